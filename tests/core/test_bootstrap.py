"""`biasscope.core.bootstrap` gives SciPy's bootstrap intervals: the same numbers, bit for bit,
as ``scipy.stats.bootstrap`` with the same generator (CI pins SciPy 1.17), within 1e-12 on
another SciPy."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np
import pytest
import scipy.stats as sps

from biasscope.core import stats
from biasscope.core.bootstrap import bootstrap_interval
from numbers_close import same_as_scipy

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


def ours(samples: list[np.ndarray], statistic: Callable[..., Any], method: str,
         batch: int | None, paired: bool = False, n: int = 999, seed: int = 3
         ) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bootstrap_interval(samples, statistic, n_resamples=n, batch=batch,
                                  confidence=0.9, method=method,
                                  rng=np.random.default_rng(seed), paired=paired)


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
    same_as_scipy(ours([x], stats._mean, method, batch),
                  scipy_interval([x], stats._mean, method, batch))
    same_as_scipy(ours([x, y], stats._mean_difference, method, batch),
                  scipy_interval([x, y], stats._mean_difference, method, batch))


@pytest.mark.parametrize("method", ["BCa", "percentile"])
@pytest.mark.parametrize("batch", [None, 5, 300])
def test_paired_means_are_scipys(method: str, batch: int | None) -> None:
    rng = np.random.default_rng(7)
    samples = [data(rng, 31, kind) for kind in ("normal", "binary", "skewed", "normal")]
    same_as_scipy(ours(samples, stats._means, method, batch, paired=True),
                  scipy_interval(samples, stats._means, method, batch, paired=True))


def test_an_undefined_bca_interval_is_nan_as_scipys() -> None:
    """Values a rounding error apart: every jackknife mean is equal, the acceleration 0/0
    and the BCa interval undefined (NaN), as SciPy's; one outlier among equal values is
    defined."""
    tiny = np.array([1.0, 1.0, 1.0, 1.0 + 2e-16])
    low, high = ours([tiny], stats._mean, "BCa", None)
    assert np.isnan(low) and np.isnan(high)
    same_as_scipy((low, high), scipy_interval([tiny], stats._mean, "BCa", None))
    outlier = np.array([0.0] * 30 + [1.0])
    same_as_scipy(ours([outlier], stats._mean, "BCa", None),
                  scipy_interval([outlier], stats._mean, "BCa", None))


def test_the_intervals_of_stats_are_scipys() -> None:
    """`stats.bootstrap_mean`, `bootstrap_difference` and `bootstrap_means` (their default
    2,000 resamples, seed 0) against SciPy called as they called it before."""
    rng = np.random.default_rng(11)
    x, y, z = rng.normal(0, 1, 40), rng.integers(0, 2, 40).astype(float), rng.normal(1, 2, 25)

    def scipy_ci(samples: tuple[np.ndarray, ...], statistic: Callable[..., Any],
                 paired: bool = False) -> tuple[float, float]:
        res = sps.bootstrap(samples, statistic, n_resamples=2000, vectorized=True,
                            paired=paired, confidence_level=0.95, method="BCa",
                            batch=max(1, 4_000_000 // sum(s.size for s in samples[:1 if paired
                                                                                   else None])),
                            **{KW: np.random.default_rng(0)})
        return res.confidence_interval.low, res.confidence_interval.high

    got = stats.bootstrap_mean(x)
    same_as_scipy((got.low, got.high), scipy_ci((x,), stats._mean))
    got = stats.bootstrap_difference(x, z)
    same_as_scipy((got.low, got.high), scipy_ci((x, z), stats._mean_difference))
    both = stats.bootstrap_means([x, y, z])
    low, high = scipy_ci((x, y), stats._means, paired=True)
    same_as_scipy([(b.low, b.high) for b in both[:2]], np.stack([low, high], axis=-1))
    same_as_scipy((both[2].low, both[2].high), scipy_ci((z,), stats._mean))


@pytest.mark.parametrize(("k", "n"), [(0, 12), (12, 12), (5, 12), (1, 200), (3, 7)])
def test_wilson_is_scipys(k: int, n: int) -> None:
    for confidence in (0.9, 0.95):
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        got = stats.wilson(k, n, confidence)
        same_as_scipy((got["low"], got["high"]), (ci.low, ci.high))


def test_a_rate_at_its_boundary_gets_wilson_and_any_other_is_bootstrapped() -> None:
    ones, zeros = np.ones(12), np.zeros(12)
    assert stats.boundary_rate(ones) == stats.wilson(12, 12)
    assert stats.boundary_rate(np.append(zeros, np.nan), 0.9) == stats.wilson(0, 12, 0.9)
    for values in (np.array([0.0, 1.0, 1.0]), np.full(5, 0.5), np.ones(1), np.array([])):
        assert stats.boundary_rate(values) is None
    boot = stats.bootstrap_means([ones])[0]  # what it replaces: no spread at all
    assert boot.low == boot.high == 1.0
