"""`biasscope.core.intervals`: intervals of means (t widened to Hall's, 0/1 outcomes
bootstrapped, Wilson where they show no spread), per-group t intervals and paired score
intervals. Differences of means: tests/core/test_small_differences.py; the bootstrap they call
against SciPy's: tests/core/test_bootstrap.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from biasscope.core import intervals
from biasscope.core.intervals import group_t_interval, mean_ci, mean_cis


def test_mean_ci_covers_mean_and_is_reproducible():
    values = np.random.default_rng(1).normal(3.0, 1.0, size=200)
    ci = mean_ci(values, n_resamples=2000, seed=7)
    assert ci.low < values.mean() == ci.estimate < ci.high
    assert ci.low > 2.5 and ci.high < 3.5 and ci.confidence == 0.95
    assert mean_ci(values, n_resamples=2000, seed=8) == ci  # t widened: no draws
    rates = (values > 3.0).astype(float)  # 0/1 outcomes are bootstrapped, seeded
    ci = mean_ci(rates, n_resamples=2000, seed=7, bounds=(0.0, 1.0))
    assert mean_ci(rates, n_resamples=2000, seed=7, bounds=(0.0, 1.0)) == ci
    assert mean_ci(rates, n_resamples=2000, seed=8, bounds=(0.0, 1.0)) != ci
    pct = mean_ci(rates, method="percentile", n_resamples=500, bounds=(0.0, 1.0))
    assert pct.low < rates.mean() < pct.high


@pytest.mark.parametrize("n", [3, 5, 10])
def test_a_mean_of_few_items_holds_its_level(n: int) -> None:
    """A pilot of a few pairs: a 95% BCa interval of 3 normal items covered their mean 71% of
    the time, of 5 85%, of 10 90%; below `intervals.SMALL` items the interval is Student's t,
    which covers 95% of normal items at any n (2000 samples: 95% ± 1.0 at 2 SE)."""
    from biasscope.core import intervals

    rng = np.random.default_rng(n)
    hits = [(ci := mean_ci(rng.normal(0.0, 1.0, n), seed=r)).low <= 0.0 <= ci.high
            for r in range(2000)]
    assert 0.93 <= np.mean(hits) <= 0.97
    assert n < intervals.SMALL


def test_a_mean_of_many_items_is_widened_t_not_bca() -> None:
    """From `intervals.SMALL` items on it was the BCa bootstrap, which undercovered skewed items
    (mean ranks 85-91% at 20 to 200): t widened to Hall's now, which does not resample."""
    from biasscope.core import intervals

    for n in (intervals.SMALL - 1, intervals.SMALL, 200):
        values = np.random.default_rng(4).exponential(size=n)
        assert mean_ci(values, n_resamples=200) == mean_ci(values, n_resamples=300)
        assert mean_ci(values) == intervals.skewed_t_interval(values)


def test_bootstrap_degenerate_inputs():
    const = mean_ci([2.0] * 10)
    assert (const.low, const.estimate, const.high) == (2.0, 2.0, 2.0)
    one = mean_ci([1.0])
    assert one.estimate == 1.0 and np.isnan(one.low) and np.isnan(one.high)
    # Spread below float resolution (JSD-P of confident answers): BCa's acceleration is 0/0,
    # SciPy warns and gives NaN; the percentile interval stands in.
    near = mean_ci([0.0] * 5 + [1e-300] * 5, n_resamples=200)
    assert 0.0 <= near.low <= near.estimate <= near.high <= 1e-300


def test_an_empty_sample_is_a_nan_interval_without_a_warning() -> None:
    """A demo run has no pro/anti pairs: the breakdown asked for the mean of nothing, and
    NumPy's 'Mean of empty slice' warning (an error under the test settings) broke the demo."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interval = mean_ci([])
    assert math.isnan(interval.estimate) and math.isnan(interval.low)


def test_mean_cis_equal_lone_calls():
    """Samples of one size share their resampled indices: each interval is the one a lone
    `mean_ci` gives (up to rounding: one product of the counts with all samples),
    degenerate and skewed samples included."""
    rng = np.random.default_rng(3)
    samples = [rng.normal(size=300), rng.exponential(size=300), rng.random(300) < 0.1,
               np.r_[np.ones(299), np.nan], rng.normal(size=41), [1.0], np.full(300, 2.0),
               rng.normal(size=5)]  # Student's t, as alone
    together = mean_cis(samples, n_resamples=500)
    alone = [mean_ci(s, n_resamples=500) for s in samples]
    def key(i: Any) -> list[float]:
        return [i.estimate, i.low, i.high]

    np.testing.assert_allclose([key(i) for i in together], [key(i) for i in alone],
                               rtol=1e-12, atol=1e-15)
    assert together[0].low != together[1].low


def test_group_t_interval_is_students_per_group_and_column():
    """Each group's interval is the one-sample t interval of its finite values; columns in one
    call get what each gets alone; an empty group and one of a single value have no bounds."""
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(5)
    groups = rng.integers(0, 6, 200)
    groups[groups == 5] = 4  # an empty group
    groups[0] = 5  # and one of a single value
    a, b, c = rng.normal(size=200), rng.exponential(size=200), rng.normal(size=200)
    c[[3, 40]] = np.nan
    together = group_t_interval(np.column_stack([a, b, c]), groups, 7, 0.9)
    for j, column in enumerate((a, b, c)):
        alone = group_t_interval(column, groups, 7, 0.9)
        for got, want in zip(together, alone, strict=True):
            np.testing.assert_allclose(got[:, j], want, rtol=1e-12, atol=1e-15)
        for g in range(5):
            x = column[(groups == g) & np.isfinite(column)]
            low, high = scipy_stats.t.interval(0.9, x.size - 1, x.mean(), scipy_stats.sem(x))
            assert together[1][g, j] == pytest.approx(low, rel=1e-9)
            assert together[2][g, j] == pytest.approx(high, rel=1e-9)
    assert np.isnan(together[1][6]).all() and np.isnan(together[0][6]).all()
    assert np.isnan(together[1][5]).all() and not np.isnan(together[0][5]).any()


def test_a_paired_difference_without_spread_gets_a_score_interval() -> None:
    """Every pair +1: Newcombe's method 10 (phi 0), its bounds from the two Wilson intervals;
    no pair discordant: plus or minus the Wilson bound of 0 discordant of n; anything with
    spread, or not 0/1, is left to the bootstrap."""
    n = 12
    right, wrong = np.ones(n), np.zeros(n)
    pro, anti = intervals.wilson(n, n), intervals.wilson(0, n)
    got = intervals.paired_boundary_difference(right, wrong)
    assert got is not None and got["estimate"] == 1.0 and got["high"] == 1.0
    assert got["low"] == pytest.approx(1 - math.hypot(1 - pro["low"], anti["high"]))
    flipped = intervals.paired_boundary_difference(wrong, right, 0.9)
    assert flipped is not None and flipped["low"] == -1.0
    assert flipped["high"] == pytest.approx(-1 + math.sqrt(2) * intervals.wilson(0, n, 0.9)["high"])
    mixed = np.r_[np.ones(5), np.zeros(7)]
    same = intervals.paired_boundary_difference(mixed, np.r_[mixed[:-1], np.nan])
    assert same is not None and same["n"] == n - 1
    assert same["low"] == -same["high"] == pytest.approx(-intervals.wilson(0, n - 1)["high"])
    assert intervals.paired_boundary_difference(mixed, wrong) is None  # spread: bootstrapped
    assert intervals.paired_boundary_difference(np.full(n, 0.6), np.full(n, 0.2)) is None
    assert intervals.paired_boundary_difference([1.0], [0.0]) is None


def _binomial_coverage(n: int, interval: Any, shares: np.ndarray) -> np.ndarray:
    """Exact coverage of a 0/1 mean's interval at each true share (the count decides it)."""
    from scipy.stats import binom

    found = [interval(np.r_[np.ones(k), np.zeros(n - k)]) for k in range(n + 1)]
    return np.array([sum(binom.pmf(k, n, p) for k, ci in enumerate(found)
                         if ci.low <= p <= ci.high) for p in shares])


@pytest.mark.parametrize("n", [3, 4, 7, 12, 19])
def test_a_rate_of_few_items_stays_a_rate_and_holds_its_level(n: int) -> None:
    """0/1 outcomes within `UNIT`: bootstrapped (Wilson where all alike) at any n, which held
    the share 96-98% of the time on average over 3 to 19 items, exact over the binomial
    (minimum 87.5%, at 4 items and a share of one half); Student's t held 33-98% and left
    [0, 1] (3 wins of 4: -0.05 to 1.55)."""
    from biasscope.core.intervals import UNIT

    shares = np.linspace(0.02, 0.98, 49)
    coverage = _binomial_coverage(n, lambda x: mean_ci(x, bounds=UNIT), shares)
    assert coverage.mean() >= 0.95 and coverage.min() >= 0.87
    for k in range(n + 1):
        ci = mean_ci(np.r_[np.ones(k), np.zeros(n - k)], bounds=UNIT)
        assert 0.0 <= ci.low <= ci.estimate <= ci.high <= 1.0


def test_a_bounded_mean_of_few_items_is_clipped_to_its_range() -> None:
    """Probabilities near 0: the t interval would reach below 0, which no mean can."""
    from biasscope.core.intervals import UNIT, skewed_t_interval

    values = np.array([0.01, 0.02, 0.4, 0.03])
    ci = mean_ci(values, bounds=UNIT)
    free = skewed_t_interval(values)
    assert free.low < 0.0 == ci.low and ci.high == free.high
    alike = mean_ci([1.0] * 12, bounds=UNIT)  # no spread: Wilson's, not [1, 1]
    assert alike.low == pytest.approx(0.7575, abs=1e-4) and alike.high == 1.0
    lone = mean_ci([0.7], bounds=UNIT)  # one value: no interval, with or without bounds
    assert math.isnan(lone.low) and math.isnan(lone.high)


def test_a_range_open_above_clips_below_and_each_sample_takes_its_own() -> None:
    """A rank's range is 1 up to a vocabulary the records do not size: a t interval is
    clipped at 1, and ranks that show no spread keep their point (no range to spread a Wilson
    interval over, where it gave NaN). `mean_cis` takes each sample's bounds, and a
    large sample's interval is the one it had without."""
    from biasscope.core.intervals import UNIT, mean_cis, t_interval

    ranks = np.array([1.0, 1.0, 2.0, 40.0])
    open_above = (1.0, math.inf)
    assert t_interval(ranks).low < 1.0 == mean_ci(ranks, bounds=open_above).low
    assert mean_ci([3.0] * 5, bounds=open_above).as_dict() == mean_ci(
        [3.0] * 5).as_dict()
    large = np.random.default_rng(0).uniform(1, 9, 40)
    found = mean_cis([ranks, [0.0, 0.1, 0.9], large, large + 1],
                     bounds=[open_above, UNIT, open_above, None])
    assert found[0] == mean_ci(ranks, bounds=open_above)
    assert found[1] == mean_ci([0.0, 0.1, 0.9], bounds=UNIT)
    assert found[2:] == mean_cis([large, large + 1])
