"""Where a sweep's units run: in this process (default) or as Ray tasks across a cluster.

A task is one checkpoint and its pending units, so a worker loads the weights once, and scores
the union of their items at once where the scorer can (``score_next_token_shared`` and
``score_continuation_shared``: each distinct prompt once, shared prefixes once), planned over
all the checkpoint's units so a resumed task computes the very numbers an uninterrupted one
would have. Each unit
is written to the run directory by whoever scored it (``RunStore.write_unit`` is atomic), so
any number of workers share one run with no coordinator; the driver only collects the unit
summaries and writes ``summary.json``. Ray is an optional extra, imported only by
:class:`RayExecutor`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from biasscope.backends.checkpoints import Checkpoint
from biasscope.core.errors import BiasscopeError, optional
from biasscope.core.items import Item
from biasscope.dynamics.scoring.asking import Asking
from biasscope.dynamics.scoring.progress import PromptProgress
from biasscope.dynamics.scoring.units import (
    ScorerSource,
    UnitSummary,
    records_frame,
    unit_frame,
    unit_summary,
)
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit


@dataclass(frozen=True)
class UnitJob:
    """One unit and everything needed to score it: plain data, so it pickles."""

    unit: Unit
    request: str  # the backend request kind, e.g. "next_token"
    items: Sequence[Item]
    asking: Asking | None = None  # options: the items' chat turns and the probe's detector


@dataclass(frozen=True)
class CheckpointTask:
    """The pending units of one checkpoint: one model load. ``done``: its units already
    written, which the scoring plan counts (never rescored) so results do not depend on them."""

    checkpoint: Checkpoint
    jobs: Sequence[UnitJob]
    done: Sequence[UnitJob] = ()


class Executor(Protocol):
    """Runs tasks; yields the summary of each unit once it is in the run directory."""

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore) -> Iterator[UnitSummary]: ...


def run_task(task: CheckpointTask, scorer: Any, store: RunStore,
             admit: Callable[[Checkpoint], None] | None = None) -> Iterator[UnitSummary]:
    """Score and write each pending unit, ``next_token`` ones together where the scorer can;
    one already written (by an earlier attempt) is only read. A unit appears whole or not at
    all, as before; units scored one by one are written as each is done. ``admit``: called
    with the checkpoint once, before its first unit is written (the sweep records its
    fingerprint then, see ``runfile.admit``)."""
    pending = [job for job in task.jobs if not store.has(job.unit, rows=len(job.items))]
    check_context(scorer, pending)
    todo = {job.unit for job in pending}
    total = sum(len(job.items) for job in pending)
    admitted = admit is None

    def write(unit: Unit, frame: pd.DataFrame) -> pd.DataFrame:
        nonlocal admitted
        if not admitted and admit is not None:
            admit(task.checkpoint)
            admitted = True
        store.write_unit(unit, frame)
        return frame

    with PromptProgress(task.checkpoint.label, total) as advance:
        together = score_together(task, pending, scorer, advance) if pending else {}
        for job in task.jobs:
            if job.unit in together:
                frame = write(job.unit, records_frame(job.unit, job.items,
                                                      together[job.unit]))
            elif job.unit in todo:
                frame = write(job.unit, unit_frame(scorer, job.unit, job.request, job.items,
                                                   job.asking))
                advance(len(job.items))
            else:
                frame = pd.read_parquet(store.unit_path(job.unit))
            yield unit_summary(frame)


def check_context(scorer: Any, jobs: Sequence[UnitJob]) -> None:
    """Refuse, before any unit is scored, an item too long for the scorer's model (one line
    naming it; ``biasscope.backends.context``), where the scorer can tell."""
    check = getattr(scorer, "check_context", None)
    if check is not None:
        for job in jobs:
            check(job.request, job.items, job.asking.messages if job.asking else None)


#: The request kinds a scorer may score all at once, shared prefixes once.
SHARED = ("next_token", "continuation")


def score_together(task: CheckpointTask, pending: Sequence[UnitJob], scorer: Any,
                   advance: Callable[[int], None]) -> dict[Unit, list[Any]]:
    """Scores of the pending units of each ``SHARED`` kind, from one call of the scorer's
    shared path for it (``score_<kind>_shared``; none without one), planned over all the
    checkpoint's units of that kind (see the module doc)."""
    out: dict[Unit, list[Any]] = {}
    for kind in SHARED:
        out.update(score_kind(task, pending, scorer, advance, kind))
    return out


def score_kind(task: CheckpointTask, pending: Sequence[UnitJob], scorer: Any,
               advance: Callable[[int], None], kind: str) -> dict[Unit, list[Any]]:
    shared = getattr(scorer, f"score_{kind}_shared", None)
    wanted = {job.unit for job in pending if job.request == kind}
    if shared is None or not wanted:
        return {}
    plan = sorted((job for job in [*task.done, *task.jobs] if job.request == kind),
                  key=lambda job: (job.unit.probe, job.unit.seed))
    needed = [job.unit in wanted for job in plan for _ in job.items]
    scores = shared([it for job in plan for it in job.items], needed, advance)
    out: dict[Unit, list[Any]] = {}
    start = 0
    for job in plan:
        if job.unit in wanted:
            out[job.unit] = scores[start:start + len(job.items)]
            if any(score is None for score in out[job.unit]):  # a bug, never a partial unit
                raise BiasscopeError(f"{scorer.label}: unit {job.unit.key} was not scored whole")
        start += len(job.items)
    return out


class LocalExecutor:
    """In this process, one checkpoint after another (the scorer source may prefetch)."""

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore, admit: Callable[[Checkpoint], None] | None = None
            ) -> Iterator[UnitSummary]:
        for task, scorer in zip(tasks, scorers([t.checkpoint for t in tasks])):
            yield from run_task(task, scorer, store, admit)
            del scorer


def run_remote(task: CheckpointTask, scorers: ScorerSource, root: str,
               admit: Callable[[RunStore, Checkpoint], None] | None = None
               ) -> list[UnitSummary]:
    """The body of a Ray task: load the checkpoint in the worker, score, write, summarise.
    ``admit``: called with the run and the checkpoint once it has loaded, before its first
    unit is written (`runfile.CommitAdmit`: the hub commit it loaded, and ``remote_code`` where
    the driver did not know it)."""
    import ray

    if not ray.get_gpu_ids():  # Ray leaves the GPUs visible to a task that asked for none
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    store = RunStore(root)
    if all(store.has(job.unit, rows=len(job.items))  # a retry after the last write
           for job in task.jobs):
        return list(run_task(task, None, store))
    (scorer,) = list(scorers([task.checkpoint]))
    return list(run_task(task, scorer, store, None if admit is None else (
        lambda ckpt: admit(store, ckpt))))


class RayExecutor:
    """One Ray task per checkpoint, each requesting ``gpus_per_checkpoint`` GPUs and
    ``cpus_per_checkpoint`` CPUs. A task whose worker dies is retried ``max_retries`` times and
    skips the units it had already written. ``address`` is a cluster (``auto``,
    ``ray://host:10001``); None joins the Ray already initialised here or starts a local one.
    The run directory must be on storage every worker can write to.
    """

    def __init__(self, address: str | None = None, gpus_per_checkpoint: float = 0,
                 cpus_per_checkpoint: float = 1, max_retries: int = 3) -> None:
        self.address = address
        self.gpus_per_checkpoint = gpus_per_checkpoint
        self.cpus_per_checkpoint = cpus_per_checkpoint
        self.max_retries = max_retries

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore, admit: Callable[[RunStore, Checkpoint], None] | None = None
            ) -> Iterator[UnitSummary]:
        """``admit``: see `run_remote`."""
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False)
        remote = ray.remote(run_remote).options(
            num_cpus=self.cpus_per_checkpoint, num_gpus=self.gpus_per_checkpoint,
            max_retries=self.max_retries, retry_exceptions=False)
        # Workers open the shared run itself: the URL of a remote run, else the local path.
        root = store.remote or str(Path(store.root).resolve())
        shared = ray.put(scorers)
        pending = [remote.remote(task, shared, root, admit) for task in tasks]
        try:
            while pending:
                (ready,), pending = ray.wait(pending, num_returns=1)
                try:
                    summaries: list[UnitSummary] = ray.get(ready)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, BiasscopeError):
                        raise cause from None
                    raise
                yield from summaries
            store.refresh()  # the workers' units, into this process's staging copy
        finally:
            for ref in pending:  # on an error or an abandoned sweep, stop what is queued
                ray.cancel(ref)


def _ray() -> Any:
    return optional("ray", "ray", "--executor ray")


EXECUTORS = ("local", "ray")


def make_executor(name: str, address: str | None = None, gpus_per_checkpoint: float = 0,
                  cpus_per_checkpoint: float = 1) -> Executor:
    """The executor named on the command line."""
    if name == "local":
        if address is not None or gpus_per_checkpoint:
            raise BiasscopeError("--ray-address and --gpus-per-checkpoint need --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address, gpus_per_checkpoint, cpus_per_checkpoint)
    raise BiasscopeError(f"unknown executor {name!r}; use one of {', '.join(EXECUTORS)}")
