"""A judge rerun whose every answer is in the response cache loads no local judge: it is made
deferred (`HFGenerator(..., deferred=True)`), its identity (the response cache's key) read
from its files, and it loads when a request is not cached. Before, every call loaded it."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_a_rerun_with_every_answer_cached_converts_no_gguf_judge(tmp_path, monkeypatch,
                                                                 capsys):
    """Its cache copy gone (another $BIASSCOPE_GGUF_CACHE, a cleared cache), a GGUF judge's
    answer keys' token ids are read from the file's own tokenizer: before, reading them
    converted the whole file (minutes for a real model) to take the tokenizer from the copy.
    That tokenizer is kept alone in the cache: the next rerun reads it there, and neither the
    tokenizer nor the header from the file's metadata (45 s and 10 s for Gemma 3 270M)."""
    pytest.importorskip("gguf")
    import biasscope.backends.gguf as gguf
    import biasscope.backends.hf_generate as hf_generate
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "here"))
    path = write_llama_gguf(tmp_path / "judge.gguf")
    pairs, out = _jsonl(tmp_path / "pairs.jsonl", PAIRS[:2]), tmp_path / "run"
    argv = ["judge", "--model", f"G={path}", "--input", str(pairs), "--out", str(out),
            "--cache", str(tmp_path / "cache.sqlite"), "--device", "cpu"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "there"))
    with monkeypatch.context() as patched:
        loads = loads_counted(patched, hf_generate, fail=True)
        patched.setattr(gguf, "_convert", lambda *_: loads.append("converted"))
        assert main(argv) == 0, capsys.readouterr().err
        assert loads == [] and json.loads((out / "summary.json").read_text()) == summary
        sha = gguf.file_sha256(path)
        assert [p.name for p in (tmp_path / "there").iterdir()] == [gguf.TOKENIZERS]
        assert (tmp_path / "there" / gguf.TOKENIZERS / sha / gguf.SAVED_TOKENIZER).is_file()

        def metadata(*_: object) -> None:
            raise AssertionError("read from the file's metadata")

        patched.setattr(gguf, "_tokenizer", metadata)
        patched.setattr(gguf, "read_header", metadata)
        patched.setattr(gguf, "_headers", {})  # as a new process has them
        assert main(argv) == 0, capsys.readouterr().err
        assert loads == [] and json.loads((out / "summary.json").read_text()) == summary
        assert not (tmp_path / "there" / sha).exists()


@pytest.mark.parametrize("letters", [False, True])
def test_a_gguf_files_own_tokenizer_gives_its_copys_key_ids(letters, tmp_path, monkeypatch):
    """The key ids a rerun reads from the file (`read_tokenizer`) are those of its converted
    copy's tokenizer, which a run that converted it asked with."""
    pytest.importorskip("gguf")
    from types import SimpleNamespace

    from biasscope.backends import gguf
    from biasscope.backends.checkpoints import from_model
    from biasscope.backends.hf_model import HFConfig, load_tokenizer
    from biasscope.judge.core import KEYS, key_token_ids
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    path = write_llama_gguf(tmp_path / "judge.gguf", letters=letters)
    own = gguf.read_tokenizer(path)
    assert not (tmp_path / "cache" / gguf.file_sha256(path)).exists()  # not converted
    (ckpt,) = from_model(str(path))  # converted
    copy = load_tokenizer(ckpt, HFConfig())
    def encoded(tokenizer):  # what `key_token_ids` reads, of every key it may be given
        return [tokenizer(text, add_special_tokens=False)["input_ids"]
                for key in KEYS for text in (key, " " + key)]

    assert encoded(own) == encoded(copy)
    ids = [key_token_ids(SimpleNamespace(label="G", tokenizer=t), KEYS[:3]) for t in (own, copy)]
    assert ids[0] is not None and ids[0] == ids[1]


def test_a_gguf_judge_that_loads_reads_its_tokenizer_again_from_the_copy(tmp_path, monkeypatch):
    """Its keys' ids read from the file, a judge with answers to give converts it and then
    tokenizes with the copy's tokenizer, as a call that found the copy made does."""
    pytest.importorskip("gguf")
    from biasscope.backends.checkpoints import from_model
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFConfig
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    path = write_llama_gguf(tmp_path / "judge.gguf")
    (ckpt,) = from_model(str(path), convert=False)
    judge = HFGenerator(ckpt, HFConfig(device="cpu"), deferred=True)
    own = judge.tokenizer
    assert not Path(ckpt.source).exists()  # not converted
    assert judge.model is not None and judge.tokenizer is not own
    assert judge.tokenizer.name_or_path == ckpt.source and Path(ckpt.source).is_dir()
