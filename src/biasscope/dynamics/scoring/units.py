"""Scoring one unit: its items, how its probe is asked, its records and their summary.

Plain functions shared by the sweep, its executors (local, Ray) and the live callback.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biasscope.backends.base import NextTokenScorer
from biasscope.backends.checkpoints import Checkpoint
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.dynamics.scoring import asking as options
from biasscope.dynamics.scoring.metrics import dynamics_metrics, seed_mean_std
from biasscope.probes import PROBES, Probe, requests_of
from biasscope.probes.facets import Absent, UnitMetrics
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.units import Unit

SUMMARY_SCHEMA = "biasscope.summary/1"
UNIT_COLUMNS = ("model", "revision", "step", "probe", "seed", "checkpoint")
ScorerSource = Callable[[Sequence[Checkpoint]], Iterator[NextTokenScorer]]


@dataclass
class SweepConfig:
    """What to evaluate and where the run directory is."""

    checkpoints: list[Checkpoint]
    out: Path | str | RunStore  # a folder, an fsspec URL (see ``RunStore``), or its store
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    limit: int | None = None
    comparable: dict[str, Any] = field(default_factory=dict)  # settings that change results
    rescore_changed: bool = False  # redo the units of checkpoints whose weights or files changed
    trust_remote_code: bool = False  # loaded running the code auto_map names (``remote_code``)


def unit_of(checkpoint: Checkpoint, probe: str, seed: int) -> Unit:
    """The unit of one checkpoint, probe and seed: keyed by the checkpoint's identity."""
    return Unit(checkpoint.model, checkpoint.revision, probe, seed, checkpoint.step,
                checkpoint.identity)


def records_frame(unit: Unit, items: Sequence[Item], scores: Sequence[Any]) -> pd.DataFrame:
    """One row per item: the unit, the item's groups, and the backend's reduced score.

    Built a column at a time (a unit is thousands of rows, written while the sweep waits);
    items whose groups differ in their names are built a row at a time, which gives the
    same frame."""
    if len(items) != len(scores):
        raise ValueError(f"{len(items)} items but {len(scores)} scores")
    names = [[k for k in item.groups if k not in UNIT_COLUMNS] for item in items]
    if not items or any(n != names[0] for n in names) or not is_dataclass(scores[0]) or any(
            type(s) is not type(scores[0]) for s in scores):
        return _records_rows(unit, items, scores)
    count = len(items)
    columns: dict[str, list[Any]] = {
        "model": [unit.model] * count, "revision": [unit.revision] * count,
        "step": [unit.step] * count, "probe": [unit.probe] * count,
        "seed": [unit.seed] * count, "checkpoint": [unit.checkpoint] * count,
        "item_id": [item.id for item in items]}
    for name in names[0]:  # as the row's dict literal: a repeated name keeps its place
        columns[name] = [item.groups[name] for item in items]
    columns["options"] = [list(item.options) for item in items]
    columns["answer"] = [item.answer for item in items]
    columns["answer_label"] = [item.options[item.answer] for item in items]
    for each in fields(scores[0]):
        values = [getattr(score, each.name) for score in scores]
        columns[each.name] = [list(v) if isinstance(v, tuple) else v for v in values]
    frame: pd.DataFrame = pd.DataFrame(columns)
    frame["step"] = frame["step"].astype("Int64")
    return frame


def _records_rows(unit: Unit, items: Sequence[Item], scores: Sequence[Any]) -> pd.DataFrame:
    rows = []
    for item, score in zip(items, scores, strict=True):
        groups = {k: v for k, v in item.groups.items() if k not in UNIT_COLUMNS}
        reduced = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(score).items()}
        rows.append({
            "model": unit.model, "revision": unit.revision, "step": unit.step,
            "probe": unit.probe, "seed": unit.seed, "checkpoint": unit.checkpoint,
            "item_id": item.id, **groups,
            "options": list(item.options), "answer": item.answer,
            "answer_label": item.options[item.answer], **reduced,
        })
    frame: pd.DataFrame = pd.DataFrame(rows)
    frame["step"] = frame["step"].astype("Int64")
    return frame


#: The request kinds a sweep scores a checkpoint with (a probe's first of these).
SWEPT = ("next_token", "continuation", options.REQUEST)


def sweep_request(probe: Probe) -> str:
    """The request kind a sweep asks ``probe`` (its first that a checkpoint can answer)."""
    kinds = requests_of(probe)
    for kind in kinds:
        if kind in SWEPT:
            return kind
    raise BiasscopeError(f"probe {probe.name} takes {', '.join(kinds)} requests; a checkpoint "
                         f"sweep asks {', '.join(SWEPT)}")


def unit_items(probe: Probe, seed: int, limit: int | None) -> list[Item]:
    """A unit's items: all, or ``limit`` of them, by the probe's own selection where it has
    one (BBQ: whole examples stratified by category; WinoBias: whole pro/anti pairs stratified
    by subset and answer; Adult: whole pairs), else the first ``limit``."""
    items = probe.items(seed)
    pick = getattr(probe, "limited", None)
    return list(pick(items, limit)) if limit and callable(pick) else items[:limit]


def ask(probe: Probe, items: Sequence[Item]) -> tuple[str, options.Asking | None]:
    """The request kind a sweep asks ``probe``, and how it asks ``items`` by chat (options)."""
    kind = sweep_request(probe)
    return kind, options.asking_of(probe, items) if kind == options.REQUEST else None


def unit_frame(scorer: Any, unit: Unit, request: str, items: Sequence[Item],
               asking: options.Asking | None = None) -> pd.DataFrame:
    """One unit's records, scored by ``scorer`` with the unit's request kind."""
    if request == options.REQUEST:
        if asking is None:
            raise ValueError(f"unit {unit.key}: option scoring needs the items' chat turns")
        scored = options.score_options(scorer, items, asking)
        return options.option_frame(unit, items, scored, asking)
    return records_frame(unit, items, score_request(scorer, request, unit.probe, items))


def score_request(scorer: Any, request: str, probe: str, items: Sequence[Item]) -> list[Any]:
    method = getattr(scorer, f"score_{request}", None)
    if method is None:
        raise BiasscopeError(f"backend {scorer.label} cannot answer {request!r} requests "
                             f"needed by probe {probe!r}")
    return list(method(items))


UnitKey = tuple[str, "str | None", "int | None", str]
UnitSummary = tuple[UnitKey, int, dict[str, float], int]


def unit_summary(frame: pd.DataFrame) -> UnitSummary:
    """(checkpoint key, seed, metrics, items) of one unit's records."""
    head = frame.iloc[0]
    step = None if pd.isna(head["step"]) else int(head["step"])
    revision = None if pd.isna(head["revision"]) else str(head["revision"])
    key = (str(head["model"]), revision, step, str(head["probe"]))
    return key, int(head["seed"]), unit_metrics(key[3], frame)(frame), len(frame)


def unit_metrics(probe: str, frame: pd.DataFrame) -> UnitMetrics:
    """The probe's own unit metrics (``PROBES[probe].unit_metrics``); for a probe without any
    (or not registered), the numbers of the request kind its records answer: the option
    numbers of option-scored records, else the next-token metrics."""
    info = PROBES.get(probe)
    if info is not None and not isinstance(info.unit_metrics, Absent):
        return info.unit_metrics
    return options.option_metrics if "option_probs" in frame else dynamics_metrics


def summarise(units: Iterable[UnitSummary]) -> dict[str, Any]:
    """Per checkpoint: every metric per seed, and the seed mean and std. Refused in one line
    where its seeds hold different numbers of records: ``items_per_seed`` is one number (the
    report's sentence and the performance cost's intervals read it), and every seed of a
    checkpoint is scored on the same items, so a unit of another size is damage (a rerun of
    the sweep sets it aside and redoes it, `RunStore.has`)."""
    per_unit: dict[UnitKey, dict[int, dict[str, float]]] = defaultdict(dict)
    sizes: dict[UnitKey, dict[int, int]] = defaultdict(dict)
    for key, seed, metrics, size in units:
        per_unit[key][seed] = metrics
        sizes[key][seed] = size
    for key, by_seed in sizes.items():
        if len(set(by_seed.values())) > 1:
            model, revision, _, probe = key
            held = ", ".join(f"seed {s}: {n}" for s, n in sorted(by_seed.items()))
            raise BiasscopeError(
                f"the records of {model}@{revision or 'main'}, probe {probe}, differ in size "
                f"between seeds ({held}); run the command that scored them again (biasscope "
                "dynamics sets a unit of the wrong size aside and redoes it)")
    checkpoints = []
    for key in sorted(per_unit, key=lambda k: (k[0], k[3], k[2] is None, k[2] or 0, k[1] or "")):
        model, revision, step, probe = key
        per_seed = per_unit[key]
        mean, std = seed_mean_std(per_seed)
        checkpoints.append({
            "model": model, "revision": revision, "step": step, "probe": probe,
            "items_per_seed": max(sizes[key].values()), "seeds": sorted(per_seed),
            "mean": mean, "std": std,
            "per_seed": {str(s): per_seed[s] for s in sorted(per_seed)},
        })
    return {"schema": SUMMARY_SCHEMA, "std": "sample standard deviation over seeds (ddof=1)",
            "checkpoints": checkpoints}


def write_summary_json(store: RunStore, summary: dict[str, Any], publish: bool = True
                       ) -> dict[str, Any]:
    """The one writer of a dynamics run's summary.json: the sweep's metrics as checkpoints
    finish, then the analysed summary (atomic; ``publish``: upload a remote run's copy). Here,
    beside the sweep, so that a sweep imports none of the analysis (``reporting``)."""
    store.check_same_folder()
    write_json(store.summary_json, summary)
    if publish:
        store.publish(store.summary_json)
    return summary
