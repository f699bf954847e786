"""A dynamics rerun loads only what it scores, and a first call that stores nothing leaves
nothing: a rerun whose every unit is stored loads (or converts) no checkpoint, still checking
the run's settings and each checkpoint's weights; one with a unit missing loads that unit's
checkpoint alone; a first call refused once the run folder was made takes the folder away."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import no_loads
from biasscope.cli.main import main
from biasscope.store.directory import RunStore

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No report (they have their own tests); a fingerprint cache of this test's own."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "write_dynamics_report",
                        lambda run, *_, **__: Path(getattr(run, "root", run)) / "r.html")
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def run(out: Path, data: Path, *args: str) -> int:
    return main(["dynamics", "--data-dir", str(data), "--out", str(out), "--seeds", "0,1",
                 "--limit", "4", "--quiet", "--device", "cpu", *args])


def loads_counted(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[str]:
    """Each model whose weights load, by source (``fail``: and the load fails)."""
    import biasscope.backends.hf as hf

    return no_loads.loads_counted(monkeypatch, hf, fail)


def scored(out: Path) -> pd.DataFrame:
    frame = RunStore(out).records()
    return frame.sort_values(["checkpoint", "seed", "item_id"]).reset_index(drop=True)


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_rerun_with_every_unit_stored_loads_no_checkpoint(checkpoint_dirs, winobias_dir,
                                                             tmp_path, monkeypatch):
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-*")]
    assert run(out, winobias_dir, *glob) == 0
    before = scored(out)
    loads = loads_counted(monkeypatch, fail=True)
    assert run(out, winobias_dir, *glob) == 0
    assert loads == []
    pd.testing.assert_frame_equal(scored(out), before)
    assert (out / "summary.json").is_file()


def test_a_rerun_with_every_unit_stored_still_checks_the_weights(checkpoint_dirs, winobias_dir,
                                                                 tmp_path, monkeypatch, capsys):
    """Nothing is loaded, but each checkpoint's files are hashed as before: one changed in
    place is refused."""
    train = tmp_path / "train"
    shutil.copytree(checkpoint_dirs[0], train / "checkpoint-10")
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(train / "checkpoint-*")]
    assert run(out, winobias_dir, *glob) == 0
    shutil.copyfile(checkpoint_dirs[1] / "model.safetensors",
                    train / "checkpoint-10" / "model.safetensors")
    loads = loads_counted(monkeypatch, fail=True)
    capsys.readouterr()
    assert run(out, winobias_dir, *glob) == 2
    assert "changed since" in capsys.readouterr().err and loads == []


def test_a_rerun_with_one_unit_missing_loads_its_checkpoint_alone(checkpoint_dirs, winobias_dir,
                                                                  tmp_path, monkeypatch):
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-*")]
    assert run(out, winobias_dir, *glob) == 0
    before = scored(out)
    (gone,) = [p for p in (out / "records").glob("*.parquet")
               if pd.read_parquet(p)[["revision", "seed"]].drop_duplicates().values.tolist()
               == [["checkpoint-20", 1]]]
    gone.unlink()
    loads = loads_counted(monkeypatch)
    assert run(out, winobias_dir, *glob) == 0
    assert loads == [str(checkpoint_dirs[1])]
    pd.testing.assert_frame_equal(scored(out), before)


@pytest.fixture
def gguf_cache(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("gguf")
    cache = tmp_path / "gguf-cache"
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(cache))
    return cache


def test_a_gguf_rerun_with_every_unit_stored_converts_nothing(gguf_cache, winobias_dir,
                                                             tmp_path, monkeypatch):
    """Before: the rerun of a run whose GGUF cache copy was gone (another machine, a cleared
    cache) converted the file again (minutes for a real model) with nothing to score. One
    whose unit is missing converts it and scores that unit."""
    from biasscope.backends import gguf
    from gguf_fixture import write_llama_gguf

    path = write_llama_gguf(tmp_path / "tiny.gguf")
    out = tmp_path / "run"
    model = ["--model", str(path), "--first-token"]
    assert run(out, winobias_dir, *model) == 0
    before, listed = scored(out), RunStore(out).read_json("run.json")["checkpoints"]
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cleared"))
    converted: list[str] = []
    convert = gguf.converted

    def counted(source: Any) -> Any:
        converted.append(str(source))
        return convert(source)

    monkeypatch.setattr(gguf, "converted", counted)
    loads = loads_counted(monkeypatch, fail=True)
    assert run(out, winobias_dir, *model) == 0
    assert converted == [] and loads == [] and not (tmp_path / "cleared").exists()
    next(iter((out / "records").glob("*.parquet"))).unlink()
    loads = loads_counted(monkeypatch)
    assert run(out, winobias_dir, *model) == 0
    assert converted == [str(path.resolve())] and len(loads) == 1
    pd.testing.assert_frame_equal(scored(out), before)
    assert RunStore(out).read_json("run.json")["checkpoints"] == listed


# --- a first call that stores nothing -------------------------------------------------------

@pytest.fixture
def broken(checkpoint_dirs, tmp_path) -> Path:
    """A checkpoint folder whose weights file was cut short: it is found, listed and hashed,
    and fails as it loads."""
    folder = tmp_path / "train" / "checkpoint-40"
    shutil.copytree(checkpoint_dirs[0], folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    return folder


def test_a_first_call_that_stores_nothing_leaves_no_folder(broken, winobias_dir, tmp_path,
                                                          capsys):
    """Before: the refused call left --out holding .run.lock and .run.id (its run.json was
    taken away), and the parents it made."""
    out = tmp_path / "new" / "run"
    assert run(out, winobias_dir, "--checkpoint-glob", str(broken)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint-40" in err[0], err
    assert not (tmp_path / "new").exists()


def test_a_first_call_into_a_users_folder_leaves_every_file_as_it_was(
        broken, winobias_dir, tmp_path):
    out = tmp_path / "mine"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "a.txt").write_text("mine")
    (out / ".hidden").write_text("also mine")
    (out / "empty").mkdir()
    before = files(out)
    folders = sorted(p for p in out.rglob("*") if p.is_dir())
    assert run(out, winobias_dir, "--checkpoint-glob", str(broken)) == 2
    assert files(out) == before
    assert sorted(p for p in out.rglob("*") if p.is_dir()) == folders
