"""Equivalence within a margin: two one-sided tests (TOST) on a difference, and its verdict.

A non-significant difference is not evidence of no difference: a small sample fails to find
anything. To say "B is as fair as A within δ", both one-sided nulls (difference ≤ −δ, and
difference ≥ δ) must be rejected at α, which is the same as the (1 − 2α) interval of the
difference lying inside (−δ, δ) (Schuirmann 1987). A verdict is one of:

- ``equivalent``: TOST rejects both nulls; the difference is smaller than δ (it may still be
  significantly non-zero, which ``significant`` says).
- ``different``: the two-sided test rejects a zero difference at α and TOST does not hold.
- ``too few items``: fewer items than any test could show equivalence from (``min_items``):
  with fewer, every item agreeing is still likely (probability ≥ α) under a true difference
  of δ made of rare items at the far end of the range (exact binomial: (1 − δ/D)ⁿ ≥ α, D
  the largest departure of one item).
- ``inconclusive``: neither: the data cannot tell.

The interval must not collapse when every item agrees (all paired differences 0: Welch's
standard error 0 would call two runs equivalent from two items), so:

- paired yes/no outcomes (the same items answered 0/1 by both runs): Tango's score interval
  and score TOST (`biasscope.core.tango`); its test of 0 is McNemar's;
- any other linear contrast of item means (a gap Σ wₖ·mean(xₖ), a mean of paired
  differences) with known ``bounds``: Welch's t with a score-type variance at each margin and
  pseudo-observations for a sample with no spread (`biasscope.core.bounded`), so neither
  identical values nor a difference made of a few large jumps give a short interval;
- any other statistic (a ratio): Student's t with the jackknife's error over clusters (the
  sampled units: BBQ's templates), leaving a cluster out of both runs when paired, never
  below the items' own jackknife, its TOST also held to the score-type variance and the
  ``too few items`` floor. A percentile bootstrap over items called two runs "different" in
  14.5% of simulated runs whose lean differs by template only (25 templates); over templates,
  in 15.6% at 5 templates (docs/claims.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from biasscope.core import tango
from biasscope.core.bounded import Bounds, Contrast
from biasscope.core.imports import lazy
from biasscope.core.numbers import ci_decimals, num, p_is
from biasscope.core.stats import Array, _finite

sps = lazy("scipy.stats")  # imported at first use

Verdict = Literal["equivalent", "different", "too few items", "inconclusive"]
VERDICTS: dict[str, str] = {"equivalent": "equivalent within the margin",
                            "different": "different", "too few items": "too few items",
                            "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class Equivalence:
    """A difference (A − B) with its TOST interval (1 − 2α), its two-sided (1 − α) interval,
    both tests' p-values and the verdict. ``n``: the items (pairs, when paired) it rests on;
    ``min_items``: the fewest items per group (``groups`` of them) from which any test could
    show equivalence (0: not known); ``clusters``: the units its error counts, when not the
    items (0)."""

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
    min_items: int = 0
    groups: int = 1
    clusters: int = 0

    @property
    def significant(self) -> bool:
        """The difference is significantly non-zero at α (two-sided)."""
        return self.p_difference < self.alpha

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "significant": self.significant}


def verdict(p_equivalence: float, p_difference: float, alpha: float, enough: bool = True
            ) -> Verdict:
    """The verdict; NaN p-values (too little data) give ``inconclusive``; below the items any
    test could conclude equivalence from (not ``enough``), ``too few items`` unless shown
    different."""
    if enough and p_equivalence < alpha:
        return "equivalent"
    if p_difference < alpha:
        return "different"
    return "inconclusive" if enough else "too few items"


def minimum_items(margin: float, alpha: float, reach: float) -> int:
    """The fewest items of one sample from which any test could show equivalence within
    ±``margin``: below it, n items that all agree have probability ≥ α when a share
    margin/``reach`` of items departs by ``reach`` (the most one item can move the
    difference) and the rest agree."""
    share = margin / reach if reach > 0 else math.inf
    if share >= 1:
        return 1
    return max(1, math.ceil(math.log(alpha) / math.log1p(-share) - 1e-9))


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
                         margin: float, alpha: float = 0.05, paired: bool = False,
                         bounds: Sequence[Bounds] | None = None) -> Equivalence:
    """TOST of the linear contrast Σ wₖ·mean(xₖ) (samples independent of each other) against
    ±``margin``, by Welch's t. Paired data come as per-item differences (one sample per group).
    ``bounds``: the range each sample's values can take (a paired difference's: ± the values'
    range); with them the statistic is `biasscope.core.bounded`'s and fewer items than
    ``minimum_items`` give ``too few items``. Without them a zero standard error
    (every value identical) is ``inconclusive``: nothing tells how far the next item could be."""
    _check(margin, alpha)
    xs = [_finite(x) for x in samples]
    est, se, df, n = welch(xs, weights)
    nan = math.nan
    if bounds is not None and all(x.size for x in xs):
        return _bounded(xs, weights, est, n, margin, alpha, paired, bounds)
    if not math.isfinite(se) or se == 0:
        return Equivalence(est, nan, nan, nan, nan, margin, alpha, nan, nan, n, paired,
                           "welch", "inconclusive", se, df)
    return _welch_result(est, est, se, df, n, margin, alpha, paired, "welch", 0,
                         groups=len(xs))


def _welch_result(estimate: float, centre: float, se: float, df: float, n: int,
                  margin: float, alpha: float, paired: bool, method: str, min_items: int,
                  enough: bool = True, groups: int = 1) -> Equivalence:
    t = sps.t(df)
    p_eq = float(max(t.sf((centre + margin) / se), t.cdf((centre - margin) / se)))
    p_diff = float(2 * t.sf(abs(centre) / se))
    q1, q2 = float(t.ppf(1 - alpha)), float(t.ppf(1 - alpha / 2))
    return Equivalence(estimate, centre - q1 * se, centre + q1 * se, centre - q2 * se,
                       centre + q2 * se, margin, alpha, p_eq, p_diff, n, paired, method,
                       verdict(p_eq, p_diff, alpha, enough), se, df, min_items, groups)


def _bounded(xs: Sequence[Array], weights: Sequence[float], estimate: float, n: int,
             margin: float, alpha: float, paired: bool, bounds: Sequence[Bounds]
             ) -> Equivalence:
    """`contrast_equivalence` by `biasscope.core.bounded` (a score-type variance at each
    margin, pseudo-observations where a sample has no spread) with the ``too few items``
    floor."""
    c = Contrast.of(xs, weights, bounds, paired)
    t = sps.t(c.df)
    p_eq = float(max(t.sf(c.statistic(-margin)), t.cdf(c.statistic(margin))))
    p_diff = float(2 * t.sf(abs(c.statistic(0.0))))
    low, high = c.interval(float(t.ppf(1 - alpha)))
    low2, high2 = c.interval(float(t.ppf(1 - alpha / 2)))
    needed = [minimum_items(margin, alpha, r) for r in c.reaches]
    enough = all(x.size >= k for x, k in zip(xs, needed, strict=True))
    return Equivalence(estimate, low, high, low2, high2, margin, alpha, p_eq, p_diff, n,
                       paired, "welch, bounded", verdict(p_eq, p_diff, alpha, enough),
                       math.sqrt(c.variance(0.0)), c.df, max(needed), len(xs))


def paired_binary_equivalence(a: npt.ArrayLike, b: npt.ArrayLike, margin: float,
                              alpha: float = 0.05) -> Equivalence:
    """TOST of p(A) − p(B) for yes/no outcomes (0/1) of the same items under A and B, by
    Tango's score test and interval (`biasscope.core.tango`); pairs with a NaN are dropped."""
    _check(margin, alpha)
    x, y = (np.asarray(v, dtype=np.float64) for v in (a, b))
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = int(x.size)
    needed = minimum_items(margin, alpha, 1.0)
    nan = math.nan
    if n == 0:
        return Equivalence(nan, nan, nan, nan, nan, margin, alpha, nan, nan, 0, True,
                           "tango", "inconclusive", min_items=needed)
    only_a, only_b = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    low, high = tango.interval(only_a, only_b, n, 1 - 2 * alpha)
    low2, high2 = tango.interval(only_a, only_b, n, 1 - alpha)
    p_eq, p_diff = tango.p_values(only_a, only_b, n, margin)
    se = (high2 - low2) / (2 * float(sps.norm.ppf(1 - alpha / 2)))
    return Equivalence((only_a - only_b) / n, low, high, low2, high2, margin, alpha, p_eq,
                       p_diff, n, True, "tango", verdict(p_eq, p_diff, alpha, n >= needed),
                       se, max(n - 1.0, 1.0), needed)


Statistic = Callable[..., Array]


def jackknife_se(samples: Sequence[npt.ArrayLike], statistic: Statistic,
                 clusters: Sequence[npt.ArrayLike], paired: bool = False
                 ) -> tuple[float, float, int]:
    """The standard error of ``statistic(*samples)`` from leaving out one cluster at a time
    (the units that were sampled: BBQ's templates, each written out for many items), its
    degrees of freedom (clusters − 1; Satterthwaite's for two samples) and the clusters. When
    ``paired`` the samples are the same items in the same order, with one ``clusters``, and a
    cluster leaves both; otherwise each sample's clusters leave it in turn and the variances
    add. Never below the items' own jackknife (each item a cluster): clusters whose items
    balance each other would otherwise give an error of 0. ``statistic`` must not depend on
    the items' order (a sum over them), so leaving out an item depends on its value only."""
    xs = [np.asarray(s) for s in samples]
    ways = [tuple(range(len(xs)))] if paired else [(i,) for i in range(len(xs))]
    k = [len(np.unique(np.asarray(clusters[way[0]]))) for way in ways]
    if min(k) < 2:
        return math.nan, math.nan, sum(k)
    found = [_leave_out(statistic, xs, way, np.asarray(clusters[way[0]])) for way in ways]
    var = float(sum(found))
    denom = sum(v * v / (c - 1) for v, c in zip(found, k, strict=True))
    df = var * var / denom if denom > 0 else float(sum(c - 1 for c in k))
    items = sum(_leave_out(statistic, xs, way, None) for way in ways)
    return math.sqrt(max(var, items)), float(df), sum(k)


def _leave_out(statistic: Statistic, xs: list[npt.NDArray[Any]], way: tuple[int, ...],
               clusters: npt.NDArray[Any] | None) -> float:
    """The jackknife variance of ``statistic`` over the clusters of the samples ``way`` (the
    others whole); ``None``: over items, one leave-one-out per distinct value (or row of
    values, paired), standing for as many items as share it."""
    size = xs[way[0]].size
    if clusters is None:
        rows = np.stack([xs[i] for i in way], axis=1)
        first, times = np.unique(rows, axis=0, return_index=True, return_counts=True)[1:]
        weights = times.astype(np.float64)
        drops: Iterator[npt.NDArray[np.bool_]] = (np.arange(size) != i for i in first)
    else:
        codes = np.unique(clusters, return_inverse=True)[1].reshape(-1)
        weights = np.ones(int(codes.max()) + 1)
        drops = (codes != j for j in range(len(weights)))
    left = np.array([float(statistic(*(x[keep] if i in way else x for i, x in enumerate(xs))))
                     for keep in drops])
    n = float(weights.sum())
    centre = float((weights * left).sum() / n)
    return (n - 1) / n * float((weights * (left - centre) ** 2).sum())


def jackknife_equivalence(samples: Sequence[npt.ArrayLike], statistic: Statistic,
                          clusters: Sequence[npt.ArrayLike], margin: float,
                          alpha: float = 0.05, paired: bool = False,
                          bounds: Bounds | None = None) -> Equivalence:
    """TOST of ``statistic(*samples)`` (e.g. score(A) − score(B)) with `jackknife_se`'s error
    and Student's t: the clusters, not the items, are the independent units (a model's lean
    varies from one BBQ template to the next, so its items are not independent answers).
    ``bounds``: the range of one item's contribution to the statistic (one item moves it by up
    to their distance D over n): the TOST then also needs the score-type test of
    `biasscope.core.bounded` with variance a(D − a)/n at a = the margin (the least variable
    way to make that difference), and fewer items than ``minimum_items`` are too few. A
    statistic whose leave-one-out values are all equal (every item alike) has no error to
    test a difference with: only the score-type floor can show it equivalent."""
    _check(margin, alpha)
    xs = [np.asarray(s) for s in samples]
    n = xs[0].size if paired else sum(x.size for x in xs)
    needed = 0 if bounds is None else minimum_items(margin, alpha, bounds[1] - bounds[0])
    enough = all(x.size >= needed for x in xs)
    nan = math.nan
    est = float(statistic(*xs)) if all(x.size for x in xs) else nan
    se, df, k = (jackknife_se(xs, statistic, clusters, paired) if all(x.size >= 2 for x in xs)
                 else (nan, nan, 0))
    if not math.isfinite(se):
        return Equivalence(est, nan, nan, nan, nan, margin, alpha, nan, nan, n, paired,
                           "jackknife", "inconclusive" if enough else "too few items",
                           min_items=needed, groups=1 if paired else len(xs), clusters=k)
    if se > 0:
        found = _welch_result(est, est, se, df, n, margin, alpha, paired, "jackknife", needed,
                              enough, 1 if paired else len(xs))
    else:
        found = Equivalence(est, est, est, est, est, margin, alpha,
                            0.0 if bounds is not None else 1.0, 1.0, n, paired, "jackknife",
                            "inconclusive", 0.0, df, needed, 1 if paired else len(xs))
    low, high, p_eq = found.low, found.high, found.p_equivalence
    if bounds is not None:  # never shorter than the score-type floor at each margin
        floor = Contrast((1.0,), (est,), (0.0,), (min(x.size for x in xs),),
                         (bounds[1] - bounds[0],))
        p_eq = max(p_eq, float(sps.norm.sf(floor.statistic(-margin))),
                   float(sps.norm.cdf(floor.statistic(margin))))
        f_low, f_high = floor.interval(float(sps.norm.ppf(1 - alpha)))
        low, high = min(low, f_low), max(high, f_high)
    return replace(found, low=low, high=high, p_equivalence=p_eq, clusters=k,
                   verdict=verdict(p_eq, found.p_difference, alpha, enough))


def sentence(name: str, result: Equivalence, unit: str = "", clusters: str = "clusters"
             ) -> str:
    """The verdict in words, with the difference and its (1 − 2α) interval; ``clusters``:
    what the result's clusters are (BBQ's templates)."""
    places = ci_decimals(result.low, result.high)
    ci = (f"{num(result.estimate, places, True)}{unit} ({1 - 2 * result.alpha:.0%} CI "
          f"{num(result.low, places, True)} to {num(result.high, places, True)}{unit})")
    pairing = "paired by item" if result.paired else "unpaired"
    if 0 < result.clusters < result.n:
        pairing += f", {result.clusters} {clusters}"
    if result.verdict == "equivalent":
        small = (" (a difference significantly non-zero, but smaller than the margin)"
                 if result.significant else "")
        return (f"{name}: equivalent within ±{result.margin:g}{unit}{small}: difference {ci}, "
                f"TOST {p_is(result.p_equivalence)}, n = {result.n}, {pairing}")
    if result.verdict == "different":
        return (f"{name}: different: difference {ci}, {p_is(result.p_difference)}; not "
                f"shown equivalent within ±{result.margin:g}{unit}, n = {result.n}, {pairing}")
    if result.verdict == "too few items":
        # n counts every group's items: "n = 80; at least 59" read as enough items.
        whole, per = ((" in all", f" in each of its {result.groups} groups")
                      if result.groups > 1 else ("", ""))
        return (f"{name}: too few items to show equivalence within ±{result.margin:g}{unit}: "
                f"n = {result.n}{whole}, {pairing}; any test needs at least {result.min_items}"
                f"{per} (with fewer, items that all agree are still likely under a difference "
                f"of ±{result.margin:g}{unit}); difference {ci}")
    return (f"{name}: inconclusive: difference {ci} is neither significantly non-zero nor "
            f"inside ±{result.margin:g}{unit}; more items are needed, n = {result.n}, {pairing}")
