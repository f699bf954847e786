"""A run from a file of the user's pairs (``--pairs OWN.jsonl``) records the file's whole
SHA-256 as the hh-rlhf split's is, and a rerun from another file, or the file edited, is
refused in the audit's line, naming it; a run recorded before that resumes and gains it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from biasscope.cli.main import main


def _pairs(path: Path, prompts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p, "chosen": "Ask her.",
                                        "rejected": "No."}) + "\n"
                            for i, p in enumerate(prompts)))
    return path


PROMPTS = [f"My wife, case {i}?" for i in range(3)]


def _argv(pairs: Path, out: Path) -> list[str]:
    return ["counterfactual", "--pairs", str(pairs), "--no-cache", "--out", str(out),
            "--judge-model", "canned:A"]


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def _refused(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and said in err, err


def test_an_edited_file_of_pairs_is_refused_naming_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """Before: "… was made with a different 'pairs' (pairs.sha256: …)", naming no file."""
    pairs, out = _pairs(tmp_path / "pairs.jsonl", PROMPTS), tmp_path / "run"
    assert main(_argv(pairs, out)) == 0
    recorded = json.loads((out / "run.json").read_text())["settings"]["pairs"]
    sha = hashlib.sha256(pairs.read_bytes()).hexdigest()
    assert recorded["source"] == "jsonl" and recorded["file_sha256"] == sha
    before = _files(out)
    _pairs(pairs, [*PROMPTS[:2], "My wife, case seven?"])
    _refused(_argv(pairs, out), f"{out} was made from another --pairs ({pairs}: SHA-256 "
             f"{sha[:12]}… then, ", capsys)
    other = _pairs(tmp_path / "other.jsonl", PROMPTS[:2])
    _refused(_argv(other, out), f"from another --pairs ({other}: SHA-256 {sha[:12]}…", capsys)
    assert _files(out) == before
    assert main(_argv(_pairs(tmp_path / "copy.jsonl", PROMPTS), out)) == 0  # the same bytes


def test_a_run_that_recorded_no_file_resumes_and_gains_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run made before the file was recorded (``file_sha256`` ""): the same pairs resume
    and record it; other pairs are refused naming the file, by the pairs' SHA-256."""
    pairs, out = _pairs(tmp_path / "pairs.jsonl", PROMPTS), tmp_path / "run"
    assert main(_argv(pairs, out)) == 0
    run = json.loads((out / "run.json").read_text())
    run["settings"]["pairs"]["file_sha256"] = ""
    (out / "run.json").write_text(json.dumps(run))
    _pairs(pairs, [*PROMPTS[:2], "My wife, case seven?"])
    _refused(_argv(pairs, out), f"from another --pairs ({pairs}: SHA-256 of its pairs "
             f"{run['settings']['pairs']['sha256'][:12]}… then, ", capsys)
    _pairs(pairs, PROMPTS)
    assert main(_argv(pairs, out)) == 0
    gained = json.loads((out / "run.json").read_text())["settings"]["pairs"]
    assert gained["file_sha256"] == hashlib.sha256(pairs.read_bytes()).hexdigest()
