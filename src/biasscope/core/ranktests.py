"""Mann-Whitney U and Wilcoxon signed-rank tests with the normal approximation, computed here
rather than by ``scipy.stats``: importing SciPy's statistics takes half a second, more than
every test of a report costs. The steps are SciPy's (``mannwhitneyu`` with
``method="auto"``, ``wilcoxon`` with ``zero_method="wilcox"``), operation for operation, so
the numbers are SciPy's; where SciPy would use an exact or permutation distribution (small
samples) the caller asks SciPy itself (`exact_mann_whitney`, `exact_signed_rank`).
tests/core/test_ranktests.py checks them against SciPy; the normal distribution is
`biasscope.core.normal`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from biasscope.core.normal import ndtr

Array = npt.NDArray[np.float64]


def rank_average(values: Array) -> tuple[Array, Array]:
    """Ranks of a 1-D array (ties get their average rank) and, at the first position of each
    run of tied values in sorted order, the run's length (zeros elsewhere)."""
    n = values.shape[-1]
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    starts = np.concatenate([np.ones(1, dtype=bool), ranked[:-1] != ranked[1:]])
    index = np.arange(n)[starts]
    counts = np.diff(index, append=np.asarray([n], dtype=index.dtype))
    ordinal = np.arange(1, n + 1, dtype=np.float64)
    runs = ordinal[starts] + (counts.astype(np.float64) - 1) / 2
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(runs, counts)
    ties = np.zeros(n, dtype=np.float64)
    ties[starts] = counts.astype(np.float64)
    return ranks, ties


def rank_rows(values: Array, out: Array | None = None) -> Array:
    """Each row's ranks, ties averaged, into ``out`` (rows x n, float64) where given: SciPy's
    ``rankdata(values, axis=1)`` exactly (an average rank is half an integer, exact in
    float64), a row holding NaN all NaN as there, without its copies of the rows. Sorted
    position j of a run of ties from positions f to l gets (f + l)/2 + 1."""
    rows, n = values.shape
    out = np.empty((rows, n), dtype=np.float64) if out is None else out
    order = np.argsort(values, axis=1, kind="stable")
    ranked = np.take_along_axis(values, order, axis=1)
    starts = np.ones((rows, n), dtype=bool)
    np.not_equal(ranked[:, 1:], ranked[:, :-1], out=starts[:, 1:])
    position = np.arange(n)
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    ends = np.ones((rows, n), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    last = np.minimum.accumulate(np.where(ends, position, n - 1)[:, ::-1], axis=1)[:, ::-1]
    np.put_along_axis(out, order, (first + last) / 2 + 1, axis=1)
    out[np.isnan(ranked[:, -1])] = np.nan  # NaN sorts last
    return out


def mann_whitney_u(x: Array, y: Array) -> tuple[float, float] | None:
    """(U of ``x``, two-sided p) of the Mann-Whitney test with the normal approximation
    (continuity and tie corrected); None where SciPy's automatic choice is the exact test
    (a sample of at most 8 values and no ties). Finite, non-empty samples."""
    n1, n2 = x.shape[-1], y.shape[-1]
    ranks, ties = rank_average(np.concatenate([x, y]))
    if (n1 <= 8 or n2 <= 8) and not np.any(ties > 1):
        return None
    u1 = np.sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u = np.maximum(u1, n1 * n2 - u1)
    n = n1 + n2
    tie_term = np.sum(ties ** 3 - ties)
    s = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    numerator = u - n1 * n2 / 2
    numerator -= 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / s
    p = np.clip(ndtr(-z) * 2, 0.0, 1.0)
    return float(u1), float(p)


def signed_rank_test(d: Array) -> tuple[float, float, Array] | None:
    """(statistic, two-sided p, ranks of |d|) of Wilcoxon's signed-rank test with the normal
    approximation (no continuity correction) for non-zero finite differences ``d``; None
    where SciPy's automatic choice is exact or a permutation test (up to 50 differences
    without ties, up to 13 with)."""
    ranks, ties = rank_average(np.abs(d))
    count = float(d.shape[-1])
    if d.shape[-1] <= 50 and (not np.any(ties == 0) or d.shape[-1] <= 13):
        return None
    r_plus = np.sum((d > 0).astype(np.float64) * ranks)
    r_minus = np.sum((d < 0).astype(np.float64) * ranks)
    mean = count * (count + 1.0) * 0.25
    se = count * (count + 1.0) * (2.0 * count + 1.0)
    se = np.sqrt((se - np.sum(ties ** 3 - ties) / 2) / 24)
    z = (r_plus - mean) / se
    p = 2 * ndtr(-np.abs(z))
    return float(np.minimum(r_plus, r_minus)), float(p), ranks


def scipy_stats() -> Any:
    """``scipy.stats``, for the small samples its exact distributions serve."""
    import scipy.stats

    return scipy.stats
