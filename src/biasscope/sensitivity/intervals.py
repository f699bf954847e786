"""Conventions of the sensitivity indices, and their intervals by a joint prompt bootstrap.

Two conventions (``--conventions``), read from the source's own code
(``src/postproc/make_processed_datasets_for_sensitivity_plots.py`` and ``make_plots.py`` of
DouwMarx/constitutional_sensitivities_of_preference_models):

========================  ==========================================  ==========================
                          ``biasscope`` (default)                      ``source``
========================  ==========================================  ==========================
std of effects            sample SD, ddof=1 (NaN for one pair)         ``np.std``: ddof=0
percentile pool           each prompt's original reward once, every    every (principle, prompt)
                          perturbed reward                             row's original and
                                                                       perturbed reward (an
                                                                       original once per
                                                                       principle)
normalisation             index / sum of |index| over the model's      index / plain sum
                          principles: absolute values add up to 1,     (adds up to 1, but flips
                          signs kept                                   every sign when the sum is
                                                                       negative and explodes
                                                                       near zero)
group comparison          normalised over all principles               renormalised over the
                                                                       compared (non-shared)
                                                                       principles, as the
                                                                       source's group figure
========================  ==========================================  ==========================

Not a switch: the Wilcoxon test of the group comparison drops effects that are exactly zero
before testing, so SciPy gives its exact p-value; the source passes them on and SciPy falls
back to a normal approximation (same statistic; the p-values differ only when zeros occur,
``docs/validation.md``). A zero normalising sum gives NaN in both.

Intervals: prompts are resampled with replacement jointly for all of a model's principles
(each resample is one set of prompts, as in the study, so normalised indices keep the
dependence between principles), every index is recomputed, pool included, and the percentile
interval is taken (``percentile_interval``; no interval where the estimate is not
finite or fewer than half the resamples give a value).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.bootstrap import index_blocks
from biasscope.core.errors import BiasscopeError
from biasscope.core.imports import lazy
from biasscope.core.intervals import percentile_interval
from biasscope.core.stats import Array

sps = lazy("scipy.stats")  # imported at first use

CONVENTIONS = ("biasscope", "source")
# the indices a resample recomputes, in the order of ``_resample``'s rows
BOOTSTRAPPED = ("mean_effect", "median_effect", "std_effect", "mean_percentile_effect",
                "median_percentile_effect", "std_percentile_effect", "wilcoxon_statistic",
                "rank_biserial")
RAW_INTERVALS = ("std_effect", "mean_percentile_effect", "median_percentile_effect",
                 "std_percentile_effect")


@dataclass(frozen=True)
class Convention:
    name: str
    ddof: int  # of the std of effects and of percentile effects
    originals_once: bool  # in the percentile pool
    absolute: bool  # normalise by the sum of absolute values, else by the plain sum


def convention(name: str) -> Convention:
    if name == "biasscope":
        return Convention(name, 1, True, True)
    if name == "source":
        return Convention(name, 0, False, False)
    raise BiasscopeError(f"conventions {name!r}: use one of {', '.join(CONVENTIONS)}")


def normalise(values: npt.ArrayLike, conv: Convention, axis: int = -1) -> Array:
    """``values`` divided by their (absolute or plain) sum along ``axis``, NaNs left out of
    the sum; NaN where that sum is zero."""
    x = np.asarray(values, dtype=np.float64)
    total = np.nansum(np.abs(x) if conv.absolute else x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: Array = np.where(total != 0, x / np.where(total != 0, total, 1.0), math.nan)
    return out


def pool_values(original: Array, perturbed: Array, conv: Convention) -> Array:
    """The rewards one model's percentiles are taken among (unsorted, finite)."""
    if conv.originals_once:
        # A row is one prompt: its original once, not each distinct value (scored twice in
        # other batches, they differ in their last bits).
        both = np.concatenate([original[np.isfinite(original)][:1], perturbed])
    else:
        ok = np.isfinite(original) & np.isfinite(perturbed)
        both = np.concatenate([original[ok], perturbed[ok]])
    out: Array = both[np.isfinite(both)]
    return out


@dataclass(frozen=True)
class _Matrix:
    """One model's rewards, prompts x principles (NaN where a pair is missing), and each
    prompt's contribution to the percentile pool (NaN-padded)."""
    original: Array
    perturbed: Array
    pool: Array


def _matrix(chunk: pd.DataFrame, principles: list[Any], conv: Convention) -> _Matrix:
    prompts = list(dict.fromkeys(chunk["prompt_id"]))
    rows = pd.Index(prompts).get_indexer(chunk["prompt_id"])
    cols = pd.Index(principles).get_indexer(chunk["principle"])
    shape = (len(prompts), len(principles))
    original, perturbed = np.full(shape, math.nan), np.full(shape, math.nan)
    original[rows, cols] = chunk["original"].to_numpy(dtype=np.float64)
    perturbed[rows, cols] = chunk["perturbed"].to_numpy(dtype=np.float64)
    pool = np.full((shape[0], 2 * shape[1]), math.nan)
    for i in range(shape[0]):
        values = pool_values(original[i], perturbed[i], conv)
        pool[i, :values.size] = values
    return _Matrix(original, perturbed, pool)


def _spread(x: Array, ddof: int) -> Array:
    n = np.isfinite(x).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out: Array = np.where(n > ddof, np.nanstd(x, axis=1, ddof=ddof), math.nan)
    return out


def _median(x: Array) -> Array:
    """NaN-aware median along axis 1 (NaN sorts last; NaN where nothing is finite)."""
    ordered = np.sort(x, axis=1)
    n = np.isfinite(x).sum(axis=1, keepdims=True)
    low = np.take_along_axis(ordered, np.maximum((n - 1) // 2, 0), axis=1)
    high = np.take_along_axis(ordered, n // 2, axis=1) if x.shape[1] else low
    out: Array = np.where(n > 0, (low + high) / 2, math.nan)[:, 0]
    return out


def _resample(m: _Matrix, idx: npt.NDArray[np.intp], conv: Convention) -> Array:
    """Every index of BOOTSTRAPPED per principle for each resample of prompts ``idx`` (resamples
    x prompts): an array resamples x indices x principles."""
    original, perturbed = m.original[idx], m.perturbed[idx]  # resamples x prompts x principles
    ok = np.isfinite(original) & np.isfinite(perturbed)
    effect = np.where(ok, perturbed - original, math.nan)
    pct = np.full(effect.shape, math.nan)
    for b in range(idx.shape[0]):
        pool = m.pool[idx[b]].ravel()
        pool = np.sort(pool[np.isfinite(pool)])
        below = np.searchsorted(pool, np.where(ok[b], perturbed[b], 0.0)) - np.searchsorted(
            pool, np.where(ok[b], original[b], 0.0))
        pct[b] = np.where(ok[b], below / max(pool.size, 1), math.nan)
    nonzero = ok & (effect != 0)
    ranks = sps.rankdata(np.where(nonzero, np.abs(effect), math.nan), axis=1, nan_policy="omit")
    r_plus = np.where(nonzero & (effect > 0), ranks, 0.0).sum(axis=1)
    m_nonzero, n = nonzero.sum(axis=1), ok.sum(axis=1)
    total = np.where(m_nonzero > 0, m_nonzero * (m_nonzero + 1) / 2, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.stack([
            np.nanmean(effect, axis=1), _median(effect), _spread(effect, conv.ddof),
            np.nanmean(pct, axis=1), _median(pct), _spread(pct, conv.ddof),
            np.where(n > 0, r_plus, math.nan),
            np.where(m_nonzero > 0, 2 * r_plus / total - 1, np.where(n > 0, 0.0, math.nan))],
            axis=1)


def bootstrap_intervals(frame: pd.DataFrame, table: pd.DataFrame, conv: Convention,
                        confidence: float, n_resamples: int, seed: int) -> pd.DataFrame:
    """``<index>_low/high`` for RAW_INTERVALS and ``<index>_normalised_low/high`` for every
    bootstrapped index, one row per row of ``table`` (model, principle)."""
    columns: dict[str, Array] = {}
    for col in BOOTSTRAPPED:
        for name in ((col, f"{col}_normalised") if col in RAW_INTERVALS
                     else (f"{col}_normalised",)):
            columns[f"{name}_low"] = np.full(len(table), math.nan)
            columns[f"{name}_high"] = np.full(len(table), math.nan)
    rng = np.random.default_rng(seed)
    for model, rows in table.groupby("model", sort=False):
        m = _matrix(frame[frame["model"] == model], list(rows["principle"]), conv)
        n = m.original.shape[0]
        step = max(1, 400_000 // max(m.original.size, 1))  # resamples per batch
        reps = np.concatenate([_resample(m, idx, conv) for idx in index_blocks(
            n, n_resamples, rng, step * max(n, 1))])
        normed = normalise(reps, conv, axis=2)  # resamples x indices x principles
        at = table.index.get_indexer(rows.index)
        scored = rows["n"].to_numpy()  # prompts with both rewards, per principle
        for k, col in enumerate(BOOTSTRAPPED):
            for name, values in ((col, reps), (f"{col}_normalised", normed)):
                if f"{name}_low" not in columns:
                    continue
                estimates = rows[name].to_numpy(dtype=np.float64)
                for j, row in enumerate(at):
                    if scored[j] < 2:  # one prompt resampled is itself: no width, no interval
                        continue
                    ci = percentile_interval(float(estimates[j]), values[:, k, j], confidence)
                    columns[f"{name}_low"][row], columns[f"{name}_high"][row] = ci.low, ci.high
    out: pd.DataFrame = pd.DataFrame(columns, index=table.index)
    return out


__all__ = ["BOOTSTRAPPED", "CONVENTIONS", "RAW_INTERVALS", "Convention", "bootstrap_intervals",
           "convention", "normalise", "pool_values"]
