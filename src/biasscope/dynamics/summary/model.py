"""One model's answers from its tests: when the gap emerges, where it changes most, whether
its trend bends, whether it holds across wordings, and where to stop training."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core import numbers, stats
from biasscope.core.curves import ItemCurves
from biasscope.core.numbers import json_rows
from biasscope.dynamics.analysis import findings, gap_tests, performance, tradeoff, wordings
from biasscope.dynamics.analysis.config import ZERO_PERFORMANCE, AnalysisConfig
from biasscope.dynamics.analysis.emergence import (
    STILL,
    GapChange,
    eligible_steps,
    emergence_step,
    gap_series,
    item_curves,
    prompt_matrix,
    recommend_stop,
    trend_change,
)
from biasscope.dynamics.analysis.stopping import stop_test
from biasscope.dynamics.summary.interest import (
    flag_ranks,
    flag_small_gaps,
    gap_of_interest,
    material,
)
from biasscope.dynamics.summary.unfinished import on_scored as _on_scored
from biasscope.probes.winobias import NAME as PROBE


@dataclass(frozen=True)
class ModelInputs:
    """What `analyse_model` reads of a model's records: the checkpoint tests per value
    (`gap_tests.checkpoint_tests`), the sharpest change (`sharpest_change`) and the CIs
    (`intervals`)."""

    tests: dict[str, pd.DataFrame]
    change: GapChange | None
    ci: dict[str, dict[str, Any]]
    breakdown: dict[int, dict[str, Any]] = field(default_factory=dict)
    snapshot: bool = False  # one checkpoint without a training step (`SNAPSHOT_STEP`)
    history: dict[int, pd.DataFrame] = field(default_factory=dict)  # per-prompt jsdp_correct
    #: per step, per-prompt jsdp_correct with wordings averaged (the gap's items); empty:
    #: ``history``'s, when it has no wordings
    items: dict[int, pd.DataFrame] = field(default_factory=dict)
    #: its checkpoints with training steps that run.json asks for and that have no records
    #: (or not of every seed) yet, as the report names them (``step 30``): an unfinished run
    unscored: tuple[str, ...] = ()
    #: how many of its checkpoints have no training step and are reported aside, off the curve
    aside: int = 0


def analyse_model(model: str, inputs: ModelInputs, summary: dict[str, Any],
                  perf: tuple[str, performance.Series] | None, options: AnalysisConfig
                  ) -> dict[str, Any]:
    tests = inputs.tests
    steps = [int(s) for s in tests["jsdp_correct"]["step"].dropna()]
    emergence, sentences = _emergence(model, inputs, steps, options)
    sentences[0] = _on_scored(sentences[0], inputs.unscored)
    sharpest, said = _sharpest(model, inputs.change, options)
    sentences += [_on_scored(s, inputs.unscored) for s in said]
    trend_steps, curve = gap_series(tests["jsdp_correct"])
    trend, said = trend_change(model, trend_steps, curve, options.alpha, options.confidence,
                               options.n_resamples, _items(inputs, trend_steps))
    sentences += [_on_scored(s, inputs.unscored) for s in said] if len(steps) > 1 else []
    sentences += _breakdown_sentences(model, inputs.breakdown, options)
    across, said = wordings.lead(model, inputs.breakdown, inputs.snapshot, options)
    sentences[:0] = said  # across wordings (--wordings): the verdicts lead
    result: dict[str, Any] = {
        "steps": steps, "snapshot": inputs.snapshot,
        "tests": {k: json_rows(v) for k, v in tests.items()},
        "breakdown": {str(s): inputs.breakdown[s] for s in sorted(inputs.breakdown)},
        "emergence": emergence, "sharpest_change": sharpest, "trend": trend,
        "ci": inputs.ci, "performance": None, "recommendation": None,
        "gap_of_interest": gap_of_interest(options),
    }
    if across:
        result["emergence_across_wordings"] = across
    gaps = {c["step"]: c["mean"].get("jsdp_gap") for c in summary["checkpoints"]
            if c["model"] == model and c["probe"] == PROBE and c["step"] is not None}
    if inputs.unscored:
        result["unscored"] = list(inputs.unscored)
    if perf is not None:
        said = []
        result.update(_recommend(model, steps, gaps, perf, options, said, inputs.history))
        sentences += [_on_scored(s, inputs.unscored) for s in said]
        if result["recommendation"]:
            result["tradeoff"], said = tradeoff.of_model(model, result, gaps, perf,
                                                         inputs.history, summary, options)
            sentences += [_on_scored(s, inputs.unscored) for s in said]
    elif len(steps) > 1:  # said, so that no stop is not read as "train to the end"
        result["recommendation_refused"] = NO_PERFORMANCE
        sentences.append(f"{model}: {NO_PERFORMANCE}.")
    result["sentences"] = sentences
    return result


#: Why a curve without a performance series gets no stop (the paper weighs gap against it).
NO_PERFORMANCE = ("no stop recommended: the run has no performance series to weigh the gap "
                  "against (score the perplexity or lambada probe alongside, import one with "
                  "`biasscope dynamics --performance-csv`, or, training with BiasCallback, "
                  "give the Trainer an eval_dataset)")


def _emergence(model: str, inputs: ModelInputs, steps: list[int], options: AnalysisConfig
               ) -> tuple[dict[str, int | None], list[str]]:
    """Each value's first step from which its gap stays significant, and what that says."""
    tested = f"{stats.CORRECTIONS[options.correction]}-corrected, α = {options.alpha:g}"
    corrected = tested + (f", |gap| >= {options.min_gap:g}" if options.min_gap > 0 else "")
    tests = inputs.tests
    emergence: dict[str, int | None] = {}
    for value in tests:
        table = tests[value].dropna(subset=["step"])
        p = table["p_adjusted"].to_numpy()
        if value != "jsdp_correct" and options.min_gap > 0:  # a rank gap: see `flag_ranks`
            p = np.where(material(tests, table, options.min_gap), p, 1.0)
        emergence[value] = emergence_step(
            table["step"].astype(int).tolist(), p, options.alpha, gaps=table["gap"].to_numpy(),
            min_gap=options.min_gap if value == "jsdp_correct" else 0.0)
    step = emergence["jsdp_correct"]
    significant = bool(tests["jsdp_correct"]["significant"].fillna(False).any())
    small = flag_small_gaps(tests["jsdp_correct"], options, inputs.snapshot)
    if len(steps) == 1:  # one checkpoint: nothing emerges "from" it
        where = ("" if inputs.snapshot else f" (step {steps[0]})" if not inputs.aside
                 else f" with a training step (step {steps[0]})")
        verdict = f"{'' if significant else 'not '}significant ({corrected})"
        if options.min_gap > 0 and tests["jsdp_correct"]["below_gap_of_interest"].any():
            # as `flag_small_gaps` says next: significant, but not at the --min-gap asked
            verdict = f"significant ({tested}) but not at |gap| >= {options.min_gap:g}"
        sentences = [f"{model}: at its one checkpoint{where} the male-female JSD-P gap is "
                     f"{verdict}."]
    else:
        sentences = [
            f"{model}: the male-female JSD-P gap is significant ({corrected}) from step {step} "
            "on, at every later checkpoint." if step is not None else
            f"{model}: the male-female JSD-P gap is not significant ({corrected}) through to "
            "the last checkpoint."]
    if not significant and (mde := gap_tests.detectable_gap(inputs.history,
                                                            tests["jsdp_correct"],
                                                            options.alpha)):
        sentences.append(f"{model}: {mde}.")
    if small is not None:
        sentences.append(f"{model}: {small}")
    # A snapshot's one checkpoint has no step: its gap sentence says "at its checkpoint".
    at = "at its checkpoint" if inputs.snapshot else None
    if (ranks := flag_ranks(tests, options, at=at)) is not None:
        sentences.append(f"{model}: {ranks}")
    return emergence, sentences


def _items(inputs: ModelInputs, steps: list[int]) -> ItemCurves | None:
    """The gap's prompts at ``steps`` (for the change of trend), from ``inputs.items``, else
    from a history without wordings (whose prompt values are the gap tests' own); None when
    some step has none."""
    per_step = inputs.items or (
        {} if any("template" in f for f in inputs.history.values()) else inputs.history)
    if not steps or not set(steps) <= set(per_step):
        return None
    return item_curves(prompt_matrix(per_step), steps)


def _sharpest(model: str, change: Any, options: AnalysisConfig
              ) -> tuple[dict[str, Any] | None, list[str]]:
    """The largest raw change of the gap between consecutive checkpoints, and its sentence."""
    if change is None:
        return None, []
    ci, raw = change.change, "a raw change, not per step"
    if getattr(change, "pairs", 1) > 1:  # the interval holds although this pair was picked
        raw += f"; one band for all {change.pairs} changes"
    said = numbers.with_ci(ci.estimate, ci.low, ci.high, options.confidence, True, raw,
                           same=STILL)
    return {**asdict(change), "change": asdict(ci)}, [
        f"{model}: the sharpest change of the gap is between steps {change.step_from} and "
        f"{change.step_to}: {said}."]


def _recommend(model: str, steps: list[int], gaps: dict[int, Any],
               perf: tuple[str, performance.Series], options: AnalysisConfig,
               sentences: list[str], history: dict[int, pd.DataFrame]) -> dict[str, Any]:
    """The performance read against the gap, and where to stop (or why no stop is
    recommended), an earlier stop only where its smaller |gap| is shown (``stop_test``, over
    the prompts' values in ``history``); adds its sentences to ``sentences``."""
    source, series = perf
    common = [s for s in steps if s in series and gaps.get(s) is not None]
    out: dict[str, Any] = {"recommendation": None}
    out["performance"] = {"source": source, "values": {str(s): series[s] for s in common},
                          "missing_steps": [s for s in steps if s not in series]}
    final = series[common[-1]] if common else math.nan
    if len(common) >= 2 and not (math.isfinite(final) and abs(final) > ZERO_PERFORMANCE):
        # A budget is a fraction of the final performance: of 0 or NaN it allows anything,
        # and the least-trained checkpoint (smallest gap) would win.
        out["recommendation_refused"] = (
            f"no stop recommended: the final checkpoint's {source} is "
            f"{numbers.num(final)}, so a performance "
            "loss relative to it is undefined")
        sentences.append(f"{model}: {out['recommendation_refused']}.")
    elif len(common) >= 2:
        perf_values = [series[s] for s in common]
        absolute = np.abs([gaps[s] for s in common])
        candidates = eligible_steps(common, absolute, perf_values, options.budget)[:-1]
        test = stop_test(history, candidates, common[-1], options.confidence,
                         options.n_resamples) if candidates else None
        tested: dict[int, float] | None = {}
        if test is not None:
            tested = dict(zip(test.steps, test.p_adjusted, strict=True))
        elif candidates:  # too few prompts to test: the final checkpoint is kept
            tested = None
        rec = recommend_stop(common, absolute, perf_values, options.budget,
                             tested=tested, alpha=options.alpha)
        out["recommendation"] = asdict(rec)
        out["stop_test"] = test.as_dict() if test else None
        allowed = numbers.setting_percent(options.budget)
        sentences.append(f"{model}: {rec.sentence} (budget: {allowed} {source} loss).")
        if rec.step != common[-1] and rec.performance <= min(perf_values[0], final):
            sentences.append(
                f"{model}: caution: the recommended step {rec.step} performs no better "
                f"than the first checkpoint ({source} {numbers.num(rec.performance)}): a "
                "model that has learned little can look fair.")
    return out


def _breakdown_sentences(model: str, breakdown: dict[int, dict[str, Any]],
                         options: AnalysisConfig) -> list[str]:
    """Pro/anti tests corrected over the checkpoints (in place), and the last checkpoint's
    pro/anti and most gendered occupations in words."""
    if not breakdown:
        return []
    findings.correct_pro_anti(breakdown, options.correction, options.alpha)
    last = max(breakdown)
    several = len(breakdown) > 1
    out = [findings.pro_anti_sentence(model, last, breakdown[last]["pro_anti"],
                                      options.confidence, several)]
    out += findings.occupation_sentences(model, last, breakdown[last]["occupations"],
                                         options.confidence, several)
    return [s for s in out if s]
