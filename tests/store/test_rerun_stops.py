"""A rerun that stops before it stores anything (`run_json.unsettled`, ``rerun=True``) gives
back run.json and the files beside it as they were before the call, but only those still as
this call left them: before, it wrote back its starting bytes over whatever another call into
the run had written meanwhile (that call's entries and series lost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from biasscope.core.errors import BiasscopeError
from biasscope.store import run_json
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes
from biasscope.store.locks import run_lock

BESIDE = "beside.json"


def adding(name: str) -> run_json.Build:
    """A call's run.json: what the run recorded, with ``name`` among its probes."""
    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        return {"settings": {}, "probes": [*(previous or {}).get("probes", []), name]}
    return build


def write_beside(store: RunStore, text: str) -> None:
    """A file beside run.json, written as a call writes one (`RunStore.wrote`)."""
    path = store.root / BESIDE
    with run_lock(store):
        was = path.read_bytes() if path.is_file() else None
        write_bytes(path, text.encode())
        store.wrote(path, was)


def a_run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    run_json.start_run(RunStore(out), "audit", adding("first"))
    write_beside(RunStore(out), "first")
    return out


def probes(out: Path) -> list[str]:
    listed: list[str] = RunStore(out).read_json("run.json")["probes"]
    return listed


def test_a_rerun_that_stops_gives_back_what_it_alone_wrote(tmp_path: Path) -> None:
    out = a_run(tmp_path)
    store = RunStore(out)
    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, rerun=True, files=(BESIDE,)):
        run_json.start_run(store, "audit", adding("this"))
        write_beside(store, "this")
        raise BiasscopeError("refused")
    assert probes(out) == ["first"]
    assert (out / BESIDE).read_text() == "first"


def test_a_rerun_that_stops_keeps_what_another_call_wrote_since(tmp_path: Path) -> None:
    out = a_run(tmp_path)
    store, other = RunStore(out), RunStore(out)
    with pytest.raises(KeyboardInterrupt), run_json.unsettled(
            store, lambda: False, rerun=True, files=(BESIDE,)):
        run_json.start_run(store, "audit", adding("this"))
        write_beside(store, "this")
        run_json.start_run(other, "audit", adding("other"))  # another call, meanwhile
        write_beside(other, "other")
        raise KeyboardInterrupt
    assert probes(out) == ["first", "this", "other"]
    assert (out / BESIDE).read_text() == "other"


def test_a_rerun_that_wrote_again_over_another_call_keeps_theirs(tmp_path: Path) -> None:
    """This call's last write holds the other's entries: giving back its starting bytes
    would lose them, though the file is as this call left it."""
    out = a_run(tmp_path)
    store, other = RunStore(out), RunStore(out)
    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, rerun=True, files=(BESIDE,)):
        run_json.start_run(store, "audit", adding("this"))
        run_json.start_run(other, "audit", adding("other"))
        run_json.start_run(store, "audit", lambda previous: previous or {})
        write_beside(other, "other")
        write_beside(store, "other, and this")
        raise BiasscopeError("refused")
    assert probes(out) == ["first", "this", "other"]
    assert (out / BESIDE).read_text() == "other, and this"


def test_a_rerun_keeps_its_files_beside_a_run_json_another_call_wrote_since(
        tmp_path: Path) -> None:
    """That run.json holds this call's entries too, and vouches for the files this call
    wrote beside it: they stay with it, as a first call's do."""
    out = a_run(tmp_path)
    store, other = RunStore(out), RunStore(out)
    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, rerun=True, files=(BESIDE, "made.json")):
        run_json.start_run(store, "audit", adding("this"))
        write_beside(store, "this")
        path = store.root / "made.json"
        with run_lock(store):
            write_bytes(path, b"this call's")
            store.wrote(path, None)
        run_json.start_run(other, "audit", adding("other"))
        raise BiasscopeError("refused")
    assert probes(out) == ["first", "this", "other"]
    assert (out / BESIDE).read_text() == "this"
    assert (out / "made.json").read_text() == "this call's"
    assert store.own == {}  # the call's watch ends with it


def test_a_rerun_gives_back_a_file_it_made_where_run_json_is_as_it_left_it(
        tmp_path: Path) -> None:
    out = a_run(tmp_path)
    store = RunStore(out)
    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, rerun=True, files=("made.json",)):
        run_json.start_run(store, "audit", adding("this"))
        path = store.root / "made.json"
        with run_lock(store):
            write_bytes(path, b"this call's")
            store.wrote(path, None)
        raise BiasscopeError("refused")
    assert probes(out) == ["first"]
    assert not (out / "made.json").exists()
