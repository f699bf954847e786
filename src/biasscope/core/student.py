"""Student's t distribution's quantile, here rather than from SciPy: a report computes its
intervals without importing ``scipy.stats`` (most of a second; tests/report/test_report_reuse.py
keeps it so), and the occupations' jackknife interval of WinoBias's pro − anti difference needs
t's quantile and nothing else.

The distribution function is the regularised incomplete beta function I_x(ν/2, ½) at
x = ν / (ν + t²), by its continued fraction (modified Lentz, as Numerical Recipes 6.4 gives it);
the quantile is its root by Brent's method (`biasscope.core.roots`).
tests/core/test_student.py checks both against SciPy to 1e-10.
"""

from __future__ import annotations

import math

from biasscope.core.roots import brent_root

_TINY = 1e-300


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), converged to machine precision."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    found = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            found *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return found


def _beta_regularised(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _beta_regularised(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (0 < q < 1)."""
    if not 0 < q < 1 or not df > 0:
        raise ValueError(f"t_ppf needs 0 < q < 1 and df > 0, not q={q!r}, df={df!r}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1 - q, df)
    high = 1.0
    while t_cdf(high, df) < q:
        high *= 2
    return brent_root(lambda t: t_cdf(t, df) - q, 0.0, high)
