"""Winogender (Rudinger et al., 2018): whom he, she and they refer to, occupation or participant.

The probe's folder: `items` (the sentences, checked against the templates, and the probe),
`metrics` (accuracy per pronoun, the gaps, JSD between pronouns and the correlation with
occupation statistics), `steps` (its values per checkpoint and the report's section),
`occupations` (accuracy and the gap per occupation), `compare` (the accuracy gap for
``biasscope compare``) and `wordings` (its built-in wordings and its measures across them).
"""

from __future__ import annotations

from biasscope.probes.facets import Absent, ProbeInfo, about
from biasscope.probes.winogender.compare import COMPARE
from biasscope.probes.winogender.items import (
    DATA,
    DEFAULT_TEMPLATE,
    GENDERS,
    METRICS,
    NAME,
    OPTIONS,
    REQUESTS,
    TEMPLATE_FIELDS,
    Sentence,
    Winogender,
    from_data,
    load_sentences,
    read_stats,
)
from biasscope.probes.winogender.metrics import by_occupation, unit_metrics, winogender_values
from biasscope.probes.winogender.steps import PANELS, STEP_STATISTICS
from biasscope.probes.winogender.wordings import ACROSS_WORDINGS, WORDINGS

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for next-token scores only, which need no reading"),
    wordings=WORDINGS,
    unit_metrics=unit_metrics,
    step_statistics=STEP_STATISTICS,
    panels=PANELS,
    compare=COMPARE,
    across_wordings=ACROSS_WORDINGS,
    performance=Absent("it measures bias, not performance"),
    seeded=False,
)

__all__ = ["DATA", "DEFAULT_TEMPLATE", "GENDERS", "METRICS", "NAME", "OPTIONS", "PROBE",
           "REQUESTS", "TEMPLATE_FIELDS", "Sentence", "Winogender", "by_occupation",
           "from_data", "load_sentences", "read_stats", "unit_metrics", "winogender_values"]
