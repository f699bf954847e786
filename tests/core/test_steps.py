"""No silent stretches: each slow step of a run says so on stderr as it starts, before its work
(core/steps.py), and ``--quiet`` silences every such line.

The work is watched, not replaced: each step's function is wrapped to write a marker to
stderr when it is called, so the order of the captured lines shows whether the announcement
came first.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import copy_context
from pathlib import Path
from typing import Any

import pytest

from biasscope.core import steps


def test_say_writes_a_line_that_quiet_silences_and_a_log_can_take(capsys):
    steps.say("loading m")
    told: list[str] = []
    with steps.quiet():
        steps.say("not shown")
        with steps.told_to(told.append):  # an outer quiet stands
            steps.say("not told either")
    with steps.told_to(told.append):
        steps.say("told")
        with steps.quiet(False):
            steps.say("still told")
    assert capsys.readouterr().err == "biasscope: loading m\n"
    assert told == ["told", "still told"]


def test_a_thread_started_in_the_callers_context_stays_quiet(capsys):
    with steps.quiet():
        worker = threading.Thread(target=copy_context().run, args=(steps.say, "in a thread"))
        worker.start()
        worker.join()
    assert capsys.readouterr().err == ""


def marked(owner: Any, name: str, monkeypatch: pytest.MonkeyPatch,
           label: Callable[..., str]) -> None:
    """``owner.name`` writes ``@work <label(args)>`` to stderr when called, then does its work."""
    real = getattr(owner, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        print(f"@work {label(*args, **kwargs)}", file=sys.stderr, flush=True)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)


def first(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert found, f"no line with {text!r} in:\n" + "\n".join(lines)
    return found[0]


def test_each_step_of_a_dynamics_run_is_announced_before_its_work(
        checkpoint_dirs, winobias_dir, tmp_path, one_thread, monkeypatch, capsys):
    pytest.importorskip("torch")
    from biasscope.backends import hf
    from biasscope.cli.main import main
    from biasscope.dynamics.summary import write as reporting

    marked(hf, "load_model", monkeypatch, lambda ckpt, options: f"load {ckpt.label}")
    marked(hf.HFScorer, "score_next_token_shared", monkeypatch,
           lambda scorer, *a: f"score {scorer.label}")
    marked(reporting, "full_summary", monkeypatch, lambda *a: "analyse")
    marked(reporting, "render_dynamics_report", monkeypatch, lambda *a: "render")
    glob = str(checkpoint_dirs[0].parent / "checkpoint-[12]0")
    out = tmp_path / "run"
    assert main(["dynamics", "--checkpoint-glob", glob, "--seeds", "0", "--data-dir",
                 str(winobias_dir), "--out", str(out)]) == 0
    lines = capsys.readouterr().err.splitlines()
    model = checkpoint_dirs[0].parent.name
    assert lines[0] == f"biasscope: loading {model}@checkpoint-10"
    for step in ("checkpoint-10", "checkpoint-20"):
        label = f"{model}@{step}"
        # The next checkpoint loads while this one is scored: each line before its own work.
        assert first(lines, f"biasscope: loading {label}") < first(lines, f"@work load {label}")
        assert (first(lines, f"biasscope: {label}: scoring 48 prompts")
                < first(lines, f"@work score {label}"))
    assert (first(lines, f"@work score {model}@checkpoint-20")
            < first(lines, f"biasscope: analysing 2 units of {out}")
            < first(lines, "@work analyse")
            < first(lines, f"biasscope: writing the report {out / 'report.html'}")
            < first(lines, "@work render"))


def test_quiet_runs_and_reports_print_nothing_on_stderr(checkpoint_dirs, winobias_dir, tmp_path,
                                            one_thread, capsys):
    pytest.importorskip("torch")
    from biasscope.cli.main import main

    glob = str(checkpoint_dirs[0].parent / "checkpoint-10")
    run = tmp_path / "run"
    assert main(["dynamics", "--checkpoint-glob", glob, "--seeds", "0", "--data-dir",
                 str(winobias_dir), "--out", str(run), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "report:" in captured.out
    assert main(["report", str(run), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().err.splitlines() == [  # the sweep's analysis, reused
        f"biasscope: reusing the analysis in {run / 'summary.json'} (same records, options and "
        "code)", f"biasscope: writing the report {run / 'report.html'}"]
    assert main(["report", str(run), "--alpha", "0.05"]) == 0  # another setting: analysed
    assert capsys.readouterr().err.splitlines()[0] == f"biasscope: analysing 1 unit of {run}"


def test_the_demo_says_each_step_before_it(tmp_path: Path, one_thread, monkeypatch, capsys):
    """A tiny demo (4 steps): its first line comes before torch loads, and
    training the tokenizer, tokenizing, training, the analysis and the report each start
    with a line; ``quiet`` prints none of them."""
    pytest.importorskip("torch")
    from biasscope.backends import lazy
    from biasscope.demo import DemoConfig, run_demo, train
    from biasscope.dynamics.summary import write as reporting

    marked(lazy, "require_torch", monkeypatch, lambda: "torch")
    marked(train, "_encode", monkeypatch, lambda *a: "tokenize")
    marked(reporting, "full_summary", monkeypatch, lambda *a: "analyse")
    marked(reporting, "render_dynamics_report", monkeypatch, lambda *a: "render")
    tiny = DemoConfig(documents=64, steps=4, batch_size=16, warmup=1, checkpoints=2,
                      eval_pairings=1, seeds=(0,), threads=1)
    run_demo(tmp_path / "demo", config=tiny)
    lines = [line.split("] ", 1)[-1] for line in capsys.readouterr().err.splitlines()]
    order = ["loading torch", "@work torch", "writing a corpus of 64 documents",
             "training a tokenizer", "tokenizing the corpus", "@work tokenize",
             "-parameter GPT-NeoX", "step 0: male-female JSD-P gap", "checking every checkpoint",
             "analysing ", "@work analyse", "writing the report", "@work render",
             "report: "]
    at = [first(lines, text) for text in order]
    assert at == sorted(at) and at[0] == 0, lines
    run_demo(tmp_path / "again", config=tiny, quiet=True)
    assert [line for line in capsys.readouterr().err.splitlines()
            if not line.startswith("@work")] == []


def test_a_gguf_file_is_named_alike_as_it_loads_in_every_command(winobias_dir, tmp_path,
                                                                  one_thread, monkeypatch,
                                                                  capsys):
    """``audit`` said "loading tiny-q8" and ``dynamics`` "loading tiny-q8.gguf" for one file:
    the line names the file, as its conversion line does; the labels run.json keeps (the
    audit's model, the sweep's checkpoint) are as they were, since units and caches are keyed
    by them."""
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    import json

    from biasscope.cli.main import main
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
    model = write_llama_gguf(tmp_path / "tiny-q8.gguf")
    common = ["--model", str(model), "--data-dir", str(winobias_dir), "--limit", "2",
              "--device", "cpu"]
    assert main(["audit", *common, "--probe", "professional-bias", "--out",
                 str(tmp_path / "audit")]) == 0
    audit = capsys.readouterr().err.splitlines()
    assert main(["dynamics", *common, "--seeds", "0", "--first-token", "--out",
                 str(tmp_path / "sweep")]) == 0
    sweep = capsys.readouterr().err.splitlines()
    for lines in (audit, sweep):
        assert "biasscope: loading tiny-q8.gguf" in lines, lines
    assert json.loads((tmp_path / "audit" / "run.json").read_text())["model"] == "tiny-q8"
    listed = json.loads((tmp_path / "sweep" / "run.json").read_text())["checkpoints"]
    assert [entry["model"] for entry in listed] == ["tiny-q8.gguf"]
