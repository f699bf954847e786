"""``$BIASSCOPE_CACHE_DIR`` names the cache's root: data under its ``data/``, remote runs'
staging copies under its ``runs/``, as the defaults under ``~/.cache/biasscope``. The data
cache took the variable as itself, so setting it put the datasets' folders beside ``runs/``;
a file downloaded there is still found, checked against its pin, never downloaded again, and
said once on stderr."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from biasscope.cli.main import main
from biasscope.core.errors import DataError
from biasscope.data.sources import SOURCES, DataFile, cache_dir, data_path, fetch
from biasscope.store.remote import Remote
from winobias_fixture import write_winobias

PAYLOAD = b"hello\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$BIASSCOPE_CACHE_DIR``, offline, with a pinned toy source; no download allowed."""
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    monkeypatch.setitem(SOURCES, ("toy", "toy.txt"), DataFile(
        "toy", "toy.txt", "https://example.invalid/toy.txt",
        hashlib.sha256(PAYLOAD).hexdigest(), len(PAYLOAD)))

    def never(*_: object, **__: object) -> None:
        raise AssertionError("downloaded")

    monkeypatch.setattr("urllib.request.urlopen", never)
    return tmp_path / "cache"


def test_the_variable_is_the_root_of_data_and_runs(root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir() == root / "data"
    assert Remote("memory://bucket/run").staging.parent == root / "runs"
    monkeypatch.delenv("BIASSCOPE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "biasscope" / "data"
    assert Remote("memory://bucket/run").staging.parent == (
        tmp_path / "home" / ".cache" / "biasscope" / "runs")


def test_a_file_in_the_old_place_is_found_checked_and_said_once(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = root / "toy" / "toy.txt"
    old.parent.mkdir(parents=True)
    old.write_bytes(PAYLOAD)
    assert data_path("toy", "toy.txt") == old  # not downloaded (offline, and urlopen fails)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"found {old} where $BIASSCOPE_CACHE_DIR kept data" in err
    assert f"into {root / 'data'}" in err
    assert fetch("toy") == [old]  # `biasscope data fetch`: ready, and not said again
    assert capsys.readouterr().err == ""
    new = root / "data" / "toy" / "toy.txt"  # the new place, where present, comes first
    new.parent.mkdir(parents=True)
    new.write_bytes(PAYLOAD)
    assert data_path("toy", "toy.txt") == new


def test_a_damaged_file_in_the_old_place_is_refused_by_its_pin(root: Path) -> None:
    old = root / "toy" / "toy.txt"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"tampered")
    with pytest.raises(DataError, match=rf"checksum mismatch for {old} .*delete the file"):
        data_path("toy", "toy.txt")


def test_a_file_missing_from_both_is_said_at_the_new_place(root: Path) -> None:
    with pytest.raises(DataError, match=rf"missing data file {root / 'data' / 'toy'}/toy\.txt"):
        data_path("toy", "toy.txt")


def test_items_are_not_written_over_a_file_of_the_old_cache(
        root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guard of `items --out` covers the old place too: its files are still read."""
    write_winobias(root)  # the old layout: <root>/winobias/<file>, pinned as written here
    for path in (root / "winobias").iterdir():
        monkeypatch.setitem(SOURCES, ("winobias", path.name), DataFile(
            "winobias", path.name, f"https://example.invalid/{path.name}",
            hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size))
    target = root / "winobias" / "male_occupations.txt"
    before = target.read_bytes()
    assert main(["items", "--probe", "winobias-gender", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "is a file of the data directory" in err and "where $BIASSCOPE_CACHE_DIR" in err
    assert target.read_bytes() == before
