"""summary.json's ``analysis.probes``: the audit probes' statistics over training steps, with
multiple-comparison control over each model's checkpoints, emergence and the stopping
recommendation, as the WinoBias analysis (`biasscope.dynamics.summary.build`) gives
them for the JSD-P gap.

The per-checkpoint values come from `biasscope.dynamics.summary.probe_steps`, one step at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from biasscope.core import numbers, stats
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.emergence import (
    eligible_steps,
    emergence_step,
    recommend_stop,
)
from biasscope.dynamics.analysis.stopping import separated
from biasscope.dynamics.summary import unfinished
from biasscope.dynamics.summary.probe_aside import Worded, add_stepless, stepless_revisions
from biasscope.dynamics.summary.probe_steps import (
    Across,
    Values,
    read_checkpoints,
    read_stepless,
    stepped,
    tested,
)
from biasscope.probes import PROBES
from biasscope.probes.facets import Absent
from biasscope.store.directory import RunStore
from biasscope.store.reading import UnitEntry, unit_index

if TYPE_CHECKING:
    from biasscope.dynamics.analysis.config import AnalysisConfig


def adjust_over_checkpoints(checkpoints: dict[int, Values], options: AnalysisConfig,
                            aside: Sequence[Values] = ()) -> dict[str, int | None]:
    """Every tested value's p-values adjusted over the model's checkpoints (``p_adjusted``,
    ``significant``, in place); the emergence step of each. ``aside``: the model's
    checkpoints without a training step, tested in the same family (each is one more test of
    the value on this model) but on no curve, so in no emergence."""
    steps = sorted(checkpoints)
    tested = sorted({k for v in [*checkpoints.values(), *aside] for k, e in v.items()
                     if "p_value" in e})
    emergence: dict[str, int | None] = {}
    for key in tested:
        at = [s for s in steps if key in checkpoints[s]]
        entries = [checkpoints[s][key] for s in at] + [v[key] for v in aside if key in v]
        p = np.array([math.nan if e.get("p_value") is None else e["p_value"] for e in entries],
                     dtype=np.float64)
        adjusted = stats.adjust_pvalues(p, options.correction)
        for entry, value in zip(entries, adjusted, strict=True):
            entry["p_adjusted"] = None if math.isnan(value) else float(value)
            entry["significant"] = bool(value < options.alpha)
        if not at:
            continue
        on_curve = adjusted[:len(at)]
        signs = np.array([math.nan if e.get("effect_size") is None else e["effect_size"]
                          for e in entries[:len(at)]], dtype=np.float64)
        emergence[key] = emergence_step(at, np.nan_to_num(on_curve, nan=1.0), options.alpha,
                                        gaps=np.nan_to_num(signs))
    return emergence


def _sentence(model: str, name: str, key: str, checkpoints: dict[int, Values],
              step: int | None, corrected: str, same: str | None = None) -> str:
    steps = [s for s in sorted(checkpoints) if key in checkpoints[s]]
    if not steps:
        return f"{model}: no {name} could be computed (no answers to score)."
    last = checkpoints[steps[-1]][key]
    at_last = f"at the last checkpoint (step {steps[-1]}) it is {tested(last, same)}"
    if len(steps) == 1:
        word = "" if last.get("significant") else "not "
        return f"{model}: the {name} is {word}significant ({corrected}); {at_last}."
    if step is not None:
        return (f"{model}: the {name} is significant ({corrected}) from step {step} on, at "
                f"every later checkpoint; {at_last}.")
    hits = [str(s) for s in steps if checkpoints[s][key].get("significant")]
    if hits and not last.get("significant"):
        where = ", ".join(hits[:10]) + (" …" if len(hits) > 10 else "")
        return (f"{model}: the {name} is significant ({corrected}) at {len(hits)} of "
                f"{len(steps)} checkpoints (step{'s' if len(hits) > 1 else ''} {where}) but "
                f"not at the last, so it has not emerged for good; {at_last}.")
    if hits:  # significant at the last, yet no emergence: no effect size to sign it
        return (f"{model}: the {name} is significant ({corrected}) at the last checkpoint, "
                f"without an effect size to give it a direction; {at_last}.")
    return (f"{model}: the {name} is not significant ({corrected}) at any checkpoint; "
            f"{at_last}.")


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _recommend(model: str, probe: str, key: str, checkpoints: dict[int, Values],
               perf: tuple[str, performance.Series] | None, options: AnalysisConfig
               ) -> tuple[dict[str, Any] | None, str | None]:
    """Where to stop on the headline value ``key``: an earlier checkpoint only where its
    |value| is shown smaller than the final's (`stopping.separated`, from the intervals)."""
    if perf is None:
        return None, None
    source, series = perf
    effect = {s: v[key].get("estimate") for s, v in checkpoints.items() if key in v}
    common = sorted(s for s, e in effect.items() if e is not None and s in series)
    if len(common) < 2:
        return None, None
    final = series[common[-1]]
    if not (math.isfinite(final) and abs(final) > 1e-9):
        return None, (f"{model}: no stop recommended for {probe}: the final checkpoint's "
                      f"{source} is {numbers.num(final)}.")
    name = stepped()[probe].names.get(key, key)
    absolute = np.abs([float(effect[s] or 0.0) for s in common])
    perf_values = [series[s] for s in common]
    within = eligible_steps(common, absolute, perf_values, options.budget)
    value = {f: {s: _number(checkpoints[s][key].get(f)) for s in within}
             for f in ("estimate", "low", "high")}
    tested = separated(value["estimate"], value["low"], value["high"], common[-1],
                       options.confidence)
    rec = recommend_stop(common, absolute, perf_values, options.budget, f"|{name}|", tested,
                         options.alpha)
    out = {"value": key, "step": rec.step, "performance": rec.performance,
           "final_performance": rec.final_performance, "gap": rec.gap,
           "final_gap": rec.final_gap, "pareto_steps": list(rec.pareto_steps),
           "p_adjusted": rec.p_adjusted, "candidates": rec.candidates,
           "sentence": rec.sentence}
    allowed = numbers.setting_percent(options.budget)
    return out, f"{model}, {probe}: {rec.sentence} (budget: {allowed} {source} loss)."


def analyse_probes(store: RunStore, summary: dict[str, Any], options: AnalysisConfig
                   ) -> dict[str, Any]:
    """Per audit probe in the run: per model its checkpoints' values (with adjusted p-values),
    emergence per tested value, the stopping recommendation on the headline value when a
    performance series exists, and sentences."""
    corrected = f"{stats.CORRECTIONS[options.correction]}-corrected, α = {options.alpha:g}"
    perf = performance.load(store, summary)
    out: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    statistics = stepped()
    worded: Across = {}
    pooling = {"confidence": options.confidence, "n_resamples": options.n_resamples,
               "alpha": options.alpha, "correction": options.correction}
    checkpoints_of = read_checkpoints(store, unavailable, worded, pooling)
    for probe, reason in sorted(unavailable.items()):
        out[probe] = {"headline": list(statistics[probe].headline),
                      "names": dict(statistics[probe].names), "models": {},
                      "unavailable": reason,
                      "sentences": [f"{probe}: no statistics over steps: {reason}."]}
    index = unit_index(store)
    for probe, reason in sorted(_without_statistics(index).items()):
        out[probe] = {"headline": [], "names": {}, "models": {}, "unavailable": reason,
                      "sentences": [f"{probe}: no statistics over steps: {reason}."]}
    stepless = stepless_revisions(index, [p for p in statistics if p not in unavailable])
    for probe in sorted(set(stepless) - set(checkpoints_of)):
        checkpoints_of[probe] = {}
    aside_worded: Worded = {}
    aside = read_stepless(store, stepless, aside_worded, pooling)
    for probe, models in checkpoints_of.items():
        spec = statistics[probe]
        section: dict[str, Any] = {"headline": list(spec.headline), "names": dict(spec.names),
                                   "models": {}, "sentences": []}
        apart = {m: [aside.get(probe, {}).get((m, r), {}) for r in sorted(rs, key=_name)]
                 for m, rs in stepless.get(probe, {}).items()}
        for model in sorted(set(apart) - set(models)):  # no step: its revisions, one family
            if len(apart[model]) > 1:  # (one alone is the model's values, as an audit's)
                adjust_over_checkpoints({}, options, apart[model])
        for model, checkpoints in sorted(models.items()):
            emergence = adjust_over_checkpoints(checkpoints, options, apart.get(model, []))
            across = worded.get(probe, {}).get(model)
            sentences = [f"{model} at step {across['step']}: {r['verdict']}"  # they lead
                         for r in across["measures"].values()] if across else []
            # Emergence and the stop are verdicts over the curve: in an unfinished run they
            # say they rest on the scored checkpoints, as the WinoBias ones do.
            unscored = unfinished.curve_checkpoints(summary.get("unfinished"), model, probe)
            sentences += [unfinished.on_scored(_sentence(model, spec.names.get(k, k), k,
                                                         checkpoints, emergence.get(k),
                                                         corrected,
                                                         spec.same(k, options.confidence)),
                                            unscored)
                          for k in spec.headline]
            sentences += _findings(spec, model, checkpoints, options.alpha)
            rec, said = _recommend(model, probe, spec.headline[0], checkpoints,
                                   perf.get(model), options)
            if said:
                sentences.append(unfinished.on_scored(said, unscored))
            section["models"][model] = {
                "steps": sorted(checkpoints),
                "checkpoints": [{"step": s, "values": checkpoints[s]}
                                for s in sorted(checkpoints)],
                "emergence": emergence, "recommendation": rec, "sentences": sentences,
                **({"wordings": across} if across else {})}
            section["sentences"] += sentences
        if probe in stepless:
            add_stepless(section, probe, spec, stepless[probe], sorted(models), aside,
                         aside_worded, options.alpha, corrected)
        out[probe] = section
    return out


def _findings(spec: Any, model: str, checkpoints: dict[int, Values], alpha: float
              ) -> list[str]:
    """The probe's findings beyond its headline (which groups differ) at the model's last
    checkpoint."""
    if spec.findings is None or not checkpoints:
        return []
    last = max(checkpoints)
    return [f"{model} at step {last}: {s}" for s in spec.findings(checkpoints[last], alpha)]


def _name(revision: str | None) -> str:
    return revision or ""


def _without_statistics(index: list[UnitEntry]) -> dict[str, str]:
    """The probes of the run scored by options (as the audit probes are) that give no
    statistics over steps, each with the reason it gives: said in the summary, not skipped."""
    out = {}
    for probe in sorted({p for entry in index for p, _, _ in entry.checkpoints}):
        info = PROBES.get(probe)
        if info is not None and info.requests[0] == "options" and isinstance(
                info.step_statistics, Absent):
            out[probe] = info.step_statistics.reason
    return out


def seed_counts(section: dict[str, Any]) -> int:
    """The most seeds any checkpoint of a probe section was scored with."""
    return max((int(e.get("seeds", 1)) for m in section["models"].values()
                for c in m["checkpoints"] for e in c["values"].values()), default=0)
