"""Performance against fairness over checkpoints: does performance mirror the gap, and what
does stopping early cost and gain, each with its interval.

- **Mirroring** is whether performance and |gap| change together between checkpoints:
  Spearman's ρ of their changes over pairs of checkpoints that share none, with an exact
  permutation test at the analysis' α (`biasscope.core.comovement`; two curves that merely
  both drift with training correlate over checkpoints whether or not they are linked). The
  sentence says "mirrors" only when that test rejects; otherwise that it is not shown. It
  never says "does not mirror": measurement noise in the changes weakens their correlation,
  so a small ρ does not show that the curves are unrelated.
- **Fairness gain** of the recommended stop: |gap(final)| − |gap(stop)|, with a bootstrap CI
  that resamples prompts within each gender and keeps each prompt's two values (stop, final)
  together: the same prompts were asked at both checkpoints.
- **Performance cost**: final − stop performance. With LAMBADA accuracy and its item count,
  Newcombe's hybrid score interval for a difference of proportions (from the two Wilson
  intervals; it treats the checkpoints' answers as independent, which, since the same items
  are asked, makes it conservative). Imported series (CSV, lm-eval) carry no per-item data, so
  their cost is a point value and the sentence says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.bootstrap import resample_counts
from biasscope.core.comovement import comovement
from biasscope.core.numbers import num, p_is, with_ci
from biasscope.core.stats import Array, Interval, percentile_interval, wilson
from biasscope.dynamics.analysis.config import JSDP_MARGIN, MAX_GAP
from biasscope.probes.winobias import GENDERS

#: Formerly the |ρ| below which, with confidence, performance "did not mirror" fairness; that
#: verdict is no longer given (see the module docstring). Kept for code that imports it.
MIRROR = 0.5


def _gain(male: Array, female: Array) -> Array:
    """|gap(final)| − |gap(stop)| from each group's (..., prompts, 2) values: column 0 the
    stop, column 1 the final checkpoint."""
    gap = male.mean(axis=-2) - female.mean(axis=-2)
    return np.asarray(np.abs(gap[..., 1]) - np.abs(gap[..., 0]))


def _wide(history: Mapping[int, pd.DataFrame], stop: int, final: int) -> pd.DataFrame:
    """Per prompt (and wording, when the history has one) its values at the stop (column 0)
    and the final checkpoint (column 1), for the prompts with both."""
    both = pd.concat([history[stop].assign(at=0), history[final].assign(at=1)])
    keys = [k for k in ("template", "prompt", "answer_label") if k in both]
    wide: pd.DataFrame = both.pivot_table(index=keys, columns="at", values="value",
                                          observed=True).dropna()
    return wide


def _resampled_gains(groups: Sequence[tuple[Array, Array]], n_resamples: int,
                     rng: np.random.Generator) -> Array:
    """Replicates of the gain: the wordings drawn with replacement (when there are several),
    then each drawn wording's prompts within each gender, pooled as the estimate pools them."""
    if len(groups) == 1:
        male, female = groups[0]
        return np.concatenate([
            _gain(male[rng.integers(0, len(male), (k, len(male)))],
                  female[rng.integers(0, len(female), (k, len(female)))])
            for k in [200] * (n_resamples // 200) + [n_resamples % 200] if k])
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        drawn = [groups[i] for i in rng.integers(0, len(groups), len(groups))]
        male = np.concatenate([m[rng.integers(0, len(m), len(m))] for m, _ in drawn])
        female = np.concatenate([f[rng.integers(0, len(f), len(f))] for _, f in drawn])
        out[r] = _gain(male, female)
    return out


def _crossed(wide: pd.DataFrame) -> bool:
    """Whether some prompt was asked under several wordings (items crossed with wordings)."""
    index = wide.index.droplevel("template")
    return bool(index.duplicated().any())


def _crossed_gains(wide: pd.DataFrame, n_resamples: int, rng: np.random.Generator) -> Array:
    """Replicates of the gain when the wordings ask the same prompts: per replicate the
    wordings are drawn, and the prompts of each gender once, that draw applying to every
    wording (a prompt's own change is shared by all of them); each row weighs its wording's
    multiplicity times its prompt's (`biasscope.core.wordings`)."""
    names, wording = np.unique(wide.index.get_level_values("template").astype(str),
                               return_inverse=True)
    label = wide.index.get_level_values("answer_label").to_numpy()
    prompt = wide.index.get_level_values("prompt").astype(str).to_numpy()
    values = wide[[0, 1]].to_numpy(dtype=np.float64)
    out = []
    for k in [200] * (n_resamples // 200) + [n_resamples % 200]:
        if not k:
            continue
        picks = resample_counts(names.size, k, rng, np.int64)
        means = []
        for g in GENDERS:
            rows = label == g
            prompts, which = np.unique(prompt[rows], return_inverse=True)
            draws = resample_counts(prompts.size, k, rng, np.int64)
            weights = (picks[:, wording[rows]] * draws[:, which]).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                means.append(weights @ values[rows] / weights.sum(axis=1, keepdims=True))
        gap = means[0] - means[1]
        out.append(np.abs(gap[:, 1]) - np.abs(gap[:, 0]))
    return np.concatenate(out)


def fairness_gain(history: Mapping[int, pd.DataFrame], stop: int, final: int,
                  confidence: float = 0.95, n_resamples: int = 2000) -> Interval | None:
    """The gain in |JSD-P gap| of stopping at ``stop`` rather than ``final`` over the prompts
    with values at both (``history``: per step, per-prompt seed means: prompt, answer_label,
    value, and template when several wordings were run); None when either step is missing.

    Prompts are resampled within each gender, each keeping its two values together; with
    several wordings, the wordings are resampled too (a two-level bootstrap), so the
    interval includes the wording-to-wording variation, as the wordings' own CIs do. When the
    wordings ask the same prompts, each replicate draws the prompts once for all wordings
    (`_crossed_gains`); prompts of their own per wording are drawn within it."""
    if stop not in history or final not in history:
        return None
    wide = _wide(history, stop, final)
    if not {0, 1} <= set(wide.columns):
        return None
    label = wide.index.get_level_values("answer_label")
    male, female = (np.asarray(wide[label == g][[0, 1]].to_numpy()) for g in GENDERS)
    estimate = float(_gain(male, female)) if len(male) and len(female) else math.nan
    if len(male) < 2 or len(female) < 2:
        return Interval(estimate, math.nan, math.nan, confidence)
    if "template" in wide.index.names and _crossed(wide):
        replicates = _crossed_gains(wide, n_resamples, np.random.default_rng(0))
        return percentile_interval(estimate, replicates, confidence)
    if "template" in wide.index.names:
        wording = wide.index.get_level_values("template")
        groups = [(wide[(wording == w) & (label == GENDERS[0])][[0, 1]].to_numpy(),
                   wide[(wording == w) & (label == GENDERS[1])][[0, 1]].to_numpy())
                  for w in wording.unique()]
        groups = [(m, f) for m, f in groups if len(m) and len(f)]
    else:
        groups = [(male, female)]
    replicates = _resampled_gains(groups, n_resamples, np.random.default_rng(0))
    return percentile_interval(estimate, replicates, confidence)


def performance_cost(source: str, final: float, stop: float, counts: Mapping[int, int],
                     steps: tuple[int, int], confidence: float = 0.95) -> dict[str, float]:
    """final − stop performance, with Newcombe's interval for LAMBADA accuracy (``counts``:
    items per step), else NaN bounds."""
    cost = {"estimate": final - stop, "low": math.nan, "high": math.nan}
    n_stop, n_final = counts.get(steps[0]), counts.get(steps[1])
    if source == "LAMBADA accuracy" and n_stop and n_final:
        a = wilson(round(final * n_final), n_final, confidence)
        b = wilson(round(stop * n_stop), n_stop, confidence)
        cost["low"] = cost["estimate"] - math.hypot(a["estimate"] - a["low"],
                                                    b["high"] - b["estimate"])
        cost["high"] = cost["estimate"] + math.hypot(a["high"] - a["estimate"],
                                                     b["estimate"] - b["low"])
    return cost


def lambada_counts(summary: Mapping[str, Any], model: str) -> dict[int, int]:
    """Items per LAMBADA checkpoint of ``model`` (for the performance cost's interval)."""
    return {int(c["step"]): int(c.get("items_per_seed") or 0) for c in summary["checkpoints"]
            if c["model"] == model and c["probe"] == "lambada" and c["step"] is not None}


def mirroring(model: str, source: str, gaps: Sequence[float], perf: Sequence[float],
              confidence: float = 0.95, n_resamples: int = 2000, alpha: float = 0.01,
              seed: int = 0) -> tuple[dict[str, Any], str]:
    """Whether performance and |gap| (at the same checkpoints, in step order) change together
    (`comovement`), and the sentence it supports at ``alpha``."""
    found = comovement(np.asarray(perf, dtype=np.float64),
                       np.abs(np.asarray(gaps, dtype=np.float64)), confidence, n_resamples,
                       seed)
    out = {**found.as_dict(), "alpha": alpha, "on": "non-overlapping changes"}
    if found.constant:
        return out, (f"{model}: {source} or the |gap| changes by the same amount between every "
                     "pair of checkpoints, so whether one mirrors the other is undefined.")
    if found.smallest_p >= alpha:
        return out, (f"{model}: too few checkpoints ({found.checkpoints}) to show whether "
                     f"{source} mirrors the JSD-P gap: the test compares their changes over "
                     f"{found.n} pairs of checkpoints, whose smallest possible p-value is "
                     f"{num(found.smallest_p)}, not below α = {alpha:g}.")
    said = (f"Spearman ρ of their changes over {found.n} pairs of checkpoints = "
            f"{found.estimate:+.2f}{_interval(found.low, found.high, confidence)}, "
            f"permutation {p_is(found.p_value)}")
    if found.p_value < alpha:
        way = "grows" if found.estimate > 0 else "shrinks"
        return out, (f"{model}: performance mirrors fairness: the |gap| {way} with {source} "
                     f"({said} < α = {alpha:g}).")
    levels = ("" if not math.isfinite(found.levels) else
              f" Over the checkpoints themselves ρ = {found.levels:+.2f}, but two curves that "
              "both drift with training correlate whether or not they are linked.")
    return out, (f"{model}: whether performance mirrors fairness is not shown: their changes "
                 f"are not shown to move together ({said}; α = {alpha:g}).{levels}")


def _interval(low: float, high: float, confidence: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f", {confidence:.0%} CI {low:+.2f} to {high:+.2f}"


def stop_sentence(cost: Mapping[str, float], gain: Interval | None, source: str,
                  confidence: float, wordings: int = 1) -> str:
    """The recommended stop's cost and gain with their intervals (or why one has none)."""
    over_wordings = f", over {wordings} wordings and their prompts" if wordings > 1 else ""
    if math.isfinite(cost["low"]):
        paid = (f"{source} cost "
                f"{with_ci(cost['estimate'], cost['low'], cost['high'], confidence, True)}")
    else:
        paid = (f"{source} cost {num(cost['estimate'], signed=True)} (no CI: the series has no "
                "per-item data)")
    if gain is None or not math.isfinite(gain.low):
        won = "fairness gain without a CI (too few prompts)"
    else:
        won = ("|JSD-P gap| reduced by "
               + with_ci(gain.estimate, gain.low, gain.high, confidence, True, over_wordings[2:]))
    return f"stopping there: {paid}; {won}"


def stop_claims(model: str, stop: int, steps: Sequence[int], gaps: Sequence[float],
                perf: Sequence[float], source: str, history: Mapping[int, pd.DataFrame],
                counts: Mapping[int, int], confidence: float = 0.95, n_resamples: int = 2000,
                alpha: float = 0.01) -> tuple[dict[str, Any], list[str]]:
    """What the analysis stores beside the stop recommendation (``tradeoff``: the mirroring
    test, the stop's performance cost and fairness gain with CIs) and its sentences."""
    rho, mirrored = mirroring(model, source, gaps, perf, confidence, n_resamples, alpha)
    out: dict[str, Any] = {"mirroring": rho, "cost": None, "gain": None}
    sentences = [mirrored]
    final = steps[-1]
    if stop != final:
        cost = performance_cost(source, perf[-1], perf[list(steps).index(stop)], counts,
                                (stop, final), confidence)
        gain = fairness_gain(history, stop, final, confidence, n_resamples)
        out["cost"], out["gain"] = cost, (gain.as_dict() if gain else None)
        wordings = (history[final]["template"].nunique()
                    if "template" in history[final] else 1)
        sentences.append(f"{model}: {stop_sentence(cost, gain, source, confidence, wordings)}.")
    return out, sentences


def of_model(model: str, result: Mapping[str, Any], gaps: Mapping[int, Any],
             perf: tuple[str, Mapping[int, float]], history: Mapping[int, pd.DataFrame],
             summary: Mapping[str, Any], options: Any) -> tuple[dict[str, Any], list[str]]:
    """`stop_claims` for one model's analysis ``result`` (with its recommendation and the
    performance values it used); ``options``: the `AnalysisConfig`."""
    common = [int(s) for s in result["performance"]["values"]]
    return stop_claims(model, int(result["recommendation"]["step"]), common,
                       [gaps[s] for s in common], [perf[1][s] for s in common], perf[0],
                       history, lambada_counts(summary, model), options.confidence,
                       options.n_resamples, options.alpha)


def model_equivalence(a: str, b: str, history_a: Mapping[int, pd.DataFrame],
                      history_b: Mapping[int, pd.DataFrame], alpha: float,
                      sentences: list[str], margin: float = JSDP_MARGIN,
                      snapshot: bool = False) -> dict[str, Any]:
    """Two models of one run at each step both have: the JSD-P gap of A − B, paired by prompt
    (per-prompt differences within each gender), with its TOST verdict within ±``margin``;
    the sentence of the last common step is also appended to ``sentences`` (``snapshot``:
    models as they are, whose one checkpoint has no training step to name)."""
    from biasscope.core.equivalence import contrast_equivalence, sentence

    rows, said = [], []
    for step in sorted(set(history_a) & set(history_b)):
        both = pd.concat([history_a[step].assign(m=0), history_b[step].assign(m=1)])
        wide = both.pivot_table(index=["prompt", "answer_label"], columns="m", values="value",
                                observed=True).dropna()
        if not {0, 1} <= set(wide.columns):
            continue
        label = wide.index.get_level_values("answer_label")
        diffs = [(wide[0] - wide[1])[label == g].to_numpy() for g in GENDERS]
        result = contrast_equivalence(diffs, [1.0, -1.0], margin, alpha, paired=True,
                                      bounds=[(-MAX_GAP, MAX_GAP)] * 2)  # a prompt's JSD-P
        rows.append({"step": int(step), **result.as_dict()})
        where = "" if snapshot else f" at step {step}"
        said = [sentence(f"JSD-P gap, {a} − {b}{where}", result)]
    sentences += said
    return {"model_a": a, "model_b": b, "margin": margin, "alpha": alpha, "rows": rows,
            "sentences": said}
