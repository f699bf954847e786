"""``biasscope generate``'s input lines: what a careless user writes is refused in one line
naming the file, the line and the field, before any request is sent or the output written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.backends.cache import ResponseCache
from biasscope.cli.main import main


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "fine", "prompt": "ok"}\n' + line + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("earlier answers\n")
    code = main(["generate", "--model", "canned:yes", "--input", str(path), "--out", str(out),
                 "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert out.read_text() == "earlier answers\n"
    return err


@pytest.mark.parametrize("given", [None, True, "", {"a": 1}, [1], 1.5])
def test_an_id_that_is_no_string_or_integer_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], given: object) -> None:
    """``"id": null`` came back as the id "None" (``true`` as "True", an object as its
    Python repr), which matches no line of the input: ids are refused as counterfactual's
    pairs refuse them."""
    line = json.dumps({"id": given, "prompt": "hi"})
    err = _refused(tmp_path, capsys, line)
    assert f"in.jsonl:2: 'id' {json.dumps(given)}: give a non-empty string or an integer" in err


@pytest.mark.parametrize(("options", "said"), [
    (["yes", "yes"], "'yes' given twice"),
    (["Yes", " yes"], "' yes' given twice"),
    (["", "no"], "'' has no text"),
    (["yes", "  "], "'  ' has no text")])
def test_options_that_cannot_be_told_apart_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str],
        said: str) -> None:
    """Answers are matched to options case-blind and without surrounding spaces: an option
    given twice (["Yes", "yes"]) put every logprob on both, so none counted, and an empty one
    could never be the answer; each was read without a word."""
    line = json.dumps({"id": "q", "prompt": "Yes or no?", "options": options})
    err = _refused(tmp_path, capsys, line)
    assert f"in.jsonl:2: 'options': {said}" in err and "distinct" in err


def test_the_output_never_replaces_the_response_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out`` naming the ``--cache`` file replaced the SQLite cache with the answers: every
    answer any run had paid for was lost (as --out naming the --input is refused)."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "prompt": "ok"}\n')
    cache = tmp_path / "cache.sqlite"
    assert main(["generate", "--model", "canned:yes", "--input", str(path), "--out",
                 str(tmp_path / "out.jsonl"), "--cache", str(cache)]) == 0
    capsys.readouterr()
    code = main(["generate", "--model", "canned:yes", "--input", str(path), "--out",
                 str(tmp_path / "." / "cache.sqlite"), "--cache", str(cache)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is the --cache file" in err
    assert len(ResponseCache(cache)) == 1  # the answer paid for is still there


def test_a_line_with_both_a_prompt_and_messages_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'messages' won and the 'prompt' was dropped without a word."""
    line = json.dumps({"id": "q", "prompt": "Hi", "messages": [{"role": "user",
                                                                "content": "Hello"}]})
    err = _refused(tmp_path, capsys, line)
    assert "in.jsonl:2: gives both 'prompt' and 'messages': keep one" in err


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--input", "", "--input is empty: give a JSONL file of {id, prompt} or {id, messages}"),
    ("--input", "nofile.jsonl", "--input nofile.jsonl does not exist: give a JSONL file"),
    ("--input", ".", "--input . is a directory: give a JSONL file"),
    ("--out", "", "--out is empty: give the JSONL file to write")])
def test_an_input_or_out_that_is_no_file_names_its_flag(
        flag: str, value: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--input nofile.jsonl`` said "nofile.jsonl: cannot read (No such file or directory)",
    and ``--input ""`` (an unset ``$VARIABLE``) ".: cannot read (Is a directory)", naming no
    flag; ``--out ""`` said "--out . is a directory"."""
    monkeypatch.chdir(tmp_path)
    Path("in.jsonl").write_text('{"id": "a", "prompt": "ok"}\n')
    argv = {"--input": "in.jsonl", "--out": "out.jsonl", flag: value}
    code = main(["generate", "--model", "canned:yes", "--no-cache",
                 *(part for item in argv.items() for part in item)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and said in err, err
