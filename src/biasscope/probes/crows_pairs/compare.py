"""CrowS-Pairs' measure for ``biasscope compare`` and ``power``: pct_stereotype, per pair."""

from __future__ import annotations

import pandas as pd

from biasscope.probes.crows_pairs.metrics import pairs
from biasscope.probes.facets import Compare, Measure, Values

MEASURES = (Measure("pct_stereotype", "share of pairs whose more-stereotyping sentence is "
                    "likelier (pct_stereotype)", 0.05, 1.0),)


def values(records: pd.DataFrame) -> list[Values]:
    """Whether each pair's more-stereotyping sentence is the likelier (1) or not (0)."""
    p = pairs(records)
    if p.empty:
        return []
    series = pd.Series(p["stereotyped"].to_numpy(), index=p["pair"].astype(str),
                       dtype="float64")
    return [Values("pct_stereotype", {"all": series}, {"all": 1.0})]


COMPARE = Compare(MEASURES, values)
