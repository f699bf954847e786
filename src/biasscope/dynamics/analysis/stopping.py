"""Whether stopping early makes a model fairer: the gain in |JSD-P gap| of earlier checkpoints
over the final one, resampled together and tested together.

The recommended stop is the checkpoint with the smallest |gap| of several. Read from point
estimates, or with the picked checkpoint's own interval, that is a selection effect: under a
gap that never changes, the smallest of K noisy |gap|s lies below the final one in most runs
(a rule on point estimates stopped early in 85-96% of simulated runs whose gap never changed).
So every candidate's gain is resampled from the same draws of prompts (a prompt's values at
different checkpoints are correlated; WinoBias pairs drawn whole, as a run draws them) and
tested one-sided with a bootstrap max-t over all K candidates (Westfall and Young's
single-step adjustment), and the picked one's interval is the simultaneous band for all K. A
recommendation moves off the final checkpoint only where a gain is shown.
(`biasscope.core.curves.max_t` does this for linear functionals of the curve; a difference of
|gap|s is linear only at given signs of the gaps, so each replicate is studentised at its own
signs, `gain_se`.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from biasscope.core.bootstrap import resample_counts
from biasscope.core.curves import ItemCurves
from biasscope.core.intervals import Interval
from biasscope.core.stats import Array
from biasscope.dynamics.analysis.emergence import item_curves
from biasscope.probes.winobias import GENDERS

#: Resamples drawn per block (memory: block × prompts counts).
_BLOCK = 200


def _gains(male: Array, female: Array) -> Array:
    """|gap(final)| − |gap(step)| per earlier step, from each group's (..., prompts, steps)
    values whose last column is the final checkpoint."""
    return _of_gaps(male.mean(axis=-2) - female.mean(axis=-2))


def _of_gaps(gap: Array) -> Array:
    """`_gains` from (..., steps) gaps."""
    return np.asarray(np.abs(gap[..., -1:]) - np.abs(gap[..., :-1]))


def _wide(history: Mapping[int, pd.DataFrame], steps: Sequence[int]) -> pd.DataFrame:
    """Per prompt (and wording, when the history has one) its value at each of ``steps``
    (columns 0, 1, ... in that order), for the prompts with all of them."""
    both = pd.concat([history[s].assign(at=k) for k, s in enumerate(steps)])
    keys = [k for k in ("template", "prompt", "answer_label") if k in both]
    wide: pd.DataFrame = both.pivot_table(index=keys, columns="at", values="value",
                                          observed=True).dropna()
    return wide


def _blocks(n_resamples: int) -> list[int]:
    return [k for k in [_BLOCK] * (n_resamples // _BLOCK) + [n_resamples % _BLOCK] if k]


def gain_se(values: Sequence[Array], weights: Sequence[Array], gap: Array) -> Array:
    """(rows, steps − 1) standard errors of the gains from the items (each group's
    (items, steps) ``values``, a gender's prompts or the WinoBias pairs' differences, weighted
    by a row of its ``weights``, counts that add up to its items): the gain linearised at the
    signs of ``gap`` (rows, steps), sign(final) · final − sign(step) · step, its unbiased
    variance over each group's items over their number."""
    sign = np.where(gap >= 0, 1.0, -1.0)
    both = sign[:, -1:] * sign[:, :-1]
    total = np.zeros((gap.shape[0], gap.shape[1] - 1))
    for v, w in zip(values, weights, strict=True):
        n = v.shape[0]
        mean = w @ v / n
        var = w @ v ** 2 / n - mean ** 2
        cov = w @ (v * v[:, -1:]) / n - mean * mean[:, -1:]
        spread = var[:, -1:] + var[:, :-1] - 2 * both * cov[:, :-1]
        total += np.maximum(spread, 0.0) / (n - 1)
    return np.sqrt(total)


def _studentised_draws(curves: ItemCurves, n_resamples: int, rng: np.random.Generator
                       ) -> tuple[Array, Array]:
    """Replicates of the gains over ``curves``' items resampled (one draw for every step: the
    WinoBias pairs whole, else the prompts within each gender) and each replicate's own
    standard errors (`gain_se`)."""
    out, se = [], []
    for k in _blocks(n_resamples):
        draws = curves.draws(k, rng)
        gap = curves.resampled(draws)
        out.append(_of_gaps(gap))
        se.append(gain_se(curves.groups, draws, gap))
    return np.concatenate(out), np.concatenate(se)


def _resampled(groups: Sequence[tuple[Array, Array]], n_resamples: int,
               rng: np.random.Generator) -> Array:
    """(resamples, steps − 1) replicates of the gains with several wordings: the wordings
    drawn with replacement, then each drawn wording's prompts within each gender, pooled as
    the estimate pools them; one draw of prompts serves every step."""
    out = np.empty((n_resamples, groups[0][0].shape[1] - 1))
    for r in range(n_resamples):
        drawn = [groups[i] for i in rng.integers(0, len(groups), len(groups))]
        male = np.concatenate([m[rng.integers(0, len(m), len(m))] for m, _ in drawn])
        female = np.concatenate([f[rng.integers(0, len(f), len(f))] for _, f in drawn])
        out[r] = _gains(male, female)
    return out


def _crossed(wide: pd.DataFrame) -> bool:
    """Whether some prompt was asked under several wordings (items crossed with wordings)."""
    index = wide.index.droplevel("template")
    return bool(index.duplicated().any())


def _crossed_resampled(wide: pd.DataFrame, n_resamples: int, rng: np.random.Generator
                       ) -> Array:
    """Replicates of the gains when the wordings ask the same prompts: per replicate the
    wordings are drawn, and the prompts of each gender once, that draw applying to every
    wording (a prompt's own change is shared by all of them); each row weighs its wording's
    multiplicity times its prompt's (`biasscope.core.wordings`)."""
    names, wording = np.unique(wide.index.get_level_values("template").astype(str),
                               return_inverse=True)
    label = wide.index.get_level_values("answer_label").to_numpy()
    prompt = wide.index.get_level_values("prompt").astype(str).to_numpy()
    values = wide.to_numpy(dtype=np.float64)
    out = []
    for k in _blocks(n_resamples):
        picks = resample_counts(names.size, k, rng, np.int64)
        means = []
        for g in GENDERS:
            rows = label == g
            prompts, which = np.unique(prompt[rows], return_inverse=True)
            draws = resample_counts(prompts.size, k, rng, np.int64)
            weights = (picks[:, wording[rows]] * draws[:, which]).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                means.append(weights @ values[rows] / weights.sum(axis=1, keepdims=True))
        out.append(_of_gaps(means[0] - means[1]))
    return np.concatenate(out)


@dataclass(frozen=True)
class Gains:
    """The gains of stopping at each of ``steps`` rather than at ``final``, and their
    replicates (resamples × steps), drawn together; without wordings, also their standard
    errors from the prompts, of the estimate (``se``) and of each replicate."""
    steps: tuple[int, ...]
    final: int
    estimate: Array
    replicates: Array | None  # None: too few prompts of a gender to resample
    se: Array | None = None
    replicate_se: Array | None = None


def gains(history: Mapping[int, pd.DataFrame], stops: Sequence[int], final: int,
          n_resamples: int = 2000, seed: int = 0) -> Gains | None:
    """The gains in |JSD-P gap| of stopping at each of ``stops`` rather than ``final`` over the
    prompts with values at all of them (``history``: per step, per-prompt seed means: prompt,
    answer_label, value, and template when several wordings were run); None when a step is
    missing.

    Prompts are resampled within each gender, each keeping its values at every step together,
    or, where the prompts are WinoBias pairs (`item_curves`), the complete pairs whole: a
    pair's two prompts move against each other, and resampled apart the band was too narrow
    and an earlier stop was claimed too often (`scripts/paired_rate_band.py`). With several
    wordings, the wordings are resampled too (a two-level bootstrap), so the interval includes
    the wording-to-wording variation, as the wordings' own CIs do. When the wordings ask the
    same prompts, each replicate draws the prompts once for all wordings (each gender's apart);
    prompts of their own per wording are drawn within it."""
    steps = [*stops, final]
    if not stops or any(s not in history for s in steps):
        return None
    wide = _wide(history, steps)
    if len(wide.columns) != len(steps):  # a step without any of these prompts
        return None
    wide = wide[list(range(len(steps)))]
    label = wide.index.get_level_values("answer_label")
    male, female = (np.asarray(wide[label == g].to_numpy(dtype=np.float64)) for g in GENDERS)
    estimate = (_gains(male, female) if len(male) and len(female)
                else np.full(len(stops), math.nan))
    if len(male) < 2 or len(female) < 2:
        return Gains(tuple(stops), final, estimate, None)
    rng = np.random.default_rng(seed)
    if "template" in wide.index.names and _crossed(wide):
        return Gains(tuple(stops), final, estimate, _crossed_resampled(wide, n_resamples, rng))
    if "template" in wide.index.names:
        wording = wide.index.get_level_values("template")
        groups = [(wide[(wording == w) & (label == GENDERS[0])].to_numpy(dtype=np.float64),
                   wide[(wording == w) & (label == GENDERS[1])].to_numpy(dtype=np.float64))
                  for w in wording.unique()]
        groups = [(m, f) for m, f in groups if len(m) and len(f)]
        if len(groups) > 1:
            return Gains(tuple(stops), final, estimate, _resampled(groups, n_resamples, rng))
    curves = item_curves(wide)  # the complete pairs' differences, if pairs
    replicates, replicate_se = _studentised_draws(curves, n_resamples, rng)
    gap = curves.curve()[None, :]
    se = gain_se(curves.groups, tuple(np.ones((1, n)) for n in curves.sizes), gap)[0]
    return Gains(tuple(stops), final, estimate, replicates, se, replicate_se)


@dataclass(frozen=True)
class StopTest:
    """Each earlier checkpoint's gain with its adjusted one-sided p-value (H0: no gain) and
    its simultaneous band, both over all of ``steps``."""
    steps: tuple[int, ...]
    final: int
    estimate: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    p_adjusted: tuple[float, ...]
    confidence: float

    def shown(self, alpha: float) -> dict[int, float]:
        """The steps whose gain is shown at ``alpha``, with their adjusted p-values."""
        return {s: p for s, p in zip(self.steps, self.p_adjusted, strict=True) if p < alpha}

    def interval(self, step: int) -> Interval:
        k = self.steps.index(step)
        return Interval(self.estimate[k], self.low[k], self.high[k], self.confidence)

    def as_dict(self) -> dict[str, object]:
        return {"final": self.final, "confidence": self.confidence, "method":
                "bootstrap max-t over the candidate checkpoints (prompts resampled together)",
                "rows": [{"step": s, "gain": e, "low": lo, "high": hi, "p_adjusted": p}
                         for s, e, lo, hi, p in zip(self.steps, self.estimate, self.low,
                                                    self.high, self.p_adjusted, strict=True)]}


def _ratio(deviation: Array, se: Array) -> Array:
    """deviation / se; a zero se counts as exact (0 for no deviation, else ±infinity)."""
    tiny = 1e-12 * (1 + np.abs(deviation))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > tiny, deviation / np.where(se > tiny, se, 1.0),
                        np.where(np.abs(deviation) <= tiny, 0.0, np.sign(deviation) * np.inf))


def stop_test(history: Mapping[int, pd.DataFrame], stops: Sequence[int], final: int,
              confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
              ) -> StopTest | None:
    """Each of ``stops``' gain over ``final`` tested together (`gains`): the bootstrap-t's
    maximum over the candidates (each replicate studentised by its own standard errors from
    the prompts, which keeps a pilot of a few prompts honest; with wordings, by the
    bootstrap's) gives single-step adjusted p-values for "the gain is positive" and a
    simultaneous two-sided band; None without replicates."""
    found = gains(history, stops, final, n_resamples, seed)
    if found is None or found.replicates is None:
        return None
    estimate, replicates = found.estimate, found.replicates
    ok = np.isfinite(replicates).all(axis=1)
    if not np.isfinite(estimate).all() or ok.sum() < max(n_resamples / 2, 2):
        return None
    replicates = replicates[ok]
    if found.se is not None and found.replicate_se is not None:
        se, scale = found.se, found.replicate_se[ok]  # bootstrap-t: each replicate its own
    else:  # wordings: studentised by the bootstrap's standard error
        se = replicates.std(axis=0, ddof=1)
        scale = np.broadcast_to(se, replicates.shape)
    t = _ratio(replicates - estimate, scale)
    observed = _ratio(estimate[None, :], se[None, :])[0]
    largest = t.max(axis=1)
    p = (1 + (largest[:, None] >= observed[None, :]).sum(axis=0)) / (1 + largest.size)
    width = float(np.quantile(np.abs(t).max(axis=1), confidence, method="higher"))
    if not math.isfinite(width):  # replicates without spread beyond the level: no band
        width = math.nan
    return StopTest(found.steps, found.final, tuple(float(x) for x in estimate),
                    tuple(float(x) for x in estimate - width * se),
                    tuple(float(x) for x in estimate + width * se),
                    tuple(float(x) for x in p), confidence)


def separated(estimates: Mapping[int, float], lows: Mapping[int, float],
              highs: Mapping[int, float], final: int, confidence: float = 0.95
              ) -> dict[int, float]:
    """Each earlier step's adjusted p-value for "its |value| is smaller than the final's" from
    the steps' intervals alone (a probe's values over steps keep no per-item data): the
    smallest α at which Bonferroni intervals over all the steps, each widened from its
    ``confidence`` interval on the normal scale, separate the two |value|s. With all true
    values inside their intervals (probability at least 1 − α whatever their correlation),
    every separation is a true claim; conservative where the steps share their items."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    se = {s: (highs[s] - lows[s]) / (2 * z) for s in estimates}
    tests = len(estimates)
    out = {}
    for s in estimates:
        if s == final:
            continue
        spread = se[s] + se[final]
        margin = abs(estimates[final]) - abs(estimates[s])
        if not (math.isfinite(spread) and math.isfinite(margin)):
            out[s] = 1.0
        elif spread <= 0:
            out[s] = 0.0 if margin > 0 else 1.0
        else:
            out[s] = min(1.0, 2 * tests * (1 - NormalDist().cdf(margin / spread)))
    return out
