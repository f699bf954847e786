"""Winogender's measure for ``biasscope compare`` and ``power``: the accuracy gap he − she,
paired by sentence (each sentence is asked under both pronouns, so the gap is a per-sentence
difference; treating the pronouns as independent groups would overstate its uncertainty)."""

from __future__ import annotations

import pandas as pd

from biasscope.probes.facets import Compare, Measure, Values
from biasscope.probes.winogender.metrics import answers, gap

MEASURES = (Measure("gap_male_female", "Winogender accuracy gap (he − she)", 0.05, 1.0,
                    (-1.0, 1.0)),)


def values(records: pd.DataFrame) -> list[Values]:
    """Each sentence's correctness under he minus under she, keyed by sentence."""
    frame = answers(records)
    if frame.empty:
        return []
    per_sentence = gap(frame, "correct", ("male",), ("female",))
    if per_sentence.empty:
        return []
    return [Values("gap_male_female", {"sentences": per_sentence}, {"sentences": 1.0})]


COMPARE = Compare(MEASURES, values)
