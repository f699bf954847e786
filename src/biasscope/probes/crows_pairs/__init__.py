"""CrowS-Pairs (Nangia et al., 2020): whole-sentence likelihood of more and less stereotyping pairs.

The probe's folder: `items` (the pairs and the probe), `metrics` (one row per pair and a unit's
numbers), `steps` (its values per checkpoint and the report's section over steps) and
`compare` (pct_stereotype for ``biasscope compare``). Its sentences are asked as they are.
"""

from __future__ import annotations

from biasscope.probes.crows_pairs.compare import COMPARE
from biasscope.probes.crows_pairs.items import (
    BIAS_TYPES,
    DATA,
    DIRECTIONS,
    METRICS,
    NAME,
    REQUESTS,
    CrowsPairs,
    Pair,
    from_data,
    load_pairs,
)
from biasscope.probes.crows_pairs.metrics import crows_metrics, pairs
from biasscope.probes.crows_pairs.steps import PANELS, STEP_STATISTICS
from biasscope.probes.facets import Absent, ProbeInfo, about

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for continuation scores only, which need no reading"),
    wordings=Absent("its sentences are scored as they are, without a template"),
    unit_metrics=crows_metrics,
    step_statistics=STEP_STATISTICS,
    panels=PANELS,
    compare=COMPARE,
    across_wordings=Absent("it has no wordings"),
    performance=Absent("it measures bias, not performance"),
    selection="version",
    seeded=False,
)

__all__ = ["BIAS_TYPES", "DATA", "DIRECTIONS", "METRICS", "NAME", "PROBE", "REQUESTS",
           "CrowsPairs", "Pair", "crows_metrics", "from_data", "load_pairs", "pairs"]
