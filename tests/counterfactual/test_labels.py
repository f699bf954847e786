"""``counterfactual --labels FILE`` (and ``--position``): a label set other than the run's
judges answered, or a position other than they were asked with, is refused before any judge or
reward model is made, in one line naming the flag, its file and what changed. Before:
"RUN/run.json was made with different settings of scorer 'J' (labels.B: …); use another --out
or the same settings", once the judges were made, and a judge new to the run took any."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.config import BackendConfig
from biasscope.cli.main import main
from biasscope.counterfactual import job
from biasscope.judge import labels_sha256
from no_loads import no_loads, refused

LABELS = {"A": "safe", "B": "harmful"}


@pytest.fixture
def given(tmp_path: Path) -> dict[str, Path]:
    pairs, labels = tmp_path / "pairs.jsonl", tmp_path / "labels.json"
    pairs.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"My wife, case {i}?",
                                         "chosen": "Ask her.", "rejected": "No."}) + "\n"
                             for i in range(3)))
    labels.write_text(json.dumps(LABELS))
    return {"pairs": pairs, "labels": labels, "out": tmp_path / "run"}


def argv(given: dict[str, Path], *judges: str, labels: bool = True,
         out: Path | None = None) -> list[str]:
    return ["counterfactual", "--pairs", str(given["pairs"]), "--no-cache", "--out",
            str(out or given["out"]), *[a for j in judges for a in ("--judge-model", j)],
            *(["--labels", str(given["labels"])] if labels else [])]


def files(out: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def nothing_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No judge made (a server's or canned one is made before any loads), no reward model."""
    loads: list[str] = []

    def made(self: Any, specs: Any, flag: str = "--model") -> Any:
        loads.extend(specs)
        raise AssertionError(f"a judge was made: {specs}")

    monkeypatch.setattr(BackendConfig, "generators", made)
    no_loads(monkeypatch, job, loads)
    return loads


def test_another_label_set_is_refused_before_a_judge_is_made(
        given: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out, path = given["out"], given["labels"]
    assert main(argv(given, "J=canned:A")) == 0
    capsys.readouterr()
    before, loads = files(out), nothing_made(monkeypatch)
    path.write_text(json.dumps({"A": "safe", "C": "harmful"}))
    refused(argv(given, "J=canned:A"), f"{out} was made from another --labels ({path}: labels "
            "A, B then, A, C now): put back the file it was made from, or use another --out "
            "for this one", loads, capsys)
    path.write_text(json.dumps({"B": "harmful", "A": "safe"}))  # the first is the verdict
    refused(argv(given, "J=canned:A"), "labels A, B then, B, A now)", loads, capsys)
    changed = {"A": "safe", "B": "very harmful"}
    path.write_text(json.dumps(changed))
    refused(argv(given, "J=canned:A"), f"{out} was made from another --labels ({path}: SHA-256 "
            f"of its label set {labels_sha256(LABELS)[:12]}… then, "
            f"{labels_sha256(changed)[:12]}… now): put back the file it was made from, or use "
            "another --out for this one", loads, capsys)
    # a judge new to the run is given the run's label set too: they answer one question
    refused(argv(given, "K=canned:B"), "another --labels (", loads, capsys)
    assert files(out) == before


def test_a_label_set_given_or_dropped_is_said(
        given: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = given["out"]
    assert main(argv(given, "J=canned:A")) == 0
    paired = given["out"].parent / "paired"
    assert main(argv(given, "J=canned:a", labels=False, out=paired)) == 0
    capsys.readouterr()
    before, loads = files(out.parent), nothing_made(monkeypatch)
    refused(argv(given, "J=canned:A", labels=False), f"{out} was judged with --labels (labels "
            "A, B): give that file again, or use another --out for this one", loads, capsys)
    refused(argv(given, "J=canned:a", out=paired),
            f"{paired} was judged pairwise, without --labels: drop --labels {given['labels']}, "
            "or use another --out for this one", loads, capsys)
    assert files(out.parent) == before


def test_the_same_label_set_reruns_and_reward_models_alone_keep_the_judges(
        given: dict[str, Path]) -> None:
    from fakes import Reward

    out, path = given["out"], given["labels"]
    assert main(argv(given, "J=canned:A")) == 0
    path.write_text(json.dumps(LABELS, indent=4))  # written otherwise: the same label set
    assert main(argv(given, "J=canned:A")) == 0
    job.run(job.CounterfactualConfig(out=out, pairs=str(given["pairs"])), [Reward("clean")])
    scorers = json.loads((out / "run.json").read_text())["settings"]["scorers"]
    assert scorers["J"]["labels"] == LABELS and "clean" in scorers


def test_a_run_whose_judges_answered_several_label_sets_is_compared_per_judge() -> None:
    """Made so before the run's judges were held to one label set: each judge named in the
    call is compared with its own; a judge new to such a run is not refused here."""
    from biasscope.core.errors import BiasscopeError
    from biasscope.counterfactual.judged import _refuse_other

    other = {"X": "yes", "Y": "no"}
    scorers = {"J": {"labels": LABELS, "question_sha256": "1"},
               "K": {"labels": other, "question_sha256": "2"}, "rm": {"backend": "hf-reward"}}
    _refuse_other("RUN", scorers, ["J"], "f.json", LABELS)
    _refuse_other("RUN", scorers, ["K", None], "f.json", other)
    _refuse_other("RUN", scorers, ["new"], "f.json", {"P": "p", "Q": "q"})
    with pytest.raises(BiasscopeError, match=r"^RUN was made from another --labels \(f.json: "
                       r"labels X, Y then, A, B now\)"):
        _refuse_other("RUN", scorers, ["J", "K"], "f.json", LABELS)


def test_another_position_is_refused_before_a_judge_is_made(
        given: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the run's judge under another --position was refused in the settings line, and
    a judge new to the run was taken under any: its scores could then never be summarised
    with the others' (a call gives one --position to every judge)."""
    out = given["out"]
    assert main(argv(given, "J=canned:A")) == 0
    capsys.readouterr()
    before, loads = files(out), nothing_made(monkeypatch)
    said = (f"{out} was judged with --position shuffle (permute now): give --position shuffle, "
            "or use another --out for this one")
    refused([*argv(given, "J=canned:A"), "--position", "permute"], said, loads, capsys)
    refused([*argv(given, "K=canned:B"), "--position", "permute"], said, loads, capsys)
    refused([*argv(given, "K=canned:B"), "--position", "consensus"],
            "--position shuffle (consensus now)", loads, capsys)
    assert files(out) == before


def test_the_same_position_reruns_and_a_run_of_several_is_compared_per_judge(
        given: dict[str, Path]) -> None:
    from biasscope.core.errors import BiasscopeError
    from biasscope.counterfactual.judged import _refuse_other_position

    assert main([*argv(given, "J=canned:A"), "--position", "fixed"]) == 0
    assert main([*argv(given, "K=canned:B"), "--position", "fixed"]) == 0
    scorers = json.loads((given["out"] / "run.json").read_text())["settings"]["scorers"]
    assert {n: e["position"] for n, e in scorers.items()} == {"J": "fixed", "K": "fixed"}
    several = {"J": {"position": "fixed", "question_sha256": "1"},
               "K": {"position": "permute", "question_sha256": "2"},
               "rm": {"backend": "hf-reward"}}  # made so before this check
    _refuse_other_position("RUN", several, ["K", None], "permute")
    _refuse_other_position("RUN", several, ["new"], "consensus")
    with pytest.raises(BiasscopeError, match=r"^RUN was judged with --position fixed "
                       r"\(permute now\)"):
        _refuse_other_position("RUN", several, ["J", "K"], "permute")
