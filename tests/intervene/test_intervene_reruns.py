"""An intervention rerun loads only what it trains: one whose every arm finished loads no
tokenizer or weights and converts no GGUF file (its cache copy gone: another
$BIASSCOPE_GGUF_CACHE, a cleared one), the base checked by what it is; one with an arm left
converts and loads for that arm alone. Training and the analysis are stubbed (an arm loads its
weights and tokenizes, then is marked finished): what is counted is the job's loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import no_loads

pytest.importorskip("torch")
pytest.importorskip("gguf")


@pytest.fixture
def text(tmp_path: Path) -> Path:
    from biasscope.demo.corpus import documents

    path = tmp_path / "text.txt"
    path.write_text("\n".join(d.replace("\n", " ") for d in documents(60, bias=0.5, seed=0)) + "\n")
    return path


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The arms that trained: each loads the base and tokenizes, then is finished."""
    from types import SimpleNamespace

    from biasscope.intervene import job, train

    arms: list[str] = []

    def train_arm(name: str, texts: Any, load: Any, tokenizer: Any, probes: Any, store: Any,
                  *args: Any, **kwargs: Any) -> None:
        if train.finished(store.root, name):
            return
        load()
        tokenizer(texts[0])
        arms.append(name)
        (store.root / "train" / name).mkdir(parents=True, exist_ok=True)
        (store.root / "train" / name / train.DONE).write_text(json.dumps({"steps": [0, 20]}))

    monkeypatch.setattr(job, "train_arm", train_arm)
    monkeypatch.setattr(job, "report", lambda store, *a, **k: SimpleNamespace(
        summary={"sentence": "stubbed"}, store=store, report="-", intervention_report="-"))
    return arms


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[str]:
    """``module.name`` called through, each call's first argument listed."""
    calls: list[str] = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda first, *a: calls.append(str(first)) or real(first, *a))
    return calls


def test_a_rerun_with_every_arm_finished_loads_and_converts_nothing(
        tmp_path, text, winobias_dir, trained, monkeypatch, capsys) -> None:
    """Before: every call converted a GGUF base whose cache copy was gone (minutes for a real
    model) and loaded its tokenizer, with nothing to train."""
    from biasscope.backends import gguf
    from biasscope.cli.main import main
    from biasscope.intervene import job
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    model = write_llama_gguf(tmp_path / "base.gguf")
    out = tmp_path / "run"
    argv = ["intervene", "--out", str(out), "--model", str(model), "--text", str(text),
            "--data-dir", str(winobias_dir), "--device", "cpu", "--quiet", "--steps", "20",
            "--every", "20", "--limit", "10", "--no-save-recommended"]
    assert main(argv) == 0, capsys.readouterr().err
    assert sorted(trained) == ["cda", "control"]
    listed = json.loads((out / "run.json").read_text())
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "empty"))
    converted = counted(monkeypatch, gguf, "converted")
    tokenizers = counted(monkeypatch, job, "load_tokenizer")
    loads = no_loads.loads_counted(monkeypatch, job, fail=True)
    trained.clear()
    assert main(argv) == 0, capsys.readouterr().err
    assert converted == loads == tokenizers == trained == []
    assert not (tmp_path / "empty").exists()
    assert json.loads((out / "run.json").read_text())["settings"] == listed["settings"]
    (out / "train" / "cda" / "done.json").unlink()  # an arm left: it alone loads
    loads = no_loads.loads_counted(monkeypatch, job)
    assert main(argv) == 0, capsys.readouterr().err
    assert converted == [str(model.resolve())] and len(loads) == len(tokenizers) == 1
    assert trained == ["cda"]
