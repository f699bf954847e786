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


def test_a_first_call_that_stops_leaves_another_calls_run_json(tmp_path: Path) -> None:
    """Two first calls into one new --out: the one that stops took run.json away, even where
    the other had written into it meanwhile (its entries, and the files they vouch for, lost).
    It now takes away only a run.json this call alone wrote."""
    store, other = RunStore(tmp_path / "run"), RunStore(tmp_path / "run")

    def build(previous: Any) -> dict[str, Any]:
        return {"settings": {}, "probes": [*(previous or {}).get("probes", []), "this"]}

    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, files=("performance.json",)):
        run_json.start_run(store, "audit", build)
        run_json.start_run(other, "audit", lambda previous: {  # the other call, meanwhile
            **(previous or {}), "probes": [*(previous or {})["probes"], "other"]})
        (store.root / "performance.json").write_text("the other call's")
        raise BiasscopeError("refused")
    assert store.read_json("run.json")["probes"] == ["this", "other"]
    assert (store.root / "performance.json").read_text() == "the other call's"
    assert (store.root / ".run.lock").is_file() and (store.root / ".run.id").is_file()


def test_a_first_call_that_merged_into_another_calls_run_json_leaves_it(tmp_path: Path
                                                                         ) -> None:
    """The other call wrote run.json first, after this one began (so this one began as a
    first call): this call's entries stay in it, the other's with them."""
    store, other = RunStore(tmp_path / "run"), RunStore(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt), run_json.unsettled(store, lambda: False):
        run_json.start_run(other, "audit", lambda previous: {"settings": {}, "by": ["other"]})
        run_json.start_run(store, "audit", lambda previous: {
            **(previous or {}), "by": [*(previous or {})["by"], "this"]})
        raise KeyboardInterrupt
    assert store.read_json("run.json")["by"] == ["other", "this"]


def test_a_first_call_rewriting_only_its_own_run_json_still_takes_it_away(tmp_path: Path
                                                                           ) -> None:
    store = RunStore(tmp_path / "new" / "run")
    with pytest.raises(BiasscopeError), run_json.unsettled(store, lambda: False):
        for n in range(3):  # a sweep writes run.json again as each checkpoint is admitted
            run_json.start_run(store, "audit", lambda previous, n=n: {"settings": {"n": n}})
        raise BiasscopeError("refused")
    assert list(tmp_path.iterdir()) == []
