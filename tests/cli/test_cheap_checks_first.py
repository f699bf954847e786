"""Every cheap refusal (a flag, ``--out`` holding another command's run, a data file that is not
there) comes before the expensive work: hashing a GGUF file (minutes for a large one on a slow
disk) or loading a model. Before, ``audit`` hashed a GGUF model, then said that ``--out`` held
a judge's run. Here hashing fails the test, so each refusal must arrive without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.cli.main import main

pytest.importorskip("gguf")


@pytest.fixture
def gguf_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny GGUF model whose hashing fails the test (it comes before any conversion or
    load of the file)."""
    import biasscope.backends.gguf as gguf
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    path = write_llama_gguf(tmp_path / "m.gguf")

    def expensive(*_: object, **__: object) -> None:
        raise AssertionError("hashed before a cheap refusal")

    monkeypatch.setattr(gguf, "file_sha256", expensive)
    return path


def _other_run(tmp_path: Path, kind: str) -> Path:
    out = tmp_path / "other"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": kind, "settings": {}}))
    return out


def _files(tmp_path: Path) -> dict[str, Path]:
    files = {"pairs": tmp_path / "pairs.jsonl", "swapped": tmp_path / "swapped.jsonl",
             "prompts": tmp_path / "prompts.jsonl", "principles": tmp_path / "p.txt"}
    files["principles"].write_text("Be kind.\nBe honest.\n")
    files["pairs"].write_text(json.dumps({"id": "p", "prompt": "2+2?", "a": "4", "b": "5"})
                              + "\n")
    files["swapped"].write_text(json.dumps({"id": "p", "prompt": "My wife?", "chosen": "Ask "
                                            "her.", "rejected": "No."}) + "\n")
    files["prompts"].write_text('{"id": "a", "prompt": "Is it?"}\n')
    return files


def _argv(command: str, model: Path, out: Path, files: dict[str, Path]) -> list[str]:
    return {
        "audit": ["audit", "--model", str(model), "--probe", "professional-bias", "--limit",
                  "2", "--out", str(out)],
        "judge": ["judge", "--model", str(model), "--input", str(files["pairs"]), "--out",
                  str(out)],
        "judge-audit": ["judge-audit", "--model", str(model), "--input", str(files["pairs"]),
                        "--out", str(out)],
        "counterfactual": ["counterfactual", "--judge-model", f"G={model}", "--pairs",
                           str(files["swapped"]), "--out", str(out)],
        "sensitivity": ["sensitivity", "--reward-model", "org/never-loaded", "--perturber",
                        str(model), "--prompts", str(files["prompts"]), "--principles",
                        str(files["principles"]), "--sanity-pairs", "0", "--out", str(out)],
        "dynamics": ["dynamics", "--model", str(model), "--out", str(out)],
        "intervene": ["intervene", "--model", str(model), "--out", str(out)],
    }[command]


def _refused(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--no-cache"] if argv[0] not in ("dynamics", "intervene") else argv) \
        == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


KINDS = {"audit": "judge", "judge": "audit", "judge-audit": "audit", "counterfactual": "audit",
         "sensitivity": "audit", "dynamics": "audit", "intervene": "audit"}


@pytest.mark.parametrize("command", sorted(KINDS))
def test_an_out_of_another_kind_is_refused_before_the_model_is_hashed(command, gguf_file,
                                                                     tmp_path, capsys):
    out = _other_run(tmp_path, KINDS[command])
    before = (out / "run.json").read_bytes()
    _refused(_argv(command, gguf_file, out, _files(tmp_path)), "use another --out", capsys)
    assert (out / "run.json").read_bytes() == before and len(list(out.iterdir())) == 1


@pytest.mark.parametrize(("command", "file"), [
    ("judge", "pairs"), ("judge-audit", "pairs"), ("counterfactual", "swapped"),
    ("sensitivity", "prompts"), ("sensitivity", "principles")])
def test_a_missing_data_file_is_refused_before_the_model_is_hashed(command, file, gguf_file,
                                                                  tmp_path, capsys):
    files = _files(tmp_path)
    files[file].unlink()
    _refused(_argv(command, gguf_file, tmp_path / "run", files), files[file].name, capsys)
    assert not (tmp_path / "run").exists()


def test_generate_checks_its_files_before_the_model_is_hashed(gguf_file, tmp_path, capsys):
    """``generate`` was in order already: its input read and its ``--out`` checked first."""
    files = _files(tmp_path)
    argv = ["generate", "--model", str(gguf_file), "--input", str(files["prompts"])]
    _refused([*argv, "--out", str(_other_run(tmp_path, "audit"))], "--out", capsys)
    files["prompts"].unlink()
    _refused([*argv, "--out", str(tmp_path / "out.jsonl")], "--input", capsys)
    assert not (tmp_path / "out.jsonl").exists()
