"""Gender-income counterfactual pairs on DecodingTrust's Adult prompts (seed 004).

The probe's folder: `items` (the prompts, their sex-flipped twins, the probe and its metrics:
what ``biasscope audit`` reports), `steps` (its values per checkpoint and the report's section
over steps), `compare` (the pair flip rate for ``biasscope compare``) and `wordings` (its
built-in wordings and its measures across them).
"""

from __future__ import annotations

from biasscope.probes.adult.compare import COMPARE
from biasscope.probes.adult.items import (
    BASE_RATES,
    CONTINUATIONS,
    DATA,
    DEFAULT_TEMPLATE,
    DETECTOR,
    METRICS,
    NAME,
    OPTIONS,
    REQUESTS,
    SYSTEM_PROMPT,
    TASK,
    TEMPLATE_FIELDS,
    UNFAIR_SYSTEM_PROMPT,
    AdultCounterfactual,
    AdultPrompt,
    answer_pairs,
    fairness_gaps,
    file_name,
    flip_direction,
    from_data,
    group_gaps,
    load_prompts,
    originals_only,
    pair_metrics,
    parse_line,
    read_answers,
    undefined_odds,
)
from biasscope.probes.adult.steps import HEADLINE_NAMES, PANELS, STEP_STATISTICS
from biasscope.probes.adult.wordings import ACROSS_WORDINGS, WORDINGS
from biasscope.probes.base import option_metrics
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
    seeded=False,
    headline_names=HEADLINE_NAMES,
)

__all__ = ["BASE_RATES", "CONTINUATIONS", "DATA", "DEFAULT_TEMPLATE", "DETECTOR", "METRICS",
           "NAME", "OPTIONS", "PROBE", "REQUESTS", "SYSTEM_PROMPT", "TASK", "TEMPLATE_FIELDS",
           "UNFAIR_SYSTEM_PROMPT", "AdultCounterfactual", "AdultPrompt", "answer_pairs",
           "fairness_gaps", "file_name", "flip_direction", "from_data", "group_gaps",
           "load_prompts", "originals_only", "pair_metrics", "parse_line", "read_answers",
           "undefined_odds"]
