"""`biasscope drop`: a checkpoint taken out of a dynamics run, its units kept aside."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from biasscope.backends.checkpoints import IN_MEMORY
from biasscope.cli.main import main
from biasscope.store.directory import RunStore

pytest.importorskip("torch")


def sweep_args(checkpoint_dirs: list[Path], data: Path, out: Path) -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", glob, "--data-dir", str(data), "--out", str(out),
            "--seeds", "0-1", "--quiet"]


@pytest.fixture(scope="module")
def swept(checkpoint_dirs, winobias_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("swept") / "run"
    assert main(sweep_args(checkpoint_dirs, winobias_dir, out)) == 0
    return out


@pytest.fixture
def run(swept, tmp_path) -> Path:
    """A copy of the swept run, for one test to change."""
    return Path(shutil.copytree(swept, tmp_path / "run"))


def listed(run: Path) -> list[str]:
    return [f"{c['model']}@{c['revision']}" for c in
            json.loads((run / "run.json").read_text())["checkpoints"]]


def steps_in(run: Path) -> list[int]:
    return sorted({int(s) for s in RunStore(run).records()["step"]})


def untouched(run: Path) -> dict[str, bytes]:
    """Every file of the run, to show a refused call changed nothing."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def test_a_dropped_checkpoint_leaves_the_run_its_summary_and_report(run, capsys):
    units = {p.name for p in RunStore(run).unit_files()}
    before = (run / "summary.json").read_bytes()
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    said = capsys.readouterr()
    (folder,) = (run / "dropped").iterdir()
    assert said.out.startswith(f"dropped train0@checkpoint-20: their units are in {folder}")
    assert listed(run) == ["train0@checkpoint-10", "train0@checkpoint-30"]
    # its two units (seeds 0, 1) and their checksums, laid out as the run is; nothing deleted
    moved = {p.name for p in (folder / "records").iterdir()}
    assert len(moved) == 2 and all("checkpoint-20" in n for n in moved)
    assert {p.name for p in RunStore(run).unit_files()} == units - moved
    assert {p.name for p in (folder / "checksums").iterdir()} == {f"{n}.sha256" for n in moved}
    assert not any((run / "checksums" / f"{n}.sha256").exists() for n in moved)
    assert RunStore(run).missing_units() == []  # not taken for units deleted by hand
    # what the run said before is kept beside them; the run's own files say it no more
    assert (folder / "summary.json").read_bytes() == before
    assert [e["identity"].endswith("checkpoint-20") for e in
            json.loads((folder / "checkpoints.json").read_text())["dropped"]] == [True]
    summary = json.loads((run / "summary.json").read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [10, 30]
    assert "unfinished" not in summary and steps_in(run) == [10, 30]
    assert "checkpoint-20" not in (run / "report.html").read_text()
    assert "checkpoint-20" in (folder / "report.html").read_text()


def test_a_later_sweep_that_lists_it_scores_it_afresh(run, checkpoint_dirs, winobias_dir,
                                                     capsys):
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    (folder,) = (run / "dropped").iterdir()
    assert main(sweep_args(checkpoint_dirs, winobias_dir, run)) == 0
    assert listed(run) == [f"train0@checkpoint-{s}" for s in (10, 30, 20)]
    assert steps_in(run) == [10, 20, 30] and len(RunStore(run).unit_files()) == 6
    assert len(list((folder / "records").iterdir())) == 2  # still kept, never read
    summary = json.loads((run / "summary.json").read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [10, 20, 30]
    # dropped again: a folder of its own
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    assert len(list((run / "dropped").iterdir())) == 2


def test_an_unknown_checkpoint_is_refused_naming_the_runs(run, capsys):
    before = untouched(run)
    assert main(["drop", str(run), "train0@checkpoint-10", "train0@step20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("checkpoint 'train0@step20': " in err and "lists no such checkpoint; give one as "
            "model@revision of those it lists: train0@checkpoint-10, train0@checkpoint-20, "
            "train0@checkpoint-30" in err)
    assert untouched(run) == before and not (run / "dropped").exists()


def test_the_identity_names_a_checkpoint_too(run, checkpoint_dirs):
    identity = str(checkpoint_dirs[0].resolve())
    assert main(["drop", str(run), identity, "train0@checkpoint-10", "--quiet"]) == 0
    assert listed(run) == ["train0@checkpoint-20", "train0@checkpoint-30"]


def test_every_checkpoint_is_refused(run, capsys):
    before = untouched(run)
    names = [f"train0@checkpoint-{s}" for s in (10, 20, 30)]
    assert main(["drop", str(run), *names]) == 2
    err = capsys.readouterr().err
    assert "that is every checkpoint of" in err and "move the run's folder away" in err
    assert untouched(run) == before


def test_the_last_checkpoint_with_records_is_refused(run, capsys):
    data = json.loads((run / "run.json").read_text())
    extra = {**data["checkpoints"][0], "revision": "checkpoint-40", "step": 40,
             "identity": "/nowhere/checkpoint-40"}
    (run / "run.json").write_text(json.dumps({**data, "checkpoints": [
        *data["checkpoints"], extra]}))
    before = untouched(run)
    names = [f"train0@checkpoint-{s}" for s in (10, 20, 30)]
    assert main(["drop", str(run), *names]) == 2
    assert "the other checkpoints have no records yet" in capsys.readouterr().err
    assert untouched(run) == before


def test_a_checkpoint_that_never_scored_is_dropped_and_the_run_is_finished(run, capsys):
    """A broken checkpoint listed before it failed to load: no unit to move, and the run's
    summary no longer calls the run unfinished."""
    data = json.loads((run / "run.json").read_text())
    extra = {**data["checkpoints"][0], "revision": "checkpoint-40", "step": 40,
             "identity": "/nowhere/checkpoint-40"}
    (run / "run.json").write_text(json.dumps({**data, "checkpoints": [
        *data["checkpoints"], extra]}))
    assert main(["report", str(run)]) == 0
    assert "unfinished" in json.loads((run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["drop", str(run), "train0@checkpoint-40", "--quiet"]) == 0
    assert "unfinished" not in json.loads((run / "summary.json").read_text())
    assert listed(run)[-1] == "train0@checkpoint-30" and steps_in(run) == [10, 20, 30]
    (folder,) = (run / "dropped").iterdir()
    assert not any((folder / "records").iterdir())


def test_a_live_step_and_another_kind_of_run_are_refused(run, capsys):
    data = json.loads((run / "run.json").read_text())
    live = {"model": "live", "source": IN_MEMORY, "revision": "step5", "step": 5,
            "identity": f"{IN_MEMORY}live@step5"}
    (run / "run.json").write_text(json.dumps({**data, "checkpoints": [
        *data["checkpoints"], live]}))
    before = untouched(run)
    assert main(["drop", str(run), "live@step5"]) == 2
    assert "a step scored live, from weights in memory" in capsys.readouterr().err
    (run / "run.json").write_text(json.dumps({**data, "kind": "intervention"}))
    before = untouched(run)
    assert main(["drop", str(run), "train0@checkpoint-10"]) == 2
    assert "is a run of kind 'intervention': only a dynamics run" in capsys.readouterr().err
    assert untouched(run) == before


def test_no_run_is_one_line(tmp_path, capsys):
    assert main(["drop", str(tmp_path / "none"), "a@b"]) == 2
    assert "run.json not found" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_a_report_that_fails_leaves_no_summary_of_the_dropped(run, monkeypatch, capsys):
    import biasscope.dynamics.summary.write as reporting
    from biasscope.core.errors import BiasscopeError

    def fails(*args: object, **kwargs: object) -> None:
        raise BiasscopeError("records file X changed after it was written")

    monkeypatch.setattr(reporting, "write_dynamics_report", fails)
    assert main(["drop", str(run), "train0@checkpoint-20"]) == 2
    err = capsys.readouterr().err
    assert "could not be written again (records file X changed" in err
    assert f"run `biasscope report {run}`" in err
    assert not (run / "summary.json").exists() and not (run / "report.html").exists()
    (folder,) = (run / "dropped").iterdir()
    assert (folder / "summary.json").is_file()  # kept, as what the run said before
    assert listed(run) == ["train0@checkpoint-10", "train0@checkpoint-30"]


def test_a_report_that_fails_after_the_summary_keeps_the_new_summary(run, monkeypatch, capsys):
    import biasscope.dynamics.summary.write as writing
    from biasscope.core.errors import BiasscopeError

    def fails(*args: object, **kwargs: object) -> None:
        raise BiasscopeError("cannot write report.html: no space left on device")

    monkeypatch.setattr(writing, "render_dynamics_report", fails)
    assert main(["drop", str(run), "train0@checkpoint-20"]) == 2
    assert "no space left on device" in capsys.readouterr().err
    summary = json.loads((run / "summary.json").read_text())  # written again: it stays
    assert [c["step"] for c in summary["checkpoints"]] == [10, 30]
    assert not (run / "report.html").exists()  # the old one, about checkpoint-20, left
    (folder,) = (run / "dropped").iterdir()
    assert "checkpoint-20" in (folder / "report.html").read_text()


def test_a_remote_run_drops_on_the_remote(checkpoint_dirs, winobias_dir, tmp_path, monkeypatch):
    """memory://: the units move on the remote, where another machine sees the run without
    them; the staged copies go too, so nothing pulls them back."""
    fsspec = pytest.importorskip("fsspec")
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.drop import drop
    from biasscope.dynamics.scoring.sweep import run_dynamics
    from biasscope.probes import load_probe

    url = f"memory://biasscope-drop-{tmp_path.name}/run"
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "a"))
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    run_dynamics(probe, from_dirs(checkpoint_dirs[:2]), url, seeds=(0,),
                 scoring=HFConfig(device="cpu"), quiet=True)
    fs, base = fsspec.core.url_to_fs(url)
    try:
        monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "b"))
        result = drop(url, ["train0@checkpoint-10"])
        assert result.folder.startswith(f"{url}/dropped/")
        names = {p.removeprefix(f"{base}/") for p in fs.find(base)}
        where = result.folder.removeprefix(f"{url}/")
        moved = {n for n in names if n.startswith(f"{where}/records/")}
        assert len(moved) == 1 and "checkpoint-10" in next(iter(moved))
        assert f"{where}/checksums/{Path(next(iter(moved))).name}.sha256" in names
        assert {f"{where}/checkpoints.json", f"{where}/summary.json", "report.html"} <= names
        assert not any("checkpoint-10" in n for n in names if n.startswith(("records/",
                                                                          "checksums/")))
        monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "c"))
        other = RunStore(url)
        assert [c["revision"] for c in other.read_json("run.json")["checkpoints"]] == [
            "checkpoint-20"]
        assert [c["step"] for c in other.read_json("summary.json")["checkpoints"]] == [20]
        assert len(other.unit_files()) == 1 and not (other.root / "dropped").exists()
    finally:
        fs.rm(base.rsplit("/", 1)[0], recursive=True)
