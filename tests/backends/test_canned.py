"""The ``canned`` backend: fixed answers in turn, reachable from every command's ``--model``, so
a run end to end needs no model, no server and no fake of a test's own."""

from __future__ import annotations

import json
from pathlib import Path

from biasscope.backends.base import GenerateRequest
from biasscope.backends.generators import load_generator
from biasscope.cli.main import main
from biasscope.store.directory import RunStore


def test_an_audit_on_canned_answers_is_a_run_with_a_report(tmp_path: Path) -> None:
    assert main(["audit", "--probe", "professional-bias", "--model", "canned:A|B", "--limit",
                 "8", "--out", str(tmp_path / "run")]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["kind"] == "audit" and run["responder"]["backend"] == {"backend": "canned",
                                                                      "model": "A|B"}
    assert list(RunStore(tmp_path / "run").records()["response"]) == ["A", "B"] * 4
    assert "professional-bias" in (tmp_path / "run" / "report.html").read_text()


def test_canned_answers_come_in_turn_across_calls() -> None:
    generator = load_generator("canned:yes|no|maybe")
    asked = [GenerateRequest(id=str(i), prompt="Q?") for i in range(2)]
    texts = [g.text for _ in range(2) for g in generator.generate(asked)]
    assert texts == ["yes", "no", "maybe", "yes"]
    assert generator.label == "canned:yes|no|maybe"
    assert {g.text for g in load_generator("canned:female").generate(asked)} == {"female"}
