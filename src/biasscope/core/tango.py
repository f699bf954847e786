"""Tango's score test and interval for the difference of two paired proportions.

Two runs answer the same n items yes/no (a pair's flip, an item's correctness): ``b`` items
are 1 under A only and ``c`` under B only. The difference Δ = p(A) − p(B) = p₁₀ − p₀₁. Its
score statistic for H₀: Δ = Δ₀ (Tango 1998, *Statistics in Medicine* 17:891; Nam 1997) is

    T(Δ₀) = (b − c − nΔ₀) / √(n (2q̃ + Δ₀(1 − Δ₀)))

with q̃ the maximum-likelihood p₀₁ under H₀ (a root of a quadratic). T(0) is McNemar's
statistic (b − c)/√(b + c). Unlike a Wald interval it does not collapse when no item is
discordant: 0 of n gives ±z²/(n + z²). The interval is {Δ₀ : |T(Δ₀)| ≤ z}; a TOST rejects
Δ ≤ −δ and Δ ≥ δ when T(−δ) > z₁₋α and T(δ) < −z₁₋α. Fagerland, Lydersen & Laake (2014,
*Stat Methods Med Res*) recommend it among paired-proportion intervals.
"""

from __future__ import annotations

import math

from biasscope.core.imports import lazy

optimize = lazy("scipy.optimize")  # imported at first use
sps = lazy("scipy.stats")  # imported at first use


def restricted_p01(b: int, c: int, n: int, delta: float) -> float:
    """The maximum-likelihood p₀₁ when p₁₀ = p₀₁ + ``delta`` (Tango's closed form)."""
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta
    c_ = -c * delta * (1 - delta)
    root = (math.sqrt(max(b_ * b_ - 4 * a_ * c_, 0.0)) - b_) / (2 * a_)
    return min(max(root, max(0.0, -delta)), (1 - delta) / 2)


def score(b: int, c: int, n: int, delta: float) -> float:
    """Tango's statistic T(Δ₀); 0 when its variance is 0 and nothing departs from Δ₀."""
    departure = b - c - n * delta
    variance = n * (2 * restricted_p01(b, c, n, delta) + delta * (1 - delta))
    if variance <= 0:
        return 0.0 if departure == 0 else math.copysign(math.inf, departure)
    return departure / math.sqrt(variance)


def interval(b: int, c: int, n: int, confidence: float) -> tuple[float, float]:
    """Tango's score interval for Δ: the Δ₀ whose two-sided test at 1 − ``confidence`` does
    not reject (T is decreasing in Δ₀)."""
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    edge = 1 - 1e-12
    estimate = (b - c) / n

    def bound(target: float, lo: float, hi: float) -> float:
        return float(optimize.brentq(lambda d: score(b, c, n, d) - target, lo, hi,
                                     xtol=1e-12))
    low = -edge if score(b, c, n, -edge) <= z else bound(z, -edge, estimate)
    high = edge if score(b, c, n, edge) >= -z else bound(-z, estimate, edge)
    return low, high


def p_values(b: int, c: int, n: int, margin: float) -> tuple[float, float]:
    """(TOST p-value within ±``margin``, two-sided p-value of Δ = 0 (McNemar's z))."""
    p_eq = max(float(sps.norm.cdf(score(b, c, n, margin))),
               float(sps.norm.sf(score(b, c, n, -margin))))
    p_diff = 2 * float(sps.norm.sf(abs(score(b, c, n, 0.0))))
    return p_eq, min(1.0, p_diff)


__all__ = ["interval", "p_values", "restricted_p01", "score"]
