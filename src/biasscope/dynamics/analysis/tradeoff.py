"""Performance against fairness over checkpoints: does performance mirror the gap, and what
does stopping early cost and gain, each with its interval.

- **Mirroring** is whether performance and |gap| change together between checkpoints:
  Spearman's ρ of their changes over pairs of checkpoints that share none, with an exact
  permutation test at the analysis' α (`biasscope.core.comovement`; two curves that merely
  both drift with training correlate over checkpoints whether or not they are linked). The
  sentence says "mirrors" only when that test rejects; otherwise that it is not shown. It
  never says "does not mirror": measurement noise in the changes weakens their correlation,
  so a small ρ does not show that the curves are unrelated.
- **Fairness gain** of the recommended stop: |gap(final)| − |gap(stop)|, with the simultaneous
  band over every checkpoint the stop was picked from (`biasscope.dynamics.analysis.stopping`):
  prompts are resampled within each gender, each keeping its values at every checkpoint
  together, since the same prompts were asked at all of them.
- **Performance cost**: final − stop performance. With LAMBADA accuracy and its item count,
  Newcombe's hybrid score interval for a difference of proportions (from the two Wilson
  intervals; it treats the checkpoints' answers as independent, which, since the same items
  are asked, makes it conservative). Imported series (CSV, lm-eval) carry no per-item data, so
  their cost is a point value and the sentence says so. The stop is chosen within the
  performance budget by the estimate; where the cost has an interval, the sentence says
  whether its upper bound is within the budget too ("shown within") or not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.comovement import comovement
from biasscope.core.intervals import Interval, wilson
from biasscope.core.numbers import level_of, num, p_is, setting_percent, with_ci
from biasscope.dynamics.analysis.config import JSDP_MARGIN, MAX_GAP
from biasscope.probes.winobias import GENDERS

#: Formerly the |ρ| below which, with confidence, performance "did not mirror" fairness; that
#: verdict is no longer given (see the module docstring). Kept for code that imports it.
MIRROR = 0.5


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
    return f", {level_of(confidence)} CI {low:+.2f} to {high:+.2f}"


def stop_sentence(cost: Mapping[str, float], gain: Interval | None, source: str,
                  confidence: float, wordings: int = 1, candidates: int = 1,
                  budget: float | None = None) -> str:
    """The recommended stop's cost and gain with their intervals (or why one has none); the
    gain's is one band for the ``candidates`` checkpoints the stop was picked from. With the
    ``budget`` (relative) and an interval of the cost: whether the cost's upper bound is within
    it (``cost["allowed"]``: the budget in the performance's units)."""
    if math.isfinite(cost["low"]):
        paid = (f"{source} cost "
                f"{with_ci(cost['estimate'], cost['low'], cost['high'], confidence, True)}")
        if budget is not None and math.isfinite(allowed := cost.get("allowed", math.nan)):
            paid += (f", shown within the {setting_percent(budget)} budget ({num(allowed)})"
                     if cost["high"] <= allowed else
                     f", within the {setting_percent(budget)} budget ({num(allowed)}) by its "
                     "estimate but not by its interval")
    else:
        paid = (f"{source} cost {num(cost['estimate'], signed=True)} (no CI: the series has no "
                "per-item data)")
    if gain is None or not math.isfinite(gain.low):
        won = "fairness gain without a CI (too few prompts)"
    else:
        band = (f"one band for the {candidates} checkpoints it was picked from"
                if candidates > 1 else "")
        over = f"over {wordings} wordings and their prompts" if wordings > 1 else ""
        won = ("|JSD-P gap| reduced by " + with_ci(gain.estimate, gain.low, gain.high,
                                                   confidence, True,
                                                   "; ".join(x for x in (band, over) if x)))
    return f"stopping there: {paid}; {won}"


def stop_claims(model: str, stop: int, steps: Sequence[int], gaps: Sequence[float],
                perf: Sequence[float], source: str, gain: Interval | None,
                counts: Mapping[int, int], confidence: float = 0.95, n_resamples: int = 2000,
                alpha: float = 0.01, wordings: int = 1, candidates: int = 1,
                budget: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """What the analysis stores beside the stop recommendation (``tradeoff``: the mirroring
    test, the stop's performance cost and fairness gain with CIs) and its sentences;
    ``gain``: the stop's, with `biasscope.dynamics.analysis.stopping.StopTest`'s band;
    ``budget``: the relative performance budget the stop was chosen within."""
    rho, mirrored = mirroring(model, source, gaps, perf, confidence, n_resamples, alpha)
    out: dict[str, Any] = {"mirroring": rho, "cost": None, "gain": None}
    sentences = [mirrored]
    final = steps[-1]
    if stop != final:
        cost = performance_cost(source, perf[-1], perf[list(steps).index(stop)], counts,
                                (stop, final), confidence)
        if budget is not None:
            cost["allowed"] = budget * abs(perf[-1])
        out["cost"], out["gain"] = cost, (gain.as_dict() if gain else None)
        said = stop_sentence(cost, gain, source, confidence, wordings, candidates, budget)
        sentences.append(f"{model}: {said}.")
    return out, sentences


def of_model(model: str, result: Mapping[str, Any], gaps: Mapping[int, Any],
             perf: tuple[str, Mapping[int, float]], history: Mapping[int, pd.DataFrame],
             summary: Mapping[str, Any], options: Any) -> tuple[dict[str, Any], list[str]]:
    """`stop_claims` for one model's analysis ``result`` (with its recommendation, the
    performance values it used and its ``stop_test``); ``options``: the `AnalysisConfig`."""
    common = [int(s) for s in result["performance"]["values"]]
    stop = int(result["recommendation"]["step"])
    test = result.get("stop_test") or {}
    row = next((r for r in test.get("rows", []) if r["step"] == stop), None)
    gain = None if row is None else Interval(row["gain"], row["low"], row["high"],
                                             options.confidence)
    final = history.get(common[-1])
    wordings = (final["template"].nunique()
                if final is not None and "template" in final else 1)
    return stop_claims(model, stop, common, [gaps[s] for s in common],
                       [perf[1][s] for s in common], perf[0], gain,
                       lambada_counts(summary, model), options.confidence,
                       options.n_resamples, options.alpha, wordings,
                       len(test.get("rows", [])), options.budget)


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
