"""`biasscope.core.ranktests` gives SciPy's rank tests: Mann-Whitney U and Wilcoxon's
signed-rank test with the normal approximation equal ``scipy.stats`` bit for bit (CI pins
SciPy 1.17; within 1e-12 on another), and leave to SciPy exactly the samples its automatic
choice gives an exact or permutation distribution."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as sps

from biasscope.core import stats
from biasscope.core.ranktests import mann_whitney_u, rank_average, rank_rows, signed_rank_test
from numbers_close import same_as_scipy


def values(rng: np.random.Generator, size: int, ties: bool) -> np.ndarray:
    return (rng.integers(0, 6, size) / 4 if ties else rng.normal(0, 1, size)).astype(float)


@pytest.mark.parametrize(("n1", "n2"), [(9, 9), (40, 25), (300, 280), (3, 20), (8, 8)])
@pytest.mark.parametrize("ties", [False, True])
def test_mann_whitney_is_scipys(n1: int, n2: int, ties: bool) -> None:
    rng = np.random.default_rng(n1 * 1000 + n2 + ties)
    for shift in (0.0, 0.3, 1.5):
        x, y = values(rng, n1, ties) + shift, values(rng, n2, ties)
        got = mann_whitney_u(x, y)
        if min(n1, n2) <= 8 and not ties:
            assert got is None  # SciPy's exact test
        else:
            res = sps.mannwhitneyu(x, y, alternative="two-sided")
            assert got is not None
            same_as_scipy(got, (res.statistic, res.pvalue))
        res = sps.mannwhitneyu(x, y, alternative="two-sided")
        test = stats.mann_whitney(x, y)
        same_as_scipy((test.statistic, test.p_value), (res.statistic, res.pvalue))


@pytest.mark.parametrize(("n", "ties"), [(51, False), (200, False), (14, True), (80, True),
                                         (50, False), (13, True)])
def test_signed_rank_is_scipys(n: int, ties: bool) -> None:
    rng = np.random.default_rng(n + ties)
    for shift in (0.0, 0.4):
        d = values(rng, n, ties) + shift
        d = d[d != 0]
        got = signed_rank_test(d)
        res = sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
        exact = d.size <= 50 and (np.unique(np.abs(d)).size == d.size or d.size <= 13)
        if exact:
            assert got is None
        else:
            assert got is not None
            same_as_scipy(got[:2], (res.statistic, res.pvalue))
            same_as_scipy(got[2], sps.rankdata(np.abs(d)))
        result = stats.signed_rank(d)
        same_as_scipy((result["statistic"], result["p_value"]), (res.statistic, res.pvalue))


def test_average_ranks_are_scipys() -> None:
    rng = np.random.default_rng(5)
    for x in (rng.normal(size=50), rng.integers(0, 4, 50).astype(float), np.ones(3)):
        ranks, ties = rank_average(x)
        same_as_scipy(ranks, sps.rankdata(x))
        assert ties.sum() == x.size and (ties > 1).any() == (np.unique(x).size < x.size)


def test_row_ranks_are_rankdatas_exactly() -> None:
    """Each row's average ranks, written into a buffer, are ``rankdata(axis=1)``'s bit for
    bit: no ties, many ties, a constant row, one column, a row holding NaN (all NaN)."""
    rng = np.random.default_rng(6)
    for rows, n in ((40, 1), (40, 2), (30, 17), (7, 300)):
        for x in (rng.normal(size=(rows, n)), rng.integers(0, 4, (rows, n)).astype(float),
                  np.round(rng.normal(size=(rows, n)), 1)):
            x[0] = 2.5
            x[1, n // 2] = np.nan
            out = np.full((rows, n), -1.0)
            assert rank_rows(x, out) is out
            np.testing.assert_array_equal(out, sps.rankdata(x, axis=1), strict=True)
