"""The bootstrap confidence intervals of `biasscope.core.stats`, computed here rather than by
``scipy.stats.bootstrap``, whose import takes half a second, more than the intervals of a
whole report cost. They are SciPy's, unwidened: `stats` gives them for 0/1 outcomes within a
range (a rate, at any size), while a mean or a difference of means with spread is Student's
or Welch's t widened to Hall's (`biasscope.core.hall`) at any size, no bootstrap (BCa
undercovered skewed items from 20 to 1,584 too).

Every statistic bootstrapped here is a mean, a difference of two means, or (paired) each
sample's mean, and the steps are SciPy's (1.15 and later) for those statistics: per batch of
resamples, each sample's indices are drawn with ``rng.integers(0, n, (batch, n))`` in turn
(paired samples share one draw); the BCa interval takes its bias from the share of resampled
statistics below the estimate and its acceleration from the jackknife, and both intervals
read the resampled statistics' linear-interpolation quantiles. Two steps are the same
numbers by a shorter road, so the intervals are SciPy's up to rounding (1e-12 apart in
tests/core/test_bootstrap.py): a resample's mean is its draw counts times the values (not a
gather of n values per resample), and the jackknife's leave-one-out means are
(sum - value) / (n - 1) (not n means of n - 1 values). One step differs on purpose: a
resampled mean within the sums' rounding of the estimate ties it, as in exact arithmetic.
SciPy compares the rounded sums, so on discrete values whose sums round (accuracies averaged
over seeds, mean ranks) the last bits put each tie on one side or the other, and its BCa
bounds can sit one resample away from these (1e-4 on a WinoBias accuracy).
The normal distribution is `biasscope.core.normal` (SciPy's ``ndtr`` and ``ndtri``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from biasscope.core.normal import ndtr, ndtri

Array = npt.NDArray[Any]
T = TypeVar("T")


#: Counts `resample_counts` drew lately: (generator state before, size, n) -> (the counts in
#: the narrowest unsigned type that holds them, generator state after), least recent first.
_DRAWN: OrderedDict[tuple[str, int, int], tuple[Array, Mapping[str, Any]]] = OrderedDict()
_DRAWN_LOCK = threading.Lock()
#: Bytes of counts `_DRAWN` keeps at most (a WinoBias sweep's distinct draws take about 18 MB).
DRAWN_BYTES = 64 << 20
#: Draws of fewer cells are made afresh: they cost less than looking them up.
_SMALLEST_KEPT = 1 << 14


@dataclass
class Resampled:
    """Whether resamples were drawn within a `resampling` block."""

    drawn: bool = False


#: The `resampling` blocks open in this context, innermost last: a draw notes each.
_OPEN: ContextVar[tuple[Resampled, ...]] = ContextVar("biasscope_resampling", default=())


@contextmanager
def resampling() -> Iterator[Resampled]:
    """Notes whether the code within draws bootstrap resamples (`resample_counts`,
    `index_blocks`): a summary says its level is too fine for its resamples
    (`biasscope.core.levels.thin_tails`) only where one of its intervals is a bootstrap, and
    whether one is depends on the data (a mean of fewer than 20 items is Student's t, an
    agreement a percentile bootstrap at any size), which the code drawing knows best."""
    noted = Resampled()
    token = _OPEN.set((*_OPEN.get(), noted))
    try:
        yield noted
    finally:
        _OPEN.reset(token)


def _note_drawn() -> None:
    for noted in _OPEN.get():
        noted.drawn = True


def forget_drawn() -> None:
    """Drop the counts `resample_counts` keeps, once an analysis is done."""
    with _DRAWN_LOCK:
        _DRAWN.clear()


def resample_counts(size: int, n: int, rng: np.random.Generator,
                    dtype: npt.DTypeLike = np.float64) -> Array:
    """How often each of ``size`` items is drawn in each of ``n`` resamples with replacement,
    one row per resample: multinomial(size, uniform) counts, counted from ``rng.integers``
    draws (a tenth of ``rng.multinomial``'s time at thousands of items). The counts depend
    on the generator alone, not on how many rows are drawn at once.

    An analysis bootstraps the same prompts from the same seed at every checkpoint (and the
    same draws for several statistics), so large draws are kept (`DRAWN_BYTES`) and given
    again to a generator in the same state, which is left where drawing would have left it:
    the numbers are the ones drawing gives, for a fraction of its time."""
    if size and n:
        _note_drawn()
    if size * n < _SMALLEST_KEPT:
        return _counted(size, n, rng, dtype)
    key = (repr(rng.bit_generator.state), size, n)
    with _DRAWN_LOCK:
        kept = _DRAWN.get(key)
        if kept is not None:
            _DRAWN.move_to_end(key)
    if kept is not None:
        rng.bit_generator.state = kept[1]
        return kept[0].astype(dtype)
    out = _counted(size, n, rng, dtype)
    top = int(out.max(initial=0))
    narrow = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64)
                  if top <= np.iinfo(t).max)
    compact = out.astype(narrow)
    with _DRAWN_LOCK:
        _DRAWN[key] = (compact, rng.bit_generator.state)
        while sum(c.nbytes for c, _ in _DRAWN.values()) > DRAWN_BYTES:
            _DRAWN.popitem(last=False)
    return out


#: Resample indices drawn at once at most, in whole rows: 16 MiB, 1390 resamples of CrowS-Pairs'
#: 1508 pairs, so that a block beside its gathered values (`block_statistics`) holds less than
#: the single draw of the default 2000 resamples and its values did (46 MiB); 100,000
#: resamples are 72 blocks, not 1.2 GB at once. Larger blocks saved no time (BENCHMARKS.md).
BLOCK_CELLS = 1 << 21


def index_blocks(n: int, n_resamples: int, rng: np.random.Generator,
                 cells: int | None = None) -> Iterator[Array]:
    """``rng.integers(0, n, (n_resamples, n))``, the indices of ``n_resamples`` resamples of
    ``n`` items, in blocks of whole rows of at most ``cells`` (`BLOCK_CELLS`) indices (one row
    at least), for a caller to reduce each block to its rows' statistics before the next is
    drawn: never resamples x items at once. A caller that spreads each index over several
    arrays of its own asks for smaller blocks. The rows are the single draw's, bit for bit,
    however many the blocks (NumPy draws a range below 2**32 from the generator's 32-bit
    stream, whose spare half-word the generator keeps between calls); no resamples give one
    empty block, so the blocks' statistics always concatenate."""
    rows = max(1, (BLOCK_CELLS if cells is None else cells) // max(n, 1))
    if n and n_resamples > 0:
        _note_drawn()
    for start in range(0, max(n_resamples, 1), rows):
        yield rng.integers(0, n, (min(rows, n_resamples - start), n))


def block_statistics(statistic: Callable[..., T], arrays: Sequence[Array], n_resamples: int,
                     rng: np.random.Generator) -> list[T]:
    """``statistic`` of each block of resamples (`index_blocks`) of the items of ``arrays``
    (one value per item each, resampled together), called with each array gathered by the
    block's indices: one result per block, to concatenate. The indices are dropped once
    gathered and the values once reduced, so a statistic that copies its values (a sort, a
    rank) never holds them beside the indices, nor the next block beside the last."""
    out = []
    for idx in index_blocks(len(arrays[0]), n_resamples, rng):
        values = [a[idx] for a in arrays]
        del idx
        out.append(statistic(*values))
        del values
    return out


def _counted(size: int, n: int, rng: np.random.Generator, dtype: npt.DTypeLike) -> Array:
    out = np.zeros((n, size), dtype=dtype)
    if size == 0:
        return out
    step = max(1, (1 << 16) // max(size, 1))  # rows whose bins stay in the cache
    # Drawn as 32-bit integers: NumPy draws a range below 2**32 with its 32-bit generator
    # whatever the type asked, so these are the int64 draws (SciPy's), in half the memory.
    offsets = np.arange(0, step * size, size, dtype=np.uint32)[:, None]
    for start in range(0, n, step):
        rows = min(step, n - start)
        drawn = rng.integers(0, size, (rows, size), dtype=np.uint32)
        drawn += offsets[:rows]
        out[start:start + rows] = np.bincount(drawn.ravel(), minlength=rows * size
                                              ).reshape(rows, size)
    return out


def _jackknifed(data: Sequence[Array], signs: Sequence[float], paired: bool) -> list[Array]:
    """Per sample, the statistic with each of its values left out in turn: a leave-one-out
    mean is (sum - value) / (n - 1). Paired, one list entry: each sample's mean (rows) with
    observation i left out (columns)."""
    if paired:
        values = np.stack(data)
        n = values.shape[-1]
        return [(values.sum(axis=-1, keepdims=True) - values) / (n - 1)]
    means = [np.mean(x) for x in data]
    out = []
    for k, (x, sign) in enumerate(zip(data, signs, strict=True)):
        rest = sum(s * m for j, (s, m) in enumerate(zip(signs, means, strict=True)) if j != k)
        out.append(sign * ((x.sum() - x) / (x.size - 1)) + rest)
    return out


def _bca_levels(estimate: Array, resampled: Array, jackknifed: Sequence[Array], alpha: float,
                rounding: Array) -> tuple[Array, Array]:
    """The quantile levels of the bias-corrected and accelerated interval (Efron and
    Tibshirani 1993, 14.3 and 15.4). A resampled statistic within ``rounding`` of the
    estimate ties it (counts half), as it does in exact arithmetic: on discrete values
    (accuracies, ranks) many resamples do, and the summation's last bits would otherwise
    decide which side each falls on, and move a bound to the neighbouring resample."""
    estimate = np.expand_dims(estimate, axis=-1)
    rounding = np.expand_dims(rounding, axis=-1)
    below = (np.count_nonzero(resampled < estimate - rounding, axis=-1)
             + np.count_nonzero(resampled <= estimate + rounding, axis=-1))
    share = np.asarray(below.astype(estimate.dtype) / (2 * resampled.shape[-1]),
                       dtype=estimate.dtype)
    z0 = ndtri(share)
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


def mean_interval(samples: Sequence[Array], signs: Sequence[float], *, n_resamples: int,
                  batch: int | None, confidence: float, method: str, rng: np.random.Generator,
                  paired: bool = False) -> tuple[Array, Array]:
    """(low, high) of the two-sided ``confidence`` bootstrap interval (``method`` ``"BCa"``
    or ``"percentile"``) of sum(signs[k] * mean(samples[k])), or, ``paired``, of each
    sample's mean, the samples (all of one size) resampled together: up to rounding, the
    numbers ``scipy.stats.bootstrap(samples, statistic, vectorized=True, paired=paired,
    batch=batch, ...)`` gives with generator ``rng``. Each sample is 1-D with at least two
    values."""
    data = [np.asarray(s, dtype=np.float64) for s in samples]
    step = batch or n_resamples or 1
    parts = []
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        if paired:  # one draw of the observations, each sample's mean of it
            n = data[0].size
            parts.append(np.stack(data) @ resample_counts(n, rows, rng).T / n)
            continue
        total: Array = np.zeros(rows)
        for x, sign in zip(data, signs, strict=True):  # SciPy's order of draws
            total = total + sign * (resample_counts(x.size, rows, rng) @ x / x.size)
        parts.append(total)
    resampled = np.concatenate(parts, axis=-1)
    # a mean of n values is within n * eps * max |x| of its exact value, however summed
    bound = [x.size * np.finfo(np.float64).eps * np.max(np.abs(x)) for x in data]
    if paired:
        estimate, rounding = np.array([np.mean(x) for x in data]), 2 * np.array(bound)
    else:
        estimate = np.asarray(sum(s * np.mean(x) for s, x in zip(signs, data, strict=True)))
        rounding = np.asarray(2 * sum(bound))
    alpha = (1 - confidence) / 2
    if method.lower() == "bca":
        levels = _bca_levels(estimate, resampled, _jackknifed(data, signs, paired), alpha,
                             rounding)
    else:
        level = np.asarray(alpha, dtype=resampled.dtype)
        levels = (level, 1 - level)
    ci = _quantiles(resampled, np.stack(levels, axis=-1))
    return ci[..., 0], ci[..., 1]
