"""``performance.json`` is read, changed and written under the run's lock: two sweeps into
different models of one run keep both models' series (before, each read the file, and the
later write lost the earlier's model). A rerun that stops gives it back only where it is
still as that call left it, never over a series another call saved since."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import performance
from biasscope.store import run_json
from biasscope.store.directory import RunStore
from together import together

WRITE_JSON = performance.write_json


def slowed(path: Path, data: Any) -> None:
    """Between the read of performance.json and its rewrite: it takes a while."""
    time.sleep(0.3)
    WRITE_JSON(path, data)


def saving(out: Path, how: str, model: str, barrier: Any) -> None:
    performance.write_json = slowed  # type: ignore[assignment]
    store = RunStore(out)
    barrier.wait()
    if how == "save":
        performance.save(store, model, {10: 0.5, 20: 0.6}, f"performance ({model}.csv)")
    else:
        performance.add(store, model, 20, 0.6, f"performance ({model}.csv)")


def saved(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / performance.FILE).read_text())["series"]
    return {m: e["values"] for m, e in data.items()}


@pytest.mark.parametrize("how", ["save", "add"])
def test_two_calls_saving_two_models_keep_both(tmp_path: Path, how: str) -> None:
    out = tmp_path / "run"
    out.mkdir()
    performance.save(RunStore(out), "a", {10: 0.5}, "performance (a.csv)")
    performance.save(RunStore(out), "b", {10: 0.5}, "performance (b.csv)")
    together(saving, [(out, how, "a"), (out, how, "b")], timeout=120)
    values = {"10": 0.5, "20": 0.6}
    assert saved(out) == {"a": values, "b": values}


def vouching(model: str) -> run_json.Build:
    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        data = (previous or {}).get("settings", {}).get("data", {})
        return {"settings": {"data": {**data, f"--performance-csv for {model}": model}}}
    return build


def test_a_rerun_that_stops_keeps_a_series_another_call_saved_since(tmp_path: Path) -> None:
    """Before, it wrote performance.json back as it was before the call: the other call's
    model lost, though its run.json vouched for it."""
    out = tmp_path / "run"
    run_json.start_run(RunStore(out), "dynamics", vouching("first"))
    performance.save(RunStore(out), "first", {10: 0.1}, "performance (first.csv)")
    store, other = RunStore(out), RunStore(out)
    with pytest.raises(BiasscopeError), run_json.unsettled(
            store, lambda: False, rerun=True, files=(performance.FILE,)):
        run_json.start_run(store, "dynamics", vouching("this"))
        performance.save(store, "this", {10: 0.2}, "performance (this.csv)")
        run_json.start_run(other, "dynamics", vouching("other"))  # another sweep, meanwhile
        performance.save(other, "other", {10: 0.3}, "performance (other.csv)")
        raise BiasscopeError("refused")
    assert saved(out) == {"first": {"10": 0.1}, "this": {"10": 0.2}, "other": {"10": 0.3}}
    assert set(store.read_json("run.json")["settings"]["data"]) == {
        f"--performance-csv for {m}" for m in ("first", "this", "other")}


def test_a_rerun_that_stops_alone_gives_its_series_back(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_json.start_run(RunStore(out), "dynamics", vouching("first"))
    performance.save(RunStore(out), "first", {10: 0.1}, "performance (first.csv)")
    store = RunStore(out)
    with pytest.raises(KeyboardInterrupt), run_json.unsettled(
            store, lambda: False, rerun=True, files=(performance.FILE,)):
        run_json.start_run(store, "dynamics", vouching("this"))
        performance.save(store, "this", {10: 0.2}, "performance (this.csv)")
        raise KeyboardInterrupt
    assert saved(out) == {"first": {"10": 0.1}}
    assert list(store.read_json("run.json")["settings"]["data"]) == [
        "--performance-csv for first"]
