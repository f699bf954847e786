"""A run at an fsspec URL: staged locally, shared through the remote.

Every test runs twice: on fsspec's in-process ``memory://`` and on a real S3 API (moto's
server on 127.0.0.1, reached by s3fs over HTTP).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from biasscope.store.directory import RunStore
from biasscope.store.units import Unit, unit_in

pytest.importorskip("torch")
fsspec = pytest.importorskip("fsspec")

from biasscope.backends.checkpoints import from_dirs  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.dynamics.scoring.sweep import run_dynamics  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402

SEEDS = (0, 1)
CPU = HFConfig(device="cpu")
ORDER = ["model", "revision", "probe", "seed", "item_id"]


@pytest.fixture(params=["memory", "s3"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh run URL: memory:// (removed afterwards: it is process-wide) or a new S3 bucket."""
    if request.param == "s3":
        yield f"s3://{request.getfixturevalue('s3').bucket()}/run"
        return
    bucket = f"biasscope-{uuid.uuid4().hex[:8]}"
    yield f"memory://{bucket}/run"
    fs = fsspec.filesystem("memory")
    if fs.exists(f"/{bucket}"):
        fs.rm(f"/{bucket}", recursive=True)


def use_cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(folder))


def sweep(checkpoint_dirs: list[Path], data: Path, out: str | Path) -> RunStore:
    probe = load_probe("winobias-gender", data_dir=data)
    return run_dynamics(probe, from_dirs(checkpoint_dirs[:2]), out, seeds=SEEDS,
                        scoring=CPU, quiet=True)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(ORDER).reset_index(drop=True)


def test_remote_run_is_shared_and_resumed(checkpoint_dirs, winobias_dir, tmp_path, url,
                                          monkeypatch):
    use_cache(monkeypatch, tmp_path / "cache-a")
    store = sweep(checkpoint_dirs, winobias_dir, url)
    assert store.remote == url and store.root.is_relative_to(tmp_path / "cache-a")
    fs, base = fsspec.core.url_to_fs(url)
    names = {p.removeprefix(f"{base}/") for p in fs.find(base)}
    units = {p.name for p in store.unit_files()}
    assert len(units) == 2 * len(SEEDS)
    assert names == {"run.json", "summary.json", *(f"records/{u}" for u in units),
                     *(f"checksums/{u}.sha256" for u in units)}

    # Another machine: an empty staging folder sees every unit done, and rescores nothing.
    use_cache(monkeypatch, tmp_path / "cache-b")
    other = RunStore(url)
    assert other.root != store.root and other.root.is_relative_to(tmp_path / "cache-b")
    assert other.run_json.is_file() and other.summary_json.is_file()
    frames = list(other.iter_units())
    assert all(other.has(unit_in(f)) for f in frames)  # type: ignore[arg-type]

    import biasscope.dynamics.scoring.executors as executors

    def no_scoring(*args: object) -> None:
        raise AssertionError("a finished unit was scored again")

    monkeypatch.setattr(executors, "unit_frame", no_scoring)
    use_cache(monkeypatch, tmp_path / "cache-c")
    again = sweep(checkpoint_dirs, winobias_dir, url)
    monkeypatch.undo()

    local = sweep(checkpoint_dirs, winobias_dir, tmp_path / "local")
    assert local.remote is None and local.root == tmp_path / "local"
    pd.testing.assert_frame_equal(ordered(again.records()), ordered(local.records()))
    pd.testing.assert_frame_equal(ordered(other.records()), ordered(local.records()))


def test_has_pulls_a_unit_written_by_another_worker(tmp_path, url, monkeypatch):
    unit = Unit("m", None, "p", 0)
    use_cache(monkeypatch, tmp_path / "a")
    first = RunStore(url)
    use_cache(monkeypatch, tmp_path / "b")
    second = RunStore(url)  # made before the unit existed
    assert not second.has(unit)
    first.write_unit(unit, pd.DataFrame({"x": [1, 2]}))
    assert second.has(unit)
    assert second.unit_path(unit).read_bytes() == first.unit_path(unit).read_bytes()
    assert second.checksum_path(unit).is_file()


def test_file_url_is_a_local_path(tmp_path):
    store = RunStore(f"file://{tmp_path}/run")
    assert store.remote is None and store.fs is None and store.root == tmp_path / "run"


def test_cli_sweep_into_a_bucket_and_report_from_another_machine(
        s3, checkpoint_dirs, winobias_dir, tmp_path, monkeypatch, capsys):
    from biasscope.cli.main import main

    url = f"s3://{s3.bucket()}/p"
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    use_cache(monkeypatch, tmp_path / "machine-a")
    assert main(["dynamics", "--checkpoint-glob", glob, "--data-dir", str(winobias_dir),
                 "--out", url, "--seeds", "0-1", "--quiet"]) == 0
    fs, base = fsspec.core.url_to_fs(url)
    first = fs.cat_file(f"{base}/report.html")
    assert b"plotly" in first.lower() and fs.exists(f"{base}/summary.json")
    capsys.readouterr()

    fs.rm(f"{base}/report.html")
    use_cache(monkeypatch, tmp_path / "machine-b")  # nothing staged here yet
    assert main(["report", url]) == 0
    assert f"published to {url}/report.html" in capsys.readouterr().out
    assert fs.cat_file(f"{base}/report.html").count(b"<table") == first.count(b"<table")


def test_a_url_whose_filesystem_is_not_installed_names_the_extra():
    import importlib.util

    from biasscope.core.errors import BiasscopeError

    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here")
    with pytest.raises(BiasscopeError, match=r"gs://bucket/run: .*pip install -e '\.\[gcs\]'"):
        RunStore("gs://bucket/run")
    with pytest.raises(BiasscopeError, match="cannot open run nosuch://bucket/run"):
        RunStore("nosuch://bucket/run")
