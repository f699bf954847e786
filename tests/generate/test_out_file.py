"""``generate --out FILE`` never loses the answers FILE holds: the same call again rewrites it,
a call with another model or other settings is refused in one line naming what differs, and a
call that stops part way leaves FILE as it was."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from biasscope.backends.base import GenerateParams, GenerateRequest, Generation
from biasscope.backends.config import BackendConfig
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.core.processes import HOST
from biasscope.generate.batch import generate_file
from biasscope.store.settings import sha256_json
from fakes import PromptEcho


def _call(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, *extra: str
          ) -> tuple[int, str]:
    prompts = tmp_path / "in.jsonl"
    if not prompts.exists():
        prompts.write_text('{"id": "a", "prompt": "Is it?", "options": ["yes", "no"]}\n'
                           '{"id": "b", "prompt": "Is it not?"}\n')
    code = main(["generate", "--model", model, "--input", str(prompts), "--out",
                 str(tmp_path / "out.jsonl"), "--no-cache", *extra])
    return code, capsys.readouterr().err


def _refused(code: int, err: str) -> str:
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_the_same_call_again_rewrites_its_file(tmp_path, capsys):
    assert _call(tmp_path, capsys, "canned:yes")[0] == 0
    assert _call(tmp_path, capsys, "canned:yes")[0] == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["model"] for r in rows] == [{"backend": "canned", "model": "yes"}] * 2
    assert rows[0]["params"]["temperature"] == 0.0 and rows[0]["answer"] == "yes"


@pytest.mark.parametrize(("second", "said"), [
    (["canned:no"], 'model.model: "yes" then, "no" now'),
    (["canned:yes", "--temperature", "0.7"], "params.temperature: 0.0 then, 0.7 now"),
    (["canned:yes", "--stop", "\n"], 'params.stop: [] then, ["\\n"] now')])
def test_another_model_or_other_settings_never_replace_the_answers(second, said, tmp_path,
                                                                   capsys):
    """A second call with another model wrote its answers over the first model's without a
    word: only the response cache still held them."""
    assert _call(tmp_path, capsys, "canned:yes")[0] == 0
    before = (tmp_path / "out.jsonl").read_bytes()
    err = _refused(*_call(tmp_path, capsys, *second))
    assert f"--out {tmp_path / 'out.jsonl'} was made with a different" in err and said in err
    assert "use another --out" in err and "or delete it" in err
    assert (tmp_path / "out.jsonl").read_bytes() == before


@pytest.mark.parametrize("edit", [
    lambda text: text.replace("Is it not?", "Is it so?"),  # a prompt fixed
    lambda text: text.replace('"yes", "no"', '"no", "yes"'),  # options in another order
    lambda text: text.replace('"id": "b"', '"id": "c"')])  # another id
def test_answers_to_other_requests_are_never_replaced(edit, tmp_path, capsys, monkeypatch):
    """Another --input (or the same file edited) wrote its answers over the first file's with
    the same model: ids do not tell two files apart (line numbers repeat), the requests do.
    The requests need no model, so they are checked before one is made (a local model loaded
    first, for minutes), and refused as an audit refuses another data file, naming it."""
    assert _call(tmp_path, capsys, "canned:yes")[0] == 0
    before = (tmp_path / "out.jsonl").read_bytes()
    recorded = json.loads(before.splitlines()[0])["input"]["sha256"]
    prompts = tmp_path / "in.jsonl"
    prompts.write_text(edit(prompts.read_text()))
    made: list[str] = []

    def generator(self: BackendConfig, spec: str, flag: str = "--model") -> None:
        made.append(spec)
        raise BiasscopeError(f"a model ({spec}) was made")

    monkeypatch.setattr(BackendConfig, "generator", generator)
    err = _refused(*_call(tmp_path, capsys, "canned:yes"))
    assert made == []
    assert (f"--out {tmp_path / 'out.jsonl'} was made from another --input ({prompts}: "
            f"SHA-256 of its requests {recorded[:12]}… then, ") in err
    assert "or use another --out" in err
    assert (tmp_path / "out.jsonl").read_bytes() == before


def test_the_library_call_names_the_other_input(tmp_path):
    """`generate_file` (the library's call, with its generator made) says the same line."""
    prompts, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Is it?"}\n')
    generate_file(PromptEcho(), prompts, out, GenerateParams(), None)
    prompts.write_text('{"id": "a", "prompt": "Is it so?"}\n')
    with pytest.raises(BiasscopeError, match=r"was made from another --input \("):
        generate_file(PromptEcho(), prompts, out, GenerateParams(), None)


@pytest.mark.parametrize(("content", "said", "delete"), [
    (b'{"id": "a", "text": "yes", "finish_reason": "stop"}\n', "older biasscope", True),
    (b"earlier notes, not answers\n", "is not an answers file of biasscope generate (line 1)",
     False),
    (b'{"id": "a", "prompt": "Is it?"}\n', "is not an answers file", False),
    (b"\xff\xfe\x00binary", "is not an answers file of biasscope generate (not UTF-8", False)])
def test_a_file_that_records_no_model_is_refused(content, said, delete, tmp_path, capsys):
    """An answers file of an older biasscope cannot show which model made it; any other file is
    no answers file at all (and deleting it is not offered)."""
    out = tmp_path / "out.jsonl"
    out.write_bytes(content)
    before = content
    err = _refused(*_call(tmp_path, capsys, "canned:yes"))
    assert said in err and ("delete it" in err) == delete, err
    assert out.read_bytes() == before


def test_an_empty_file_holds_nothing_to_lose(tmp_path, capsys):
    (tmp_path / "out.jsonl").write_text("")
    assert _call(tmp_path, capsys, "canned:yes")[0] == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


class Stopping:
    """Answers the first chunk, then is stopped (Ctrl-C) or has the file written by another
    call (``then``) while it answers the second."""

    label = "echo"

    def __init__(self, then: object) -> None:
        self.then, self.calls = then, 0

    def identity(self) -> dict[str, str]:
        return {"backend": "echo"}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        self.calls += 1
        if self.calls == 2:
            if isinstance(self.then, BaseException):
                raise self.then
            assert callable(self.then)
            self.then()
        return [Generation(r.prompt or "") for r in requests]


def _prompts(tmp_path: Path) -> Path:
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"p{i}"}) + "\n"
                               for i in range(4)))
    return prompts


def test_a_stopped_call_leaves_the_earlier_answers_whole(tmp_path):
    prompts, out = _prompts(tmp_path), tmp_path / "out.jsonl"
    generate_file(PromptEcho(), prompts, out, GenerateParams(), None)
    before = out.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        generate_file(Stopping(KeyboardInterrupt()), prompts, out, GenerateParams(), None,
                      chunk=2)
    assert out.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["in.jsonl",
                                                                           "out.jsonl"]


def test_answers_another_call_wrote_meanwhile_are_kept(tmp_path):
    """Checked before the first request and again before the write: a call with another
    model that wrote the file while this one ran keeps its answers."""
    prompts, out = _prompts(tmp_path), tmp_path / "out.jsonl"

    def other() -> None:
        generate_file(PromptEcho(), prompts, out, GenerateParams(temperature=1.0), None)

    with pytest.raises(BiasscopeError, match=r"params\.temperature: 1\.0 then, 0\.0 now"):
        generate_file(Stopping(other), prompts, out, GenerateParams(), None, chunk=2)
    assert {json.loads(line)["params"]["temperature"] for line in out.read_text().splitlines()
            } == {1.0}


def test_a_killed_writers_temp_file_is_removed(tmp_path):
    """SIGKILLed while writing, a call left its temp file beside --out for good."""
    prompts, out = _prompts(tmp_path), tmp_path / "out.jsonl"
    dead = tmp_path / f".out.jsonl.{HOST}~{2**22 + 7}.abc123.tmp"  # above any pid_max
    dead.write_text('{"id": 0, "te')
    generate_file(PromptEcho(), prompts, out, GenerateParams(), None)
    assert not dead.exists() and len(out.read_text().splitlines()) == 4


def test_a_file_of_failed_requests_only_holds_nothing_to_lose(tmp_path, capsys):
    """Every request failed (a server that was down): a call with another model or URL may
    write its answers there; beside one answer, a failure changes nothing."""
    made = {"model": {"backend": "canned", "model": "yes"}, "params": {"temperature": 0.0},
            "input": {"sha256": sha256_json([["a", "Is it?", None, ["yes", "no"]],
                                             ["b", "Is it not?", None, None]])}}
    failed = {"id": "a", "text": "", "finish_reason": None, "error": "HTTP 500", **made}
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps(failed) + "\n" + json.dumps({**failed, "id": "b"}) + "\n")
    assert _call(tmp_path, capsys, "canned:no")[0] == 0
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["no", "no"]
    out.write_text(json.dumps(failed) + "\n" + json.dumps({**failed, "error": None}) + "\n")
    assert "was made with a different 'model'" in _refused(*_call(tmp_path, capsys, "canned:no"))


def test_a_gguf_files_answers_are_its_own_wherever_it_was_converted(tmp_path, capsys,
                                                                     monkeypatch):
    """Answers of a GGUF file recorded the cache folder it was converted into as the model's
    source: the same file with another $BIASSCOPE_GGUF_CACHE was refused as another model.
    They name the file; answers recorded by the cache folder are the same SHA-256's file's."""
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    from biasscope.backends.gguf import file_sha256
    from gguf_fixture import write_llama_gguf

    model = write_llama_gguf(tmp_path / "a.gguf")
    spec = f"hf:{model}"
    out = tmp_path / "out.jsonl"
    for cache in ("here", "there"):
        monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / cache))
        code, err = _call(tmp_path, capsys, spec, "--max-tokens", "2")
        assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["model"]["source"] for r in rows} == {str(model.resolve())}
    old = str(tmp_path / "here" / file_sha256(model))  # as an older biasscope recorded it
    out.write_text("".join(json.dumps({**r, "model": {**r["model"], "source": old}}) + "\n"
                           for r in rows))
    code, err = _call(tmp_path, capsys, spec, "--max-tokens", "2")
    assert code == 0, err
    write_llama_gguf(model, seed=1)  # other weights under its name: another model
    code, err = _call(tmp_path, capsys, spec, "--max-tokens", "2")  # after its conversion
    assert code == 2 and "different 'model' (model.gguf_sha256: " in err.splitlines()[-1]
