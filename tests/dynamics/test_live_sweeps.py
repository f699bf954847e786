"""A live run's folder and a sweep of the Trainer's saved checkpoints under the live run's
model name: one step's records come from one source. Before, the sweep added checkpoint-folder
units beside the training's at the same steps (two checkpoints per step in the summary, and a
resumed training refused for the sweep's seeds 1-4 as its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.cli.main import main  # noqa: E402
from biasscope.core.errors import BiasscopeError  # noqa: E402
from live_trainer import train, written  # noqa: E402


@pytest.fixture
def data(tmp_path, winobias_dir):
    (tmp_path / "data").symlink_to(winobias_dir)
    return tmp_path


def sweep(data: Path, out: Path, name: str = "live", *extra: str) -> int:
    glob = str(data / "trainer" / "checkpoint-*")
    return main(["dynamics", "--checkpoint-glob", f"{name}={glob}", "--data-dir",
                 str(data / "data"), "--out", str(out), "--device", "cpu", "--quiet", *extra])


def test_a_sweep_of_a_live_run_s_steps_under_its_name_is_refused_before_any_loads(
        data, tiny_tokenizer, one_thread, monkeypatch, capsys):
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    run_json, units = (out / "run.json").read_bytes(), written(out)
    loads: list[object] = []
    monkeypatch.setattr("biasscope.dynamics.scoring.sweep.iter_scorers",
                        lambda *a: loads.append(a) or iter(()))
    capsys.readouterr()
    assert sweep(data, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"biasscope: error: {out} holds steps 2, 4 of 'live' scored during training "
                   "(BiasCallback), which this sweep's checkpoint-2, checkpoint-4 would score "
                   "again under that name from checkpoint folders; one step's records come from "
                   "one source: give the sweep another model name (--checkpoint-glob "
                   "NAME='GLOB'), or use another --out"]
    assert loads == []
    assert (out / "run.json").read_bytes() == run_json and written(out) == units


def test_the_sweep_under_another_name_is_a_model_of_its_own(data, tiny_tokenizer, one_thread):
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    units = written(out)
    assert sweep(data, out, "saved", "--seeds", "0") == 0
    after = written(out)
    assert {k: after[k] for k in units} == units
    summary = json.loads((out / "summary.json").read_text())
    steps = [(c["model"], c["step"]) for c in summary["checkpoints"]]
    assert sorted(steps) == [("live", 0), ("live", 2), ("live", 4), ("saved", 2), ("saved", 4)]


def test_a_training_into_a_sweep_s_steps_of_its_model_name_is_refused_before_it_trains(
        data, tiny_tokenizer, one_thread):
    """Before: a fresh training was refused as if another training had written the steps
    ("… resume the training that wrote them"), and one resumed before the sweep's last step as
    "the training that went on past step 2"."""
    train(tiny_tokenizer, data, data / "first", 4)
    out = data / "live"
    assert sweep(data, out, "live", "--seeds", "0") == 0
    units = written(out)
    with pytest.raises(BiasscopeError) as fresh:
        train(tiny_tokenizer, data, out, 4, seed=5)
    assert str(fresh.value) == (
        f"out: {out} holds steps 2, 4 of model_name 'live' scored by biasscope dynamics from "
        "checkpoint folders (checkpoint-2 …), which this training, from step 0, would score "
        "again in memory; one step's records come from one source: give another out or "
        "LiveConfig(model_name=...)")
    with pytest.raises(BiasscopeError, match=r"holds steps 4 of model_name 'live' scored by "
                                             r"biasscope dynamics from checkpoint folders "
                                             r"\(checkpoint-4\), which this training, resumed "
                                             r"at step 2, would score again in memory"):
        train(tiny_tokenizer, data, out, 4, resume=str(data / "trainer/checkpoint-2"))
    assert written(out) == units
