"""WinoBias across wordings (``--wordings``), per checkpoint: the JSD-P gap, the accuracy
gap, pro − anti and the male default, each with its per-wording estimates, the pooled estimate
and its two-level CI, the variance share due to wording, sign agreement and a verdict
(`biasscope.core.wordings`). The measures, their names and how rows are resampled (by
WinoBias pair) are the probe's (`biasscope.probes.winobias.wordings`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.stats import CORRECTIONS, Correction, adjust_pvalues
from biasscope.core.wordings import verdict, wording_uncertainty
from biasscope.dynamics.analysis import occupations
from biasscope.dynamics.analysis.breakdown import occupations as occupation_rows
from biasscope.dynamics.analysis.breakdown import prompt_means
from biasscope.dynamics.analysis.emergence import emergence_step
from biasscope.probes.winobias.wordings import LABELS as LABELS  # the probe's, re-exported
from biasscope.probes.winobias.wordings import measures as measures


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
    """The template-inclusive test over checkpoints: per step the JSD-P gap's pooled p-value
    (`core.wordings`: a t-test on its two-level bootstrap standard error, wordings and
    items), corrected over the model's checkpoints, and the
    step from which every later one is significant in the last one's direction."""
    steps = sorted(s for s in breakdown if "jsdp_gap" in (breakdown[s].get("wordings") or {}))
    if not steps:
        return None, []
    pooled = [breakdown[s]["wordings"]["jsdp_gap"]["pooled"] for s in steps]
    adjusted = adjust_pvalues([p.get("p_value", np.nan) for p in pooled], correction)
    gaps = [p["estimate"] for p in pooled]
    step = emergence_step(steps, adjusted, alpha, gaps=gaps, min_gap=min_gap)
    test = (f"t-test on the two-level bootstrap's standard error over wordings and items, "
            f"{CORRECTIONS[correction]}-corrected, α = {alpha:g}")
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


def occupations_by_wording(values: pd.DataFrame, confidence: float = 0.95
                           ) -> dict[str, list[dict[str, Any]]]:
    """The per-occupation preferences of one (model, step) under each wording on its own
    (`breakdown.occupations`); empty with one wording."""
    if "template" not in values or values["template"].nunique() < 2:
        return {}
    return {str(w): occupation_rows(prompt_means(part), confidence)
            for w, part in values.groupby("template", sort=True, observed=True)}


def labour_statistics(model: str, by_wording: dict[str, list[dict[str, Any]]],
                      statistics: Any, confidence: float, n_resamples: int
                      ) -> tuple[dict[str, Any], str | None]:
    """Spearman's ρ between each wording's preferences and the BLS share of women, and the
    sentence that says how far the wordings agree. A rank correlation has no two-level pooled
    CI here: each wording's ρ keeps its own CI over occupations, and the wordings whose ρ
    differs from 0 are counted after Holm over them (``p_holm``): counted by their own CIs,
    a model unrelated to the statistics had one named in 14% (4 wordings) and 25% (8) of runs."""
    rhos = {w: occupations.compare(rows, statistics, confidence, n_resamples)["spearman"]
            for w, rows in by_wording.items()}
    known = [r for r in rhos.values() if r["estimate"] is not None]
    if not known:
        return rhos, None
    values = [float(r["estimate"]) for r in known]
    held = adjust_pvalues([math.nan if r.get("p_value") is None else r["p_value"]
                           for r in known], "holm")
    alpha = 1 - confidence
    for r, p in zip(known, held, strict=True):
        r["p_holm"] = None if math.isnan(p) else float(p)
    below = sum(1 for r, p in zip(known, held, strict=True) if p < alpha and r["estimate"] < 0)
    above = sum(1 for r, p in zip(known, held, strict=True) if p < alpha and r["estimate"] > 0)
    negative = sum(1 for v in values if v < 0)
    return rhos, (
        f"{model}: per wording, the preference's Spearman ρ with the share of women ranges "
        f"from {min(values):+.2f} to {max(values):+.2f}: negative under {negative} of "
        f"{len(known)} wordings; significantly below 0 under {below} and above 0 under {above} "
        f"(Holm over the {len(known)} wordings, p < {alpha:g}).")
