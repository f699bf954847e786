"""A unit file read for analysis is what ``pandas.read_parquet`` reads (types included), and
the index of a run names each key a file holds once, whether its rows share one key or not."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from biasscope.backends.base import NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.dynamics.scoring import unit_of
from biasscope.dynamics.scoring.units import records_frame
from biasscope.probes import load_probe
from biasscope.store.directory import RunStore
from biasscope.store.reading import unit_index
from biasscope.store.units import records_of


def write(store: RunStore, winobias_dir: Path, revision: str | None, step: int | None) -> Path:
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    unit = unit_of(Checkpoint("m", "dir", revision, step), probe.name, 0)
    items = probe.items(0)[:12]
    scores = [NextTokenScore(tuple(-1.0 - i for i, _ in enumerate(it.options)), 3) for it in items]
    return store.write_unit(unit, records_frame(unit, items, scores))


def test_records_are_what_pandas_reads(tmp_path: Path, winobias_dir: Path) -> None:
    store = RunStore(tmp_path / "run")
    for path in (write(store, winobias_dir, "step10", 10), write(store, winobias_dir, None, None)):
        data = path.read_bytes()
        ours, theirs = records_of(data), pd.read_parquet(io.BytesIO(data))
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
        assert list(ours.dtypes) == list(theirs.dtypes)


def test_the_index_names_each_key_once(tmp_path: Path, winobias_dir: Path) -> None:
    store = RunStore(tmp_path / "run")
    one = write(store, winobias_dir, "step10", 10)
    (entry,) = unit_index(store)
    assert entry.path == one and entry.checkpoints == {("winobias-gender", "m", 10)}
    frame = pd.read_parquet(one)  # a file of two checkpoints' rows (an older run's layout)
    mixed = pd.concat([frame, frame.assign(step=20, revision="step20"), frame.assign(step=None)])
    mixed.to_parquet(one, index=False)
    (entry,) = unit_index(store)
    assert entry.checkpoints == {("winobias-gender", "m", 10), ("winobias-gender", "m", 20),
                                 ("winobias-gender", "m", None)}
    assert entry.stepless == {("winobias-gender", "m", "step10")}
