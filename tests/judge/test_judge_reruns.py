"""A judge rerun whose every answer is in the response cache loads no local judge: it is made
deferred (`HFGenerator(..., deferred=True)`), its identity (the response cache's key) read
from its files, and it loads when a request is not cached. Before, every call loaded it."""

from __future__ import annotations

import json

import pytest

from biasscope.cli.main import main
from no_loads import loads_counted
from test_judge_runs import PAIRS, _jsonl

pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_rerun_with_every_answer_cached_loads_no_local_judge(
        kind, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """On a CPU, and on a GPU under --dtype auto (the dtype its config names); without the
    cache it loads once, and the verdicts are the same."""
    import torch

    import biasscope.backends.hf_generate as hf_generate
    from biasscope.judge import panel

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    pairs, out = _jsonl(tmp_path / "pairs.jsonl", PAIRS[:2]), tmp_path / "run"
    argv = [kind, "--model", f"J=hf:{checkpoint_dirs[0]}", "--input", str(pairs), "--out",
            str(out), "--cache", str(tmp_path / "cache.sqlite")]
    assert main([*argv, "--device", "cpu"]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    with monkeypatch.context() as patched:
        loads = loads_counted(patched, hf_generate, fail=True)
        assert main([*argv, "--device", "cpu"]) == 0, capsys.readouterr().err
        assert loads == [] and json.loads((out / "summary.json").read_text()) == summary
        for module in (panel, hf_generate):  # its config names float32, as the CPU loaded
            patched.setattr(module, "resolve_device", lambda name: torch.device("cuda"))
        assert main(argv) == 0, capsys.readouterr().err
        assert loads == []
    loads = loads_counted(monkeypatch, hf_generate)
    assert main([*argv, "--device", "cpu", "--no-cache"]) == 0, capsys.readouterr().err
    assert loads == [str(checkpoint_dirs[0])]
    assert json.loads((out / "summary.json").read_text()) == summary
