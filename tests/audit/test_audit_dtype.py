"""``audit --dtype`` and ``--batch-size`` of a local model: run.json records the dtype in the
model's identity and a rerun in another is refused before the model loads (``auto`` on a
CPU is float32: the same run); a model that loads nothing here, or ``--responses``, refuses
them. Before, the command took neither: a local model ran in ``auto`` at 16 prompts a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.cli.main import main
from no_loads import loads_counted, refused

pytest.importorskip("torch")

PROBE = "professional-bias"


def _argv(out: Path, model: str, *extra: str) -> list[str]:
    local = () if model.startswith("canned:") else ("--device", "cpu")  # a server's: refused
    return ["audit", "--model", model, "--probe", PROBE, "--limit", "4", "--out", str(out),
            *local, "--no-cache", *extra]


def test_a_local_models_dtype_is_recorded_and_another_refused_unloaded(
        tmp_path, checkpoint_dirs, monkeypatch, capsys):
    import biasscope.backends.hf_generate as hf_generate

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    out, model = tmp_path / "run", str(checkpoint_dirs[0])
    sizes: list[int] = []
    scores = hf_generate.HFGenerator.option_logprobs

    def counted(self, *args, **kwargs):
        sizes.append(self.config.batch_size)
        return scores(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(hf_generate.HFGenerator, "option_logprobs", counted)
        assert main(_argv(out, model, "--dtype", "bfloat16", "--batch-size", "2")) == 0, \
            capsys.readouterr().err
    assert sizes and set(sizes) == {2}
    assert json.loads((out / "run.json").read_text())["responder"]["backend"]["dtype"] \
        == "bfloat16"
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with monkeypatch.context() as patched:
        refused(_argv(out, model, "--dtype", "float32"),
                "(responder.backend.dtype: \"bfloat16\" then, \"float32\" now)",
                loads_counted(patched, hf_generate, fail=True), capsys)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # auto on a CPU is float32: a float32 run reruns under auto, loading nothing.
    full = tmp_path / "full"
    assert main(_argv(full, model, "--dtype", "float32")) == 0, capsys.readouterr().err
    with monkeypatch.context() as patched:
        loads = loads_counted(patched, hf_generate, fail=True)
        assert main(_argv(full, model)) == 0, capsys.readouterr().err
        assert loads == []


@pytest.mark.parametrize("extra", [["--dtype", "bfloat16"], ["--batch-size", "4"]])
def test_a_model_that_loads_nothing_here_refuses_them(extra, tmp_path, capsys):
    out = tmp_path / "run"
    refused(_argv(out, "canned:A", *extra),
            f"--model canned:A answers from a fixed list and loads no weights here, so "
            f"{' '.join(extra)} would be ignored", [], capsys)
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"item_id": "x", "response": "A"}\n')
    argv = ["audit", "--responses", str(responses), "--probe", PROBE, "--out", str(out),
            *extra]
    refused(argv, f"{' '.join(extra)}: only for --model", [], capsys)
    assert not out.exists()
