"""LAMBADA last-word accuracy (OpenAI's detokenised test set), the source's performance series.

The probe's folder: `items` (the passages and the probe) and `metrics` (a unit's accuracy and
perplexity). Its accuracy is the performance a fairness curve is read against.
"""

from __future__ import annotations

from biasscope.probes.facets import Absent, Performance, ProbeInfo, about
from biasscope.probes.lambada.items import (
    DATA,
    METRICS,
    NAME,
    REQUESTS,
    Lambada,
    from_data,
    load_passages,
)
from biasscope.probes.lambada.metrics import lambada_metrics

_PERFORMANCE = "it measures performance, not bias"

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for continuation scores only, which need no reading"),
    wordings=Absent("its passages are asked as they are, without a template"),
    unit_metrics=lambada_metrics,
    step_statistics=Absent(f"{_PERFORMANCE}: the dynamics analysis reads it as the "
                           "performance series"),
    panels=Absent("the dynamics report draws it as the performance series"),
    compare=Absent(_PERFORMANCE),
    across_wordings=Absent("it has no wordings"),
    performance=Performance("accuracy", "LAMBADA accuracy"),
    seeded=False,
)

__all__ = ["DATA", "METRICS", "NAME", "PROBE", "REQUESTS", "Lambada", "from_data",
           "lambada_metrics", "load_passages"]
