"""One pass per checkpoint: a sweep scores a checkpoint's units together (runs/executors.py),
the records match per-unit scoring, a redone unit gets the same bytes, and progress shows
(runs/progress.py): a bar on a terminal, a plain line every interval elsewhere."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from rich.progress import Progress

from biasscope.dynamics.scoring import progress
from biasscope.dynamics.scoring.progress import PromptProgress

torch = pytest.importorskip("torch")

from biasscope.backends.checkpoints import Checkpoint, from_dirs  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.dynamics.scoring.sweep import hf_scorers, sweep  # noqa: E402
from biasscope.dynamics.scoring.units import SweepConfig  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from biasscope.store.directory import RunStore  # noqa: E402

OPTIONS = HFConfig(device="cpu", batch_size=8)
ORDER = ["step", "seed", "item_id"]
LINE = re.compile(r"^biasscope: \S+: [\d,]+/[\d,]+ prompts \(\d+%\), [\d,.]+ prompts/s, "
                  r"(ETA \d+:\d\d:\d\d|done in \d+:\d\d:\d\d)$")


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


class PerUnit:
    """The scorer without its shared path: every unit scored on its own, as before."""

    def __init__(self, scorer: Any, calls: list[int]) -> None:
        self.scorer, self.label, self.calls = scorer, scorer.label, calls

    def score_next_token(self, items: Sequence[Any]) -> list[Any]:
        self.calls.append(len(items))
        return list(self.scorer.score_next_token(items))


def per_unit(calls: list[int]) -> Any:
    def source(checkpoints: Sequence[Checkpoint]) -> Iterator[Any]:
        for scorer in hf_scorers(OPTIONS)(checkpoints):
            yield PerUnit(scorer, calls)
    return source


def records(store: RunStore) -> pd.DataFrame:
    return store.records().sort_values(ORDER).reset_index(drop=True)


def run(dirs: list[Path], data: Path, out: Path, scorers: Any, seeds: list[int],
        quiet: bool = True) -> RunStore:
    probe = load_probe("winobias-gender", data_dir=data)
    return sweep(probe, SweepConfig(from_dirs(dirs), out, seeds), scorers, quiet=quiet)


def test_a_checkpoint_is_scored_once_across_seeds(checkpoint_dirs, winobias_dir, tmp_path,
                                                  monkeypatch):
    seeds = [0, 1, 2, 3, 4]
    calls: list[int] = []
    plain = records(run(checkpoint_dirs[:1], winobias_dir, tmp_path / "plain", per_unit(calls),
                        seeds))
    assert len(calls) == len(seeds)  # the old way: one pass per seed

    from biasscope.backends import prefix
    shared_calls: list[int] = []
    real = prefix.score_shared

    def counted(scorer: Any, items: Any, needed: Any, advance: Any = None) -> Any:
        shared_calls.append(sum(needed))
        return real(scorer, items, needed, advance)

    monkeypatch.setattr(prefix, "score_shared", counted)
    shared = records(run(checkpoint_dirs[:1], winobias_dir, tmp_path / "shared",
                         hf_scorers(OPTIONS), seeds))
    assert shared_calls == [sum(calls)]  # one pass over every seed's items
    pd.testing.assert_frame_equal(shared.drop(columns=["option_logprobs"]),
                                  plain.drop(columns=["option_logprobs"]))
    for a, b in zip(shared["option_logprobs"], plain["option_logprobs"]):
        assert list(a) == pytest.approx(list(b), abs=1e-4)


def test_a_redone_unit_gets_the_same_bytes(checkpoint_dirs, winobias_dir, tmp_path):
    out = tmp_path / "run"
    store = run(checkpoint_dirs[:1], winobias_dir, out, hf_scorers(OPTIONS), [0, 1, 2])
    victim = sorted(store.unit_files())[1]
    before = victim.read_bytes()
    victim.unlink()
    run(checkpoint_dirs[:1], winobias_dir, out, hf_scorers(OPTIONS), [0, 1, 2])
    assert victim.read_bytes() == before


def test_without_a_terminal_a_sweep_logs_a_line_per_interval(checkpoint_dirs, winobias_dir,
                                                             tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    run(checkpoint_dirs[:2], winobias_dir, tmp_path / "run", hf_scorers(OPTIONS), [0, 1],
        quiet=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if "prompts" in line]
    for name in ("checkpoint-10", "checkpoint-20"):
        first, *mine = [line for line in lines if name in line]
        assert first.endswith(f"{name}: scoring 96 prompts")  # as it starts, not 30 s later
        assert mine and all(LINE.match(line) for line in mine), mine
        assert "ETA" in mine[0] and mine[-1].endswith(tuple("0123456789"))
        assert "done in" in mine[-1] and "96/96 prompts (100%)" in mine[-1]


def test_quiet_sweeps_print_nothing(checkpoint_dirs, winobias_dir, tmp_path, capsys,
                                    monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    run(checkpoint_dirs[:1], winobias_dir, tmp_path / "run", hf_scorers(OPTIONS), [0])
    assert capsys.readouterr().err == ""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_every_interval_with_rate_and_eta():
    stream, clock = io.StringIO(), Clock()
    with PromptProgress("m@step1", 1000, stream=stream, interval=30, clock=clock) as advance:
        for _ in range(10):
            clock.now += 10
            advance(50)  # 5 prompts/s
    lines = stream.getvalue().splitlines()
    assert lines == [
        "biasscope: m@step1: scoring 1,000 prompts",
        "biasscope: m@step1: 150/1,000 prompts (15%), 5.0 prompts/s, ETA 0:02:50",
        "biasscope: m@step1: 300/1,000 prompts (30%), 5.0 prompts/s, ETA 0:02:20",
        "biasscope: m@step1: 450/1,000 prompts (45%), 5.0 prompts/s, ETA 0:01:50",
        "biasscope: m@step1: 500/1,000 prompts (50%), 5.0 prompts/s, done in 0:01:40",
    ]


def test_short_checkpoints_write_only_the_line_that_starts_them():
    stream = io.StringIO()
    with PromptProgress("m", 10, stream=stream, interval=30) as advance:
        assert stream.getvalue() == "biasscope: m: scoring 10 prompts\n"  # before any prompt
        advance(10)
    assert stream.getvalue() == "biasscope: m: scoring 10 prompts\n"
    quiet = io.StringIO()
    with PromptProgress("m", 10, stream=quiet, display=progress.Display(quiet=True)) as advance:
        advance(10)
    assert quiet.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_shows_prompts_per_second_and_eta():
    stream = Terminal()
    shown = PromptProgress("m@step1", 100, stream=stream, interval=0)
    with shown as advance:
        advance(40)
        assert shown._own is not None  # a rich bar of its own, not lines
        (task,) = shown._own.tasks
        assert task.completed == 40 and task.fields["unit"] == "prompts"
    assert "biasscope: m@step1" not in stream.getvalue()
    names = [type(c).__name__ for c in progress.columns()]
    assert names[-3:] == ["RateColumn", "TimeElapsedColumn", "TimeRemainingColumn"]
    fake = SimpleNamespace(finished_speed=None, speed=212.54, fields={"unit": "prompts"})
    assert str(progress.RateColumn().render(fake)) == "212.5 prompts/s"  # type: ignore[arg-type]
    fake.fields = {}  # the sweep's own units task names no unit: no rate
    assert str(progress.RateColumn().render(fake)) == ""  # type: ignore[arg-type]


def test_a_sweep_bar_gets_a_task_per_checkpoint():
    bar = Progress(*progress.columns(), disable=True)
    with progress.shown_in(bar, quiet=False), PromptProgress("m@step1", 10) as advance:
        advance(4)
        (task,) = [t for t in bar.tasks if t.description == "m@step1"]
        assert task.completed == 4 and task.fields["unit"] == "prompts"
    assert not [t for t in bar.tasks if t.description == "m@step1"]  # removed when done
