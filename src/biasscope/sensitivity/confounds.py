"""Confounds of a perturbation, which the sensitivity source itself names: a revision changes
length and style as well as substance; some responses cannot be revised toward a principle
(the revision changes nothing); principles are perturbed one at a time as if independent.

- **Length-adjusted effect**: per (model, principle), the ordinary least-squares line of the
  reward effect (perturbed - original) on the length change (characters, revision minus
  response). Its intercept is the effect of a revision that leaves the length unchanged (the
  adjusted effect); its slope is reward per 100 characters. Both get a percentile interval
  from resamples of prompts, at the summary's level (``--confidence``, ``--resamples``:
  95% from 2000 by default), as every interval below is. Where no revision kept the length,
  the intercept is an extrapolation: the table gives the range of length changes to read it
  against.
- **Unchanged revisions**: the normalised edit distance of revision and response (Levenshtein
  distance over the longer length, 0 identical, 1 nothing in common); revisions below the
  threshold (default 0.05) are counted with a Wilson interval, and left out of every index
  with ``exclude_unchanged``.
- **Dependence between principles**: per model and pair of principles, the Pearson
  correlation across prompts of their per-prompt effects, with a Fisher-z interval. Both
  effects subtract the same original reward, so its noise alone correlates them (about +0.5
  when each revision is a fresh response of the same quality), and a test of that correlation
  finds "dependent" principles that are not. The test (`common_change`) is of the
  covariance the two revisions' rewards share beyond what each shares with the original,
  Cov(a, b) - (Cov(a, o) + Cov(b, o)) / 2: zero when each revision is the original plus its
  own change, a fresh response, or anything between, positive when both principles move
  the reward through one common change (often length or tone). One-sided t-test of its
  per-prompt terms (effect size: their Cohen's d), Holm over the pairs of one model, at
  `ALPHA` (0.05) whatever the level of the intervals: a test's own setting. That
  covariance over the effects' standard deviations (``r_beyond_original``) is the part of r
  the original does not explain.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.bootstrap import block_statistics, index_blocks
from biasscope.core.errors import BiasscopeError
from biasscope.core.imports import lazy
from biasscope.core.intervals import percentile_interval, wilson
from biasscope.core.levels import Levels
from biasscope.core.numbers import level_of, num, p_is, with_ci
from biasscope.core.stats import Array, adjust_pvalues
from biasscope.sensitivity.settings import ALPHA

sps = lazy("scipy.stats")  # imported at first use


@dataclass(frozen=True)
class Confounds:
    """How the summary treats near-unchanged revisions (recorded in run.json and summary)."""

    unchanged_below: float = 0.05
    exclude_unchanged: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.unchanged_below <= 1:
            raise BiasscopeError(f"unchanged threshold {self.unchanged_below}: use a "
                                 "normalised edit distance between 0 and 1")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions of characters), by Hyyrö's
    bit-parallel algorithm on Python integers: one pass over ``b`` of word operations on
    ``len(a)``-bit vectors, fast enough for thousands of long revisions."""
    if not a or not b:
        return len(a) + len(b)
    m = len(a)
    full, top = (1 << m) - 1, 1 << (m - 1)
    peq: dict[str, int] = {}
    for i, ch in enumerate(a):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    pv, mv, score = full, 0, m
    for ch in b:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = ((((eq & pv) + pv) & full) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def normalised_edit_distance(a: str, b: str) -> float:
    """Edit distance over the longer length: 0 for identical texts (both empty included)."""
    longest = max(len(a), len(b))
    return edit_distance(a, b) / longest if longest else 0.0


def distances(part: pd.DataFrame) -> pd.Series:
    """Normalised edit distance of each row's revision from its response (NaN: no revision)."""
    values = [normalised_edit_distance(str(r), str(v)) if isinstance(v, str) else math.nan
              for r, v in zip(part["response"], part["revision"])]
    out: pd.Series = pd.Series(values, index=part.index, dtype=np.float64)
    return out


def _ols(x: Array, y: Array) -> tuple[Array, Array]:
    """Intercepts and slopes of y on x along the last axis (NaN where x is constant)."""
    mx, my = x.mean(axis=-1, keepdims=True), y.mean(axis=-1, keepdims=True)
    sxx = ((x - mx) ** 2).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, ((x - mx) * (y - my)).sum(axis=-1) / sxx, math.nan)
    intercept: Array = my[..., 0] - slope * mx[..., 0]
    return intercept, np.asarray(slope)


def length_adjusted(part: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Per (model, principle) of scored rows: the adjusted effect and the slope per 100
    characters, with prompt-bootstrap intervals, and the range of length changes."""
    rows = []
    rng = np.random.default_rng(seed)
    for (model, principle), chunk in part.groupby(["model", "principle"], sort=False):
        x = chunk["length_change"].to_numpy(dtype=np.float64)
        y = (chunk["perturbed"] - chunk["original"]).to_numpy(dtype=np.float64)
        ok = np.isfinite(x) & np.isfinite(y)
        x, y = x[ok], y[ok]
        row: dict[str, Any] = {"model": model, "principle": principle, "n": int(x.size),
                               "mean_effect": float(y.mean()) if x.size else math.nan,
                               "length_change_min": float(x.min()) if x.size else math.nan,
                               "length_change_max": float(x.max()) if x.size else math.nan}
        a, b = _ols(x[None, :], y[None, :]) if x.size >= 3 else (np.full(1, math.nan),) * 2
        if x.size >= 3:
            blocks = block_statistics(_ols, [x, y], n_resamples, rng)
            boot_a, boot_b = (np.concatenate(part) for part in zip(*blocks, strict=True))
        else:  # drawn all the same: the next (model, principle) draws where it always did
            for _ in index_blocks(max(x.size, 1), n_resamples, rng):
                pass
            boot_a = boot_b = np.full(1, math.nan)
        for name, est, boot, scale in (("adjusted_effect", a, boot_a, 1.0),
                                       ("slope_per_100_chars", b, boot_b, 100.0)):
            ci = percentile_interval(float(est[0]) * scale, boot * scale, confidence)
            row[name], row[f"{name}_low"], row[f"{name}_high"] = ci.estimate, ci.low, ci.high
        row["r_squared"] = _r_squared(x, y)
        rows.append(row)
    return rows


def _r_squared(x: Array, y: Array) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1] ** 2)


def unchanged(part: pd.DataFrame, threshold: float, confidence: float = 0.95
              ) -> list[dict[str, Any]]:
    """Per (model, principle): revisions closer to the response than ``threshold``, their
    share with its Wilson interval at ``confidence``."""
    rows = []
    for (model, principle), chunk in part.groupby(["model", "principle"], sort=False):
        d = chunk["edit_distance"].to_numpy(dtype=np.float64)
        d = d[np.isfinite(d)]
        share = wilson(int((d < threshold).sum()), int(d.size), confidence)
        rows.append({"model": model, "principle": principle, "revisions": int(d.size),
                     "unchanged": int((d < threshold).sum()), "unchanged_share": share,
                     "median_edit_distance": float(np.median(d)) if d.size else math.nan})
    return rows


def _pearson(x: Array, y: Array, confidence: float) -> dict[str, float]:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    out = {"n": int(x.size), "r": math.nan, "low": math.nan, "high": math.nan,
           "p_value": math.nan}
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    test = sps.pearsonr(x, y)
    out["r"], out["p_value"] = float(test.statistic), float(test.pvalue)
    if x.size > 3:
        z, half = math.atanh(min(max(out["r"], -0.999999), 0.999999)), sps.norm.ppf(
            0.5 + confidence / 2) / math.sqrt(x.size - 3)
        out["low"], out["high"] = math.tanh(z - half), math.tanh(z + half)
    return out


def common_change(original: Array, a: Array, b: Array) -> dict[str, float]:
    """How far two principles' revisions move the reward together beyond the original
    response they both revise (see the module docstring): ``n`` prompts, the covariance
    ``common_covariance``, ``r_beyond_original`` (it over the effects' standard deviations:
    a ratio of covariances, which small samples can take outside -1 to 1), the one-sided
    ``p_value`` and its effect size (Cohen's d of the per-prompt terms)."""
    ok = np.isfinite(original) & np.isfinite(a) & np.isfinite(b)
    o, a, b = (x[ok] - x[ok].mean() for x in (original, a, b))
    n = int(o.size)
    out = {"n": n, "common_covariance": math.nan, "r_beyond_original": math.nan,
           "p_value": math.nan, "effect_size": math.nan}
    if n < 3:
        return out
    terms = (a * b - (a * o + b * o) / 2) * n / (n - 1)  # their mean: the covariance
    out["common_covariance"] = float(terms.mean())
    spread = math.sqrt(float(np.var(a - o, ddof=1) * np.var(b - o, ddof=1)))
    if spread > 0:
        out["r_beyond_original"] = out["common_covariance"] / spread
    if np.ptp(terms) > 0:
        out["p_value"] = float(sps.ttest_1samp(terms, 0.0, alternative="greater").pvalue)
        out["effect_size"] = float(terms.mean() / terms.std(ddof=1))
    return out


def effect_correlations(part: pd.DataFrame, confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per model and pair of principles: Pearson r of per-prompt effects with its Fisher-z
    CI, and the test of a change common to both beyond the shared original reward
    (`common_change`), Holm-adjusted over the model's pairs (``p_holm``)."""
    rows: list[dict[str, Any]] = []
    for model, chunk in part.groupby("model", sort=False):
        wide = chunk.pivot_table(index="prompt_id", columns="principle", values="perturbed",
                                 sort=False)
        original = chunk.groupby("prompt_id", sort=False)["original"].mean().reindex(
            wide.index).to_numpy(np.float64)
        found = []
        for a, b in itertools.combinations(list(wide.columns), 2):
            pa, pb = wide[a].to_numpy(np.float64), wide[b].to_numpy(np.float64)
            pearson = _pearson(pa - original, pb - original, confidence)
            found.append({"model": model, "principle_a": a, "principle_b": b,
                          **{k: pearson[k] for k in ("n", "r", "low", "high")},
                          **{k: v for k, v in common_change(original, pa, pb).items()
                             if k != "n"}})
        held = adjust_pvalues([r["p_value"] for r in found], "holm")
        rows += [{**r, "p_holm": float(p)} for r, p in zip(found, held)]
    return rows


def confound_summary(part: pd.DataFrame, options: Confounds, levels: Levels | None = None
                     ) -> dict[str, Any]:
    """``summary.json``'s ``confounds`` of one direction (``part`` carries ``edit_distance``),
    intervals at ``levels``; the length regression and correlations use the rows the indices
    use."""
    levels = levels or Levels()
    scored = part[part["perturbed"].notna()]
    if options.exclude_unchanged:
        scored = scored[~(scored["edit_distance"] < options.unchanged_below)]
    return {"unchanged_below": options.unchanged_below,
            "exclude_unchanged": options.exclude_unchanged,
            "unchanged": unchanged(part, options.unchanged_below, levels.confidence),
            "length": length_adjusted(scored, levels.confidence, levels.n_resamples),
            "correlations": effect_correlations(scored, levels.confidence)}


def confound_sentences(found: dict[str, Any], confidence: float = 0.95) -> list[str]:
    """The length adjustment of each model's largest effect, unchanged revisions, the most
    correlated pair of principles; intervals at ``confidence`` (the summary's level), the
    test of a common change at its own α (`ALPHA`)."""
    out = []
    for row in found["length"]:
        if math.isfinite(row["adjusted_effect_low"]) and abs(row["slope_per_100_chars"]) > 0:
            slope_ci = (row["slope_per_100_chars_low"], row["slope_per_100_chars_high"])
            if slope_ci[0] > 0 or slope_ci[1] < 0:
                slope = with_ci(row["slope_per_100_chars"], *slope_ci, confidence, signed=True)
                adjusted = with_ci(row["adjusted_effect"], row["adjusted_effect_low"],
                                   row["adjusted_effect_high"], confidence, signed=True)
                out.append(
                    f"{row['model']}, principle {row['principle']}: the reward moves {slope} "
                    f"per 100 characters of length change; at unchanged length the effect is "
                    f"{adjusted} against {num(row['mean_effect'], signed=True)} unadjusted.")
    same = sum(r["unchanged"] for r in found["unchanged"])
    total = sum(r["revisions"] for r in found["unchanged"])
    if same:
        how = "left out of the indices" if found["exclude_unchanged"] else (
            "kept in the indices (--exclude-unchanged leaves them out)")
        out.append(f"{same} of {total} revisions changed next to nothing (normalised edit "
                   f"distance below {found['unchanged_below']:g}); {how}.")
    strong = [r for r in found["correlations"] if r["p_holm"] < ALPHA]
    if strong:
        top = max(strong, key=lambda r: r["effect_size"])
        out.append(f"{len(strong)} pair(s) of principles move the reward through a common "
                   "change: their revisions' rewards co-vary beyond what each shares with the "
                   f"original response (one-sided t-test over prompts, Holm p < {ALPHA:g}). The "
                   f"strongest, {top['model']}: {top['principle_a']} and {top['principle_b']}, "
                   f"{p_is(top['p_holm'], 'Holm p')}, Cohen's d = {top['effect_size']:+.2f} "
                   f"(their per-prompt effects: r = {top['r']:+.2f}, {level_of(confidence)} CI "
                   f"{top['low']:+.2f} "
                   f"to {top['high']:+.2f}, which the shared original alone can push up): they "
                   "are not independent perturbations.")
    return out


__all__ = ["Confounds", "common_change", "confound_sentences", "confound_summary", "distances",
           "edit_distance", "effect_correlations", "length_adjusted",
           "normalised_edit_distance", "unchanged"]
