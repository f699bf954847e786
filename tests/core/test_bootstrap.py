"""`biasscope.core.bootstrap` gives SciPy's bootstrap intervals of means: the numbers
``scipy.stats.bootstrap`` gives with the same generator, up to rounding (a resample's mean
from its draw counts, the jackknife by formula: 1e-12 apart). `stats` uses them, unwidened,
for 0/1 outcomes within a range; a mean or a difference of means with spread is t's or
Welch's widened to Hall's at any size, not a bootstrap."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np
import pytest
import scipy.stats as sps

from biasscope.core import intervals
from biasscope.core.bootstrap import index_blocks, mean_interval, resample_counts, resampling
from biasscope.core.hall import skewed_welch_bounds
from traced import traced_peak

KW = "rng" if tuple(int(p) for p in metadata.version("scipy").split(".")[:2]) >= (1, 15) \
    else "random_state"


def scipy_interval(samples: list[np.ndarray], statistic: Callable[..., Any], method: str,
                   batch: int | None, paired: bool = False, n: int = 999, seed: int = 3
                   ) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.bootstrap(tuple(samples), statistic, n_resamples=n, batch=batch,
                            vectorized=True, paired=paired, confidence_level=0.9,
                            method=method, **{KW: np.random.default_rng(seed)})
    return res.confidence_interval.low, res.confidence_interval.high


def ours(samples: list[np.ndarray], signs: tuple[float, ...], method: str,
         batch: int | None, paired: bool = False, n: int = 999, seed: int = 3
         ) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mean_interval(samples, signs, n_resamples=n, batch=batch, confidence=0.9,
                             method=method, rng=np.random.default_rng(seed), paired=paired)


def mean(x: np.ndarray, axis: int = -1) -> Any:
    return np.mean(x, axis=axis)


def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> Any:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def means(*samples: np.ndarray, axis: int = -1) -> Any:
    return np.stack([np.mean(s, axis=axis) for s in samples], axis=0)


def same_as_scipy(got: Any, scipy: Any) -> None:
    """Equal up to rounding: the counts' dot product and the leave-one-out formula round
    differently from SciPy's gathered means."""
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(scipy, dtype=float),
                               rtol=1e-12, atol=1e-14)


def data(rng: np.random.Generator, size: int, kind: str) -> np.ndarray:
    if kind == "binary":  # accuracies: heavy ties
        return rng.integers(0, 2, size).astype(np.float64)
    if kind == "skewed":
        return rng.lognormal(0, 1.5, size)
    return rng.normal(0, 1, size)


@pytest.mark.parametrize("method", ["BCa", "percentile"])
@pytest.mark.parametrize("kind", ["normal", "binary", "skewed"])
@pytest.mark.parametrize("batch", [None, 7, 400])
def test_one_and_two_samples_are_scipys(method: str, kind: str, batch: int | None) -> None:
    rng = np.random.default_rng(len(kind) + (batch or 0))
    x, y = data(rng, 23, kind), data(rng, 17, kind)
    same_as_scipy(ours([x], intervals.MEAN, method, batch),
                  scipy_interval([x], mean, method, batch))
    same_as_scipy(ours([x, y], intervals.DIFFERENCE, method, batch),
                  scipy_interval([x, y], difference, method, batch))


@pytest.mark.parametrize("method", ["BCa", "percentile"])
@pytest.mark.parametrize("batch", [None, 5, 300])
def test_paired_means_are_scipys(method: str, batch: int | None) -> None:
    rng = np.random.default_rng(7)
    samples = [data(rng, 31, kind) for kind in ("normal", "binary", "skewed", "normal")]
    same_as_scipy(ours(samples, intervals.MEAN * 4, method, batch, paired=True),
                  scipy_interval(samples, means, method, batch, paired=True))


def test_an_undefined_bca_interval_is_nan_as_scipys() -> None:
    """Values a rounding error apart: every jackknife mean is equal, the acceleration 0/0
    and the BCa interval undefined (NaN), as SciPy's; one outlier among equal values is
    defined."""
    tiny = np.array([1.0, 1.0, 1.0, 1.0 + 2e-16])
    low, high = ours([tiny], intervals.MEAN, "BCa", None)
    assert np.isnan(low) and np.isnan(high)
    same_as_scipy((low, high), scipy_interval([tiny], mean, "BCa", None))
    outlier = np.array([0.0] * 30 + [1.0])
    same_as_scipy(ours([outlier], intervals.MEAN, "BCa", None),
                  scipy_interval([outlier], mean, "BCa", None))


def test_the_bootstraps_of_stats_are_scipys() -> None:
    """What `stats` still bootstraps is SciPy's BCa (its default 2,000 resamples, seed 0):
    `mean_ci` and `mean_cis` of 0/1 outcomes within [0, 1], and `_bootstrap`,
    the interval a mean or a difference of means with spread had at 20 items and more before
    it became t's or Welch's widened to Hall's (`test_a_mean_or_a_difference_with_spread_is_
    widened_t_at_any_size`)."""
    rng = np.random.default_rng(11)
    x, y, z = rng.normal(0, 1, 40), rng.integers(0, 2, 40).astype(float), rng.normal(1, 2, 25)
    w = rng.integers(0, 2, 40).astype(float)

    def scipy_ci(samples: tuple[np.ndarray, ...], statistic: Callable[..., Any],
                 paired: bool = False) -> tuple[float, float]:
        res = sps.bootstrap(samples, statistic, n_resamples=2000, vectorized=True,
                            paired=paired, confidence_level=0.95, method="BCa",
                            batch=max(1, 4_000_000 // sum(s.size for s in samples[:1 if paired
                                                                                   else None])),
                            **{KW: np.random.default_rng(0)})
        return res.confidence_interval.low, res.confidence_interval.high

    got = intervals._bootstrap((x,), intervals.MEAN, 0.95, 2000, "BCa", 0)
    same_as_scipy((got.low, got.high), scipy_ci((x,), mean))
    got = intervals._bootstrap((x, z), intervals.DIFFERENCE, 0.95, 2000, "BCa", 0)
    same_as_scipy((got.low, got.high), scipy_ci((x, z), difference))
    got = intervals.mean_ci(y, bounds=intervals.UNIT)
    same_as_scipy((got.low, got.high), scipy_ci((y,), mean))
    both = intervals.mean_cis([y, w, z], bounds=intervals.UNIT)
    low, high = scipy_ci((y, w), means, paired=True)
    same_as_scipy([(b.low, b.high) for b in both[:2]], np.stack([low, high], axis=-1))
    assert both[2] == intervals.skewed_t_interval(z, bounds=intervals.UNIT)


def test_a_mean_or_a_difference_with_spread_is_widened_t_at_any_size() -> None:
    """No BCa for values with spread at any size: BCa undercovered skewed items at 20 to 1,584
    (scripts/small_mean_intervals.py --large, small_difference_intervals.py --large)."""
    rng = np.random.default_rng(12)
    for n in (20, 200, 1584):
        x, y = rng.exponential(1.0, n), rng.exponential(0.5, n)
        assert intervals.mean_ci(x) == intervals.skewed_t_interval(x)
        assert intervals.mean_cis([x, y]) == [intervals.skewed_t_interval(x),
                                                  intervals.skewed_t_interval(y)]
        got, (low, high) = intervals.mean_difference_ci(x, y), skewed_welch_bounds(x, y)
        assert (got.low, got.high) == (low, high)
        with resampling() as noted:  # nothing is drawn
            intervals.mean_ci(x), intervals.mean_difference_ci(x, y)
        assert not noted.drawn


@pytest.mark.parametrize(("k", "n"), [(0, 12), (12, 12), (5, 12), (1, 200), (3, 7)])
def test_wilson_is_scipys(k: int, n: int) -> None:
    for confidence in (0.9, 0.95):
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        got = intervals.wilson(k, n, confidence)
        same_as_scipy((got["low"], got["high"]), (ci.low, ci.high))


def test_a_rate_at_its_boundary_gets_wilson_and_any_other_is_bootstrapped() -> None:
    ones, zeros = np.ones(12), np.zeros(12)
    assert intervals.boundary_rate(ones) == intervals.wilson(12, 12)
    assert intervals.boundary_rate(np.append(zeros, np.nan), 0.9) == intervals.wilson(0, 12, 0.9)
    for values in (np.array([0.0, 1.0, 1.0]), np.full(5, 0.5), np.ones(1), np.array([])):
        assert intervals.boundary_rate(values) is None
    boot = intervals.mean_cis([ones])[0]  # what it replaces: no spread at all
    assert boot.low == boot.high == 1.0


@pytest.mark.parametrize("size", [1, 2, 7, 40, 3168, 70_000])
def test_resample_counts_are_multinomial_counts(size: int) -> None:
    """Each row is one resample of ``size`` items with replacement: non-negative integer
    counts summing to ``size``, each item's count with mean 1 and the multinomial variance
    1 - 1/size; the same numbers whatever the chunk (the chunk follows the size)."""
    n = 4000 if size < 1000 else 40
    counts = resample_counts(size, n, np.random.default_rng(11))
    assert counts.shape == (n, size) and counts.dtype == np.float64
    assert (counts >= 0).all() and (counts == np.round(counts)).all()
    assert (counts.sum(axis=1) == size).all()
    assert counts.mean() == pytest.approx(1.0)
    if size > 1:
        # var of one cell is (1 - 1/size); its estimate over n*size cells, loosely
        assert counts.var(ddof=1) == pytest.approx(1 - 1 / size, rel=0.05)
    single = np.concatenate([resample_counts(size, 1, rng)
                             for rng in [np.random.default_rng(11)] for _ in range(n)])
    assert np.array_equal(single, counts)


@pytest.mark.parametrize("size", [1, 3, 40, 1584, 70_000])
def test_resample_counts_count_scipys_draws(size: int) -> None:
    """The counts are those of the indices SciPy draws, ``rng.integers(0, n, (batch, n))``
    (int64), whatever type they are drawn in here, and the generator ends where it does."""
    n = 300 if size < 10_000 else 3
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    counts = resample_counts(size, n, ours)
    drawn = theirs.integers(0, size, (n, size))
    expected = np.stack([np.bincount(row, minlength=size) for row in drawn])
    assert np.array_equal(counts, expected)
    assert ours.bit_generator.state == theirs.bit_generator.state


def test_resample_counts_of_nothing() -> None:
    assert resample_counts(0, 3, np.random.default_rng(0)).shape == (3, 0)
    assert resample_counts(5, 0, np.random.default_rng(0)).shape == (0, 5)
    assert resample_counts(4, 2, np.random.default_rng(0), np.int64).dtype == np.int64


def test_kept_counts_are_the_drawn_ones_and_leave_the_generator_where_drawing_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A draw given again from `bootstrap._DRAWN` equals drawing it afresh, in the dtype
    asked for, and moves the generator on as drawing does; the caller's copy is its own; the
    kept bytes stay under `DRAWN_BYTES`, and `forget_drawn` empties them."""
    from biasscope.core import bootstrap

    bootstrap.forget_drawn()
    fresh = np.random.default_rng(5)
    expected = [bootstrap._counted(300, 200, fresh, np.float64) for _ in range(2)]
    after = fresh.integers(0, 10**9, 4)
    for dtype in (np.float64, np.float32, np.int64):
        rng = np.random.default_rng(5)
        got = [resample_counts(300, 200, rng, dtype) for _ in range(2)]
        assert all(g.dtype == dtype for g in got)
        assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
        assert np.array_equal(rng.integers(0, 10**9, 4), after)
        got[0][:] = -1  # the caller's copy: the kept counts are untouched
    assert len(bootstrap._DRAWN) == 2
    monkeypatch.setattr(bootstrap, "DRAWN_BYTES", 300 * 200)  # room for one uint8 draw
    resample_counts(300, 200, np.random.default_rng(6))
    assert len(bootstrap._DRAWN) == 1
    bootstrap.forget_drawn()
    assert not bootstrap._DRAWN


@pytest.mark.parametrize("paired", [False, True])
def test_ties_with_the_estimate_do_not_depend_on_rounding(paired: bool) -> None:
    """Seed-averaged accuracies (multiples of 0.2) tie the estimate in many resamples; their
    sums round, so exact comparison would put each tie on either side by its last bits. The
    same values as whole numbers (times 5) sum exactly: both give one BCa interval."""
    rng = np.random.default_rng(4)
    fifths = [rng.integers(0, 6, 400) / 5 for _ in range(2 if paired else 1)]
    signs = intervals.MEAN * len(fifths)
    exact = ours([5 * x for x in fifths], signs, "BCa", None, paired=paired, n=2000)
    rounded = ours(fifths, signs, "BCa", None, paired=paired, n=2000)
    np.testing.assert_allclose(np.asarray(rounded), np.asarray(exact) / 5, rtol=1e-12)


@pytest.mark.parametrize(("n", "n_resamples"), [(2106, 2000), (1508, 2000), (2106, 1000)])
def test_index_blocks_of_the_default_resamples_of_a_probe_are_its_single_draw(
        n: int, n_resamples: int) -> None:
    """The default resamples of the most items a probe has (StereoSet's 2106 examples,
    CrowS-Pairs' 1508 pairs) come in blocks of at most `BLOCK_CELLS` indices, together the
    single draw the bootstraps made before."""
    from biasscope.core.bootstrap import BLOCK_CELLS

    blocks = list(index_blocks(n, n_resamples, np.random.default_rng(3)))
    assert len(blocks) > 1 and all(b.size <= BLOCK_CELLS for b in blocks)
    assert np.array_equal(np.concatenate(blocks),
                          np.random.default_rng(3).integers(0, n, (n_resamples, n)))


def test_block_statistics_never_hold_the_indices_beside_a_copy_of_the_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A statistic that copies its values (a sort) holds a block's gathered values and their
    copy, never the block's indices beside them nor the last block beside the next: two
    blocks' worth at most, not three; the numbers are the single draw's."""
    from biasscope.core import bootstrap

    monkeypatch.setattr(bootstrap, "BLOCK_CELLS", 1 << 18)  # 262 resamples of 1000 items
    x = np.random.default_rng(1).normal(size=1000)

    def median(v: np.ndarray) -> np.ndarray:
        return np.sort(v, axis=1)[:, 500].copy()  # not a view that keeps the sort

    single = median(x[np.random.default_rng(2).integers(0, x.size, (2000, x.size))])
    blocked, peak = traced_peak(
        lambda: bootstrap.block_statistics(median, [x], 2000, np.random.default_rng(2)))
    block = (bootstrap.BLOCK_CELLS // x.size) * x.size * 8
    assert peak < 2.2 * block, f"{peak / block:.2f} blocks at the peak"
    assert np.array_equal(np.concatenate(blocked), single)


def test_index_blocks_are_the_single_draw_in_whole_rows(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Blocks of a few rows are the single draw's rows, bit for bit, and leave the generator
    where it left it; a row wider than the bound is a block of its own; no resamples give one
    empty block (the blocks' statistics always concatenate)."""
    from biasscope.core import bootstrap

    monkeypatch.setattr(bootstrap, "BLOCK_CELLS", 3 * 257 + 5)
    for n in (1, 7, 257, 1000):
        single_rng, rng = np.random.default_rng(8), np.random.default_rng(8)
        single = single_rng.integers(0, n, (301, n))
        blocks = list(index_blocks(n, 301, rng))
        assert all(b.size <= max(bootstrap.BLOCK_CELLS, n) for b in blocks)
        assert np.array_equal(np.concatenate(blocks), single)
        assert np.array_equal(rng.integers(0, 10**6, 5), single_rng.integers(0, 10**6, 5))
    assert [b.shape for b in index_blocks(4, 0, np.random.default_rng(0))] == [(0, 4)]


def test_index_blocks_of_a_callers_size_are_the_single_draw_too() -> None:
    """A caller that spreads each index over several arrays of its own (the judge's
    agreement and leaderboards) asks for smaller blocks: still the single draw's rows."""
    single_rng, rng = np.random.default_rng(5), np.random.default_rng(5)
    single = single_rng.integers(0, 300, (101, 300))
    blocks = list(index_blocks(300, 101, rng, cells=1000))
    assert [b.shape[0] for b in blocks] == [3] * 33 + [2]
    assert np.array_equal(np.concatenate(blocks), single)
    assert np.array_equal(rng.integers(0, 10**6, 5), single_rng.integers(0, 10**6, 5))


def test_resampling_notes_whether_a_bootstrap_was_drawn() -> None:
    """A summary says its level is too fine for its resamples only where an interval is a
    bootstrap: a mean of values with spread (t widened, at any size) or of constant ones draws
    none; a rate of 0/1 outcomes and a block of indices do, noted in every enclosing block."""
    with resampling() as outer:
        with resampling() as few:
            intervals.mean_ci(np.arange(6.0), 0.999, 200)
            intervals.mean_ci(np.arange(30.0), 0.999, 200)
            intervals.mean_ci(np.ones(30), 0.999, 200)
        assert not few.drawn and not outer.drawn
        with resampling() as many:
            intervals.mean_ci(np.arange(20.0) % 2, 0.999, 200, bounds=intervals.UNIT)
        assert many.drawn and outer.drawn
    with resampling() as blocks:
        list(index_blocks(5, 100, np.random.default_rng(0)))
    assert blocks.drawn
