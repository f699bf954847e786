"""The bootstrap confidence intervals of `biasscope.core.stats`, computed here rather than by
``scipy.stats.bootstrap``: importing SciPy's statistics takes half a second, more than the
intervals of a whole report cost, and a report needs nothing else from it.

The steps are SciPy's (1.15 and later), operation for operation, so the intervals are the
numbers SciPy gives for the same generator: per batch of resamples, each sample's indices are
drawn with ``rng.integers(0, n, (batch, n))`` in turn (paired samples share one draw); the
BCa interval takes its bias from the share of resampled statistics below the estimate and
its acceleration from the jackknife, and both intervals read the resampled statistics'
linear-interpolation quantiles. tests/core/test_bootstrap.py checks them against SciPy.
The normal distribution is `biasscope.core.normal` (SciPy's ``ndtr`` and ``ndtri``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from biasscope.core.normal import ndtr, ndtri

Array = npt.NDArray[Any]
Statistic = Callable[..., Array]
#: Values gathered at once (1 MiB of float64), so that they are still in the cache when the
#: statistic reads them: a statistic of each row alone is the same number, and the batch of
#: rows SciPy gathers at once (``batch``) is tens of megabytes.
CHUNK = 1 << 17


def _by_rows(statistic: Statistic, sources: Sequence[Array], indices: Sequence[Array]
             ) -> Array:
    """``statistic`` of each source taken at its 2-D index array (last axis), a few rows at
    a time; the rows' results side by side in the last axis."""
    step = max(1, CHUNK // max(1, max(i.shape[-1] for i in indices)))
    rows = indices[0].shape[0]
    parts = [statistic(*(np.take(s, i[start:start + step], axis=-1)
                         for s, i in zip(sources, indices, strict=True)), axis=-1)
             for start in range(0, rows, step)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def _broadcast(arrays: Sequence[Array]) -> list[Array]:
    """The arrays broadcast against each other in every axis but the last."""
    common = np.broadcast_shapes(*((*a.shape[:-1], 1) for a in arrays))[:-1]
    return [np.broadcast_to(a, common + a.shape[-1:]) for a in arrays]


def _jackknife(sample: Array, batch: int | None) -> Iterator[Array]:
    """The leave-one-out resamples of ``sample`` (last axis), ``batch`` rows at a time."""
    n = sample.shape[-1]
    step = batch or n
    for k in range(0, n, step):
        rows = min(step, n - k)
        keep = np.ones((rows, n), dtype=bool)
        np.fill_diagonal(keep[:, k:k + rows], False)
        index = np.broadcast_to(np.arange(n), (rows, n))[keep].reshape((rows, n - 1))
        yield np.take(sample, index, axis=-1)


def _bca_levels(data: Sequence[Array], statistic: Statistic, alpha: float, resampled: Array,
                batch: int | None) -> tuple[Array, Array]:
    """The quantile levels of the bias-corrected and accelerated interval (Efron and
    Tibshirani 1993, 14.3 and 15.4)."""
    estimate = np.expand_dims(statistic(*data, axis=-1), axis=-1)
    below = (np.count_nonzero(resampled < estimate, axis=-1)
             + np.count_nonzero(resampled <= estimate, axis=-1))
    share = np.asarray(below.astype(estimate.dtype) / (2 * resampled.shape[-1]),
                       dtype=estimate.dtype)
    z0 = ndtri(share)
    jackknifed = []
    for j, sample in enumerate(data):
        samples = [np.expand_dims(s, axis=-2) for s in data]
        parts = []
        for left_out in _jackknife(sample, min(batch or sample.shape[-1],
                                               max(1, CHUNK // sample.shape[-1]))):
            samples[j] = left_out
            parts.append(statistic(*_broadcast(samples), axis=-1))
        jackknifed.append(np.concatenate(parts, axis=-1))
    sizes = [float(t.shape[-1]) for t in jackknifed]
    spread = [(n - 1) * (np.mean(t, axis=-1, keepdims=True) - t)
              for t, n in zip(jackknifed, sizes, strict=True)]
    nums = [np.sum(u ** 3, axis=-1) / n ** 3 for u, n in zip(spread, sizes, strict=True)]
    dens = [np.sum(u ** 2, axis=-1) / n ** 2 for u, n in zip(spread, sizes, strict=True)]
    acceleration = 1 / 6 * sum(nums) / sum(dens) ** (3 / 2)
    z_alpha = float(ndtri(alpha))
    low, high = z0 + z_alpha, z0 - z_alpha
    return (ndtr(z0 + low / (1 - acceleration * low)),
            ndtr(z0 + high / (1 - acceleration * high)))


def _quantiles(values: Array, levels: Array) -> Array:
    """Per row of ``values`` (last axis) its linear-interpolation quantiles at its row of
    ``levels`` (NaN for a level outside [0, 1], and for every level of a row holding NaN)."""
    y = np.sort(values, axis=-1)
    shape = np.broadcast_shapes(y.shape[:-1], levels.shape[:-1])
    y = np.broadcast_to(y, shape + y.shape[-1:])
    p = np.broadcast_to(levels, shape + levels.shape[-1:])
    n = np.asarray(y.shape[-1], dtype=y.dtype)
    rows_nan = np.isnan(y).any(axis=-1)
    if rows_nan.any():
        y = np.array(y, copy=True)
        y[rows_nan] = np.nan
    outside = (p > 1) | (p < 0) | np.isnan(p)
    if outside.any():
        p = np.array(p, copy=True)
        p[outside] = 0.5
    position = p * n + (1 - p)
    upper = position // 1
    lower = upper - 1
    weight = position % 1
    weight = np.where(lower < 0, 0, weight)
    lower, upper = np.clip(lower, 0.0, n - 1), np.clip(upper, 0.0, n - 1)
    out = ((1 - weight) * np.take_along_axis(y, lower.astype(np.int64), axis=-1)
           + weight * np.take_along_axis(y, upper.astype(np.int64), axis=-1))
    out[outside] = np.nan
    return np.asarray(out)


def bootstrap_interval(samples: Sequence[Array], statistic: Statistic, *, n_resamples: int,
                       batch: int | None, confidence: float, method: str,
                       rng: np.random.Generator, paired: bool = False) -> tuple[Array, Array]:
    """(low, high) of the two-sided ``confidence`` bootstrap interval of ``statistic`` (a
    function of the samples' last axes, ``axis=-1``), ``method`` ``"BCa"`` or
    ``"percentile"``: the numbers ``scipy.stats.bootstrap(samples, statistic,
    vectorized=True, paired=paired, batch=batch, ...)`` gives with generator ``rng``. Each
    sample is 1-D with at least two values (paired: all of one size)."""
    data = [np.asarray(s) for s in samples]
    if paired:  # the observations' indices are resampled, and the statistic reads them
        originals, unpaired = data, statistic

        def on_indices(index: Array, axis: int = -1) -> Array:
            if index.ndim == 2:
                return _by_rows(unpaired, originals, [index] * len(originals))
            return unpaired(*(np.take(s, index, axis=-1) for s in originals), axis=axis)

        data, statistic = [np.arange(data[0].shape[-1])], on_indices
    step = batch or n_resamples or 1
    parts = []
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        drawn = [rng.integers(0, s.shape[-1], (rows, s.shape[-1]), dtype=np.int64)
                 for s in data]  # SciPy's draws; its s[..., i] by np.take, a third the time
        parts.append(_by_rows(statistic, data, drawn))
    resampled = np.concatenate(parts, axis=-1)
    alpha = (1 - confidence) / 2
    if method.lower() == "bca":
        levels = _bca_levels(data, statistic, alpha, resampled, batch)
    else:
        level = np.asarray(alpha, dtype=resampled.dtype)
        levels = (level, 1 - level)
    ci = _quantiles(resampled, np.stack(levels, axis=-1))
    return ci[..., 0], ci[..., 1]
