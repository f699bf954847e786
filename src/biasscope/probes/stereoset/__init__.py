"""StereoSet intrasentence (Nadeem et al., 2021): stereotype, anti-stereotype or unrelated fill.

The probe's folder: `items` (the examples and the probe), `metrics` (SS, LMS and ICAT as the
repository's evaluation defines them, with CIs) and `steps` (its values per checkpoint and
the report's section).
"""

from __future__ import annotations

from biasscope.probes.facets import Absent, ProbeInfo, about
from biasscope.probes.stereoset.items import (
    DATA,
    DOMAINS,
    LABELS,
    METRICS,
    NAME,
    REQUESTS,
    Example,
    StereoSet,
    from_data,
    load_examples,
)
from biasscope.probes.stereoset.metrics import examples, scores, stereoset_metrics
from biasscope.probes.stereoset.steps import PANELS, STEP_STATISTICS

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for continuation scores only, which need no reading"),
    wordings=Absent("its sentences are scored as they are, without a template"),
    unit_metrics=stereoset_metrics,
    step_statistics=STEP_STATISTICS,
    panels=PANELS,
    compare=Absent("its scores are averaged over target terms, not means of per-item values "
                   "that a comparison could pair"),
    across_wordings=Absent("it has no wordings"),
    performance=Absent("it measures bias, not performance"),
    seeded=False,
)

__all__ = ["DATA", "DOMAINS", "LABELS", "METRICS", "NAME", "PROBE", "REQUESTS", "Example",
           "StereoSet", "examples", "from_data", "load_examples", "scores",
           "stereoset_metrics"]
