"""An audit rerun whose every unit is stored loads no model: the run's settings and the
model's identity (its files hashed, the dtype its settings load it in) are checked as before,
and the summary and report are written from the stored units. A unit missing loads the model
once and scores it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import no_loads
from biasscope.cli.main import main
from biasscope.store.directory import RunStore
from winogender_fixture import write_winogender

pytest.importorskip("torch")


def loads_counted(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[str]:
    """Each model whose weights load, by source (``fail``: and the load fails)."""
    import biasscope.backends.hf_generate as hf_generate

    return no_loads.loads_counted(monkeypatch, hf_generate, fail)


def records(out: Path) -> pd.DataFrame:
    return RunStore(out).records().sort_values("item_id").reset_index(drop=True)


def probes(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "summary.json").read_text())["probes"])


@pytest.fixture
def model(checkpoint_dirs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a tiny checkpoint (the tests change its weights), hashed into a cache of
    this test's own."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    return Path(shutil.copytree(checkpoint_dirs[0], tmp_path / "model"))


def test_a_rerun_with_every_unit_stored_loads_no_model(
        model: Path, checkpoint_dirs: list[Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["audit", "--model", f"hf:{model}", "--probe", "professional-bias", "--limit", "4",
            "--device", "cpu", "--no-cache", "--out", str(out)]
    assert main(argv) == 0
    before, summary = records(out), probes(out)
    loads = loads_counted(monkeypatch, fail=True)
    assert main(argv) == 0
    assert loads == []
    pd.testing.assert_frame_equal(records(out), before)
    assert probes(out) == summary and (out / "report.html").is_file()
    # Still checked as strictly, with nothing loaded: another way of asking, other weights.
    capsys.readouterr()
    assert main([*argv, "--scoring", "generate"]) == 2
    assert "different 'responder'" in capsys.readouterr().err and loads == []
    shutil.copyfile(checkpoint_dirs[1] / "model.safetensors", model / "model.safetensors")
    assert main(argv) == 2
    assert "responder.backend.fingerprint" in capsys.readouterr().err and loads == []


def test_a_rerun_with_every_unit_stored_converts_no_gguf_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its cache copy gone (another $BIASSCOPE_GGUF_CACHE), a GGUF model's tokenizer (whether
    it has a chat template, for run.json) is read from the file: before, reading it converted
    the whole file first. It is kept alone in the cache, and the next rerun reads it there."""
    pytest.importorskip("gguf")
    import biasscope.backends.gguf as gguf
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "here"))
    path, out = write_llama_gguf(tmp_path / "model.gguf", letters=True), tmp_path / "run"
    argv = ["audit", "--model", str(path), "--probe", "professional-bias", "--limit", "4",
            "--device", "cpu", "--no-cache", "--out", str(out)]
    assert main(argv) == 0
    before, summary = records(out), probes(out)
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "there"))
    loads = loads_counted(monkeypatch, fail=True)
    monkeypatch.setattr(gguf, "_convert", lambda *_: loads.append("converted"))
    assert main(argv) == 0
    assert loads == [] and [p.name for p in (tmp_path / "there").iterdir()] == [gguf.TOKENIZERS]
    pd.testing.assert_frame_equal(records(out), before)
    assert probes(out) == summary
    monkeypatch.setattr(gguf, "_tokenizer", lambda *_: loads.append("read from the metadata"))
    assert main(argv) == 0
    assert loads == [] and probes(out) == summary


def test_a_rerun_with_a_unit_missing_loads_the_model_once(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    argv = ["audit", "--model", f"hf:{model}", "--probe", "professional-bias", "--limit", "4",
            "--device", "cpu", "--no-cache", "--out", str(out)]
    assert main(argv) == 0
    before = records(out)
    (unit,) = (out / "records").glob("*.parquet")
    unit.unlink()
    loads = loads_counted(monkeypatch)
    assert main(argv) == 0
    assert loads == [str(model)]
    pd.testing.assert_frame_equal(records(out), before)


def test_a_scored_probes_rerun_loads_no_model(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Winogender, scored from the model's next-token log-probs: its scorer is made over the
    model when it first scores, not when the call starts."""
    data = write_winogender(tmp_path / "data")
    out = tmp_path / "run"
    argv = ["audit", "--model", f"hf:{model}", "--probe", "winogender", "--first-token",
            "--data-dir", str(data), "--device", "cpu", "--out", str(out)]
    assert main(argv) == 0
    before, summary = records(out), probes(out)
    loads = loads_counted(monkeypatch, fail=True)
    assert main(argv) == 0
    assert loads == [] and probes(out) == summary
    next(iter((out / "records").glob("*.parquet"))).unlink()
    loads = loads_counted(monkeypatch)
    assert main(argv) == 0
    assert loads == [str(model)]
    pd.testing.assert_frame_equal(records(out), before)


def test_a_rerun_on_a_gpu_under_dtype_auto_loads_no_model(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU, ``--dtype auto`` loads the dtype the checkpoint's config names, and the
    identity holds it: the weights loaded to tell it, every unit stored or not. It is read
    from config.json now (the GPU here is the one the identity's dtype is resolved for; the
    weights load on the CPU, in the float32 the tiny model's config names)."""
    import torch

    import biasscope.backends.hf_generate as hf_generate

    monkeypatch.setattr(hf_generate, "resolve_device", lambda name: torch.device("cuda"))
    out = tmp_path / "run"
    argv = ["audit", "--model", f"hf:{model}", "--probe", "professional-bias", "--limit", "4",
            "--no-cache", "--out", str(out)]
    assert main(argv) == 0
    backend = json.loads((out / "run.json").read_text())["responder"]["backend"]
    assert backend["dtype"] == "float32"
    loads = loads_counted(monkeypatch, fail=True)
    assert main(argv) == 0
    assert loads == []
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    capsys.readouterr()
    assert main(argv) == 2  # another config: other files, and another dtype, refused unloaded
    assert "responder.backend" in capsys.readouterr().err and loads == []


def test_weights_that_load_in_another_dtype_than_their_files_say_are_refused(
        model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run was checked with the dtype read from the files: weights that load in another
    are refused as they load, not scored under the identity of the first."""
    import torch

    import biasscope.backends.hf_generate as hf_generate
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFConfig
    from biasscope.core.errors import ModelError

    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    monkeypatch.setattr(hf_generate, "resolve_device", lambda name: torch.device("cuda"))
    deferred = HFGenerator(Checkpoint("m", str(model)), HFConfig(), deferred=True)
    assert deferred.identity()["dtype"] == "bfloat16"
    with pytest.raises(ModelError, match=r"^model m loaded in float32, not in the bfloat16 its "
                                         r"files say; nothing of it was scored: pass --dtype "
                                         r"bfloat16$"):
        deferred.model  # noqa: B018 (the load; on the CPU here, float32)
