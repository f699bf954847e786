"""Power planning for a difference of means: how many items a gap of a given size needs, and
what the smallest gap a finished run could have detected was.

A measure's standard error is σ·√(c/n) with σ the per-item standard deviation, n the items
per group and c the design factor: 1 for one sample or paired items (the mean of per-item
differences), 2 for two equal independent groups (a gap between groups). Power is that of the
two-sided t-test at α, from the noncentral t distribution (exact for normal items, close for
the bounded per-item values biasscope measures once n is a few dozen; tests/core/test_power.py
checks it by simulation). A gap tested by Mann-Whitney gets its own minimum detectable shift
(`mann_whitney_detectable`). For equivalence (TOST) the usual approximation
Φ_t((δ − d)/se − t₁₋α) + Φ_t((δ + d)/se − t₁₋α) − 1 is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt

from biasscope.core.imports import lazy
from biasscope.core.normal import ndtr, ndtri
from biasscope.core.roots import brent_root

sps = lazy("scipy.stats")  # imported at first use

Array = npt.NDArray[np.float64]
Design = Literal["paired", "two-groups"]
DESIGNS: dict[str, float] = {"paired": 1.0, "two-groups": 2.0}
MAX_ITEMS = 10_000_000


def _df(n: float, design: Design) -> float:
    return n - 1 if design == "paired" else 2 * n - 2


def _check(alpha: float, power: float | None = None) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha!r} must lie in (0, 1)")
    if power is not None and not alpha < power < 1:
        raise ValueError(f"power {power!r} must lie between alpha and 1")


def two_sided_power(effect: float, se: float, df: float, alpha: float = 0.05) -> float:
    """Power of the two-sided t-test at α when the true difference is ``effect``."""
    _check(alpha)
    if not (se > 0 and df > 0):
        return math.nan
    q = float(sps.t.ppf(1 - alpha / 2, df))
    ncp = abs(effect) / se
    value = float(sps.nct.sf(q, df, ncp) + sps.nct.cdf(-q, df, ncp))
    return value if math.isfinite(value) else float(ncp > q)  # SciPy's NaN far in the tail


def power_at(effect: float, sd: float, n: int, alpha: float = 0.05,
             design: Design = "two-groups") -> float:
    """Power with ``n`` items (per group) of standard deviation ``sd``."""
    if n < 2 or sd <= 0:
        return math.nan
    return two_sided_power(effect, sd * math.sqrt(DESIGNS[design] / n), _df(n, design), alpha)


def _smallest_n(reaches: Callable[[int], bool], what: str) -> int:
    """The smallest n ≥ 2 with ``reaches(n)`` true (a monotone condition): doubling, then
    bisection."""
    high = 2
    while not reaches(high):
        high *= 2
        if high > MAX_ITEMS:
            raise ValueError(f"more than {MAX_ITEMS} items would be needed for {what}")
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return max(2, high)


def items_needed(effect: float, sd: float, alpha: float = 0.05, power: float = 0.8,
                 design: Design = "two-groups") -> int:
    """Items (per group) for the two-sided test at α to find a difference ``effect`` with
    probability ``power``, per-item standard deviation ``sd``."""
    _check(alpha, power)
    if not (effect != 0 and sd > 0):
        raise ValueError("the effect must be non-zero and the standard deviation positive")
    return _smallest_n(lambda n: power_at(effect, sd, n, alpha, design) >= power,
                       f"an effect of {effect:g}")


def minimum_detectable_effect(se: float, df: float, alpha: float = 0.05,
                              power: float = 0.8) -> float:
    """The smallest true difference that the two-sided test at α, with this standard error and
    degrees of freedom, finds with probability ``power`` (NaN without a standard error)."""
    _check(alpha, power)
    if not (se > 0 and df > 0 and math.isfinite(se)):
        return math.nan
    high = float(sps.t.ppf(1 - alpha / 2, df) + sps.norm.ppf(power))
    while two_sided_power(high, 1.0, df, alpha) < power:
        high *= 2
    ncp = brent_root(lambda d: two_sided_power(d, 1.0, df, alpha) - power, 1e-9, high)
    return float(ncp * se)


def detectable_from_interval(low: float, high: float, df: float, alpha: float = 0.05,
                             power: float = 0.8, confidence: float = 0.95) -> float:
    """The minimum detectable effect of a finished estimate known only by its CI: the
    standard error read back from the interval's width (normal theory; exact for a t or
    Wald interval, close for a bootstrap or Wilson one). NaN without a finite interval."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high)):
        return math.nan
    se = (high - low) / (2 * float(sps.norm.ppf(0.5 + confidence / 2)))
    return minimum_detectable_effect(se, df, alpha, power)


def mann_whitney_detectable(x: npt.ArrayLike, y: npt.ArrayLike, alpha: float = 0.05,
                            power: float = 0.8) -> float:
    """The smallest shift of one group that the two-sided Mann-Whitney test at α finds with
    probability ``power``, for groups of these sizes shaped like ``x`` and ``y`` (pooled,
    each centred on its mean). Power is the normal approximation to the distribution of U
    under the shifted alternative (Lehmann 1975): p = P(X < Y), and U's variance from p and
    the probabilities that one X lies below two Ys, and two Xs below one Y, all read off the
    pooled values (ties count half). Unlike a t-test's minimum detectable effect this follows
    the values' shape (skew, point masses, several modes), where the rank test is more or
    less powerful than the t-test. NaN with fewer than two values in a group."""
    _check(alpha, power)
    a, b = (np.asarray(v, dtype=np.float64) for v in (x, y))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if min(a.size, b.size) < 2:
        return math.nan
    values = np.sort(np.concatenate([a, b]))
    n1, n2 = a.size, b.size
    z = float(ndtri(1 - alpha / 2))  # norm.ppf, as norm.cdf below
    null_sd = math.sqrt((n1 + n2 + 1) / (12 * n1 * n2))

    def below(points: Array) -> Array:  # P(V < t) + ½ P(V = t) for V from the pooled values
        low = np.searchsorted(values, points, "left")
        high = np.searchsorted(values, points, "right")
        return np.asarray((low + high) / 2 / values.size)

    def power_at_shift(shift: float) -> float:
        above = 1 - below(values - shift)  # per X = v: P(X' + shift > v)
        under = below(values + shift)  # per Y = w + shift: P(X < Y)
        p = float(above.mean())
        var = (p * (1 - p) + (n2 - 1) * (float((above ** 2).mean()) - p * p)
               + (n1 - 1) * (float((under ** 2).mean()) - p * p)) / (n1 * n2)
        sd = math.sqrt(max(var, 1e-300))
        return float(ndtr((abs(p - 0.5) - z * null_sd) / sd)
                     + ndtr((-abs(p - 0.5) - z * null_sd) / sd))

    top = float(values[-1] - values[0]) + 1e-12
    if power_at_shift(top) < power:
        return math.nan
    return float(brent_root(lambda d: power_at_shift(d) - power, 0.0, top, xtol=1e-12))


def equivalence_power(difference: float, margin: float, se: float, df: float,
                      alpha: float = 0.05) -> float:
    """Approximate probability that TOST at α shows equivalence within ±``margin`` when the true
    difference is ``difference``."""
    _check(alpha)
    if not (se > 0 and df > 0):
        return math.nan
    q, t = float(sps.t.ppf(1 - alpha, df)), sps.t(df)
    upper = t.cdf((margin - difference) / se - q)
    lower = t.cdf((margin + difference) / se - q)
    return float(max(0.0, upper + lower - 1))


def items_for_equivalence(margin: float, sd: float, alpha: float = 0.05, power: float = 0.8,
                          design: Design = "paired", difference: float = 0.0) -> int:
    """Items (per group) for TOST at α to show equivalence within ±``margin`` with probability
    ``power`` when the true difference is ``difference`` (|difference| < margin)."""
    _check(alpha, power)
    if not (margin > abs(difference) and sd > 0):
        raise ValueError("the margin must exceed |difference| and the deviation be positive")
    c = DESIGNS[design]
    return _smallest_n(lambda n: equivalence_power(difference, margin, sd * math.sqrt(c / n),
                                                   _df(n, design), alpha) >= power,
                       f"equivalence within {margin:g}")
