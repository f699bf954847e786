"""Equivalence within a margin: two one-sided tests (TOST) on a difference, and its verdict.

A non-significant difference is not evidence of no difference: a small sample fails to find
anything. To say "B is as fair as A within δ", both one-sided nulls (difference ≤ −δ, and
difference ≥ δ) must be rejected at α, which is the same as the (1 − 2α) interval of the
difference lying inside (−δ, δ) (Schuirmann 1987). A verdict is one of:

- ``equivalent``: TOST rejects both nulls; the difference is smaller than δ (it may still be
  significantly non-zero, which ``significant`` says).
- ``different``: the two-sided test rejects a zero difference at α and TOST does not hold.
- ``inconclusive``: neither: the data cannot tell (typically too few items for δ).

Two ways to get the interval: a linear contrast of item means (a gap is
mean(group 1) − mean(group 2), a paired difference is the mean of per-item differences) uses
Welch's t with Satterthwaite's degrees of freedom; any other statistic (a ratio) a percentile
bootstrap, resampling items jointly when paired.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from biasscope.core.numbers import ci_decimals, num, pvalue
from biasscope.core.stats import _RNG_KW, Array, _finite

Verdict = Literal["equivalent", "different", "inconclusive"]
VERDICTS: dict[str, str] = {"equivalent": "equivalent within the margin",
                            "different": "different", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class Equivalence:
    """A difference (A − B) with its TOST interval (1 − 2α), its two-sided (1 − α) interval,
    both tests' p-values and the verdict. ``n``: the items (pairs, when paired) it rests on."""

    estimate: float
    low: float
    high: float
    low_two_sided: float
    high_two_sided: float
    margin: float
    alpha: float
    p_equivalence: float
    p_difference: float
    n: int
    paired: bool
    method: str
    verdict: Verdict
    se: float = math.nan
    df: float = math.nan

    @property
    def significant(self) -> bool:
        """The difference is significantly non-zero at α (two-sided)."""
        return self.p_difference < self.alpha

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "significant": self.significant}


def verdict(p_equivalence: float, p_difference: float, alpha: float) -> Verdict:
    """The three-way verdict; NaN p-values (too little data) give ``inconclusive``."""
    if p_equivalence < alpha:
        return "equivalent"
    if p_difference < alpha:
        return "different"
    return "inconclusive"


def _check(margin: float, alpha: float) -> None:
    if not (margin > 0 and math.isfinite(margin)):
        raise ValueError(f"margin {margin!r} must be a positive number")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha {alpha!r} must lie in (0, 0.5)")


def welch(samples: Sequence[npt.ArrayLike], weights: Sequence[float]
          ) -> tuple[float, float, float, int]:
    """Estimate Σ wₖ·mean(xₖ), its standard error and Satterthwaite degrees of freedom, and the
    items used (NaNs dropped). NaN error and df when a sample has fewer than two items."""
    xs = [_finite(s) for s in samples]
    n = sum(x.size for x in xs)
    if any(x.size == 0 for x in xs):
        return math.nan, math.nan, math.nan, n
    estimate = float(sum(w * x.mean() for w, x in zip(weights, xs, strict=True)))
    if any(x.size < 2 for x in xs):
        return estimate, math.nan, math.nan, n
    parts = [w * w * x.var(ddof=1) / x.size for w, x in zip(weights, xs, strict=True)]
    var = float(sum(parts))
    denom = sum(p * p / (x.size - 1) for p, x in zip(parts, xs, strict=True))
    df = var * var / denom if denom > 0 else float(sum(x.size - 1 for x in xs))
    return estimate, math.sqrt(var), float(df), n


def contrast_equivalence(samples: Sequence[npt.ArrayLike], weights: Sequence[float],
                         margin: float, alpha: float = 0.05, paired: bool = False
                         ) -> Equivalence:
    """TOST of the linear contrast Σ wₖ·mean(xₖ) (samples independent of each other) against
    ±``margin``, by Welch's t. Paired data come as per-item differences (one sample per group).
    A zero standard error (every difference identical) decides by the estimate alone."""
    _check(margin, alpha)
    est, se, df, n = welch(samples, weights)
    if not math.isfinite(se):
        nan = math.nan
        return Equivalence(est, nan, nan, nan, nan, margin, alpha, nan, nan, n, paired,
                           "welch", "inconclusive", se, df)
    if se == 0:
        p_eq = 0.0 if abs(est) < margin else 1.0
        p_diff = 0.0 if est != 0 else 1.0
        return Equivalence(est, est, est, est, est, margin, alpha, p_eq, p_diff, n, paired,
                           "welch", verdict(p_eq, p_diff, alpha), se, df)
    t = sps.t(df)
    p_eq = float(max(t.sf((est + margin) / se), t.cdf((est - margin) / se)))
    p_diff = float(2 * t.sf(abs(est) / se))
    q1, q2 = float(t.ppf(1 - alpha)), float(t.ppf(1 - alpha / 2))
    return Equivalence(est, est - q1 * se, est + q1 * se, est - q2 * se, est + q2 * se, margin,
                       alpha, p_eq, p_diff, n, paired, "welch", verdict(p_eq, p_diff, alpha),
                       se, df)


Statistic = Callable[..., Array]


def bootstrap_equivalence(samples: Sequence[npt.ArrayLike], statistic: Statistic,
                          margin: float, alpha: float = 0.05, paired: bool = False,
                          n_resamples: int = 2000, seed: int = 0) -> Equivalence:
    """TOST of ``statistic(*samples)`` (vectorised along ``axis``, e.g. score(A) − score(B))
    by a percentile bootstrap. ``paired``: the samples are the same items in the same order and
    are resampled together. The p-values are the bootstrap's tail shares: of replicates at or
    beyond each margin (TOST) and, doubled, on the far side of 0 (two-sided)."""
    _check(margin, alpha)
    xs = [np.asarray(s) for s in samples]
    n = xs[0].size if paired else sum(x.size for x in xs)
    nan = math.nan
    if any(x.size < 2 for x in xs):
        est = float(statistic(*xs)) if all(x.size for x in xs) else nan
        return Equivalence(est, nan, nan, nan, nan, margin, alpha, nan, nan, n, paired,
                           "bootstrap", "inconclusive")
    est = float(statistic(*xs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.DegenerateDataWarning)
        res = sps.bootstrap(xs, statistic, n_resamples=n_resamples, paired=paired,
                            vectorized=True, method="percentile", confidence_level=1 - 2 * alpha,
                            **{_RNG_KW: np.random.default_rng(seed)})
    boot = np.asarray(res.bootstrap_distribution, dtype=np.float64)
    low, high, low2, high2 = (float(v) for v in np.percentile(
        boot, [100 * alpha, 100 * (1 - alpha), 50 * alpha, 100 * (1 - alpha / 2)]))
    p_eq = float(max(np.mean(boot <= -margin), np.mean(boot >= margin)))
    p_diff = float(min(1.0, 2 * min(np.mean(boot <= 0), np.mean(boot >= 0))))
    if np.ptp(boot) == 0:  # no spread: decide by the estimate, as the Welch path does
        p_eq, p_diff = (0.0 if abs(est) < margin else 1.0), (0.0 if est != 0 else 1.0)
    return Equivalence(est, low, high, low2, high2, margin, alpha, p_eq, p_diff, n, paired,
                       "bootstrap", verdict(p_eq, p_diff, alpha))


def sentence(name: str, result: Equivalence, unit: str = "") -> str:
    """The verdict in words, with the difference and its (1 − 2α) interval."""
    places = ci_decimals(result.low, result.high)
    ci = (f"{num(result.estimate, places, True)}{unit} ({1 - 2 * result.alpha:.0%} CI "
          f"{num(result.low, places, True)} to {num(result.high, places, True)}{unit})")
    pairing = "paired by item" if result.paired else "unpaired"
    if result.verdict == "equivalent":
        small = (" (a difference significantly non-zero, but smaller than the margin)"
                 if result.significant else "")
        return (f"{name}: equivalent within ±{result.margin:g}{unit}{small}: difference {ci}, "
                f"TOST p = {pvalue(result.p_equivalence)}, n = {result.n}, {pairing}")
    if result.verdict == "different":
        return (f"{name}: different: difference {ci}, p = {pvalue(result.p_difference)}; not "
                f"shown equivalent within ±{result.margin:g}{unit}, n = {result.n}, {pairing}")
    return (f"{name}: inconclusive: difference {ci} is neither significantly non-zero nor "
            f"inside ±{result.margin:g}{unit}; more items are needed, n = {result.n}, {pairing}")
