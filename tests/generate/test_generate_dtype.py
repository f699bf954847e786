"""``generate --dtype`` and ``--batch-size`` of a local model (a GGUF file here): each answer
line records the dtype in its ``model``, so an output file is never of two dtypes, and the
response cache keeps each dtype's answers apart (``auto``: the dtype it resolves to, float32
for a GGUF file's copy). A local model loads on its first request not cached, so a call
refused for another dtype, or answered from the cache, loads none (it loaded first). A model
that loads nothing here refuses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.cli.main import main


def _call(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, out: str,
          *extra: str) -> tuple[int, str]:
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Is it?", "options": ["yes", "no"]}\n'
                       '{"id": "b", "prompt": "Is it not?"}\n')
    local = () if model.startswith(("canned:", "openai")) else ("--device", "cpu")  # refused
    code = main(["generate", "--model", model, "--input", str(prompts), "--out",
                 str(tmp_path / out), "--cache", str(tmp_path / "cache.sqlite"),
                 *local, "--max-tokens", "2", *extra])
    return code, capsys.readouterr()


def _dtypes(path: Path) -> set[str]:
    return {json.loads(line)["model"]["dtype"] for line in path.read_text().splitlines()}


def test_a_local_models_dtype_is_recorded_refused_on_a_rerun_and_keyed(tmp_path, capsys,
                                                                         monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    import biasscope.backends.hf_generate as hf_generate
    from gguf_fixture import write_llama_gguf
    from no_loads import loads_counted

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf"))
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    spec = f"hf:{write_llama_gguf(tmp_path / 'a.gguf')}"
    code, said = _call(tmp_path, capsys, spec, "half.jsonl", "--dtype", "bfloat16",
                       "--batch-size", "1")
    assert code == 0, said.err
    assert _dtypes(tmp_path / "half.jsonl") == {"bfloat16"} and "2 sent" in said.out
    before = (tmp_path / "half.jsonl").read_bytes()
    with monkeypatch.context() as patched:  # refused on its files' identity: nothing loaded
        loads_counted(patched, hf_generate, fail=True)
        code, said = _call(tmp_path, capsys, spec, "half.jsonl", "--dtype", "float32")
    err = said.err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "model.dtype: \"bfloat16\" then, \"float32\" now" in err[0]
    assert (tmp_path / "half.jsonl").read_bytes() == before
    # float32's answers are asked, not served from bfloat16's; auto's are float32's.
    code, said = _call(tmp_path, capsys, spec, "full.jsonl", "--dtype", "float32")
    assert code == 0 and "2 sent, 0 from the cache" in said.out, said
    with monkeypatch.context() as patched:  # all cached: nothing loaded
        loads_counted(patched, hf_generate, fail=True)
        code, said = _call(tmp_path, capsys, spec, "auto.jsonl")
    assert code == 0 and "0 sent, 2 from the cache" in said.out, said
    assert _dtypes(tmp_path / "auto.jsonl") == {"float32"}


@pytest.mark.parametrize("model", ["canned:yes", "openai-compatible:http://127.0.0.1:9/v1#m"])
def test_a_model_that_loads_nothing_here_refuses_them(model, tmp_path, capsys):
    for extra, said in ((["--dtype", "bfloat16"], "--dtype bfloat16 would be ignored"),
                        (["--batch-size", "2"], "--batch-size 2 would be ignored")):
        code, out = _call(tmp_path, capsys, model, "out.jsonl", *extra)
        err = out.err.strip().splitlines()
        assert code == 2 and len(err) == 1 and said in err[0], err
        assert f"--model {model} " in err[0] and "loads no weights here" in err[0]
    assert not (tmp_path / "out.jsonl").exists()
