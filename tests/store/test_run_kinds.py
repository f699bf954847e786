"""One run type: ``run.json`` is written in one place (``store.run_json.start_run``), every run
records its kind first, ``jobs.JOBS`` renders each kind, and runs from before kinds still read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.jobs import JOBS, render
from biasscope.store.directory import RunStore
from biasscope.store.run_json import kind_of, recorded_kind, start_run

OLD_RUNS = Path(__file__).parents[1] / "fixtures" / "old_runs" / "runs"


def _audit(root: Path, _checkpoints: list[Path], _data: Path) -> None:
    from biasscope.audit import job

    items = root.parent / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--limit", "4", "--out",
                 str(items)]) == 0
    responses = root.parent / "responses.jsonl"
    responses.write_text("".join(json.dumps({"item_id": json.loads(line)["item_id"],
                                             "response": "The nurse."}) + "\n"
                                 for line in items.read_text().splitlines()))
    job.run(job.AuditConfig(out=root, probes=["professional-bias"], responses=str(responses),
                            limit=4))


def _dynamics(root: Path, checkpoints: list[Path], data: Path) -> None:
    from biasscope.dynamics import job

    job.run(job.DynamicsConfig(out=root, checkpoint_globs=[str(checkpoints[0])],
                               data_dir=str(data), seeds=(0,), limit=4, quiet=True))


def _counterfactual(root: Path, _checkpoints: list[Path], _data: Path) -> None:
    from biasscope.counterfactual import job
    from fakes import Reward

    pairs = root.parent / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({
        "id": f"p{i}", "prompt": "Rate this applicant.", "response": f"Jamal is fit {i}.",
        "counterfactual": {"prompt": "Rate this applicant.", "response": f"Greg is fit {i}."},
        "group": "female"}) + "\n" for i in range(6)))
    job.run(job.CounterfactualConfig(out=root, pairs=str(pairs)), [Reward("clean")])


def _judged(kind: str) -> Callable[[Path, list[Path], Path], None]:
    """The judge's writer as its job calls it (the judge itself needs a served model:
    tests/judge/test_judge.py runs it)."""
    def write(root: Path, _checkpoints: list[Path], _data: Path) -> None:
        from biasscope.judge.batch import write_run

        write_run(root, kind, ["judge-a"], {"judges": {"judge-a": "spec"}},
                  {"headline": {}, "sentences": []})
    return write


# Sensitivity and intervention runs need a reward model or training: their own tests
# (test_sensitivity_run.py, test_intervene.py) check the kind they record.
WRITERS = {"audit": _audit, "dynamics": _dynamics, "counterfactual": _counterfactual,
           "judge": _judged("judge"), "judge-audit": _judged("judge-audit")}


def test_every_kind_has_a_job_and_a_renderer() -> None:
    assert set(WRITERS) | {"sensitivity", "intervention"} == set(JOBS)


@pytest.mark.parametrize("kind", list(WRITERS))
def test_each_job_records_its_kind_and_its_renderer_shows_it(
        kind: str, tmp_path: Path, checkpoint_dirs: list[Path], winobias_dir: Path) -> None:
    root = tmp_path / "run"
    WRITERS[kind](root, checkpoint_dirs, winobias_dir)
    written = json.loads((root / "run.json").read_text())
    assert next(iter(written)) == "kind" and written["kind"] == kind
    page, published = render(root, tmp_path / "again.html")
    assert page == tmp_path / "again.html" and page.is_file() and published is None


@pytest.mark.parametrize("kind", ["audit", "judge", "judge-audit", "sensitivity",
                                  "counterfactual"])
def test_a_run_stopped_before_its_summary_names_the_command_that_finishes_it(
        kind: str, tmp_path: Path) -> None:
    """An audit of Gemma 3 270M stopped by Ctrl-C after its first probe: `biasscope report`
    said "run `biasscope audit` first", and the same of a judge's or judge-audit's run."""
    root = tmp_path / "run"
    start_run(RunStore(root), kind, lambda _: {"model": "m"})
    with pytest.raises(BiasscopeError, match=rf"has no summary.json yet .*: run `biasscope "
                                             rf"{kind} --out {root}` again with the run's other "
                                             "flags to finish it; what it stored is kept$"):
        render(root)
    assert not (root / "report.html").exists()


@pytest.mark.parametrize(("run", "kind"), [("dynamics", "dynamics"), ("responses", "audit"),
                                           ("sensitivity", "sensitivity")])
def test_old_runs_read_with_their_kind(run: str, kind: str) -> None:
    """The dynamics fixture is from before dynamics runs recorded a kind."""
    store = RunStore(OLD_RUNS / run)
    assert recorded_kind(store) == kind
    assert ("kind" in store.read_json("run.json")) == (kind != "dynamics")


def test_an_old_intervention_run_is_known_by_its_settings() -> None:
    old = {"schema": "biasscope.run/1", "settings": {"intervention": {"name": "cda"}}}
    assert kind_of(old) == "intervention"
    assert kind_of({**old, "kind": "dynamics"}) == "dynamics"  # what a run records wins


def test_an_old_run_extended_gains_its_kind_and_keeps_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(OLD_RUNS / "dynamics", root)
    before = json.loads((root / "run.json").read_text())
    written = start_run(RunStore(root), "dynamics", lambda previous: dict(previous or {}))
    assert written == {"kind": "dynamics", **before}
    assert json.loads((root / "run.json").read_text()) == written


def test_a_run_of_another_kind_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = tmp_path / "run"
    start_run(RunStore(root), "audit", lambda _: {"model": "m"})
    before = (root / "run.json").read_bytes()
    built = []
    with pytest.raises(BiasscopeError, match=r"run.json is not a counterfactual run \(audit\); "
                                             "use another --out"):
        start_run(RunStore(root), "counterfactual", lambda p: built.append(p) or {})
    assert (root / "run.json").read_bytes() == before and not built


def test_a_sweep_into_an_intervention_run_keeps_its_kind(tmp_path: Path) -> None:
    root = tmp_path / "run"
    start_run(RunStore(root), "intervention", lambda _: {"settings": {"intervention": {}}})
    written = start_run(RunStore(root), "dynamics", lambda p: {**(p or {}), "seeds": [0]},
                        joins=("intervention",))
    assert written["kind"] == "intervention" and written["seeds"] == [0]
    with pytest.raises(BiasscopeError, match=r"not a dynamics run \(intervention\)"):
        start_run(RunStore(root), "dynamics", lambda p: p or {})


def test_an_unknown_kind_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "run.json").write_text(json.dumps({"kind": "future"}))
    with pytest.raises(BiasscopeError, match="kind 'future', which this biasscope does not"):
        render(root)


def test_one_writer_of_run_json() -> None:
    """Five jobs wrote their own run.json; now every job asks ``start_run``."""
    import re

    package = Path(__file__).resolve().parents[2] / "src" / "biasscope"
    writers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if re.search(r"write_json\([^,]*(run_json|\"run\.json\")", p.read_text()))
    assert writers == ["store/run_json.py"]
