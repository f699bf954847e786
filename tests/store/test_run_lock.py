"""Two sweeps started together into one run directory: run.json keeps both, or refuses one.

Real processes, released together by a barrier; every write of run.json is slowed down
between its read and its rewrite, so that without the lock they would always interleave.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasscope.backends.checkpoints import Checkpoint
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import SweepConfig
from biasscope.store import run_json
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.locks import LOCK, fcntl, run_lock
from biasscope.store.units import Unit
from together import CTX, together


class Probe:
    name = "p"

    def config(self) -> dict[str, object]:
        return {"probe": "p"}


def slowed(recorded: Any, now: Any) -> dict[str, str]:
    """kept_versions() runs between the read of run.json and its rewrite: it takes a while."""
    time.sleep(0.3)
    return KEPT_VERSIONS(recorded, now)


KEPT_VERSIONS = run_json.kept_versions


def start(out: Path, revision: str, seed: int, dtype: str, errors: Any, barrier: Any) -> None:
    run_json.kept_versions = slowed  # type: ignore[assignment]
    barrier.wait()
    config = SweepConfig([Checkpoint("org/m", "org/m", revision, int(revision[4:]))], out,
                         [seed], comparable={"dtype": dtype})
    try:
        init_run(RunStore(out), [Probe()], config)  # type: ignore[list-item]
    except BiasscopeError as exc:
        errors.put(str(exc))


def started_together(out: Path, *runs: tuple[str, int, str]) -> list[str]:
    errors = CTX.Queue()
    together(start, [(out, *r, errors) for r in runs], timeout=60)
    found = []
    while not errors.empty():
        found.append(errors.get())
    return found


@pytest.mark.parametrize("trial", range(4))
def test_concurrent_sweeps_both_land_in_run_json(tmp_path: Path, trial: int) -> None:
    out = tmp_path / "run"
    assert started_together(out, ("step0", 0, "float32")) == []  # the run exists: both read it
    assert started_together(out, ("step1", 1, "float32"), ("step2", 2, "float32")) == []
    run = json.loads((out / "run.json").read_text())
    assert sorted(c["revision"] for c in run["checkpoints"]) == ["step0", "step1", "step2"]
    assert run["seeds"] == [0, 1, 2]


@pytest.mark.parametrize("trial", range(4))
def test_concurrent_sweeps_with_two_dtypes_refuse_one(tmp_path: Path, trial: int) -> None:
    out = tmp_path / "run"
    errors = started_together(out, ("step1", 1, "float32"), ("step2", 2, "bfloat16"))
    assert len(errors) == 1 and "'dtype'" in errors[0] and "another --out" in errors[0]
    run = json.loads((out / "run.json").read_text())
    (entry,) = run["checkpoints"]
    assert run["settings"]["dtype"] == {"step1": "float32", "step2": "bfloat16"}[
        entry["revision"]]


def test_a_run_whose_folder_is_deleted_writes_nothing_more(tmp_path: Path) -> None:
    """Deleted under a running process and started again (perhaps with other settings): the
    first process must not write its units or run.json into the new run, nor recreate the
    folder when nobody did."""
    out = tmp_path / "run"
    first = RunStore(out)
    with run_lock(first):
        write_json(first.run_json, {"dtype": "float32"})
    unit = Unit(model="m", revision=None, probe="p", seed=0)
    first.write_unit(unit, pd.DataFrame({"model": ["m"], "probe": ["p"], "x": [1.0]}))

    shutil.rmtree(out)
    with pytest.raises(BiasscopeError, match="deleted or replaced"):
        first.write_unit(Unit(model="m", revision=None, probe="p", seed=1),
                         pd.DataFrame({"model": ["m"], "probe": ["p"], "x": [2.0]}))
    with pytest.raises(BiasscopeError, match="deleted or replaced"), run_lock(first):
        pass
    assert not out.exists()

    second = RunStore(out)  # the rerun, with another setting
    with run_lock(second):
        write_json(second.run_json, {"dtype": "bfloat16"})
    with pytest.raises(BiasscopeError, match=str(out)):
        first.write_unit(unit, pd.DataFrame({"model": ["m"], "probe": ["p"], "x": [1.0]}))
    assert not second.unit_path(unit).exists()
    assert json.loads(second.run_json.read_text()) == {"dtype": "bfloat16"}
    second.write_unit(unit, pd.DataFrame({"model": ["m"], "probe": ["p"], "x": [3.0]}))
    assert second.has(unit)


def held_elsewhere(store: RunStore) -> bool:
    """Whether another process finds the run's lock taken."""
    code = ("import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n"
            "    sys.exit(1)\n")
    done = subprocess.run([sys.executable, "-c", code, str(store.root / LOCK)], timeout=60)
    return done.returncode == 1


@pytest.mark.skipif(fcntl is None, reason="fcntl locks")
def test_the_run_lock_taken_again_inside_itself_stays_held(tmp_path: Path) -> None:
    """A drop holds the lock as it settles a staged series, which takes it too. Before, the
    inner block's close released the process's lock: the rest of the drop ran unlocked."""
    store, again = RunStore(tmp_path / "run"), RunStore(tmp_path / "run")
    with run_lock(store):
        with run_lock(again):  # another RunStore of the run, as `settle`'s may be
            assert held_elsewhere(store)
        assert held_elsewhere(store)
    assert not held_elsewhere(store)


def test_another_thread_waits_for_the_run_lock(tmp_path: Path) -> None:
    """``fcntl`` locks belong to the process: a second thread took the lock at once."""
    store = RunStore(tmp_path / "run")
    order: list[str] = []

    def other() -> None:
        with run_lock(RunStore(tmp_path / "run")):
            order.append("other")

    with run_lock(store):
        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.3)
        order.append("this")
    thread.join(10)
    assert order == ["this", "other"]


def test_the_process_forgets_a_run_lock_once_its_last_block_ends(tmp_path: Path) -> None:
    """Each lock file was remembered for the life of the process: a notebook sweeping many
    runs grew the record by one each. It goes with the outermost block, and not before a
    thread waiting for it is done, which must still wait for the same lock."""
    from biasscope.store import locks

    before = dict(locks._HELD)  # another test's, if any
    for k in range(3):
        store = RunStore(tmp_path / f"run{k}")
        with run_lock(store), run_lock(store):
            assert len(locks._HELD) == len(before) + 1
    assert dict(locks._HELD) == before
    store, order = RunStore(tmp_path / "run"), list[str]()

    def held(name: str) -> None:
        with run_lock(RunStore(tmp_path / "run")):
            order.append(f"{name} in")
            time.sleep(0.2)
            order.append(f"{name} out")

    thread = threading.Thread(target=held, args=("other",))
    with run_lock(store):
        thread.start()
        time.sleep(0.3)
    held("third")  # while the other waits or holds it: one at a time still
    thread.join(10)
    assert order in (["other in", "other out", "third in", "third out"],
                     ["third in", "third out", "other in", "other out"])
    assert dict(locks._HELD) == before
