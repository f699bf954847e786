"""Where a sweep's units run: in this process (default) or as Ray tasks across a cluster.

A task is one checkpoint and its pending units, so a worker loads the weights once. Each unit
is written to the run directory by whoever scored it (``RunStore.write_unit`` is atomic), so
any number of workers share one run with no coordinator; the driver only collects the unit
summaries and writes ``summary.json``. Ray is an optional extra, imported only by
:class:`RayExecutor`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from biasscope.errors import BiasscopeError, optional
from biasscope.items import Item
from biasscope.runs.checkpoints import Checkpoint
from biasscope.runs.dynamics import (
    ScorerSource,
    UnitSummary,
    records_frame,
    score_request,
    unit_summary,
)
from biasscope.runs.store import RunStore, Unit


@dataclass(frozen=True)
class UnitJob:
    """One unit and everything needed to score it: plain data, so it pickles."""

    unit: Unit
    request: str  # the backend request kind, e.g. "next_token"
    items: Sequence[Item]


@dataclass(frozen=True)
class CheckpointTask:
    """The pending units of one checkpoint: one model load."""

    checkpoint: Checkpoint
    jobs: Sequence[UnitJob]


class Executor(Protocol):
    """Runs tasks; yields the summary of each unit once it is in the run directory."""

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore) -> Iterator[UnitSummary]: ...


def run_task(task: CheckpointTask, scorer: Any, store: RunStore) -> Iterator[UnitSummary]:
    """Score and write each unit; one already written (by an earlier attempt) is only read."""
    for job in task.jobs:
        if store.has(job.unit):
            frame = pd.read_parquet(store.unit_path(job.unit))
        else:
            frame = records_frame(job.unit, job.items, score_request(
                scorer, job.request, job.unit.probe, job.items))
            store.write_unit(job.unit, frame)
        yield unit_summary(frame)


class LocalExecutor:
    """In this process, one checkpoint after another (the scorer source may prefetch)."""

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore) -> Iterator[UnitSummary]:
        for task, scorer in zip(tasks, scorers([t.checkpoint for t in tasks])):
            yield from run_task(task, scorer, store)
            del scorer


def run_remote(task: CheckpointTask, scorers: ScorerSource, root: str) -> list[UnitSummary]:
    """The body of a Ray task: load the checkpoint in the worker, score, write, summarise."""
    import ray

    if not ray.get_gpu_ids():  # Ray leaves the GPUs visible to a task that asked for none
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    store = RunStore(root)
    if all(store.has(job.unit) for job in task.jobs):  # a retry after the last write
        return list(run_task(task, None, store))
    (scorer,) = list(scorers([task.checkpoint]))
    return list(run_task(task, scorer, store))


class RayExecutor:
    """One Ray task per checkpoint, each requesting ``gpus_per_unit`` GPUs and
    ``cpus_per_unit`` CPUs. A task whose worker dies is retried ``max_retries`` times and
    skips the units it had already written. ``address`` is a cluster (``auto``,
    ``ray://host:10001``); None joins the Ray already initialised here or starts a local one.
    The run directory must be on storage every worker can write to.
    """

    def __init__(self, address: str | None = None, gpus_per_unit: float = 0,
                 cpus_per_unit: float = 1, max_retries: int = 3) -> None:
        self.address = address
        self.gpus_per_unit = gpus_per_unit
        self.cpus_per_unit = cpus_per_unit
        self.max_retries = max_retries

    def run(self, tasks: Sequence[CheckpointTask], scorers: ScorerSource,
            store: RunStore) -> Iterator[UnitSummary]:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False)
        remote = ray.remote(run_remote).options(
            num_cpus=self.cpus_per_unit, num_gpus=self.gpus_per_unit,
            max_retries=self.max_retries, retry_exceptions=False)
        # Workers open the shared run itself: the URL of a remote run, else the local path.
        root = store.remote or str(Path(store.root).resolve())
        shared = ray.put(scorers)
        pending = [remote.remote(task, shared, root) for task in tasks]
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


def make_executor(name: str, address: str | None = None, gpus_per_unit: float = 0,
                  cpus_per_unit: float = 1) -> Executor:
    """The executor named on the command line."""
    if name == "local":
        if address is not None or gpus_per_unit:
            raise BiasscopeError("--ray-address and --gpus-per-unit need --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address, gpus_per_unit, cpus_per_unit)
    raise BiasscopeError(f"unknown executor {name!r}; use one of {', '.join(EXECUTORS)}")
