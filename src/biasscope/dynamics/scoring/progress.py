"""Progress within a checkpoint: a bar with prompts/s and ETA on a terminal, else a plain line
as the scoring starts and every 30 s after.

A unit of a 410m model on CPU scores for minutes; without this nothing moves in that time.
Where stderr is no terminal (nohup, CI, a Ray worker's log) a bar would print nothing useful,
so lines such as ``biasscope: pythia-70m@step1000: scoring 15,840 prompts`` and, 30 s later,
``biasscope: pythia-70m@step1000: 6,400/15,840 prompts (40%), 212.5 prompts/s, ETA 0:00:44``
are written instead. A sweep shows its prompts in its own live bar
(``shown_in``); elsewhere (a Ray worker, a direct ``run_task``) the stream decides.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from biasscope.core.numbers import num

#: Seconds between plain progress lines.
INTERVAL = 30.0


class RateColumn(ProgressColumn):
    """``212.5 prompts/s`` for tasks that name their ``unit``; nothing for the others."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        unit = task.fields.get("unit")
        return Text(f"{speed:,.1f} {unit}/s" if unit and speed else "", style="progress.data.speed")


def columns() -> tuple[ProgressColumn, ...]:
    """The columns of every biasscope progress bar: what, how far, how fast, how long left."""
    return (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
            TimeElapsedColumn(), TimeRemainingColumn())


@dataclass(frozen=True)
class Display:
    """Where progress goes: a live bar to add tasks to, or nowhere (``quiet``)."""

    bar: Progress | None = None
    quiet: bool = False


_DISPLAY: ContextVar[Display | None] = ContextVar("biasscope_display", default=None)


@contextmanager
def shown_in(bar: Progress | None, quiet: bool) -> Iterator[None]:
    """Within this block, prompt progress goes to ``bar`` (None: a bar of its own on a
    terminal, else plain lines), or nowhere if ``quiet``."""
    token = _DISPLAY.set(Display(bar, quiet))
    try:
        yield
    finally:
        _DISPLAY.reset(token)


def clock_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PromptProgress:
    """``with PromptProgress(label, total) as advance: advance(n)`` as prompts are scored."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic,
                 display: Display | None = None) -> None:
        self.label, self.total, self.clock = label, total, clock
        self.interval = INTERVAL if interval is None else interval
        self.stream = stream if stream is not None else sys.stderr
        self.display = display or _DISPLAY.get() or Display()
        self.done = 0
        self.lines = 0
        self._own: Progress | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._start = self._last = 0.0

    def __enter__(self) -> Callable[[int], None]:
        self._start = self._last = self.clock()
        if self.display.quiet or self.total <= 0:
            return self.advance
        bar = self.display.bar
        if bar is None and _is_terminal(self.stream):
            bar = self._own = Progress(*columns(), console=Console(file=self.stream),
                                       transient=True)
            bar.start()
        if bar is not None:
            self._bar = bar
            self._task = bar.add_task(self.label, total=self.total, unit="prompts")
        else:  # the first line as the work starts (tokenizing is part of it), not 30 s later
            print(f"biasscope: {self.label}: scoring {num(self.total)} prompts",
                  file=self.stream, flush=True)
        return self.advance

    def advance(self, n: int) -> None:
        self.done += n
        if self.display.quiet or self.total <= 0:
            return
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=n)
            return
        now = self.clock()
        if now - self._last >= self.interval:
            self._last = now
            self._line(now)

    def _line(self, now: float, finished: bool = False) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        share = 100 * self.done / self.total
        tail = (f"done in {clock_text(elapsed)}" if finished else
                f"ETA {clock_text((self.total - self.done) / rate)}" if rate else "ETA unknown")
        print(f"biasscope: {self.label}: {self.done:,}/{self.total:,} prompts ({share:.0f}%), "
              f"{rate:,.1f} prompts/s, {tail}", file=self.stream, flush=True)
        self.lines += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.remove_task(self._task)
        if self._own is not None:
            self._own.stop()
        elif self._bar is None and self.lines and kind is None:  # a long one says it ended
            self._line(self.clock(), finished=True)


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())
