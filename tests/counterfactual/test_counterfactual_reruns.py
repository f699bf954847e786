"""A counterfactual rerun loads only the local models it has something left to ask: a reward
model's rewards stored in scores.jsonl are read back, and its identity is read from its files
(hashed; the dtype its config names on a GPU under --dtype auto), so it loads when it first
scores. Before, every call loaded every reward model to tell its identity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from no_loads import loads_counted
from test_counterfactual import _tiny_reward_model, _wife_pairs

pytest.importorskip("torch")


def _scores(out: Path) -> list[dict[str, Any]]:
    lines = (out / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines),
                  key=lambda r: (r["pair"], r["version"], r["response"]))


def test_a_rerun_with_every_reward_stored_loads_no_reward_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every reward stored: no load, on a CPU or (its config naming float32, as the CPU
    loaded it in) on a GPU. A pair's rewards missing: it loads once, and scores as before."""
    import torch

    import biasscope.backends.reward as reward

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = _tiny_reward_model(tmp_path / "rm")
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "run"
    _wife_pairs(pairs, 4)
    argv = ["counterfactual", "--reward-model", str(folder), "--pairs", str(pairs),
            "--no-chat-template", "--out", str(out)]
    assert main([*argv, "--device", "cpu"]) == 0, capsys.readouterr().err
    summary, scores = json.loads((out / "summary.json").read_text()), _scores(out)
    with monkeypatch.context() as patched:
        loads = loads_counted(patched, reward, fail=True, loader="_load_classifier")
        assert main([*argv, "--device", "cpu"]) == 0, capsys.readouterr().err
        assert loads == [] and json.loads((out / "summary.json").read_text()) == summary
        patched.setattr(reward, "resolve_device", lambda name: torch.device("cuda"))
        assert main(argv) == 0, capsys.readouterr().err
        assert loads == [] and _scores(out) == scores
    first = scores[0]["pair"]
    (out / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores
                                              if r["pair"] != first), encoding="utf-8")
    loads = loads_counted(monkeypatch, reward, loader="_load_classifier")
    assert main([*argv, "--device", "cpu"]) == 0, capsys.readouterr().err
    assert loads == [str(folder)] and _scores(out) == scores
    assert json.loads((out / "summary.json").read_text()) == summary
