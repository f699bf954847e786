"""A sweep of checkpoints x seeds through one probe into a run directory, resumable."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console
from rich.progress import Progress

from biasscope.backends.base import NextTokenScorer
from biasscope.errors import BiasscopeError
from biasscope.items import Item
from biasscope.metrics import PROBE_METRICS
from biasscope.metrics.dynamics import dynamics_metrics, seed_mean_std
from biasscope.probes import Probe, requests_of
from biasscope.runs import options
from biasscope.runs.checkpoints import Checkpoint
from biasscope.runs.progress import columns as progress_columns
from biasscope.runs.progress import shown_in
from biasscope.runs.runfile import init_run as init_run  # re-exported for live and tests
from biasscope.runs.store import RunStore, Unit, remove_stale_temp_files, write_json

if TYPE_CHECKING:
    from biasscope.runs.executors import Executor

SUMMARY_SCHEMA = "biasscope.summary/1"
UNIT_COLUMNS = ("model", "revision", "step", "probe", "seed", "checkpoint")
ScorerSource = Callable[[Sequence[Checkpoint]], Iterator[NextTokenScorer]]


@dataclass
class SweepConfig:
    """What to evaluate and where the run directory is."""

    checkpoints: list[Checkpoint]
    out: Path | str  # a folder, or an fsspec URL (see ``RunStore``)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    limit: int | None = None
    comparable: dict[str, Any] = field(default_factory=dict)  # settings that change results
    rescore_changed: bool = False  # redo the units of checkpoints whose weights changed


def unit_of(checkpoint: Checkpoint, probe: str, seed: int) -> Unit:
    """The unit of one checkpoint, probe and seed: keyed by the checkpoint's identity."""
    return Unit(checkpoint.model, checkpoint.revision, probe, seed, checkpoint.step,
                checkpoint.identity)


def records_frame(unit: Unit, items: Sequence[Item], scores: Sequence[Any]) -> pd.DataFrame:
    """One row per item: the unit, the item's groups, and the backend's reduced score."""
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


def sweep(probes: Probe | Sequence[Probe], config: SweepConfig, scorers: ScorerSource, *,
          quiet: bool = False, executor: Executor | None = None) -> RunStore:
    """Evaluate every pending unit; finished units are skipped, so a rerun resumes.

    Probes that do not vary with the seed (``seeded = False``) are evaluated once, as seed 0.
    ``executor`` runs the units (default: in this process; see ``biasscope.runs.executors``).
    """
    from biasscope.runs.executors import CheckpointTask, LocalExecutor, UnitJob

    probes = [probes] if not isinstance(probes, Sequence) else list(probes)
    store = RunStore(config.out)
    checkpoints = init_run(store, probes, config)  # named as the run names them
    remove_stale_temp_files(store.records_dir)
    units = {c: [(p, unit_of(c, p.name, s)) for p in probes
                 for s in (config.seeds if getattr(p, "seeded", True) else [0])]
             for c in checkpoints}
    items_by_seed: dict[tuple[str, int], tuple[list[Item], str, options.Asking | None]] = {}

    def job(probe: Probe, unit: Unit) -> UnitJob:
        key = (probe.name, unit.seed)
        if key not in items_by_seed:
            items = unit_items(probe, unit.seed, config.limit)
            items_by_seed[key] = (items, *ask(probe, items))
        items, kind, asking = items_by_seed[key]
        return UnitJob(unit, kind, items, asking)

    have = {u: store.has(u) for c in checkpoints for _, u in units[c]}
    # A task's finished units come along as ``done``: planned with, never rescored.
    tasks = [CheckpointTask(c, [job(p, u) for p, u in units[c] if not have[u]],
                            [job(p, u) for p, u in units[c] if have[u]])
             for c in checkpoints if not all(have[u] for _, u in units[c])]
    tasks = [t for t in tasks if t.jobs]
    # Each unit file is read once here; new units add their summary as they are written.
    done = [unit_summary(frame) for frame in store.iter_units() if not frame.empty]
    left = {(t.checkpoint.model, t.checkpoint.revision): len(t.jobs) for t in tasks}
    console = Console(stderr=True)
    live = not quiet and console.is_terminal
    with Progress(*progress_columns(), console=console, transient=True, disable=not live) as bar, \
            shown_in(bar if live else None, quiet):  # prompts within a checkpoint, too
        task = bar.add_task("units", total=sum(left.values()))
        for summary in (executor or LocalExecutor()).run(tasks, scorers, store):
            (model, revision, _, probe), seed = summary[0], summary[1]
            label = f"{model}@{revision}" if revision else model
            bar.update(task, advance=1, description=f"{label} {probe} seed {seed}")
            done.append(summary)
            left[(model, revision)] -= 1
            if not left[(model, revision)]:  # a checkpoint is finished
                write_summary(store, done)
    write_summary(store, done)
    return store


UnitKey = tuple[str, "str | None", "int | None", str]
UnitSummary = tuple[UnitKey, int, dict[str, float], int]


def unit_summary(frame: pd.DataFrame) -> UnitSummary:
    """(checkpoint key, seed, metrics, items) of one unit's records."""
    head = frame.iloc[0]
    step = None if pd.isna(head["step"]) else int(head["step"])
    revision = None if pd.isna(head["revision"]) else str(head["revision"])
    key = (str(head["model"]), revision, step, str(head["probe"]))
    metrics = PROBE_METRICS.get(key[3]) or (
        options.option_metrics if "option_probs" in frame else dynamics_metrics)
    return key, int(head["seed"]), metrics(frame), len(frame)


def summarise(units: Iterable[UnitSummary]) -> dict[str, Any]:
    """Per checkpoint: every metric per seed, and the seed mean and std."""
    per_unit: dict[UnitKey, dict[int, dict[str, float]]] = defaultdict(dict)
    sizes: dict[UnitKey, int] = {}
    for key, seed, metrics, size in units:
        per_unit[key][seed] = metrics
        sizes[key] = size
    checkpoints = []
    for key in sorted(per_unit, key=lambda k: (k[0], k[3], k[2] is None, k[2] or 0, k[1] or "")):
        model, revision, step, probe = key
        per_seed = per_unit[key]
        mean, std = seed_mean_std(per_seed)
        checkpoints.append({
            "model": model, "revision": revision, "step": step, "probe": probe,
            "items_per_seed": sizes[key], "seeds": sorted(per_seed), "mean": mean, "std": std,
            "per_seed": {str(s): per_seed[s] for s in sorted(per_seed)},
        })
    return {"schema": SUMMARY_SCHEMA, "std": "sample standard deviation over seeds (ddof=1)",
            "checkpoints": checkpoints}


def write_summary(store: RunStore, units: Iterable[UnitSummary] | None = None
                  ) -> dict[str, Any]:
    """Write summary.json from the given unit summaries, or by reading every unit once."""
    if units is None:
        units = [unit_summary(frame) for frame in store.iter_units() if not frame.empty]
    summary = summarise(units)
    write_json(store.summary_json, summary)
    store.publish(store.summary_json)
    return summary


def hf_scorers(options: Any) -> ScorerSource:
    """Scorer source over Hugging Face checkpoints (imports torch only when called)."""
    def source(checkpoints: Sequence[Checkpoint]) -> Iterator[NextTokenScorer]:
        from biasscope.backends.hf import iter_scorers
        yield from iter_scorers(checkpoints, options)
    return source


def hf_comparable(options: Any) -> dict[str, Any]:
    chosen = asdict(options)
    return {"dtype": chosen["dtype"], "first_token": chosen["first_token"]}


def run_dynamics(probe: Probe | Sequence[Probe], checkpoints: list[Checkpoint], out: str | Path, *,
                 seeds: Sequence[int] = (0, 1, 2, 3, 4), options: Any = None,
                 limit: int | None = None, quiet: bool = False,
                 executor: Executor | None = None,
                 data: dict[str, str] | None = None,
                 rescore_changed: bool = False) -> RunStore:
    """Library entry point of ``biasscope dynamics``: HF checkpoints x seeds into ``out``.

    ``data``: SHA-256 of each data file the probes read (``source/name`` -> hex), checked
    against the run's on a rerun (see ``biasscope.data.sources.recording``).
    ``rescore_changed``: a checkpoint whose weights changed since the run scored it has its
    units redone (else it is refused; see ``runs.fingerprints``).
    """
    from biasscope.backends.hf import HFOptions
    options = options or HFOptions()
    where = out if isinstance(out, str) and "://" in out else Path(out)  # Path folds "//"
    comparable = hf_comparable(options) | ({"data": dict(data)} if data else {})
    config = SweepConfig(list(checkpoints), where, list(seeds), limit, comparable,
                         rescore_changed)
    return sweep(probe, config, hf_scorers(options), quiet=quiet, executor=executor)
