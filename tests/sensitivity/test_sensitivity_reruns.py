"""A sensitivity rerun that stops before it stores anything new leaves the run as it found it:
run.json lists no reward model or direction the run holds nothing of. Fast: the scripted
perturber and arithmetic reward models of test_sensitivity_run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.core.errors import ModelError
from biasscope.store.directory import RunStore
from fakes import Length, Reviser
from test_sensitivity_run import run


class Unloadable(Length):
    """A reward model whose weights do not load when it first scores (or whose scoring is
    interrupted): ``stop`` is raised."""

    def __init__(self, label: str, stop: BaseException) -> None:
        super().__init__(label)
        self.stop = stop

    def score(self, conversations: Any) -> list[float]:
        raise self.stop


class Refusing(Reviser):
    """A perturber whose server answers 400 to every request."""

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        return [Generation("", error="HTTP 400: bad request") for _ in requests]


def _files(out: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


STOPS = [ModelError("len2: cannot load its weights"), KeyboardInterrupt()]


@pytest.mark.parametrize("stop", STOPS)
def test_a_rerun_that_stores_nothing_leaves_the_run_as_it_found_it(
        tmp_path: Path, stop: BaseException) -> None:
    """A rerun adding a reward model (or a direction) that stopped before it stored anything
    kept the run.json it had rewritten: it listed a model, and a direction, the run held no
    records of, so every later summary called the run incomplete. run.json, and a file of the
    new direction's failed perturbations, are put back byte for byte."""
    out = tmp_path / "run"
    run(out)
    files = _files(out)
    with pytest.raises(type(stop)):
        run(out, models=[Length(), Unloadable("len2", stop)])
    assert _files(out) == files
    with pytest.raises(type(stop)):  # a new direction whose every request failed
        run(out, perturber=Refusing(), directions=("away",),
            models=[Length(), Unloadable("len2", stop)])
    assert _files(out) == files


def test_a_refused_rerun_leaves_a_killed_call_s_temporary_files(tmp_path: Path) -> None:
    """A rerun refused for another setting or reward model changes nothing in --out, not even
    the temporary files a killed call left (as intervene and dynamics now wait to remove
    theirs until a call has passed every check)."""
    import subprocess
    import sys

    from biasscope.core.errors import BiasscopeError
    from biasscope.core.processes import HOST

    out = tmp_path / "run"
    run(out)
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    for where in (out / "records", out / "checksums", out):
        (where / f".x.parquet.{HOST}~{dead.pid}.ab12.tmp").write_bytes(b"half a file")
    files = _files(out)
    for change, said in (({"seed": 3}, "perturber.seed"),
                         ({"models": [Length(scale=2.0)]}, "reward model 'len'")):
        with pytest.raises(BiasscopeError, match=said):
            run(out, **change)
        assert _files(out) == files


@pytest.mark.parametrize("stop", STOPS)
def test_a_rerun_that_stores_something_keeps_its_run_json(
        tmp_path: Path, stop: BaseException) -> None:
    """A unit, or an answered perturbation (recorded under its direction's template), is
    something stored: run.json stays as the call rewrote it."""
    out = tmp_path / "run"
    run(out)
    before = (out / "run.json").read_bytes()
    with pytest.raises(type(stop)):  # len2's unit is stored before len3 stops
        run(out, models=[Length(), Length("len2", 2.0), Unloadable("len3", stop)])
    assert (out / "run.json").read_bytes() != before
    assert set(RunStore(out).records()["model"]) == {"len", "len2"}
    assert list(json.loads((out / "run.json").read_text())["settings"]["reward_models"]) == [
        "len", "len2", "len3"]
    run(tmp_path / "other")
    with pytest.raises(type(stop)):  # away's answers are stored before len2 stops
        run(tmp_path / "other", directions=("away",),
            models=[Unloadable("len2", stop), Length()])
    recorded = json.loads((tmp_path / "other" / "run.json").read_text())
    assert list(recorded["directions"]) == ["toward", "away"]
    assert (tmp_path / "other" / "perturbations-away.jsonl").is_file()
