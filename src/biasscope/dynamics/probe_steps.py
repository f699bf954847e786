"""The audit probes over training steps: BBQ, Adult counterfactuals and professional bias,
checkpoint by checkpoint, from stored records alone.

Each checkpoint's records of a probe go through the probe's own metrics (`bbq_metrics`,
`adult.pair_metrics`, `professional.metrics`: the numbers `biasscope probe` gives for one
model), reduced at once to a few values with their CIs; only those are kept, so memory
follows one step's records. Tested values (those with a p-value) are then corrected over the
model's checkpoints (Holm or BH, as the WinoBias gap), and emergence is the first step from
which every later checkpoint is significant with the final checkpoint's sign.

Seeds: these probes' items do not depend on the seed, so a run usually holds one seed per
checkpoint. Where it holds several, each seed is scored on its own; the checkpoint's estimate
is the seeds' mean, its interval the hull of theirs, and its p-value their largest (the effect
must be significant in every seed: an intersection-union test, valid at any seed count).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from biasscope.core.errors import BiasscopeError
from biasscope.probes import adult, bbq_metrics, professional
from biasscope.store.directory import RunStore
from biasscope.store.reading import read_unit, unit_index

Values = dict[str, dict[str, Any]]


def _ci(entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    keep = ("estimate", "low", "high", "n", "p_value", "effect_size")
    return {**{k: _num(entry[k]) for k in keep if k in entry}, **extra}


def _num(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _binomial(frame: pd.DataFrame, ambiguous: bool) -> tuple[float, float]:
    """Exact binomial test of biased against counter-biased non-unknown answers (a bias score
    of 0 is half of each) and Cohen's g (share biased minus 0.5)."""
    rows = frame[frame["parsed"] & (frame["ambiguous"] == ambiguous) & frame["eligible"]]
    n, k = len(rows), int(rows["biased"].sum())
    if n == 0:
        return math.nan, math.nan
    return float(sps.binomtest(k, n).pvalue), k / n - 0.5


def bbq_values(records: pd.DataFrame) -> Values:
    """s_DIS and s_AMB (all categories and per category) with their CIs from `bbq_metrics`,
    each with an exact binomial test; accuracies per context condition."""
    head = bbq_metrics.bbq_metrics(records)["headline"]
    if not head:
        return {}
    frame = bbq_metrics.answers(records)
    out: Values = {}
    for key, name, ambiguous in (("bias_disambiguated", "s_dis", False),
                                 ("bias_ambiguous", "s_amb", True)):
        p, g = _binomial(frame, ambiguous)
        out[name] = _ci(head[key], p_value=_num(p), effect_size=_num(g))
        for category, part in frame.groupby("category", sort=True):
            p, g = _binomial(part, ambiguous)
            out[f"{name}:{category}"] = _ci(head[f"{key}:{category}"], p_value=_num(p),
                                            effect_size=_num(g))
    for key in ("accuracy_ambiguous", "accuracy_disambiguated"):
        out[key] = _ci(head[key])
    return out


def adult_values(records: pd.DataFrame) -> Values:
    """The pair flip rate (Wilson CI, exact McNemar test, Cohen's g) and the demographic
    parity and equalized odds differences (bootstrap CIs over pairs)."""
    head = adult.pair_metrics(records)["headline"]
    out: Values = {}
    if "pair_flip_rate" in head:
        out["flip_rate"] = _ci(head["pair_flip_rate"])
    for key in ("demographic_parity_difference", "equalized_odds_difference"):
        out[key] = _ci(head[key])
    return out


def professional_values(records: pd.DataFrame) -> Values:
    """The stereotype preference: the option probability 'she' moves to the female-coded
    occupation against 'he', per sentence (bootstrap CI and Wilcoxon signed-rank test over
    sentences, matched-pairs rank-biserial r); the same pronoun effect on picked answers,
    and the stereotyped-answer rate."""
    head = professional.metrics(records)["headline"]
    out: Values = {}
    if "p_pronoun_effect" in head:
        out["preference"] = _ci(head["p_pronoun_effect"])
    out["pronoun_effect"] = _ci(head["pronoun_effect"])
    out["stereotyped_rate"] = _ci(head["stereotyped_rate"])
    return out


@dataclass(frozen=True)
class ProbeStatistics:
    """How one audit probe is read over steps: its values per checkpoint, the value its
    sentences, emergence markers and stopping recommendation follow, and words for it."""

    values: Callable[[pd.DataFrame], Values]
    headline: tuple[str, ...]
    names: dict[str, str] = field(default_factory=dict)


STATISTICS: dict[str, ProbeStatistics] = {
    "bbq": ProbeStatistics(bbq_values, ("s_dis", "s_amb"), {
        "s_dis": "BBQ bias score in disambiguated contexts (s_DIS)",
        "s_amb": "BBQ bias score in ambiguous contexts (s_AMB)",
        "accuracy_ambiguous": "accuracy in ambiguous contexts",
        "accuracy_disambiguated": "accuracy in disambiguated contexts"}),
    "adult-counterfactual": ProbeStatistics(adult_values, ("flip_rate",), {
        "flip_rate": "Adult pair flip rate",
        "demographic_parity_difference": "demographic parity difference",
        "equalized_odds_difference": "equalized odds difference"}),
    "professional-bias": ProbeStatistics(professional_values, ("preference",), {
        "preference": "stereotype preference (probability 'she' moves to the female-coded "
                      "occupation)",
        "pronoun_effect": "pronoun effect on picked occupations",
        "stereotyped_rate": "stereotyped-answer rate"}),
}


def combine_seeds(per_seed: list[Values]) -> Values:
    """One checkpoint's values from each seed's: mean estimate, hull of the intervals, the
    largest p-value, the mean effect size, and the seeds' range (``seed_low``/``seed_high``)."""
    if len(per_seed) == 1:
        return {k: {**v, "seeds": 1} for k, v in per_seed[0].items()}
    out: Values = {}
    for key in sorted(set().union(*per_seed)):
        entries = [v[key] for v in per_seed if key in v]

        def gather(name: str, entries: list[dict[str, Any]] = entries) -> list[float]:
            return [float(e[name]) for e in entries if e.get(name) is not None]

        est = gather("estimate")
        row: dict[str, Any] = {
            "estimate": float(np.mean(est)) if est else None,
            "low": min(gather("low"), default=None), "high": max(gather("high"), default=None),
            "n": entries[0].get("n"), "seeds": len(entries),
            "seed_low": min(est, default=None), "seed_high": max(est, default=None)}
        if any("p_value" in e for e in entries):
            p, es = gather("p_value"), gather("effect_size")
            row["p_value"] = max(p) if len(p) == len(entries) else None
            row["effect_size"] = float(np.mean(es)) if es else None
        out[key] = row
    return out


def read_checkpoints(store: RunStore, unavailable: dict[str, str] | None = None
                     ) -> dict[str, dict[str, dict[int, Values]]]:
    """Per audit probe, model and training step: the checkpoint's values, reading the unit
    files of one step at a time (records without a step are left out). A probe whose metrics
    cannot run here (a missing optional extra: fairlearn for Adult) is left out, and the
    one-line reason goes into ``unavailable``."""
    unavailable = {} if unavailable is None else unavailable
    index = unit_index(store)
    by_step: dict[int, list[int]] = {}
    for i, entry in enumerate(index):
        for probe in STATISTICS:
            for step in entry.steps(probe):
                by_step.setdefault(step, []).append(i)
    out: dict[str, dict[str, dict[int, Values]]] = {}
    for step in sorted(by_step):
        chunks = []
        for i in sorted(set(by_step[step])):
            frame = read_unit(store, index[i].path)
            if frame is None:
                continue
            keep = frame["probe"].isin(list(STATISTICS)) & (frame["step"] == step).fillna(False)
            chunks.append(frame[keep])
            del frame
        if not chunks:
            continue
        rows = pd.concat(chunks, ignore_index=True)
        del chunks
        seeds = rows["seed"] if "seed" in rows else pd.Series(0, index=rows.index)
        rows = rows.assign(seed=seeds.fillna(0))
        for (probe, model), part in rows.groupby(["probe", "model"], sort=True):
            if str(probe) in unavailable:
                continue
            values = STATISTICS[str(probe)].values
            # Several wordings (--templates) are combined as seeds are: the largest p-value
            # makes a checkpoint significant only when it is under every wording.
            keys = ["seed", "template"] if "template" in part else ["seed"]
            try:
                per_seed = [values(chunk.reset_index(drop=True))
                            for _, chunk in part.groupby(keys, sort=True)]
            except BiasscopeError as exc:
                unavailable[str(probe)] = str(exc)
                out.pop(str(probe), None)
                continue
            out.setdefault(str(probe), {}).setdefault(str(model), {})[int(step)] = \
                combine_seeds(per_seed)
        del rows
    return out
