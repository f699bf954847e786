"""Professional bias over training steps: its values per checkpoint
(`biasscope.dynamics.summary.probe_steps` tests them over each model's checkpoints) and the report's
section that draws them (data: `biasscope.report.probe_panels` renders it)."""

from __future__ import annotations

import pandas as pd

from biasscope.probes.facets import Panel, Panels, StepStatistics, StepValues, step_value
from biasscope.probes.professional.items import metrics


def professional_values(records: pd.DataFrame, confidence: float = 0.95,
                        n_resamples: int = 2000) -> StepValues:
    """The stereotype preference: the option probability 'she' moves to the female-coded
    occupation against 'he', per sentence (bootstrap CI and the test of the mean over
    sentences, Cohen's d_z); the same pronoun effect on picked answers,
    and the stereotyped-answer rate; CIs at ``confidence``, bootstraps of ``n_resamples``."""
    head = metrics(records, confidence, n_resamples)["headline"]
    out: StepValues = {}
    if "p_pronoun_effect" in head:
        out["preference"] = step_value(head["p_pronoun_effect"])
    out["pronoun_effect"] = step_value(head["pronoun_effect"])
    out["stereotyped_rate"] = step_value(head["stereotyped_rate"])
    return out


STEP_STATISTICS = StepStatistics(professional_values, ("preference",), {
    "preference": "stereotype preference (probability 'she' moves to the female-coded "
                  "occupation)",
    "pronoun_effect": "pronoun effect on picked occupations",
    "stereotyped_rate": "stereotyped-answer rate"})

#: Words for the audit headline's values the step statistics do not name.
HEADLINE_NAMES = {
    "p_pronoun_effect": STEP_STATISTICS.names["preference"],
    "pronoun_gap": "stereotyped-answer gap, he − she",
    "stereotyped_rate_he": "stereotyped-answer rate with 'he'",
    "stereotyped_rate_she": "stereotyped-answer rate with 'she'",
    "p_stereotyped_he": "probability of the stereotyped occupation with 'he'",
    "p_stereotyped_she": "probability of the stereotyped occupation with 'she'",
    "refused_rate": "refusal rate",
    "unparsed_rate": "share of answers naming no single occupation",
    "ambiguity_rate": "share of answers calling the sentence ambiguous"}

PANELS = Panels("Professional bias over training steps", (
    Panel("Stereotype preference", "Option probability the model moves to the female-coded "
          "occupation after 'she' against after 'he', per sentence, averaged over sentences "
          "({level} bootstrap CI over sentences; test of the mean over sentences); 0: the "
          "pronoun does not matter, positive: answers follow the stereotype.", ("preference",)),
    Panel("Picked answers", "The same on the picked occupations (tested the same way), and "
          "the share of answers naming the stereotyped occupation ({level} CIs).",
          ("pronoun_effect", "stereotyped_rate"))))
