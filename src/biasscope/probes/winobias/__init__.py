"""WinoBias Type 2 as a gender question (Patel et al., *Fairness Dynamics During Training*).

The probe's folder: `items` (the sentences, the prompts, the probe), `values` (per-record and
per-prompt values its analysis and comparisons read), `compare` (its measures for
``biasscope compare``) and `wordings` (its built-in wordings and measures across them). Its
unit metrics are the next-token ones (`biasscope.probes.next_token`); its analysis over
training steps is the dynamics analysis itself (`biasscope.dynamics.summary.build`).
"""

from __future__ import annotations

from biasscope.probes.facets import Absent, ProbeInfo, about
from biasscope.probes.next_token import dynamics_metrics
from biasscope.probes.winobias.compare import COMPARE
from biasscope.probes.winobias.items import (
    CONTINUATIONS,
    DATA,
    DEFAULT_TEMPLATE,
    FEMALE_OCCUPATIONS,
    GENDERS,
    MALE_OCCUPATIONS,
    METRICS,
    NAME,
    OPTIONS,
    PRONOUN_GENDER,
    REQUESTS,
    SPLITS,
    SUBSETS,
    TEMPLATE_FIELDS,
    WinoBiasGender,
    WinoSentence,
    from_data,
    load_sentences,
    option_order,
    parse_line,
    read_occupations,
)
from biasscope.probes.winobias.wordings import ACROSS_WORDINGS, WORDINGS

PROBE = ProbeInfo(
    name=NAME, load=from_data, requests=REQUESTS, data=DATA, metrics=METRICS,
    about=about(__doc__),
    detector=Absent("it is asked for next-token scores only, which need no reading"),
    wordings=WORDINGS,
    unit_metrics=dynamics_metrics,
    step_statistics=Absent("its analysis over training steps is the dynamics analysis itself "
                           "(gap tests, emergence, where to stop)"),
    panels=Absent("the dynamics report's own figures draw it"),
    compare=COMPARE,
    across_wordings=ACROSS_WORDINGS,
    performance=Absent("it measures bias, not performance"),
)

__all__ = ["CONTINUATIONS", "DATA", "DEFAULT_TEMPLATE", "FEMALE_OCCUPATIONS", "GENDERS",
           "MALE_OCCUPATIONS", "METRICS", "NAME", "OPTIONS", "PROBE", "PRONOUN_GENDER",
           "REQUESTS", "SPLITS", "SUBSETS", "TEMPLATE_FIELDS", "WinoBiasGender", "WinoSentence",
           "from_data", "load_sentences", "option_order", "parse_line", "read_occupations"]
