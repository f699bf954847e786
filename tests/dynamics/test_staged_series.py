"""A performance series is staged in a file of its call's own, held while the call runs: two
sweeps given series into one --out never write over each other's staged series, and one
call's `settle` never throws away another's that is still running (before, both staged in
``performance.pending.json``: the later call's series replaced the earlier's, and the earlier's
save took the later's away)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biasscope.dynamics.analysis import performance
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json


def series(model: str, value: float) -> dict[str, Any]:
    return {model: ({10: value, 20: value + 0.1}, f"performance ({model}.csv)",
                    {f"--performance-csv for {model}": f"sha-{model}"})}


def vouch(store: RunStore, *models: str) -> None:
    """run.json records the models' files as they were staged."""
    write_json(store.run_json, {"kind": "dynamics", "settings": {"data": {
        f"--performance-csv for {m}": f"sha-{m}" for m in models}}})


def saved(store: RunStore) -> dict[str, Any]:
    if not (store.root / performance.FILE).is_file():
        return {}
    data: dict[str, Any] = json.loads((store.root / performance.FILE).read_text())["series"]
    return {m: e["values"] for m, e in data.items()}


def test_two_calls_staging_into_one_run_keep_each_other_s_series(tmp_path: Path) -> None:
    """Both calls were killed after run.json recorded both files: both series are kept."""
    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    one, two = performance.pending_name(), performance.pending_name()
    with performance.staged(store, series("a", 0.2), one), \
            performance.staged(store, series("b", 0.5), two):
        vouch(store, "a", "b")
    performance.settle(store)  # the next call
    assert saved(store) == {"a": {"10": 0.2, "20": 0.30000000000000004},
                            "b": {"10": 0.5, "20": 0.6}}
    assert performance.staged_files(store) == []


def test_a_running_call_s_staged_series_is_left_to_it(tmp_path: Path) -> None:
    """Another call's settle, while this one runs before its run.json: left, not thrown away
    as a killed call's; once the call is gone (killed), it goes as before."""
    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    vouch(store)
    name = performance.pending_name()
    with performance.staged(store, series("a", 0.2), name):
        performance.settle(store)
        assert (store.root / name).is_file()
        vouch(store, "a")  # this call's run.json, then it is killed before performance.json
    performance.settle(store)
    assert saved(store) == {"a": {"10": 0.2, "20": 0.30000000000000004}}
    assert not (store.root / name).exists()


def test_a_staged_series_run_json_never_vouched_for_is_thrown_away(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    vouch(store)
    with performance.staged(store, series("a", 0.2), performance.pending_name()):
        pass  # killed before its run.json
    performance.settle(store)
    assert saved(store) == {} and performance.staged_files(store) == []


def test_a_series_an_earlier_version_staged_is_settled(tmp_path: Path) -> None:
    """``performance.pending.json``, the one name every call staged under before."""
    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    vouch(store, "a")
    write_json(store.root / performance.PENDING, {"series": {"a": {
        "source": "performance (a.csv)", "values": {"10": 0.2},
        "records": {"--performance-csv for a": "sha-a"}}}})
    performance.settle(store)
    assert saved(store) == {"a": {"10": 0.2}}
    assert not (store.root / performance.PENDING).exists()


def test_a_staged_series_is_an_input_of_the_stored_analysis(tmp_path: Path) -> None:
    """A report reads a vouched staged series (`performance.load`): an analysis stored before
    it was staged is not reused as if nothing changed."""
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.analysis.occupations import Statistics
    from biasscope.dynamics.summary.reuse import inputs_key

    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    vouch(store, "a")
    before = inputs_key(store, AnalysisConfig(), Statistics())
    with performance.staged(store, series("a", 0.2), performance.pending_name()):
        pass
    assert inputs_key(store, AnalysisConfig(), Statistics()) != before
    assert performance.load(store, {"checkpoints": []}) == {
        "a": ("performance (a.csv)", {10: 0.2, 20: 0.30000000000000004})}
