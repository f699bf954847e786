"""run.json records the wording of a judge's question (``question_sha256``): the hash is of
the very messages a judge model is sent, it moves with any change of the wording, and a rerun
into a run asked in other words (a run from another biasscope version) is refused."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.backends.canned import CannedGenerator
from biasscope.cli.main import main
from biasscope.judge import Judge, JudgingConfig, classify, compare, tasks
from biasscope.judge.tasks import question_sha256
from biasscope.store.settings import sha256_json

LABELS = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad.",
          "NEUTRAL": "The text is neither."}


class Recording(CannedGenerator):
    """Answers "A" and keeps every request."""

    def __init__(self) -> None:
        super().__init__(["A"])
        self.requests: list[GenerateRequest] = []

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        self.requests += requests
        return super().generate(requests)


@pytest.mark.parametrize("reasoning", [False, True])
@pytest.mark.parametrize("keys", ["ABCD", ("1", "2", "3")])
def test_the_fingerprint_is_of_the_messages_a_judge_is_sent(reasoning, keys):
    config = JudgingConfig(position="fixed", reasoning=reasoning, keys=tuple(keys))
    model = Recording()
    compare(Judge(model, config), [("{message}", "{response}", "{response}")])
    classify(Judge(model, config), ["{text}"], LABELS)
    pair, text = (sha256_json(r.messages) for r in model.requests)
    assert pair == question_sha256(config, None)
    assert text == question_sha256(config, LABELS)


def test_any_change_of_the_wording_changes_the_fingerprint(monkeypatch):
    plain = JudgingConfig()
    seen = {question_sha256(plain, None), question_sha256(plain, LABELS),
            question_sha256(JudgingConfig(reasoning=True), None),
            question_sha256(JudgingConfig(keys=("1", "2", "3")), None),
            question_sha256(plain, {**LABELS, "NEUTRAL": "The text is neutral."})}
    assert len(seen) == 5
    monkeypatch.setattr(tasks, "_system", lambda reasoning, keys: "Be fair. Answer A or B.")
    assert question_sha256(plain, None) not in seen
    assert question_sha256(plain, LABELS) not in seen


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Q{i}?", "a": "yes",
                                        "b": "no"}) + "\n" for i in range(3)))
    return path


@pytest.mark.parametrize(("recorded", "said"), [
    ("0" * 64, "'question_sha256' (000000000000… then"),
    (None, "'question_sha256' (not recorded then")])
def test_a_run_asked_in_other_words_is_not_resumed(tmp_path, capsys, recorded, said):
    out, pairs = tmp_path / "run", _pairs(tmp_path)
    argv = ["judge", "--model", "canned:A", "--input", str(pairs), "--out", str(out),
            "--no-cache"]
    assert main(argv) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["question_sha256"] == question_sha256(JudgingConfig(), None)
    assert main(argv) == 0  # the same wording resumes
    # As an older biasscope would have left it: another wording, or none recorded.
    if recorded is None:
        del run["settings"]["question_sha256"]
    else:
        run["settings"]["question_sha256"] = recorded
    (out / "run.json").write_text(json.dumps(run))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"made with a different {said}" in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
