"""An audit into a run made with another model is refused before the model loads: a GGUF
file's audit hashed it, converted it where it had no cache copy yet (minutes for a real one)
and loaded it (11 s for Gemma 3 270M) before it said so. Hashing is what tells the file apart;
the conversion and the load are not needed for that."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

from biasscope.cli.main import main
from no_loads import no_loads, refused


def test_another_gguf_file_is_refused_before_it_is_converted_or_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import biasscope.backends.gguf as gguf
    import biasscope.backends.hf_generate as hf_generate
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    first = write_llama_gguf(tmp_path / "a.gguf")
    other = write_llama_gguf(tmp_path / "b.gguf", seed=1)
    argv = ["audit", "--probe", "professional-bias", "--limit", "2", "--device", "cpu",
            "--no-cache", "--out", str(tmp_path / "run")]
    assert main([*argv, "--model", str(first)]) == 0
    assert main([*argv, "--model", f"hf:{first}"]) == 0  # the same file: it resumes
    capsys.readouterr()
    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    monkeypatch.setattr(gguf, "_convert", lambda *_: loads.append("converted"))
    refused([*argv, "--model", str(other)], "made with a different 'model' (\"a\" then, \"b\" "
            "now", loads, capsys)
    write_llama_gguf(first, seed=2)  # the same name, other weights
    refused([*argv, "--model", str(first)], "a different 'responder' (responder.backend."
            "gguf_sha256: ", loads, capsys)
    refused([*argv, "--model", str(tmp_path / "missing.gguf")], "does not exist", loads,
            capsys)


def test_a_gguf_files_cache_copy_moved_is_the_same_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """run.json recorded the folder a GGUF file was converted into as the model's source: the
    same file audited again with another $BIASSCOPE_GGUF_CACHE (another machine's, a cleared
    one) was refused as another model. The file and its SHA-256 name it; a run that recorded
    the cache folder resumes where that folder is the same SHA-256's."""
    import json

    import biasscope.backends.hf_generate as hf_generate
    from biasscope.backends.gguf import file_sha256
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    first = write_llama_gguf(tmp_path / "a.gguf")
    out = tmp_path / "run"
    argv = ["audit", "--probe", "professional-bias", "--limit", "2", "--device", "cpu",
            "--no-cache", "--out", str(out), "--model", str(first)]
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "here"))
    assert main(argv) == 0
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "there"))
    assert main(argv) == 0, capsys.readouterr().err
    run_json = out / "run.json"
    backend = json.loads(run_json.read_text())["responder"]["backend"]
    assert backend["source"] == backend["gguf_file"] == str(first.resolve())

    def as_older_biasscope_recorded(sha: str) -> None:
        data = json.loads(run_json.read_text())
        data["responder"]["backend"]["source"] = str(tmp_path / "here" / sha)
        run_json.write_text(json.dumps(data))

    as_older_biasscope_recorded(file_sha256(first))
    assert main(argv) == 0, capsys.readouterr().err
    assert json.loads(run_json.read_text())["responder"]["backend"] == backend
    as_older_biasscope_recorded(file_sha256(first))
    write_llama_gguf(first, seed=2)  # the same name, other weights: still another model
    capsys.readouterr()
    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    refused(argv, "a different 'responder' (responder.backend.", loads, capsys)
