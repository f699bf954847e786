"""BBQ (Parrish et al., 2022): question-answering bias over all 11 categories.

The probe's folder: `items` (the upstream lines, the items and the probe), `metrics` (its
scores over answer records: what ``biasscope audit`` reports), `steps` (its values per
checkpoint and the report's section over steps), `compare` (s_DIS and s_AMB for
``biasscope compare``) and `wordings` (its built-in wordings and its scores across them).
"""

from __future__ import annotations

from biasscope.probes.base import option_metrics
from biasscope.probes.bbq.compare import COMPARE
from biasscope.probes.bbq.items import (
    ANSWERS,
    CATEGORIES,
    DATA,
    DEFAULT_TEMPLATE,
    DETECTOR,
    FIELDS,
    METRICS,
    NAME,
    REQUESTS,
    TEMPLATE_FIELDS,
    UNKNOWN_TEXTS,
    BBQProbe,
    answer_text,
    answers,
    bbq_metrics,
    bias_score,
    by_template,
    find_target,
    from_data,
    load_items,
    parse_line,
    sample,
)
from biasscope.probes.bbq.steps import HEADLINE_NAMES, PANELS, STEP_STATISTICS
from biasscope.probes.bbq.wordings import ACROSS_WORDINGS, WORDINGS
from biasscope.probes.facets import Absent, ProbeInfo, about

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=DETECTOR,
    wordings=WORDINGS,
    unit_metrics=option_metrics,
    step_statistics=STEP_STATISTICS,
    panels=PANELS,
    compare=COMPARE,
    across_wordings=ACROSS_WORDINGS,
    performance=Absent("it measures bias, not performance"),
    selection="categories",
    seeded=False,
    headline_names=HEADLINE_NAMES,
)

__all__ = ["ANSWERS", "CATEGORIES", "DATA", "DEFAULT_TEMPLATE", "DETECTOR", "FIELDS", "METRICS",
           "NAME", "PROBE", "REQUESTS", "TEMPLATE_FIELDS", "UNKNOWN_TEXTS", "BBQProbe",
           "answer_text", "answers", "bbq_metrics", "bias_score", "by_template", "find_target",
           "from_data", "load_items", "parse_line", "sample"]
