"""Real processes released at one moment: what two runs into one folder do to each other.

Spawned, as two users start two commands: a forked child of the test process inherits its
threads' half-done state (a heap mid-update once aborted a child with ``malloc_consolidate():
invalid chunk size``), and a spawned one inherits nothing, so a target patches what it slows
down itself. Held at a barrier until all have started; each must exit cleanly (a target
reports failures through a queue of its own, made with `CTX`)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

CTX = multiprocessing.get_context("spawn")


def together(target: Callable[..., None], runs: Sequence[Sequence[Any]],
             timeout: float = 120) -> None:
    """``target(*run, barrier)`` for every run in its own process, released together."""
    barrier = CTX.Barrier(len(runs))
    procs = [CTX.Process(target=target, args=(*run, barrier)) for run in runs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout)
        assert proc.exitcode == 0, f"a process ended with {proc.exitcode}"
