"""`generate` and `items` that fail to write leave no temp file behind and the previous output
whole: a full disk, an unwritable folder, a directory in the way, an exception mid-write."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

import biasscope.generate.batch as generate_mod
import biasscope.store.files as store_mod
from biasscope.backends.base import GenerateParams
from biasscope.cli.main import main
from biasscope.generate.batch import generate_file
from biasscope.store.settings import sha256_json
from fakes import CannedGenerator, PromptEcho

#: An earlier answers file of the same model, settings and requests: a call may replace it.
OLD = (json.dumps({"id": "old", "text": "old", "finish_reason": None, "model": {"backend": "echo"},
                   "params": asdict(GenerateParams()), "input": {"sha256": sha256_json(
                       [[str(i), f"p{i}", None, None] for i in range(5)])}}) + "\n").encode()
#: An earlier export of `biasscope items`: the only file (beside an empty one) items replaces.
ITEMS = b'{"item_id": "old", "probe": "professional-bias"}\n'


def setup(tmp_path: Path) -> tuple[Path, Path]:
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"p{i}"}) + "\n"
                               for i in range(5)))
    out = tmp_path / "out" / "gen.jsonl"
    out.parent.mkdir()
    out.write_bytes(OLD)
    return prompts, out


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def full_disk(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def denied(*args: object, **kwargs: object) -> None:
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


@pytest.mark.parametrize(("target", "name", "fault", "message"), [
    (store_mod.os, "fsync", full_disk, "no space left on device"),
    (store_mod.os, "replace", full_disk, "no space left on device"),
    (store_mod.tempfile, "mkstemp", denied, "permission denied"),  # an unwritable folder
])
def test_generate_that_cannot_write_leaves_no_temp_file(target, name, fault, message, tmp_path,
                                                        monkeypatch):
    prompts, out = setup(tmp_path)
    monkeypatch.setattr(target, name, fault)
    from biasscope.core.errors import BiasscopeError

    with pytest.raises(BiasscopeError, match=message):
        generate_file(PromptEcho(), prompts, out, GenerateParams(), None)
    assert temp_files(out.parent) == [] and out.read_bytes() == OLD


def test_an_exception_mid_write_leaves_no_temp_file(tmp_path, monkeypatch):
    prompts, out = setup(tmp_path)
    real = generate_mod.json_line
    calls = []

    def failing(obj: object) -> str:
        if isinstance(obj, dict) and "finish_reason" in obj:  # an output row
            calls.append(obj)
            if len(calls) == 3:
                raise RuntimeError("boom")
        return real(obj)

    monkeypatch.setattr(generate_mod, "json_line", failing)
    with pytest.raises(RuntimeError, match="boom"):
        generate_file(PromptEcho(), prompts, out, GenerateParams(), None)
    assert temp_files(out.parent) == [] and out.read_bytes() == OLD


def test_a_lone_surrogate_is_written_as_valid_json(tmp_path):
    # An input line holding one is refused (tests/cli/test_user_errors.py); an answer may hold one.
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "xy"}\n')
    out = tmp_path / "gen.jsonl"
    generate_file(CannedGenerator(["x\udc80y"]), prompts, out, GenerateParams(), None)
    assert json.loads(out.read_text(encoding="utf-8"))["text"] == "x\udc80y"
    assert temp_files(tmp_path) == []


def test_a_nan_logprob_is_written_as_null(tmp_path):
    """A completions server may give a token no logprob (read as NaN): the line held a bare
    ``NaN``, which strict JSON readers refuse."""
    from biasscope.backends.base import Generation, TokenLogprob

    class NoLogprob:
        label = "nolog"

        def identity(self) -> dict[str, str]:
            return {"backend": "nolog"}

        def generate(self, requests):
            return [Generation("x", tokens=(TokenLogprob("x", float("nan"), ()),))
                    for _ in requests]

    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "xy"}\n')
    out = tmp_path / "gen.jsonl"
    generate_file(NoLogprob(), prompts, out, GenerateParams(), None)

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")
    line = json.loads(out.read_text(encoding="utf-8"), parse_constant=refuse)
    assert line["logprobs"][0]["logprob"] is None


@pytest.mark.parametrize("command", ["generate", "items"])
def test_cli_write_failures_are_one_line_and_leave_no_temp_file(command, tmp_path, capsys,
                                                               monkeypatch):
    prompts, out = setup(tmp_path)
    old = OLD if command == "generate" else ITEMS  # what each may replace
    out.write_bytes(old)
    args = {"generate": ["generate", "--model", "openai-compatible:http://127.0.0.1:9/v1#m",
                         "--input", str(prompts), "--no-cache"],
            "items": ["items", "--probe", "professional-bias"]}[command]
    if command == "generate":  # answer without a server: the write is what fails here
        monkeypatch.setattr("biasscope.backends.config.BackendConfig.generator",
                            lambda self, spec, **_: PromptEcho())
    real = os.fsync
    monkeypatch.setattr(store_mod.os, "fsync", full_disk)
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left on device" in err, err
    assert temp_files(out.parent) == [] and out.read_bytes() == old
    monkeypatch.setattr(store_mod.os, "fsync", real)
    # A directory where the file should go: one line too, and nothing left behind.
    assert main([*args, "--out", str(out.parent)]) == 2
    err = capsys.readouterr().err.strip()
    said = "is a directory: give the JSONL file"  # before any request is sent
    assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err
    assert temp_files(out.parent) == [] and temp_files(tmp_path) == []
