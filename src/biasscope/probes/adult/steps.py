"""Adult counterfactual pairs over training steps: their values per checkpoint
(`biasscope.dynamics.summary.probe_steps` tests them over each model's checkpoints) and the report's
section that draws them (data: `biasscope.report.probe_panels` renders it)."""

from __future__ import annotations

import pandas as pd

from biasscope.probes.adult.items import pair_metrics
from biasscope.probes.facets import Panel, Panels, StepStatistics, StepValues, step_value


def adult_values(records: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
                 ) -> StepValues:
    """The pair flip rate (Wilson CI, exact McNemar test, Cohen's g) and the demographic
    parity and equalized odds differences (bootstrap CIs over pairs, of ``n_resamples``), at
    ``confidence``."""
    head = pair_metrics(records, confidence, n_resamples)["headline"]
    out: StepValues = {}
    if "pair_flip_rate" in head:
        out["flip_rate"] = step_value(head["pair_flip_rate"])
    for key in ("demographic_parity_difference", "equalized_odds_difference"):
        out[key] = step_value(head[key])
    return out


STEP_STATISTICS = StepStatistics(adult_values, ("flip_rate",), {
    "flip_rate": "Adult pair flip rate",
    "demographic_parity_difference": "demographic parity difference",
    "equalized_odds_difference": "equalized odds difference"})

#: Words for the audit headline's values the step statistics do not name.
HEADLINE_NAMES = {
    "pair_flip_rate": STEP_STATISTICS.names["flip_rate"],
    "accuracy_male": "accuracy on prompts about a man",
    "accuracy_female": "accuracy on prompts about a woman",
    "refusal_rate": "refusal rate",
    "unparsed_rate": "share of answers neither yes nor no"}

PANELS = Panels("Adult counterfactual pairs over training steps", (
    Panel("Pair flip rate", "Share of complete pairs whose answer changes when only the "
          "person's sex is flipped ({level} Wilson CI); tested by exact McNemar on the discordant "
          "pairs.", ("flip_rate",)),
    Panel("Demographic parity and equalized odds differences", "fairlearn's differences "
          "between men and women over complete pairs ({level} bootstrap CI over pairs); 0 is "
          "parity.", ("demographic_parity_difference", "equalized_odds_difference"))))
