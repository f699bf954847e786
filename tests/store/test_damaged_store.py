"""The run store under faults: damaged unit files are redone, full disks fail cleanly."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest

from biasscope.core.errors import BiasscopeError
from biasscope.store import directory as store_mod
from biasscope.store import files as files_mod
from biasscope.store.directory import CorruptUnitWarning, RunStore
from biasscope.store.units import Unit

UNITS = [Unit("m", None, "p", seed) for seed in range(3)]


def frame(unit: Unit) -> pd.DataFrame:
    return pd.DataFrame({"seed": [unit.seed] * 4, "item_id": [f"i{k}" for k in range(4)],
                         "value": [unit.seed + k / 10 for k in range(4)]})


def expected() -> pd.DataFrame:
    return pd.concat([frame(u) for u in UNITS], ignore_index=True)


def sort(records: pd.DataFrame) -> pd.DataFrame:
    return records.sort_values(["seed", "item_id"]).reset_index(drop=True)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    run = RunStore(tmp_path / "run")
    for unit in UNITS:
        run.write_unit(unit, frame(unit))
    return run


def leftovers(run: RunStore) -> list[Path]:
    return [p for d in (run.records_dir, run.checksums_dir) if d.is_dir()
            for p in d.iterdir() if p.name.endswith(".tmp")]


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-20])


@pytest.mark.parametrize("damage", [flip_byte, truncate])
def test_damaged_unit_is_quarantined_and_redone(store: RunStore, damage) -> None:
    bad = store.unit_path(UNITS[1])
    original = bad.read_bytes()
    damage(bad)
    fresh = RunStore(store.root)  # a resume: a new process with nothing cached
    assert fresh.has(UNITS[0])
    with pytest.warns(CorruptUnitWarning, match=bad.name):
        assert not fresh.has(UNITS[1])
    aside = bad.with_name(bad.name + ".corrupt-1")
    assert aside.is_file() and aside.read_bytes() != original  # kept for inspection
    assert not bad.exists() and not fresh.checksum_path(UNITS[1]).exists()
    assert aside not in fresh.unit_files() and len(fresh.unit_files()) == 2
    fresh.write_unit(UNITS[1], frame(UNITS[1]))
    assert all(RunStore(store.root).has(u) for u in UNITS)
    assert sort(fresh.records()).equals(sort(expected()))  # every row exactly once


def test_damage_after_verification_is_caught_by_the_next_resume(store: RunStore) -> None:
    assert store.has(UNITS[2])
    flip_byte(store.unit_path(UNITS[2]))
    with pytest.warns(CorruptUnitWarning):
        assert not RunStore(store.root).has(UNITS[2])
    assert store.unit_path(UNITS[2]).with_suffix(".parquet.corrupt-1").is_file()


def test_has_hashes_each_file_once(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = RunStore(store.root)
    assert fresh.has(UNITS[0])
    reads: list[Path] = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self))
    assert fresh.has(UNITS[0]) and fresh.has(UNITS[0])
    assert not reads


def test_unit_without_checksum_is_accepted_if_readable(store: RunStore) -> None:
    """Units written before checksums existed, or by a writer killed between the two files."""
    store.checksum_path(UNITS[0]).unlink()
    store.checksum_path(UNITS[1]).unlink()
    truncate(store.unit_path(UNITS[1]))
    fresh = RunStore(store.root)
    assert fresh.has(UNITS[0])
    assert fresh.checksum_path(UNITS[0]).is_file()  # recorded now, checked from then on
    with pytest.warns(CorruptUnitWarning, match="no checksum"):
        assert not fresh.has(UNITS[1])


@pytest.mark.parametrize("checksum", [False, True])
def test_a_unit_of_another_size_is_set_aside(store: RunStore, checksum: bool) -> None:
    """A file cut short to whole rows reads as parquet: only its size tells it from a unit."""
    path = store.unit_path(UNITS[1])
    store.checksum_path(UNITS[1]).unlink()
    short = frame(UNITS[1]).iloc[:2].to_parquet(None, index=False)
    path.write_bytes(short)
    if checksum:  # recorded by a writer of this very file: it still is not the unit asked
        RunStore(store.root).has(UNITS[1])
    fresh = RunStore(store.root)
    assert fresh.has(UNITS[0], rows=4) and fresh.has(UNITS[1])  # a caller that cannot tell
    with pytest.warns(CorruptUnitWarning, match="it holds 2 records, the unit asks 4"):
        assert not fresh.has(UNITS[1], rows=4)
    assert path.with_name(path.name + ".corrupt-1").read_bytes() == short
    assert not path.exists() and not fresh.checksum_path(UNITS[1]).exists()


def test_a_summary_of_seeds_of_different_sizes_is_refused(store: RunStore) -> None:
    from biasscope.dynamics.scoring.units import summarise

    key = ("m", "step10", 10, "p")
    with pytest.raises(BiasscopeError, match=r"the records of m@step10, probe p, differ in size "
                       r"between seeds \(seed 0: 20, seed 1: 40\); run the command"):
        summarise([(key, 1, {"x": 0.5}, 40), (key, 0, {"x": 0.5}, 20)])


def test_disk_full_on_third_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunStore(tmp_path / "run")
    for unit in UNITS[:2]:
        run.write_unit(unit, frame(unit))

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store_mod.os, "fsync", full)
    with pytest.raises(BiasscopeError, match="no space left on device; free disk space") as info:
        run.write_unit(UNITS[2], frame(UNITS[2]))
    monkeypatch.undo()
    message = str(info.value)
    assert "\n" not in message and str(run.unit_path(UNITS[2])) in message
    fresh = RunStore(run.root)
    assert [fresh.has(u) for u in UNITS] == [True, True, False]
    assert sort(fresh.records()).equals(sort(expected().iloc[:8]))
    assert not leftovers(run)


def test_disk_full_on_checksum_leaves_no_half_unit(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunStore(tmp_path / "run")
    real = files_mod.atomic_write

    def full_on_checksum(path: Path, write) -> None:
        if path.suffix == ".sha256":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, write)

    monkeypatch.setattr(files_mod, "atomic_write", full_on_checksum)
    with pytest.raises(BiasscopeError, match="no space"):
        run.write_unit(UNITS[0], frame(UNITS[0]))
    assert not run.unit_path(UNITS[0]).exists() and not run.has(UNITS[0])


def test_permission_denied_simulated(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(files_mod.tempfile, "mkstemp", denied)
    extra = Unit("m", None, "p", 9)
    with pytest.raises(BiasscopeError, match="permission denied; fix the folder's permissions"):
        store.write_unit(extra, frame(extra))
    monkeypatch.undo()
    assert sort(RunStore(store.root).records()).equals(sort(expected()))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_read_only_records_dir(store: RunStore) -> None:
    store.records_dir.chmod(0o555)
    try:
        extra = Unit("m", None, "p", 9)
        with pytest.raises(BiasscopeError, match="permission denied"):
            store.write_unit(extra, frame(extra))
        assert not leftovers(store)
    finally:
        store.records_dir.chmod(0o755)
    assert sort(RunStore(store.root).records()).equals(sort(expected()))


def test_dynamics_redoes_a_corrupted_unit(checkpoint_dirs, winobias_dir, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.dynamics.scoring.sweep import run_dynamics
    from biasscope.probes import load_probe

    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    checkpoints = from_dirs(checkpoint_dirs[:2])

    def run(out: Path) -> pd.DataFrame:
        records = run_dynamics(probe, checkpoints, out, seeds=[0, 1], quiet=True).records()
        return records.sort_values(["step", "seed", "item_id"]).reset_index(drop=True)

    clean = run(tmp_path / "clean")
    out = tmp_path / "damaged"
    run(out)
    victim = sorted((out / "records").glob("*.parquet"))[1]
    flip_byte(victim)
    stamps = {p: p.stat().st_mtime_ns for p in (out / "records").glob("*.parquet") if p != victim}
    with pytest.warns(CorruptUnitWarning, match=victim.name):
        redone = run(out)
    assert redone.equals(clean)
    assert victim.with_name(victim.name + ".corrupt-1").is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # only the victim redone
    assert len(list((out / "records").glob("*.parquet"))) == 4


def test_dynamics_redoes_a_unit_cut_short_without_its_checksum(
        checkpoint_dirs, winobias_dir, tmp_path: Path, capsys) -> None:
    """It was taken for finished, given a fresh checksum, and summary.json said 40 items per
    seed where seed 0 held 20."""
    pytest.importorskip("torch")
    import json

    from biasscope.cli.main import main

    out = tmp_path / "run"
    argv = ["dynamics", "--checkpoint-glob", str(checkpoint_dirs[0]), "--data-dir",
            str(winobias_dir), "--out", str(out), "--seeds", "0-1", "--quiet"]
    assert main(argv) == 0
    clean = RunStore(out).records().sort_values(["seed", "item_id"]).reset_index(drop=True)
    victim = next(p for p in sorted((out / "records").glob("*.parquet"))
                  if pd.read_parquet(p)["seed"].iloc[0] == 0)
    rows = pd.read_parquet(victim)
    (out / "checksums" / f"{victim.name}.sha256").unlink()
    victim.write_bytes(rows.iloc[:len(rows) // 2].to_parquet(None, index=False))
    capsys.readouterr()
    assert main(["report", str(out), "--quiet"]) == 2  # no report on a mixed-size checkpoint
    assert capsys.readouterr().err.startswith("biasscope: error: the records of ")
    with pytest.warns(CorruptUnitWarning, match=f"it holds {len(rows) // 2} records, the unit "
                      f"asks {len(rows)}"):
        assert main(argv) == 0
    redone = RunStore(out).records().sort_values(["seed", "item_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(redone, clean)
    assert victim.with_name(victim.name + ".corrupt-1").is_file()
    (point,) = json.loads((out / "summary.json").read_text())["checkpoints"]
    assert point["items_per_seed"] == len(rows) and point["seeds"] == [0, 1]


def test_the_command_prints_a_set_aside_unit_as_one_note(checkpoint_dirs, winobias_dir,
                                                         tmp_path: Path) -> None:
    """Not Python's warning format: the library's file and line, then its source line."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    import biasscope
    from biasscope.cli.main import main

    out = tmp_path / "run"
    argv = ["dynamics", "--checkpoint-glob", str(checkpoint_dirs[0]), "--data-dir",
            str(winobias_dir), "--out", str(out), "--seeds", "0", "--quiet"]
    assert main(argv) == 0
    (victim,) = (out / "records").glob("*.parquet")
    flip_byte(victim)
    src = str(Path(biasscope.__file__).parents[1])
    done = subprocess.run([sys.executable, "-m", "biasscope", *argv], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": src})
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "biasscope" in line or "have" in line]
    assert len(said) == 1 and "CorruptUnitWarning" not in done.stderr, done.stderr
    assert said[0].startswith(f"biasscope: note: records file {victim} cannot be trusted (SHA-256 ")
    assert said[0].endswith(f"moved to {victim.name}.corrupt-1, the unit will be redone")
