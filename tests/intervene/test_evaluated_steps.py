"""An arm's resume skips only the evaluations whose units are whole: a unit cut short (a copy
or a sync that truncated it, checksum rewritten to match) is set aside and its step evaluated
again, as a sweep redoes a short unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from biasscope.backends.base import NextTokenScore
from biasscope.dynamics.scoring import unit_of
from biasscope.dynamics.scoring.units import records_frame
from biasscope.intervene.train import Limited, checkpoint_at, evaluated_steps
from biasscope.probes import load_probe
from biasscope.store.directory import CorruptUnitWarning, RunStore


def test_a_short_unit_is_evaluated_again(tmp_path: Path, winobias_dir: Path) -> None:
    probe = Limited(load_probe("winobias-gender", data_dir=winobias_dir), 8)
    store = RunStore(tmp_path / "run")
    for step, kept in ((0, 8), (20, 8), (40, 5)):
        unit = unit_of(checkpoint_at("control", step), probe.name, 0)
        items = probe.items(0)[:kept]
        scores = [NextTokenScore(tuple(-1.0 for _ in it.options), 1) for it in items]
        store.write_unit(unit, records_frame(unit, items, scores))
    with pytest.warns(CorruptUnitWarning, match="holds 5 records"):
        assert evaluated_steps(store, "control", [probe], [0], [0, 20, 40, 60]) == [0, 20]
    assert not store.unit_path(unit_of(checkpoint_at("control", 40), probe.name, 0)).exists()
