"""A sweep of checkpoints x seeds through one probe into a run directory, resumable."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from biasscope.backends.base import NextTokenScorer
from biasscope.backends.checkpoints import Checkpoint, convert_gguf
from biasscope.backends.hf import Encodings, check_tokenizer, iter_scorers
from biasscope.backends.hf_model import HFConfig
from biasscope.core import steps
from biasscope.core.items import Item
from biasscope.dynamics.scoring import asking as options
from biasscope.dynamics.scoring import runfile
from biasscope.dynamics.scoring.executors import (
    CheckpointTask,
    Executor,
    LocalExecutor,
    RayExecutor,
    UnitJob,
)
from biasscope.dynamics.scoring.fingerprints import Fingerprints, fingerprints
from biasscope.dynamics.scoring.progress import columns as progress_columns
from biasscope.dynamics.scoring.progress import shown_in
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import (
    ScorerSource,
    SweepConfig,
    UnitSummary,
    ask,
    summarise,
    unit_items,
    unit_of,
    unit_summary,
    write_summary_json,
)
from biasscope.probes import Probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit


def sweep(probes: Probe | Sequence[Probe], config: SweepConfig, scorers: ScorerSource, *,
          quiet: bool = False, executor: Executor | None = None) -> RunStore:
    """Evaluate every pending unit; finished units are skipped, so a rerun resumes.

    Probes that do not vary with the seed (``seeded = False``) are evaluated once, as seed 0.
    ``executor`` runs the units (default: in this process;
    see ``biasscope.dynamics.scoring.executors``).
    ``quiet``: no progress bars, and no line as a step starts (`biasscope.core.steps`).
    """
    with steps.quiet(quiet):
        return _sweep(probes, config, scorers, quiet, executor)


def _sweep(probes: Probe | Sequence[Probe], config: SweepConfig, scorers: ScorerSource,
           quiet: bool, executor: Executor | None) -> RunStore:
    probes = [probes] if not isinstance(probes, Sequence) else list(probes)
    store = config.out if isinstance(config.out, RunStore) else RunStore(config.out)
    local = executor is None or isinstance(executor, LocalExecutor)
    with fingerprints(config.trust_remote_code) as prints:  # a Ray task: hashed up front
        checkpoints = init_run(store, probes, config, prints=prints, defer=local)
        # With --rescore-changed, a hub branch found moved once it loaded has the units it had
        # set aside then, after they were planned as done: a second pass scores them.
        for _ in range(2):
            if not _sweep_units(store, probes, config, checkpoints, (scorers, prints),
                                executor or LocalExecutor(), quiet):
                break
        # A killed call's temporary files (this host's dead writers' only), removed once
        # this call has passed every check (a checkpoint's, once it loaded, the last): a
        # refused rerun leaves --out as it found it. Never read, they can wait until then.
        store.remove_stale_temp_files()
        return store


def _sweep_units(store: RunStore, probes: list[Probe], config: SweepConfig,
                 checkpoints: list[Checkpoint], source: tuple[ScorerSource, Fingerprints],
                 executor: Executor, quiet: bool) -> list[Unit]:
    """Score the pending units; the units found done when planned and set aside since
    (`runfile.admit` with ``rescore_changed``), still to be scored."""
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

    # A unit file holds one record per item: one holding another number (cut short where no
    # checksum vouches for it) is set aside and redone, never taken for finished.
    have = {u: store.has(u, rows=len(job(p, u).items)) for c in checkpoints
            for p, u in units[c]}
    # A task's finished units come along as ``done``: planned with, never rescored.
    tasks = [CheckpointTask(c, [job(p, u) for p, u in units[c] if not have[u]],
                            [job(p, u) for p, u in units[c] if have[u]])
             for c in checkpoints if not all(have[u] for _, u in units[c])]
    tasks = [t for t in tasks if t.jobs]
    # Each unit file is read once here; new units add their summary as they are written.
    done = [unit_summary(frame) for frame in store.iter_units() if not frame.empty]
    left = {(t.checkpoint.model, t.checkpoint.revision): len(t.jobs) for t in tasks}
    convert_gguf(t.checkpoint for t in tasks)  # a GGUF file the run lists (`init_run`)
    scorers, prints = source
    if isinstance(executor, LocalExecutor) and isinstance(scorers, HFScorers):
        scorers.check(tasks)  # every checkpoint's tokenizer, before the first is scored

    def admit(ckpt: Checkpoint) -> None:
        """A checkpoint listed without its fingerprints gets them before its first unit; a hub
        checkpoint whose revision may move, the commit it loaded; one whose config was not in
        the cache, its ``remote_code``."""
        if not prints.known(ckpt) or prints.movable(ckpt) or prints.code_unknown(ckpt):
            runfile.admit(store, probes, config, prints.loaded(ckpt))

    console = Console(stderr=True)
    live = not quiet and console.is_terminal
    with Progress(*progress_columns(), console=console, transient=True, disable=not live) as bar, \
            shown_in(bar if live else None, quiet):  # prompts within a checkpoint, too
        task = bar.add_task("units", total=sum(left.values()))
        running = (executor.run(tasks, hashing(scorers, prints), store, admit=admit)
                   if isinstance(executor, LocalExecutor) else
                   executor.run(tasks, scorers, store, runfile.CommitAdmit.of(probes, config))
                   if isinstance(executor, RayExecutor) else
                   executor.run(tasks, scorers, store))
        for summary in running:
            (model, revision, _, probe), seed = summary[0], summary[1]
            label = f"{model}@{revision}" if revision else model
            bar.update(task, advance=1, description=f"{label} {probe} seed {seed}")
            done.append(summary)
            left[(model, revision)] -= 1
            if not left[(model, revision)]:  # a checkpoint is finished
                write_summary(store, done)
    write_summary(store, done)
    return [u for u, had in have.items() if had and not store.unit_path(u).exists()]


def hashing(scorers: ScorerSource, prints: Fingerprints) -> ScorerSource:
    """``scorers``, with each checkpoint's weights (and tokenizer and config files) hashed from
    when it starts to load: the first now, the next when the current one is handed over (the
    prefetch loads it then)."""
    def source(checkpoints: Sequence[Checkpoint]) -> Iterator[NextTokenScorer]:
        if checkpoints:
            prints.start(checkpoints[0])
        for index, scorer in enumerate(scorers(checkpoints)):
            if index + 1 < len(checkpoints):
                prints.start(checkpoints[index + 1])
            yield scorer
    return source


def write_summary(store: RunStore, units: Iterable[UnitSummary] | None = None
                  ) -> dict[str, Any]:
    """summary.json's metrics per checkpoint (the analysis comes when the sweep is done), from
    the given unit summaries, or by reading every unit once."""
    if units is None:
        units = [unit_summary(frame) for frame in store.iter_units() if not frame.empty]
    return write_summary_json(store, summarise(units))


class HFScorers:
    """Scorer source over Hugging Face checkpoints (imports torch only when called). `check`
    loads every checkpoint's tokenizer and encodes its items first: a later checkpoint's
    missing or other tokenizer was refused only once the ones before it were scored (an hour
    of a long sweep); the scorers then take the tokenizers it loaded. Weights still load one
    checkpoint ahead of the scoring (`iter_scorers`)."""

    def __init__(self, scoring: Any) -> None:
        self.scoring = scoring
        self.encodings = Encodings(scoring.first_token)
        self.tokenizers: dict[str, Any] = {}

    def check(self, tasks: Sequence[CheckpointTask]) -> None:
        for task in tasks:
            check_tokenizer(task.checkpoint, self.scoring, self.encodings, self.tokenizers,
                            [(job.request, job.items) for job in task.jobs])

    def __call__(self, checkpoints: Sequence[Checkpoint]) -> Iterator[NextTokenScorer]:
        yield from iter_scorers(checkpoints, self.scoring, self.encodings, self.tokenizers)


def hf_scorers(scoring: Any) -> ScorerSource:
    """Scorer source over Hugging Face checkpoints (`HFScorers`)."""
    return HFScorers(scoring)


def hf_comparable(scoring: Any) -> dict[str, Any]:
    chosen = asdict(scoring)
    return {"dtype": chosen["dtype"], "first_token": chosen["first_token"]}


def run_dynamics(probe: Probe | Sequence[Probe], checkpoints: list[Checkpoint],
                 out: str | Path | RunStore, *,
                 seeds: Sequence[int] = (0, 1, 2, 3, 4), scoring: Any = None,
                 limit: int | None = None, quiet: bool = False,
                 executor: Executor | None = None,
                 data: dict[str, str] | None = None,
                 rescore_changed: bool = False) -> RunStore:
    """Library entry point of ``biasscope dynamics``: HF checkpoints x seeds into ``out``.

    ``data``: SHA-256 of each data file the probes read (``source/name`` -> hex), checked
    against the run's on a rerun (see ``biasscope.data.sources.recording``).
    ``rescore_changed``: a checkpoint whose weights (or tokenizer, chat template or config
    files) changed since the run scored it has its units redone (else it is refused; see
    ``biasscope.dynamics.scoring.fingerprints``).
    """
    scoring = scoring or HFConfig()
    where = out if isinstance(out, RunStore) or (isinstance(out, str) and "://" in out) \
        else Path(out)  # Path folds "//"
    comparable = hf_comparable(scoring) | ({"data": dict(data)} if data else {})
    config = SweepConfig(list(checkpoints), where, list(seeds), limit, comparable,
                         rescore_changed, bool(getattr(scoring, "trust_remote_code", False)))
    return sweep(probe, config, hf_scorers(scoring), quiet=quiet, executor=executor)
