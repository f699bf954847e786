"""Held-out perplexity on plain text (ETHICS commonsense scenarios, or your own documents).

The probe's folder: `items` (the documents, their held-out split, the probe and perplexity
with its interval) and `metrics` (a unit's perplexity). Its perplexity, inverted, is the
performance a fairness curve is read against.
"""

from __future__ import annotations

from biasscope.probes.facets import Absent, Performance, ProbeInfo, about
from biasscope.probes.perplexity.items import (
    DATA,
    ETHICS,
    METRICS,
    NAME,
    REQUESTS,
    Document,
    Perplexity,
    clip,
    from_data,
    held_out,
    load_documents,
    perplexity,
    perplexity_interval,
    split,
)
from biasscope.probes.perplexity.metrics import perplexity_metrics

_PERFORMANCE = "it measures performance, not bias"

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for continuation scores only, which need no reading"),
    wordings=Absent("its documents are asked as they are, without a template"),
    unit_metrics=perplexity_metrics,
    step_statistics=Absent(f"{_PERFORMANCE}: the dynamics analysis reads it as the "
                           "performance series"),
    panels=Absent("the dynamics report draws it as the performance series"),
    compare=Absent(_PERFORMANCE),
    across_wordings=Absent("it has no wordings"),
    # higher is better, as budgets read a series: a 2% loss is about 2% more perplexity
    performance=Performance("perplexity", "1 / held-out perplexity", invert=True),
    seeded=False,
)

__all__ = ["DATA", "ETHICS", "METRICS", "NAME", "PROBE", "REQUESTS", "Document", "Perplexity",
           "clip", "from_data", "held_out", "load_documents", "perplexity",
           "perplexity_interval", "perplexity_metrics", "split"]
