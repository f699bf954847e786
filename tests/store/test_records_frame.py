"""A unit's records are built a column at a time: the very frame (and parquet bytes) that
building them a row at a time gives, for every kind of score and of item groups."""

from __future__ import annotations

import io
from dataclasses import replace

import pandas as pd
import pytest

from biasscope.backends.base import ContinuationScore, NextTokenScore
from biasscope.core.items import Item
from biasscope.dynamics.scoring.units import _records_rows, records_frame
from biasscope.probes import load_probe
from biasscope.store.units import Unit


def parquet(frame: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.to_parquet(out, index=False)
    return out.getvalue()


def same(unit: Unit, items: list[Item], scores: list[object]) -> None:
    fast, slow = records_frame(unit, items, scores), _records_rows(unit, items, scores)
    pd.testing.assert_frame_equal(fast, slow)
    assert list(fast.dtypes) == list(slow.dtypes)
    assert parquet(fast) == parquet(slow)


@pytest.mark.parametrize("unit", [Unit("m", "step10", "winobias-gender", 3, 10, "/ck/step10"),
                                  Unit("m", None, "winobias-gender", 0)])
def test_next_token_records_equal_row_by_row(winobias_dir, unit):
    items = load_probe("winobias-gender", data_dir=winobias_dir).items(unit.seed)[:50]
    scores = [NextTokenScore((-1.5 - i, -2.25, -9.0 + i / 7), 1 + i) for i in range(len(items))]
    same(unit, items, scores)


def test_other_scores_and_groups_equal_row_by_row():
    base = Item(id="a", prompt="p", options=("x", "y"), continuations=(" x", " y"), answer=1,
                groups={"split": "pro", "seed": 99, "item_id": "shadow", "kind": None})
    items = [replace(base, id=f"a{i}", answer=i % 2) for i in range(6)]
    unit = Unit("m", None, "lambada", 0)
    same(unit, items, [ContinuationScore(-float(i), i % 2 == 0, 3) for i in range(6)])
    ragged = [*items[:3], replace(items[3], groups={"split": "anti", "extra": 1.5})]
    same(unit, ragged, [NextTokenScore((-1.0, -2.0), 2)] * 4)
    with pytest.raises(ValueError):
        records_frame(unit, items, [NextTokenScore((-1.0, -2.0), 2)] * 5)
