"""WinoBias across wordings (``--templates``), per checkpoint: the JSD-P gap, the accuracy
gap, pro − anti and the male default, each with its per-wording estimates, the pooled estimate
and its two-level CI, the variance share due to wording, sign agreement and a verdict
(`biasscope.core.wordings`).

The measures, over every record of one (model, step), all seeds:

- ``jsdp_gap``: mean JSD-P of the correct option on prompts whose answer is ``male`` minus on
  those whose answer is ``female`` (positive: the model is further from the right answer
  when it is male);
- ``accuracy_gap``: accuracy on ``male`` answers minus on ``female`` ones;
- ``pro_minus_anti``: accuracy on referenced prompts of pro-stereotypical sentences minus
  anti-stereotypical ones (positive: better where the pronoun fits the stereotype);
- ``male_default``: P(male) − P(female) (softmax over the options) on prompts whose answer
  is ``not specified`` (positive: an unspecified gender is read as male);
- ``occupation_stereotype``: P(male) − P(female) on prompts about male-stereotyped
  occupations minus female-stereotyped ones, over all prompts (pro and anti sentences put
  each pronoun on each occupation, so the pronoun cancels): the per-occupation preference
  summed up as how far it follows the stereotype.

Rows are resampled by WinoBias pair (line N of the pro and the anti file of one subset, both
prompts of each, all seeds), so the pairing and the seeds stay together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.stats import CORRECTIONS, Correction, adjust_pvalues
from biasscope.core.wordings import Measure, gap, rate, verdict, wording_uncertainty
from biasscope.dynamics import occupations
from biasscope.dynamics.breakdown import occupations as occupation_rows
from biasscope.dynamics.breakdown import prompt_means
from biasscope.dynamics.emergence import emergence_step

LABELS = {
    "jsdp_gap": "the JSD-P gap (male − female)",
    "accuracy_gap": "the accuracy gap (male − female)",
    "pro_minus_anti": "pro − anti accuracy",
    "male_default": "the male default (P(male) − P(female) when the gender is not specified)",
    "occupation_stereotype": "the occupation stereotype (P(male) − P(female) on male- minus "
                             "female-stereotyped occupations)",
}


def measures(values: pd.DataFrame) -> list[Measure]:
    """The measures of one checkpoint's `breakdown.record_values` (with ``template`` and
    ``answer_label``)."""
    answer = values["answer_label"].astype(str).to_numpy()
    male, female = answer == "male", answer == "female"
    referenced = (values["kind"].astype(str) == "referenced").to_numpy()
    split = values["split"].astype(str).to_numpy()
    stereotype = values["stereotype"].astype(str).to_numpy()
    out = []
    for name, (columns, combine) in {
            "jsdp_gap": gap(values["jsdp_correct"], male, female),
            "accuracy_gap": gap(values["correct"], male, female),
            "pro_minus_anti": gap(values["correct"], referenced & (split == "pro"),
                                  referenced & (split == "anti")),
            "male_default": rate(values["p_diff"], answer == "not specified"),
            "occupation_stereotype": gap(values["p_diff"], stereotype == "male",
                                         stereotype == "female")}.items():
        out.append(Measure(name, columns, combine))
    return out


def checkpoint_wordings(values: pd.DataFrame, confidence: float = 0.95,
                        n_resamples: int = 1000, alpha: float = 0.01,
                        correction: Correction = "holm") -> dict[str, Any]:
    """Every measure across the wordings of one (model, step); empty with one wording."""
    if "template" not in values or values["template"].nunique() < 2:
        return {}
    wordings = values["template"].astype(str).to_numpy()
    clusters = values["pair"].astype(str).to_numpy()
    out = {}
    for m in measures(values):
        result = wording_uncertainty(m, wordings, clusters, confidence=confidence,
                                     n_resamples=n_resamples, alpha=alpha,
                                     correction=correction)
        out[m.name] = {**result, "label": LABELS[m.name],
                       "verdict": verdict(result, LABELS[m.name])}
    return out


def sentences(model: str, step: int, wordings: dict[str, Any] | None, snapshot: bool
              ) -> list[str]:
    """The verdicts of a model's last checkpoint, named."""
    if not wordings:
        return []
    where = model if snapshot else f"{model} at step {step}"
    return [f"{where}: {r['verdict']}" for r in wordings.values()]


def emergence(model: str, breakdown: dict[int, dict[str, Any]], correction: Correction,
              alpha: float, min_gap: float = 0.0) -> tuple[dict[str, Any] | None, list[str]]:
    """The template-inclusive test over checkpoints: per step the JSD-P gap's two-level
    bootstrap p-value (wordings, then items), corrected over the model's checkpoints, and the
    step from which every later one is significant in the last one's direction."""
    steps = sorted(s for s in breakdown if "jsdp_gap" in (breakdown[s].get("wordings") or {}))
    if not steps:
        return None, []
    pooled = [breakdown[s]["wordings"]["jsdp_gap"]["pooled"] for s in steps]
    adjusted = adjust_pvalues([p.get("p_value", np.nan) for p in pooled], correction)
    gaps = [p["estimate"] for p in pooled]
    step = emergence_step(steps, adjusted, alpha, gaps=gaps, min_gap=min_gap)
    test = (f"two-level bootstrap over wordings and items, {CORRECTIONS[correction]}-corrected, "
            f"α = {alpha:g}")
    if len(steps) == 1:
        said = "" if adjusted[0] < alpha else "not "
        text = f"{model}: pooled over wordings, the JSD-P gap is {said}significant ({test})."
    elif step is None:
        text = (f"{model}: pooled over wordings, the JSD-P gap is not significant ({test}) "
                "through to the last checkpoint.")
    else:
        text = (f"{model}: pooled over wordings, the JSD-P gap is significant ({test}) from "
                f"step {step} on.")
    return {"steps": steps, "p_adjusted": [float(p) for p in adjusted], "jsdp_gap": step}, [text]


def lead(model: str, breakdown: dict[int, dict[str, Any]], snapshot: bool, options: Any
         ) -> tuple[dict[str, Any] | None, list[str]]:
    """A model's template-inclusive emergence (`emergence`) and the sentences that lead its
    findings: that test, then the last checkpoint's verdicts."""
    if not breakdown:
        return None, []
    last = max(breakdown)
    across, said = emergence(model, breakdown, options.correction, options.alpha,
                             options.min_gap)
    return across, said + sentences(model, last, breakdown[last].get("wordings"), snapshot)


def occupations_by_wording(values: pd.DataFrame, confidence: float = 0.95,
                           n_resamples: int = 2000) -> dict[str, list[dict[str, Any]]]:
    """The per-occupation preferences of one (model, step) under each wording on its own
    (`breakdown.occupations`); empty with one wording."""
    if "template" not in values or values["template"].nunique() < 2:
        return {}
    return {str(w): occupation_rows(prompt_means(part), confidence, n_resamples)
            for w, part in values.groupby("template", sort=True, observed=True)}


def labour_statistics(model: str, by_wording: dict[str, list[dict[str, Any]]],
                      statistics: Any, confidence: float, n_resamples: int
                      ) -> tuple[dict[str, Any], str | None]:
    """Spearman's ρ between each wording's preferences and the BLS share of women, and the
    sentence that says how far the wordings agree. A rank correlation has no two-level pooled
    CI here: each wording's ρ keeps its own CI over occupations."""
    rhos = {w: occupations.compare(rows, statistics, confidence, n_resamples)["spearman"]
            for w, rows in by_wording.items()}
    known = [r for r in rhos.values() if r["estimate"] is not None]
    if not known:
        return rhos, None
    values = [float(r["estimate"]) for r in known]
    below = sum(1 for r in known if r["high"] is not None and r["high"] < 0)
    above = sum(1 for r in known if r["low"] is not None and r["low"] > 0)
    negative = sum(1 for v in values if v < 0)
    return rhos, (
        f"{model}: per wording, the preference's Spearman ρ with the share of women ranges "
        f"from {min(values):+.2f} to {max(values):+.2f}: negative under {negative} of "
        f"{len(known)} wordings, with a {confidence:.0%} CI below 0 under {below} and above 0 "
        f"under {above}.")
