"""Adult's measure for ``biasscope compare`` and ``power``: the pair flip rate, per pair
(default margin 0.05)."""

from __future__ import annotations

import pandas as pd

from biasscope.probes.adult.items import answer_pairs, read_answers
from biasscope.probes.facets import Compare, Measure, Values, labels

MEASURES = (Measure("flip_rate", "pair flip rate", 0.05, 1.0),)


def values(records: pd.DataFrame) -> list[Values]:
    """Pair flip rate: 1 where the male and female versions of a complete pair differ (under
    several wordings, the pair's share of its wordings that flip)."""
    answers = read_answers(records)
    flips = []
    for _, part in answers.groupby(labels(answers), sort=False):
        pairs = answer_pairs(part)
        flips.append(pairs.loc[pairs["complete"], "flip"].astype("float64"))
    joined = pd.concat(flips) if flips else pd.Series(dtype="float64")
    joined.index = joined.index.astype(str)
    return [Values("flip_rate", {"pairs": joined.groupby(level=0, sort=False).mean()},
                   {"pairs": 1.0})]


COMPARE = Compare(MEASURES, values)
