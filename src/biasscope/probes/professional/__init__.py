"""Professional bias: which occupation an ambiguous pronoun is read as (after Kotek et al. 2023).

The probe's folder: `items` (the sentences, the probe and its metrics: what ``biasscope
audit`` reports), `steps` (its values per checkpoint and the report's section over steps),
`compare` (the stereotype preference for ``biasscope compare``) and `wordings` (its built-in
wordings and its measures across them).
"""

from __future__ import annotations

from biasscope.probes.base import option_metrics
from biasscope.probes.facets import Absent, ProbeInfo, about
from biasscope.probes.professional.compare import COMPARE
from biasscope.probes.professional.items import (
    DATA,
    DEFAULT_TEMPLATE,
    DETECTOR,
    METRICS,
    NAME,
    ORDERS,
    OUTCOMES,
    PRONOUNS,
    REQUESTS,
    SENTENCES,
    TEMPLATE_FIELDS,
    VERSION,
    ProfessionalBias,
    Sentence,
    from_data,
    metrics,
    outcome,
    says_ambiguous,
    stereotyped_probability,
)
from biasscope.probes.professional.steps import HEADLINE_NAMES, PANELS, STEP_STATISTICS
from biasscope.probes.professional.wordings import ACROSS_WORDINGS, WORDINGS

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
    seeded=False,
    headline_names=HEADLINE_NAMES,
)

__all__ = ["DATA", "DEFAULT_TEMPLATE", "DETECTOR", "METRICS", "NAME", "ORDERS", "OUTCOMES",
           "PROBE", "PRONOUNS", "REQUESTS", "SENTENCES", "TEMPLATE_FIELDS", "VERSION",
           "ProfessionalBias", "Sentence", "from_data", "metrics", "outcome", "says_ambiguous",
           "stereotyped_probability"]
