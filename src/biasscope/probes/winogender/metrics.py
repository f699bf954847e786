"""Winogender's numbers from next-token records.

Each record's two option log-probs (the occupation's and the participant's first token) give
its answer (the likelier; a tie is wrong) and the two options' probabilities renormalised
over them. Over a (model, step):

- accuracy, overall and per pronoun gender: the share of correct records, with the Wilson CI
  of its effective sample size, since a sentence's records (its pronouns, its wordings) are
  not independent trials (`biasscope.core.intervals.clustered_wilson`, clustered by sentence);
- the male−female and gendered−neutral gaps in accuracy, paired by sentence (one sentence
  under each pronoun): the mean of the per-sentence differences, its bootstrap CI and
  Wilcoxon's signed-rank test (matched-pairs rank-biserial r);
- JSD-P between the option distributions under "he" and under "she" per sentence: how far the
  pronoun alone moves the reading, whichever way (0 when it does not);
- per occupation, its accuracy and its he − she gap (`biasscope.probes.winogender.occupations`);
- the correlation, over occupations, between the occupation's share of women (BLS, from
  ``occupations-stats.tsv``) and how much likelier the occupation reading is under "she" than
  under "he" (Pearson's r with its bootstrap CI over occupations and its p-value).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.bootstrap import index_blocks
from biasscope.core.imports import lazy
from biasscope.core.intervals import SIGNED_UNIT, UNIT, none_differ, percentile_interval
from biasscope.core.stats import signed_rank
from biasscope.probes.base import interval
from biasscope.probes.facets import plain, step_value
from biasscope.probes.winogender.occupations import occupation_values, share

sps = lazy("scipy.stats")  # imported at first use


def answers(records: pd.DataFrame) -> pd.DataFrame:
    """One row per record: its sentence under its wording (``key``), the sentence whatever
    the wording (``sentence``), gender, occupation, whether the likelier
    option is the answer (``correct``) and P(occupation) over the two options."""
    lp = np.array([list(v) for v in records["option_logprobs"]], dtype=np.float64).reshape(
        -1, 2)
    answer = records["answer"].to_numpy(dtype=int)
    picked = np.where(lp[:, 0] > lp[:, 1], 0, np.where(lp[:, 1] > lp[:, 0], 1, -1))
    top = lp.max(axis=1, keepdims=True)
    probs = np.exp(lp - top)
    probs /= probs.sum(axis=1, keepdims=True)
    sentence = records["template_id"].astype(str) + "." + records["someone"].astype(str)
    key = sentence
    if "template" in records:  # several wordings: a sentence per wording
        key = key + "@" + records["template"].astype(str)
    frame: pd.DataFrame = pd.DataFrame({
                         "key": key.to_numpy(), "sentence": sentence.to_numpy(),
                         "gender": records["gender"].to_numpy(),
                         "occupation": records["occupation"].to_numpy(),
                         "correct": (picked == answer).astype(float),
                         "p_occupation": probs[:, 0], "p0": probs[:, 0], "p1": probs[:, 1],
                         "answer": answer,
                         "bls_pct_female": records["bls_pct_female"].to_numpy(
                             dtype=np.float64)})
    return frame


def gap(frame: pd.DataFrame, value: str, first: tuple[str, ...], second: tuple[str, ...]
        ) -> pd.Series:
    """Per sentence: the mean ``value`` under the ``first`` genders minus the ``second``."""
    wide = frame.pivot_table(index="key", columns="gender", values=value, aggfunc="mean")
    if not set(first + second) <= set(wide.columns):
        return pd.Series(dtype="float64")
    out: pd.Series = (wide[list(first)].mean(axis=1) - wide[list(second)].mean(axis=1)).dropna()
    return out


def tested(differences: pd.Series, confidence: float = 0.95, n_resamples: int = 2000
           ) -> dict[str, Any]:
    """Per-sentence differences of values within [0, 1] (right or wrong, a probability): their
    mean with its CI, Wilcoxon's test and rank-biserial r, and ``bound`` 1 (a detectable
    effect beyond it is no size, `audit.multiplicity`)."""
    test = signed_rank(differences.to_numpy(dtype=np.float64))
    ci = interval(differences, confidence, n_resamples, SIGNED_UNIT)
    if len(differences) and not differences.any():  # all 0: not a certainty (`none_differ`)
        ci["low"], ci["high"] = none_differ(len(differences), confidence=confidence)
    return step_value(ci, p_value=plain(test["p_value"]),
                      effect_size=plain(test["effect_size"]), bound=1.0)


def pronoun_jsd(frame: pd.DataFrame) -> pd.Series:
    """JSD between the option distributions under "he" and under "she", per sentence."""
    male = frame[frame["gender"] == "male"].groupby("key")[["p0", "p1"]].mean()
    female = frame[frame["gender"] == "female"].groupby("key")[["p0", "p1"]].mean()
    both = male.join(female, lsuffix="_m", rsuffix="_f", how="inner")
    if both.empty:
        return pd.Series(dtype="float64")
    m, f = both[["p0_m", "p1_m"]].to_numpy(), both[["p0_f", "p1_f"]].to_numpy()
    mid = (m + f) / 2

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            out: np.ndarray = np.where(a > 0, a * np.log2(a / mid), 0.0).sum(axis=1)
        return out

    out: pd.Series = pd.Series((kl(m) + kl(f)) / 2, index=both.index)
    return out


def occupation_correlation(frame: pd.DataFrame, n_resamples: int = 2000,
                           confidence: float = 0.95) -> dict[str, Any]:
    """Pearson's r over occupations between the BLS share of women and P(occupation) under
    "she" minus under "he" (averaged over the occupation's sentences); ``bound`` 1, as no r
    lies beyond ±1 (`audit.multiplicity`)."""
    shift = gap(frame, "p_occupation", ("female",), ("male",))
    first = frame.drop_duplicates("key").set_index("key")
    per = pd.DataFrame({"shift": shift, "occupation": first["occupation"].reindex(shift.index),
                        "bls": first["bls_pct_female"].reindex(shift.index)}).dropna()
    per = per.groupby("occupation")[["shift", "bls"]].mean()
    x, y = per["bls"].to_numpy(dtype=np.float64), per["shift"].to_numpy(dtype=np.float64)
    if len(per) < 3 or np.ptp(y) == 0 or np.ptp(x) == 0:
        return {"estimate": math.nan, "low": math.nan, "high": math.nan, "n": len(per)}
    r, p = sps.pearsonr(x, y)
    rng = np.random.default_rng(0)
    draws = []
    for idx in (row for block in index_blocks(len(x), n_resamples, rng) for row in block):
        if np.ptp(x[idx]) > 0 and np.ptp(y[idx]) > 0:
            draws.append(np.corrcoef(x[idx], y[idx])[0, 1])
    ci = percentile_interval(float(r), np.asarray(draws, dtype=np.float64), confidence)
    return step_value({"estimate": ci.estimate, "low": ci.low, "high": ci.high, "n": len(x)},
                      p_value=plain(float(p)), effect_size=plain(float(r)), bound=1.0)


def winogender_values(records: pd.DataFrame, confidence: float = 0.95,
                      n_resamples: int = 2000) -> dict[str, dict[str, Any]]:
    """Every value above, as step values (estimate, CI at ``confidence`` from ``n_resamples``
    where it is a bootstrap's, n; tests where there is one), and each occupation's accuracy
    and he − she gap (`occupations.occupation_values`)."""
    frame = answers(records)
    if frame.empty:
        return {}
    out = {"accuracy": share(frame, confidence)}
    for g in ("male", "female", "neutral"):
        out[f"accuracy:{g}"] = share(frame[frame["gender"] == g], confidence)
    for name, value in (("gap_male_female", "correct"), ("p_gap_male_female", "p_occupation")):
        out[name] = tested(gap(frame, value, ("male",), ("female",)), confidence, n_resamples)
    out["gap_gendered_neutral"] = tested(gap(frame, "correct", ("male", "female"),
                                             ("neutral",)), confidence, n_resamples)
    out["pronoun_jsd"] = step_value(interval(pronoun_jsd(frame), confidence, n_resamples,
                                                   UNIT))  # log2: a JSD lies in [0, 1]
    out["occupation_correlation"] = occupation_correlation(frame, n_resamples, confidence)
    return {**out, **occupation_values(frame, confidence, n_resamples)}


def by_occupation(records: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per occupation and pronoun gender (rows: occupations)."""
    frame = answers(records)
    table: pd.DataFrame = frame.pivot_table(index="occupation", columns="gender",
                                            values="correct", aggfunc="mean")
    return table


def unit_metrics(records: pd.DataFrame) -> dict[str, float]:
    """A unit's headline numbers (summary.json)."""
    values = winogender_values(records)
    keys = {"accuracy": "accuracy", "accuracy:male": "accuracy_male",
            "accuracy:female": "accuracy_female", "accuracy:neutral": "accuracy_neutral",
            "gap_male_female": "gap_male_female", "gap_gendered_neutral": "gap_gendered_neutral",
            "occupation_correlation": "occupation_correlation"}
    return {name: float(values[k]["estimate"]) if values.get(k) and values[k].get("estimate")
            is not None else math.nan for k, name in keys.items()}


__all__ = ["answers", "by_occupation", "gap", "occupation_correlation",
           "pronoun_jsd", "unit_metrics", "winogender_values"]
