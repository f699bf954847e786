"""Real processes released at one moment: what two runs into one folder do to each other.

Forked (the test's monkeypatches come along) and held at a barrier until all have started;
each must exit cleanly (a target reports failures through a queue of its own, made with
`CTX`)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

CTX = multiprocessing.get_context("fork")


def together(target: Callable[..., None], runs: Sequence[Sequence[Any]],
             timeout: float = 120) -> None:
    """``target(*run, barrier)`` for every run in its own process, released together."""
    barrier = CTX.Barrier(len(runs))
    procs = [CTX.Process(target=target, args=(*run, barrier)) for run in runs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout)
        assert proc.exitcode == 0
