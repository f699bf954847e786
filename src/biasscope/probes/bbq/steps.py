"""BBQ over training steps: its values per checkpoint (`biasscope.dynamics.summary.probe_steps`
reads them one step at a time and tests them over each model's checkpoints) and the report's
section that draws them (data: `biasscope.report.probe_panels` renders it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from biasscope.core.wordings import sign_flip_p
from biasscope.probes.bbq.metrics import answers, bbq_metrics
from biasscope.probes.facets import Panel, Panels, StepStatistics, StepValues, plain, step_value

#: Random sign patterns of the test over more than 12 templates.
SIGN_FLIPS = 10_000


def _template_test(frame: pd.DataFrame, ambiguous: bool) -> tuple[float, float]:
    """Whether the non-unknown answers lean with the stereotype more than against it (a bias
    score of 0 is half of each): a sign-flip test over templates of each template's biased
    minus half its non-unknown answers, every pattern up to 12 templates, else `SIGN_FLIPS`
    random ones; and Cohen's g (share biased minus 0.5). A template's items are no
    independent trials (`metrics`); with one item per template this is the exact binomial
    test."""
    rows = frame[frame["parsed"] & (frame["ambiguous"] == ambiguous) & frame["eligible"]]
    n, k = len(rows), int(rows["biased"].sum())
    if n == 0:
        return math.nan, math.nan
    excess = rows["biased"].astype(np.float64) - 0.5
    per_template = excess.groupby(rows["question_template"].to_numpy(),
                                  sort=False).sum().to_numpy()
    p = sign_flip_p(per_template, 0.0, SIGN_FLIPS, np.random.default_rng(0))
    return p, k / n - 0.5


def bbq_values(records: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
               ) -> StepValues:
    """s_DIS and s_AMB (all categories and per category) with their CIs from `bbq_metrics` at
    ``confidence``, each with a sign-flip test over templates; accuracies per context
    condition. ``n_resamples`` is unused: these intervals are the templates' jackknife's."""
    head = bbq_metrics(records, confidence)["headline"]
    if not head:
        return {}
    frame = answers(records)
    out: StepValues = {}
    for key, name, ambiguous in (("bias_disambiguated", "s_dis", False),
                                 ("bias_ambiguous", "s_amb", True)):
        p, g = _template_test(frame, ambiguous)
        out[name] = step_value(head[key], p_value=plain(p), effect_size=plain(g))
        for category, part in frame.groupby("category", sort=True):
            p, g = _template_test(part, ambiguous)
            out[f"{name}:{category}"] = step_value(head[f"{key}:{category}"], p_value=plain(p),
                                                   effect_size=plain(g))
    for key in ("accuracy_ambiguous", "accuracy_disambiguated"):
        out[key] = step_value(head[key])
    return out


STEP_STATISTICS = StepStatistics(bbq_values, ("s_dis", "s_amb"), {
    "s_dis": "BBQ bias score in disambiguated contexts (s_DIS)",
    "s_amb": "BBQ bias score in ambiguous contexts (s_AMB)",
    "accuracy_ambiguous": "accuracy in ambiguous contexts",
    "accuracy_disambiguated": "accuracy in disambiguated contexts"})

#: Words for the audit headline's values the step statistics do not name.
HEADLINE_NAMES = {
    "bias_disambiguated": STEP_STATISTICS.names["s_dis"],
    "bias_ambiguous": STEP_STATISTICS.names["s_amb"],
    "unanswered_rate": "share of answers naming no option",
    "refusal_rate": "refusal rate"}

PANELS = Panels("BBQ over training steps", (
    Panel("s_DIS and s_AMB over all categories",
          "BBQ bias scores run from -1 (every non-unknown answer against the stereotype) to 1 "
          "(every one with it); s_AMB is scaled by the share of wrong answers in ambiguous "
          "contexts. Error bars: {level} CI over templates (their jackknife, Student's t).",
          ("s_dis", "s_amb")),
    Panel("s_DIS per category", "The disambiguated bias score of each category, with its {level} "
          "CI over templates (error bars).", ("s_dis:*",)),
    Panel("s_AMB per category", "The ambiguous bias score of each category, with its {level} "
          "CI over templates (error bars).", ("s_amb:*",)),
    Panel("Accuracy per context condition", "Share of answers naming the correct option; in "
          "ambiguous contexts 'unknown' is right.",
          ("accuracy_ambiguous", "accuracy_disambiguated"))))
