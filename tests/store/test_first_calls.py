"""A first call that stops before it stores anything (`run_json.unsettled`) leaves --out as it
found it: a folder it made goes, with the parents it made; a folder that was there keeps
every file it held and gains none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasscope.core.errors import BiasscopeError
from biasscope.store import run_json
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit

UNIT = Unit("m", None, "p", 0)


def stopped(store: RunStore, stop: BaseException, *, unit: bool = False) -> None:
    """A call that writes run.json (making the folder, its lock and id), then stops
    (``unit``: after storing one unit)."""
    def build(previous: Any) -> dict[str, Any]:
        return {"settings": {}}

    with pytest.raises(type(stop)), run_json.unsettled(
            store, lambda: bool(store.unit_files()), folders=("train",)):
        run_json.start_run(store, "audit", build)
        (store.root / "train").mkdir()
        if unit:
            store.write_unit(UNIT, pd.DataFrame({"model": ["m"], "probe": ["p"]}))
        raise stop


def tree(folder: Path) -> dict[str, bytes | None]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("stop", [BiasscopeError("refused"), KeyboardInterrupt()])
def test_a_first_call_that_stores_nothing_takes_away_the_folders_it_made(
        tmp_path: Path, stop: BaseException) -> None:
    """Before: --out was left holding .run.lock and .run.id, and the parents it made."""
    stopped(RunStore(tmp_path / "new" / "deeper" / "run"), stop)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_was_there_keeps_every_file_and_gains_none(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "notes.txt").write_text("mine")
    (out / ".run.lock").write_text("")  # an earlier call's, say: kept as it was
    (out / "empty").mkdir()
    before = tree(out)
    stopped(RunStore(out), BiasscopeError("refused"))
    assert tree(out) == before


def test_a_first_call_that_stored_a_unit_keeps_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    stopped(RunStore(out), BiasscopeError("stopped"), unit=True)
    assert (out / "run.json").is_file() and (out / ".run.id").is_file()
    assert RunStore(out).has(UNIT)


def test_the_same_store_starts_again_after_its_folder_was_taken_away(tmp_path: Path) -> None:
    """The process's token of the folder it made is forgotten with it: a call made again
    with the same RunStore is a first call, not refused as a folder replaced under it."""
    store = RunStore(tmp_path / "run")
    stopped(store, BiasscopeError("refused"))
    assert not store.root.exists()
    stopped(store, BiasscopeError("stopped"), unit=True)
    assert store.has(UNIT)
