"""Turn a sweep into answers: is the male-female gap significant, when does it emerge, where
is it changing fastest, and where to stop training for fairness at a bounded performance cost.

Everything is computed from stored records (plus an imported performance series), so a
report can be rebuilt without a model. Per-prompt values are averaged over seeds before any
test (see `biasscope.core.stats`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core import stats
from biasscope.core.columns import group_codes
from biasscope.core.curves import forget_resamples
from biasscope.core.intervals import UNIT, mean_ci, mean_cis, mean_difference_ci
from biasscope.core.levels import thin_tails
from biasscope.core.numbers import json_rows, num, p_is
from biasscope.dynamics.analysis import occupations, performance, tradeoff, wordings
from biasscope.dynamics.analysis.breakdown import checkpoint_breakdown
from biasscope.dynamics.analysis.config import JSDP_RANGE, MAX_GAP, RANK_RANGE, AnalysisConfig
from biasscope.dynamics.analysis.emergence import sharpest_of
from biasscope.dynamics.scoring.units import summarise, unit_summary
from biasscope.dynamics.summary import unfinished
from biasscope.dynamics.summary.interest import flag_aside, gap_of_interest
from biasscope.dynamics.summary.model import ModelInputs, analyse_model
from biasscope.dynamics.summary.probes import analyse_probes
from biasscope.dynamics.summary.reading import SNAPSHOT_STEP, ModelParts, RunParts, read_run
from biasscope.probes.winobias import GENDERS
from biasscope.probes.winobias import NAME as PROBE
from biasscope.probes.winobias.values import paired_values
from biasscope.store.directory import RunStore


def intervals(pvs: Mapping[str, pd.DataFrame], options: AnalysisConfig
              ) -> dict[str, dict[str, Any]]:
    """Bootstrap CIs over prompts of every plotted mean, per step, from
    `gap_tests.prompt_values` of ``jsdp_correct``, ``target_rank``, ``correct`` (the accuracy
    per answer), ``jsdp:male`` and ``jsdp:female`` (any steps)."""
    values = {
        "jsdp_correct": pvs["jsdp_correct"],
        "average_rank": pvs["target_rank"],
        "accuracy": pvs["correct"],
        "jsdp_not_specified/male": pvs["jsdp:male"],
        "jsdp_not_specified/female": pvs["jsdp:female"],
    }
    out: dict[str, dict[str, Any]] = {}
    pending: list[tuple[str, str, np.ndarray]] = []  # bootstrapped together below
    for name, table in values.items():
        for (step, answer), chunk in _groups(table, ["step", "answer_label"]):
            if name.startswith("jsdp_not_specified") and answer != "not specified":
                continue
            key = name if name.startswith("jsdp_not_specified") else f"{name}/{answer}"
            out.setdefault(str(step), {})[key] = None
            pending.append((str(step), key, chunk))
    # Each mean within its range at a few prompts (a t interval's, clipped): an accuracy in
    # [0, 1], a JSD-P part in [0, ½ ln 2], a rank from 1; the gap of two in ±½ ln 2.
    ranges = {"accuracy": UNIT, "average_rank": RANK_RANGE}
    for rates in (False, True):  # resampled apart, as before ranges were given
        part = [p for p in pending if p[1].startswith("accuracy/") == rates]
        boots = mean_cis([v for _, _, v in part], confidence=options.confidence,
                         n_resamples=options.n_resamples,
                         bounds=[ranges.get(key.split("/")[0], JSDP_RANGE)
                                 for _, key, _ in part])
        for (step, key, _), boot in zip(part, boots, strict=True):
            out[step][key] = [boot.low, boot.high]
    for step, at in values["jsdp_correct"].groupby("step", sort=True):
        out.setdefault(str(step), {})["jsdp_gap"] = _gap_interval(at, options)
    return out


def _gap_interval(chunk: pd.DataFrame, options: AnalysisConfig) -> list[float]:
    """The male − female JSD-P gap's CI at one checkpoint: over complete WinoBias
    pairs (`paired_values`), the mean of the pairs' differences (`mean_ci`; Welch's over the prompts
    missed a gap of 0 in 16% of 95% intervals, a pair's two prompts moving against each
    other), else Welch's widened (`mean_difference_ci`). A gap lies within ±½ ln 2."""
    if (pairs := paired_values(chunk, GENDERS)) is not None:
        ci = mean_ci(pairs[0] - pairs[1], options.confidence, options.n_resamples,
                     bounds=(-MAX_GAP, MAX_GAP))
    else:
        label = chunk["answer_label"].to_numpy()
        male, female = (chunk["value"].to_numpy(dtype=np.float64)[label == g] for g in GENDERS)
        ci = mean_difference_ci(male, female, options.confidence, bounds=(-MAX_GAP, MAX_GAP))
    return [ci.low, ci.high]


def _groups(table: pd.DataFrame, keys: list[str]) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """``table``'s values per group of ``keys`` with none missing, as ``groupby(keys,
    sort=True)`` gives them (each group's rows in order), without a frame per group."""
    groups, first = group_codes([table[k] for k in keys])
    heads = table[keys].iloc[first].itertuples(index=False, name=None)
    value = table["value"].to_numpy()
    return [(head, value[groups == g]) for g, head in enumerate(heads)
            if not any(pd.isna(k) for k in head)]


def analyse(run: RunParts, store: RunStore, summary: dict[str, Any],
            options: AnalysisConfig | None = None,
            statistics: occupations.Statistics | None = None) -> dict[str, Any]:
    """The ``analysis`` section of summary.json, from the parts `read_run` gathered;
    ``statistics``: the occupation statistics (`occupations.load`), if read."""
    options = options or AnalysisConfig()
    out: dict[str, Any] = {**asdict(options), "models": {}, "comparisons": [],
                           "step_mismatch": {}, "sentences": [], "equivalence": []}
    out["sentences"] += _aside(run, out)
    models = sorted(m for m, parts in run.models.items() if parts.ci)
    tested: dict[str, dict[str | None, dict[str, dict[str, Any]]]] = {}
    for model in sorted(set(run.aside) - set(models)):  # no step: its revisions, one family
        tested[model] = in_family({}, _aside_rows(run, model), options)
    if not models:
        _aside_tests(out, tested, options)
        return out
    perf = performance.load(store, summary)
    for model in models:
        parts = run.models[model]
        tables = {value: stats.tests_table(rows, ("model", "step", "seeds"), GENDERS,
                                           run.step_dtype, "model", options.correction,
                                           options.alpha)
                  for value, rows in parts.rows.items()}
        tested[model] = in_family(tables, _aside_rows(run, model), options)
        inputs = ModelInputs(
            tables,
            sharpest_of(parts.items, confidence=options.confidence,
                        n_resamples=options.n_resamples),
            parts.ci, parts.breakdown, model in run.snapshots, parts.history, parts.items,
            unfinished.curve_checkpoints(summary.get("unfinished"), model, PROBE),
            len(run.aside.get(model, ())))
        analysed = analyse_model(model, inputs, summary, perf.get(model), options)
        out["models"][model] = analysed
        out["sentences"] += analysed["sentences"]
    _aside_tests(out, tested, options)
    all_steps = {m: set(out["models"][m]["steps"]) for m in models}
    union = set().union(*all_steps.values())
    for model in models:
        missing = sorted(union - all_steps[model])
        if missing and len(models) > 1:
            out["step_mismatch"][model] = missing
            out["sentences"].append(f"{model} has no records at steps "
                                    f"{', '.join(map(str, missing[:10]))}"
                                    f"{' …' if len(missing) > 10 else ''}: compared only where "
                                    "both models have a checkpoint.")
    for a, b in itertools.combinations(models, 2):
        for option in ("male", "female"):
            rows = run.comparisons.get((a, b, f"jsdp:{option}"), [])
            table = stats.tests_table(rows, ("step", "seeds"), ("a", "b"), run.step_dtype,
                                      None, options.correction, options.alpha)
            out["comparisons"].append({"model_a": a, "model_b": b, "value": f"jsdp:{option}",
                                       "answer": "not specified", "rows": json_rows(table)})
        out["equivalence"].append(tradeoff.model_equivalence(
            a, b, run.models[a].history, run.models[b].history, options.alpha, out["sentences"],
            snapshot=out["models"][a]["snapshot"] and out["models"][b]["snapshot"]))
    if statistics is not None:
        _occupation_statistics(out, statistics, options)
    return out


def _aside(run: RunParts, out: dict[str, Any]) -> list[str]:
    """``out["aside"]`` (only where there are some), the checkpoints without a training step
    that no curve holds, each with its CIs as one step's, and the sentences saying so. Tests
    over training need ordered checkpoints; placing unnamed ones on the curve, or pooling
    them, would mislead."""
    if run.aside:
        out["aside"] = [{"model": m, "revision": r, "ci": run.aside_ci.get((m, r), {})}
                        for m, revisions in run.aside.items() for r in revisions]
    said = []
    if run.stepless:
        said.append(f"No training steps for {', '.join(run.stepless)} (revisions not named "
                    "stepN or checkpoint-N): reported aside with their own values, outside the "
                    "analysis over training and the model comparisons. Name them by step, or "
                    "report them in a run of their own (one checkpoint per model is a "
                    "snapshot).")
    for model, revisions in run.aside.items():
        if model in run.stepless:
            continue
        one = len(revisions) == 1
        names = unfinished.named([unfinished.checkpoint_label({"revision": r})
                                  for r in revisions])
        said.append(f"{model}: {names} {'has' if one else 'have'} no training step (not named "
                    f"stepN or checkpoint-N): reported aside with {'its' if one else 'their'} "
                    "own values, not on the curve (emergence, sharpest change, change of "
                    f"trend, recommended stop). Name {'it' if one else 'them'} by step to place "
                    f"{'it' if one else 'them'} on it.")
    return said


def _aside_rows(run: RunParts, model: str) -> dict[str | None, dict[str, list[dict[str, Any]]]]:
    return {r: run.aside_rows.get((model, r), {}) for r in run.aside.get(model, ())}


def in_family(tables: Mapping[str, pd.DataFrame],
              aside: Mapping[str | None, Mapping[str, list[dict[str, Any]]]],
              options: AnalysisConfig) -> dict[str | None, dict[str, dict[str, Any]]]:
    """Each revision aside's gap test per value (``aside``: `RunParts.aside_rows`), corrected
    in one family with the model's checkpoints on the curve (``tables``, whose ``p_adjusted``
    and ``significant`` are redone in place): each is one more test of the gap on this
    model, so a ``best`` beside 30 steps is not tested at α alone."""
    out: dict[str | None, dict[str, dict[str, Any]]] = {}
    for value in ModelParts().rows:
        extra = [(r, row) for r, by in aside.items() for row in by.get(value, [])]
        if not extra:
            continue
        table = tables.get(value)
        curve = np.zeros(0) if table is None else table["p_value"].to_numpy(np.float64)
        p = np.concatenate([curve, np.array([row["p_value"] for _, row in extra], np.float64)])
        adjusted = stats.adjust_pvalues(p, options.correction)
        if table is not None:
            table["p_adjusted"] = adjusted[:curve.size]
            table["significant"] = table["p_adjusted"] < options.alpha
        rows = pd.DataFrame([row for _, row in extra]).assign(
            p_adjusted=adjusted[curve.size:], significant=adjusted[curve.size:] < options.alpha)
        for (revision, _), row in zip(extra, json_rows(rows), strict=True):
            out.setdefault(revision, {})[value] = row
    return out


def _aside_tests(out: dict[str, Any], tested: Mapping[str, Mapping[str | None, Any]],
                 options: AnalysisConfig) -> None:
    """Each checkpoint aside's gap tests into its ``aside`` entry (``tests``), and a sentence
    on its JSD-P gap, as a checkpoint on the curve gets one, with its flags and caveats below
    the smallest gap of interest (`flag_aside`; ``gap_of_interest`` beside them)."""
    corrected = f"{stats.CORRECTIONS[options.correction]}-corrected, α = {options.alpha:g}"
    for entry in out.get("aside", []):
        model, revision = entry["model"], entry["revision"]
        found = tested.get(model, {}).get(revision)
        if not found:
            continue
        entry["tests"], entry["gap_of_interest"] = found, gap_of_interest(options)
        if (row := found.get("jsdp_correct")) is None:
            continue
        family = ("over the model's checkpoints with a step and without"
                  if model in out["models"] else "over its revisions")
        label = unfinished.checkpoint_label({"revision": revision})
        word = "" if row["significant"] else "not "
        out["sentences"].append(
            f"{model} at {label}: the male-female JSD-P gap is {word}significant ({corrected}, "
            f"{family}): male − female {num(row['gap'], signed=True)}, {row['test']} "
            f"{p_is(row['p_value'])}, {p_is(row['p_adjusted'], 'adjusted p')}, effect size "
            f"r = {num(row['effect_size'], 2, True)}.")
        out["sentences"] += [f"{model}: {s}" for s in flag_aside(found, options, f"at {label}")]


def _occupation_statistics(out: dict[str, Any], statistics: occupations.Statistics,
                           options: AnalysisConfig) -> None:
    """Each model's last-checkpoint preference against the BLS share of women, in place."""
    names = sorted({str(o["occupation"]) for m in out["models"].values()
                    for b in m["breakdown"].values() for o in b["occupations"]}, key=str.lower)
    section: dict[str, Any] = {"source": f"{occupations.SOURCE}/{occupations.NAME}",
                               "path": statistics.path, "unavailable": statistics.unavailable,
                               "matching": "exact lower-case occupation name, no aliases"}
    if statistics.reused:
        section["reused"] = ("the figures the run's last analysis stored in summary.json, as "
                             "the file was not found; pass --data-dir to read it again")
    out["occupation_statistics"] = section
    if not names:
        return
    if statistics.unavailable:
        out["sentences"].append("The occupation statistics (share of women per occupation, "
                                f"U.S. BLS) are not available: {statistics.unavailable}.")
        return
    section.update(occupations.matching(names, statistics))
    section["bls_pct_female"] = {n.lower(): statistics.bls_pct_female[n.lower()]
                                 for n in section["matched"]}
    for model, result in out["models"].items():
        if not result["breakdown"]:
            continue
        last = max(result["breakdown"], key=int)
        rows = result["breakdown"][last]["occupations"]
        compared = occupations.compare(rows, statistics, options.confidence,
                                       options.n_resamples)
        result["occupation_statistics"] = {"step": int(last), **compared}
        text = occupations.sentence(model, int(last), compared, options.confidence,
                                    section["unmatched"], len(result["breakdown"]) > 1)
        said = [text]
        if by_wording := result["breakdown"][last].get("occupations_by_wording"):
            rhos, agreement = wordings.labour_statistics(model, by_wording, statistics,
                                                         options.confidence, options.n_resamples)
            result["occupation_statistics"]["by_wording"] = rhos
            said += [agreement] if agreement else []
        result["sentences"] += said
        out["sentences"] += said


def full_summary(store: RunStore, options: AnalysisConfig | None = None,
                 data_dir: str | None = None,
                 statistics: occupations.Statistics | None = None) -> dict[str, Any]:
    """summary.json's content from the records alone: metrics, then the analysis, reading
    each unit once and holding one training step's records at a time (`read_run`).
    ``statistics``: the occupation statistics, if already read (else from ``data_dir``)."""
    options = options or AnalysisConfig()
    chosen = options
    def breakdown(values: pd.DataFrame) -> dict[str, Any]:
        out = checkpoint_breakdown(values, chosen.confidence, chosen.n_resamples)
        across = wordings.checkpoint_wordings(values, chosen.confidence, alpha=chosen.alpha,
                                              correction=chosen.correction)
        if not across:
            return out
        by_wording = wordings.occupations_by_wording(values, chosen.confidence)
        return {**out, "wordings": across, "occupations_by_wording": by_wording}

    units, run = read_run(store, lambda pvs: intervals(pvs, chosen), unit_summary, breakdown)
    summary = summarise(units)
    if missing := store.missing_units():  # left out: said in summary.json and the report
        summary["missing_units"] = missing
    if store.run_json.is_file() and (
            section := unfinished.unscored(store, store.read_json("run.json"))):
        summary["unfinished"] = {**section, "sentence": unfinished.sentence(
            section, store.root.name)}
    for checkpoint in summary["checkpoints"]:  # their step is the analysis position only
        if checkpoint["model"] in run.snapshots and checkpoint["step"] == SNAPSHOT_STEP:
            checkpoint["snapshot"] = True
    if statistics is None:
        statistics = occupations.for_run(store.summary_json, data_dir)
    summary["analysis"] = analyse(run, store, summary, options, statistics)
    forget_resamples()
    probes = analyse_probes(store, summary, options)
    said = summary["analysis"]["sentences"]
    whose = [w for w, has in (("the WinoBias", run.models or run.aside_ci),
                              ("the audit probes'", probes)) if has]
    if whose and (coarse := thin_tails(options.confidence, options.n_resamples,
                                       " and ".join(whose), "the analysis' n_resamples")):
        said.insert(0, coarse)
        summary["analysis"]["thin_tails"] = coarse  # said on stderr too (`said_thin`)
    if probes:  # the audit probes over steps (`biasscope.dynamics.summary.probes`)
        summary["analysis"]["probes"] = probes
        for section in probes.values():
            said += section["sentences"]
    return summary
