"""The analysis' one pass over a run: every unit read once, a training step at a time.

A unit's records are reduced, as soon as they are read, to what the statistics use: per
record the prompt, the correct answer and five values (the JSD-P part of the correct option,
of the ``male`` and of the ``female`` option, the target's rank, and whether the correct
option won, for the accuracies' intervals), in narrow columns
(categorical labels; ranks as float32 when that is exact). The units of one step, all seeds
and models, are then turned into per-prompt values (the seed mean), tested and bootstrapped,
and dropped. Between steps a model keeps, per checkpoint, each prompt's JSD-P of the correct
option (one number per prompt and step: the curve's items, for the sharpest change, the change
of trend and the recommended stop's fairness gain; per wording too when several ran). So
memory follows one step's records, not the run's: a 154-checkpoint sweep costs what one
checkpoint costs, plus those numbers.

Every number is the one a whole-run computation gives (same rows, same order, same
functions of `biasscope.core.stats`); tests/report/test_report_streaming.py checks it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.columns import categorical, group_codes, group_means
from biasscope.dynamics.analysis import gap_tests
from biasscope.dynamics.analysis.breakdown import record_values as breakdown_values
from biasscope.probes.next_token import OptionScores
from biasscope.probes.winobias import GENDERS
from biasscope.probes.winobias import NAME as PROBE
from biasscope.store.directory import RunStore
from biasscope.store.reading import UnitEntry, read_unit, unit_index

#: Name of each per-prompt value (as `gap_tests.record_values` names it) -> its narrow column.
VALUES = {"jsdp_correct": "jsdp_correct", "target_rank": "target_rank",
          "jsdp:male": "jsdp_male", "jsdp:female": "jsdp_female", "correct": "correct"}
NOT_SPECIFIED = "not specified"
#: The analysis position of a snapshot's one checkpoint (a model without training steps, in a
#: run where no model has them). Reports and sentences never show it as a step.
SNAPSHOT_STEP = 0


def unit_values(records: pd.DataFrame, scores: OptionScores | None = None,
                prompts: pd.Categorical | None = None) -> pd.DataFrame:
    """Per record of one unit (or any records of one probe): model, step, prompt,
    answer_label and the `VALUES`, each exactly as `gap_tests.record_values` computes it (and
    ``template`` under several wordings). ``scores`` and ``prompts``: the records'
    `OptionScores` and `categorical` `gap_tests.prompt_ids`, if already built."""
    options = list(records["options"].iloc[0]) if len(records) else []
    if scores is None and len(records):
        scores = OptionScores.of(records)
    parts = scores.parts if scores is not None else np.zeros((0, 0))
    correct = scores.correct if scores is not None else np.zeros(0, dtype=bool)
    answers = records["answer"].to_numpy(dtype=int)
    rank = gap_tests.record_values(records, "target_rank")
    narrow = rank.astype(np.float32)
    exact = np.array_equal(narrow.astype(np.float64), rank, equal_nan=True)
    frame: pd.DataFrame = pd.DataFrame({
        "model": categorical(records["model"]),
        "step": records["step"].array,
        "prompt": (categorical(gap_tests.prompt_ids(records)) if prompts is None
                   else prompts),
        "answer_label": categorical(records["answer_label"]),
        "jsdp_correct": parts[np.arange(len(records)), answers] if len(records) else rank,
        "target_rank": narrow if exact else rank,
        "correct": correct.astype(np.float32)})
    for gender in GENDERS:
        column = (parts[:, options.index(gender)] if gender in options and len(records)
                  else np.full(len(records), np.nan))
        frame[f"jsdp_{gender}"] = column
    if "template" in records:  # several wordings: the stop's per-wording history, the seeds
        frame["template"] = categorical(records["template"].astype(str))
    return frame


def prompt_tables(values: pd.DataFrame, by_wording: bool = False) -> dict[str, pd.DataFrame]:
    """`gap_tests.prompt_values` of each of the `VALUES`, for the records ``values`` were
    reduced from: one grouping for all of them (each column's group means are computed on
    their own, as `gap_tests.seed_means` computes them). Wordings, like seeds, are repeated
    measurements of a prompt and averaged, unless ``by_wording`` (the stop's two-level CI);
    ``seeds`` counts a prompt's seeds, not its records (seeds times wordings)."""
    keys = ["model", "step", *(["template"] if by_wording else []), "prompt", "answer_label"]
    groups, first = group_codes([values[k] for k in keys])
    columns = list(VALUES.values())
    means = group_means(groups, np.column_stack(
        [values[c].to_numpy(dtype=np.float64) for c in columns]), len(first))
    seeds = np.bincount(groups, minlength=len(first))
    if not by_wording and "template" in values:  # records are seeds times wordings
        wording, _ = pd.factorize(values["template"])
        held = np.unique(np.stack([groups, wording])[:, wording >= 0], axis=1)
        seeds = seeds // np.maximum(np.bincount(held[0], minlength=len(first)), 1)
    labels = pd.DataFrame({k: (values[k].array.take(first) if k == "step" else  # Int64 kept
                               values[k].array.take(first).to_numpy(dtype=object))
                           for k in keys})
    return {value: labels.assign(value=means[:, j], seeds=seeds)
            for j, value in enumerate(VALUES)}


def _labels(pv: pd.DataFrame, labels: tuple[str, ...]) -> pd.DataFrame:
    chosen: pd.DataFrame = pv[pv["answer_label"].isin(labels)]
    return chosen


@dataclass
class ModelParts:
    """What the analysis of one model needs, gathered checkpoint by checkpoint."""

    rows: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"jsdp_correct": [], "target_rank": []})
    ci: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per step, the pro/anti and per-occupation aggregates (`metrics.breakdown`).
    breakdown: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Per step, the per-prompt jsdp_correct of male and female prompts (the stop's gain),
    #: per wording when several ran.
    history: dict[int, pd.DataFrame] = field(default_factory=dict)
    #: Per step, the per-prompt jsdp_correct of male and female prompts, wordings averaged
    #: as the gap tests average them (the curve's items).
    items: dict[int, pd.DataFrame] = field(default_factory=dict)


@dataclass
class RunParts:
    """The analysis' inputs from one pass: per model its parts, and the model comparisons'
    test rows per (model a, model b, value); ``step_dtype`` is the records' step type.
    ``snapshots``: models analysed at `SNAPSHOT_STEP`; ``stepless``: models with no training
    step at all (not snapshots). ``aside``: per model, its revisions without a training step
    that are not a snapshot (None: a folder's), off the curve and reported by name with their
    own CIs (``aside_ci``, as one step's `intervals`)."""

    stepless: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    aside: dict[str, list[str | None]] = field(default_factory=dict)
    aside_ci: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    #: per revision aside, its gap tests (`gap_tests.checkpoint_rows`) per tested value,
    #: before correction: as one step's rows, without a step
    aside_rows: dict[tuple[str, str | None], dict[str, list[dict[str, Any]]]] = field(
        default_factory=dict)
    models: dict[str, ModelParts] = field(default_factory=dict)
    comparisons: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    step_dtype: Any = None


Intervals = Callable[[Mapping[str, pd.DataFrame]], dict[str, dict[str, Any]]]
Breakdown = Callable[[pd.DataFrame], dict[str, Any]]


def add_checkpoint(parts: ModelParts, pvs: Mapping[str, pd.DataFrame], intervals: Intervals,
                   worded: pd.DataFrame | None = None) -> None:
    """One (model, step)'s per-prompt values into its model's parts; ``worded``: its JSD-P
    values per wording and prompt, kept as the history when several wordings ran."""
    for value, rows in parts.rows.items():
        rows += gap_tests.checkpoint_rows(_labels(pvs[value], GENDERS))
    parts.ci.update(intervals(pvs))
    current = _labels(pvs["jsdp_correct"], GENDERS)
    if len(current):
        step = int(current["step"].iloc[0])
        parts.items[step] = current[["prompt", "answer_label", "value"]]
        parts.history[step] = parts.items[step] if worded is None else worded


def add_step(run: RunParts, models: list[str], by_model: Mapping[str, pd.DataFrame],
             intervals: Intervals) -> None:
    """The reduced records of one step (per model, its units' rows in file order)."""
    pvs = {m: prompt_tables(frame) for m, frame in by_model.items()}
    for model, tables in pvs.items():
        frame = by_model[model]
        worded = None
        if "template" in frame and frame["template"].nunique() > 1:
            per = _labels(prompt_tables(frame, by_wording=True)["jsdp_correct"], GENDERS)
            worded = per[["template", "prompt", "answer_label", "value"]]
        add_checkpoint(run.models[model], tables, intervals, worded)
    for a, b in itertools.combinations(models, 2):
        if a not in pvs or b not in pvs:
            continue
        for option in GENDERS:
            value = f"jsdp:{option}"
            both = pd.concat([_labels(pvs[m][value], (NOT_SPECIFIED,)) for m in (a, b)])
            run.comparisons.setdefault((a, b, value), []).extend(gap_tests.model_rows(both, a, b))


def _models(index: list[UnitEntry], run: RunParts) -> list[str]:
    """The models the analysis reads, and ``run``'s snapshots, step-less models and revisions
    aside.

    Candidates compared as they are (one checkpoint each, no training steps) are snapshots;
    beside a sweep, or with several unordered revisions, a checkpoint without a step cannot be
    placed on a curve: it is set aside (its own values, no test over training)."""
    stepped = {m for e in index for p, m, s in e.checkpoints if p == PROBE and s is not None}
    revisions: dict[str, set[str | None]] = {}
    for entry in index:
        for p, m, r in entry.stepless:
            if p == PROBE:
                revisions.setdefault(m, set()).add(r)
    run.snapshots = [] if stepped else sorted(m for m, r in revisions.items() if len(r) == 1)
    run.stepless = sorted(set(revisions) - set(run.snapshots) - stepped)
    run.aside = {m: sorted(r, key=lambda v: v or "") for m, r in sorted(revisions.items())
                 if m not in run.snapshots}
    models = sorted(stepped | set(run.snapshots))
    run.models = {m: ModelParts() for m in models}
    return models


def read_run(store: RunStore, intervals: Intervals,
             summarise: Callable[[pd.DataFrame], Any], breakdown: Breakdown | None = None
             ) -> tuple[list[Any], RunParts]:
    """``summarise`` of every non-empty unit (in file order, as `RunStore.iter_units` gives
    them) and the analysis' parts of the `PROBE` records with a step, reading each unit file
    once, a step at a time (a file with rows of several steps is read for each).
    ``breakdown`` turns one checkpoint's `metrics.breakdown.record_values` into its
    aggregates (`ModelParts.breakdown`)."""
    index = unit_index(store)
    summaries: dict[int, Any] = {}
    gone: set[int] = set()  # set aside by `read_unit`
    run = RunParts()
    models = _models(index, run)

    def positions(entry: UnitEntry) -> set[int]:
        snapshot = any(p == PROBE and m in run.snapshots for p, m, _ in entry.stepless)
        return entry.steps(PROBE) | ({SNAPSHOT_STEP} if snapshot else set())

    def frame_of(i: int) -> pd.DataFrame | None:
        frame = None if i in gone else read_unit(store, index[i].path)
        if frame is None:
            gone.add(i)
            return None
        if run.snapshots and "step" in frame:
            place = frame["step"].isna() & frame["model"].isin(run.snapshots)
            frame["step"] = frame["step"].mask(place, SNAPSHOT_STEP)
        if not frame.empty and i not in summaries:
            summaries[i] = summarise(frame)
        return frame

    steps = sorted({s for e in index for s in positions(e)})
    for step in steps:
        reduced: dict[str, list[pd.DataFrame]] = {}
        extra: dict[str, list[pd.DataFrame]] = {}
        for i, entry in enumerate(index):
            if step not in positions(entry) or (frame := frame_of(i)) is None:
                continue
            chosen = ((frame["probe"] == PROBE) & (frame["step"] == step).fillna(False)).to_numpy()
            rows = frame if chosen.all() else frame[chosen]  # a unit is one step: no copy
            if run.step_dtype is None:
                run.step_dtype = frame["step"].dtype
            for model, chunk in rows.groupby("model", sort=False):
                scores = OptionScores.of(chunk)
                prompts = categorical(gap_tests.prompt_ids(chunk))
                reduced.setdefault(str(model), []).append(unit_values(chunk, scores, prompts))
                if breakdown is not None:
                    extra.setdefault(str(model), []).append(
                        breakdown_values(chunk, scores, prompts))
            del frame, rows
        add_step(run, models, {m: pd.concat(f, ignore_index=True) for m, f in reduced.items()},
                 intervals)
        if breakdown is not None:
            for model, frames in extra.items():
                run.models[model].breakdown[int(step)] = breakdown(
                    pd.concat(frames, ignore_index=True))
        del extra
    read = _read_aside(index, run, frame_of, intervals)
    for i, entry in enumerate(index):
        if not positions(entry) and i not in read:
            frame_of(i)
    return [summaries[i] for i in sorted(summaries)], run


def _read_aside(index: list[UnitEntry], run: RunParts,
                frame_of: Callable[[int], pd.DataFrame | None], intervals: Intervals
                ) -> set[int]:
    """``run.aside_ci`` and ``run.aside_rows``: each revision set aside read on its own (its
    units, all seeds), as one checkpoint's CIs and gap tests, so memory holds one such
    checkpoint's values at a time. Returns the units read."""
    read: set[int] = set()
    for model, revisions in run.aside.items():
        for revision in revisions:
            reduced = []
            for i, entry in enumerate(index):
                if (PROBE, model, revision) not in entry.stepless or (
                        frame := frame_of(i)) is None:
                    continue
                read.add(i)
                named = (frame["revision"] == revision if revision is not None
                         else frame["revision"].isna()) if "revision" in frame else True
                chosen = ((frame["probe"] == PROBE) & frame["step"].isna()
                          & (frame["model"] == model) & named).to_numpy()
                if chosen.any():  # at `SNAPSHOT_STEP`: one checkpoint's intervals
                    reduced.append(unit_values(frame[chosen].assign(step=SNAPSHOT_STEP)))
            if reduced:
                tables = prompt_tables(pd.concat(reduced, ignore_index=True))
                run.aside_ci[(model, revision)] = intervals(tables).get(str(SNAPSHOT_STEP), {})
                run.aside_rows[(model, revision)] = {  # the curve's test (`add_checkpoint`)
                    value: [{**r, "step": None} for r in gap_tests.checkpoint_rows(
                        _labels(tables[value], GENDERS))] for value in ModelParts().rows}
    return read
