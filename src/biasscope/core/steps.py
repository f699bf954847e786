"""A line on stderr as each slow step starts, so that a run is never silent for long.

Loading a model, converting a GGUF file, scoring, the analysis and the report each take from
seconds to minutes; without a word the user cannot tell a slow step from a hung one. Each says
what it starts, once, before the work: ``biasscope: loading gemma-3-270m-q4_k_m.gguf``. One
plain line per step reads the same on a terminal and in a CI log (a live rich bar shows it
above itself). ``quiet()`` silences them for the block it wraps (``--quiet``) and ``told_to()``
hands them to a log of the caller's (the demo stamps its own lines); both are context
variables, so a worker thread started with ``contextvars.copy_context()`` keeps them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Sink = Callable[[str], None]

#: Files at least this large are about a second's read or more: hashing one is a step.
LARGE_FILE = 100 * 2**20


def _stderr(message: str) -> None:
    print(f"biasscope: {message}", file=sys.stderr, flush=True)


def _silent(message: str) -> None:
    return None


_SINK: ContextVar[Sink] = ContextVar("biasscope_steps", default=_stderr)


def say(message: str) -> None:
    """``biasscope: message`` on stderr now (or to the log of ``told_to``; nothing if quiet)."""
    _SINK.get()(message)


def is_quiet() -> bool:
    return _SINK.get() is _silent


@contextmanager
def told_to(sink: Sink) -> Iterator[None]:
    """Within this block, ``say`` hands each line to ``sink`` (an outer ``quiet()`` stands)."""
    token = _SINK.set(_SINK.get() if is_quiet() else sink)
    try:
        yield
    finally:
        _SINK.reset(token)


@contextmanager
def quiet(on: bool = True) -> Iterator[None]:
    """Within this block, ``say`` prints nothing if ``on``; else as outside it."""
    token = _SINK.set(_silent if on else _SINK.get())
    try:
        yield
    finally:
        _SINK.reset(token)
