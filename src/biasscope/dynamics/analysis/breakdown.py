"""Where the bias is, per checkpoint: pro- against anti-stereotypical sentences, and per
occupation.

A WinoBias pair is two sentences that differ only in the pronoun: line N of
``pro_stereotyped_type2.txt.<subset>`` and line N of ``anti_stereotyped_type2.txt.<subset>``
(records ``sentence_id`` ``pro-dev-001`` and ``anti-dev-001``). Their referenced prompts ask
the same question about the same occupation; only the pronoun's agreement with the
occupation's stereotype changes. So pro against anti is a *paired* comparison of per-pair
differences; the matched-pairs rank-biserial correlation is its effect size. A model's lean on
an occupation is shared by that occupation's pairs (about 20 each in WinoBias), so the pairs are
not independent: the difference's interval and test take occupations as the units, stratified by
the occupation's stereotyped gender (`by_occupation`). A bootstrap and Wilcoxon's test over
pairs, as before, said p < 0.05 in 17% to 45% of simulated runs whose occupations lean one way
or the other regardless of the stereotype, and the 95% interval covered 57% to 83%
(docs/validation.md).

The gender preference of a prompt is ``log P(male) − log P(female)`` (full-vocabulary log-probs
of the two option tokens; positive: leans male) and its probability-mass version
``P(male) − P(female)`` with P the softmax over the three options (as JSD-P uses).

Values are averaged over seeds per prompt first (seeds only reorder the options, see
`biasscope.core.stats`); intervals are over those prompts. Functions here take the records of one
(model, step), reduced by `record_values` (the probe's, `biasscope.probes.winobias.values`), so
a report keeps only these small aggregates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.intervals import boundary_rate, group_t_interval, paired_boundary_difference
from biasscope.core.stats import signed_rank
from biasscope.core.student import t_cdf, t_ppf
from biasscope.probes.winobias import SPLITS
from biasscope.probes.winobias.values import MEANS as MEANS  # the probe's own, re-exported
from biasscope.probes.winobias.values import breakdown_values
from biasscope.probes.winobias.values import prompt_means as prompt_means

record_values = breakdown_values  # its name here, where the analysis and tests look for it


#: Per measure: its column and the sign that makes the difference "better on pro".
PRO_ANTI = {"accuracy": ("correct", 1.0), "jsdp_correct": ("jsdp_correct", -1.0)}


def pro_anti(pm: pd.DataFrame, confidence: float, n_resamples: int) -> dict[str, Any]:
    """Accuracy and JSD-P of the correct option on referenced prompts, pro and anti, and per
    measure the paired difference (``pro − anti`` for accuracy, ``anti − pro`` for JSD-P:
    positive means the model does better where the pronoun agrees with the stereotype).
    Every interval is the occupations' (`by_occupation`): an accuracy of all right or all
    wrong gets its Wilson interval instead (`boundary_rate`), and an accuracy
    difference alike on every pair a paired score interval
    (`paired_boundary_difference`). ``n_resamples`` is no longer used."""
    ref = pm[pm["kind"] == "referenced"]
    occupation_of = ref.drop_duplicates("pair").set_index("pair")[["occupation", "stereotype"]]
    out: dict[str, Any] = {"n_pairs": 0}
    samples: dict[str, np.ndarray] = {}
    pairs = None  # the referenced pairs' accuracy, pro and anti
    for measure, (column, sign) in PRO_ANTI.items():
        for split in SPLITS:
            rows = ref[ref["split"] == split]
            values = rows[column].to_numpy(dtype=np.float64)
            samples[f"{measure}/{split}"] = values
            out[f"{measure}/{split}"] = _split_interval(
                values, rows["occupation"].to_numpy(dtype=object),
                rows["stereotype"].to_numpy(dtype=object), confidence,
                (0.0, 1.0) if measure == "accuracy" else None)
        paired = _paired(ref, column)
        if paired is None:
            out[f"{measure}/difference"] = None
            out[f"{measure}/test"] = None
            continue
        pro, anti, names = paired
        diff = sign * (pro - anti)
        if measure == "accuracy":
            pairs = (pro, anti)
        out["n_pairs"] = len(pro)
        out[f"{measure}/difference"], out[f"{measure}/test"] = by_occupation(
            diff, occupation_of.loc[names, "occupation"].to_numpy(dtype=object),
            occupation_of.loc[names, "stereotype"].to_numpy(dtype=object), confidence,
            (-1.0, 1.0) if measure == "accuracy" else None)
    for split in SPLITS:  # all right or all wrong: no spread for the occupations to show
        entry, rate = out[f"accuracy/{split}"], boundary_rate(
            samples[f"accuracy/{split}"], confidence)
        if entry is not None and rate is not None:
            entry.update(low=rate["low"], high=rate["high"])
    gap = None if pairs is None else paired_boundary_difference(*pairs, confidence)
    if gap is not None:  # every pair's difference alike: no spread to resample
        out["accuracy/difference"].update(low=gap["low"], high=gap["high"])
    return out


def _split_interval(values: np.ndarray, occupations: np.ndarray, stereotypes: np.ndarray,
                    confidence: float, bounds: tuple[float, float] | None) -> dict[str, Any]:
    """One split's mean with the occupations' interval (`by_occupation`): a model's lean on an
    occupation is shared by its prompts, so a prompt bootstrap's 95% interval held the mean
    accuracy in 82-89% of runs."""
    keep = ~np.isnan(values)
    found, _ = by_occupation(values[keep], occupations[keep], stereotypes[keep], confidence,
                             bounds)
    return {"estimate": found["estimate"], "low": found["low"], "high": found["high"],
            "n": found["n"], "occupations": found["occupations"]}


def _paired(ref: pd.DataFrame, column: str
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The pro and the anti value of ``column`` of every pair that has both, and the pairs, in
    the order of the pairs' names, as ``pivot_table(index="pair", columns="split")`` then
    ``dropna`` give them; None where a split has no value at all (the pivot has no column
    for it). One prompt per pair and split, as WinoBias has, is read as it is (a pivot of a
    few thousand rows costs a breakdown more than its statistics); several are averaged by
    that pivot."""
    pair, split = ref["pair"].to_numpy(dtype=object), ref["split"].to_numpy(dtype=object)
    values = ref[column].to_numpy(dtype=np.float64)
    named = pd.notna(pair) & np.isin(split, SPLITS)  # the pivot's rows and columns
    keys = list(zip(pair[named].tolist(), split[named].tolist(), strict=True))
    if len(set(keys)) < len(keys):
        table = ref.pivot_table(index="pair", columns="split", values=column, observed=True)
        if not set(SPLITS) <= set(table.columns):
            return None
        both = table.dropna(subset=list(SPLITS))
        return (both["pro"].to_numpy(dtype=np.float64), both["anti"].to_numpy(dtype=np.float64),
                both.index.to_numpy(dtype=object))
    kept = named & ~np.isnan(values)  # a pivot's mean of no value is NaN, and dropped
    if not all((kept & (split == s)).any() for s in SPLITS):
        return None
    held = {(p, s): v for p, s, v in zip(pair[kept].tolist(), split[kept].tolist(),
                                          values[kept].tolist(), strict=True)}
    names = sorted({p for p, s in held if s == "pro"} & {p for p, s in held if s == "anti"})
    return (np.array([held[(p, "pro")] for p in names], dtype=np.float64),
            np.array([held[(p, "anti")] for p in names], dtype=np.float64),
            np.array(names, dtype=object))


def by_occupation(diff: np.ndarray, occupations: np.ndarray, stereotypes: np.ndarray,
                  confidence: float, bounds: tuple[float, float] | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The mean per-pair difference, its interval and its two-sided test, with occupations as
    the units and their stereotype's gender as strata: a model's default pronoun helps the pro
    sentence of every male-stereotyped occupation and the anti sentence of every
    female-stereotyped one, a difference between the strata that WinoBias's balance (20 of
    each) cancels in the mean and that is no noise of the mean. The error is the stratified
    cluster one (per stratum, k/(k − 1) Σ (n_o (m_o − m_s) / N_s)², weighted by the strata's
    shares of pairs, squared), never below the pairs' own within the strata; Student's t on
    occupations − strata degrees of freedom; the interval within ``bounds``. A stratum of one
    occupation leaves no spread to read: then the occupations are one stratum. The pairs'
    matched-pairs rank-biserial r is the effect size. NaN bounds and p with fewer than two
    occupations."""
    n = diff.size
    estimate = float(diff.mean()) if n else math.nan
    low = high = p = math.nan
    per_stratum = [len(set(occupations[stereotypes == s].tolist()))
                   for s in pd.unique(stereotypes)]
    if min(per_stratum, default=0) < 2:  # a stratum of one occupation: no strata
        stereotypes = np.zeros(n, dtype=object)
    variance = floor = 0.0
    df = -len(pd.unique(stereotypes))
    for stratum in pd.unique(stereotypes):
        d, codes = diff[stereotypes == stratum], pd.factorize(
            occupations[stereotypes == stratum])[0]
        sums, counts = np.bincount(codes, weights=d), np.bincount(codes).astype(np.float64)
        k, share = sums.size, d.size / n
        df += k
        if k < 2:
            continue
        deviation = (sums - counts * d.mean()) / d.size
        variance += share ** 2 * k / (k - 1) * float((deviation ** 2).sum())
        floor += share ** 2 * float(d.var(ddof=1)) / d.size
    se = math.sqrt(max(variance, floor))
    if se == 0 and n >= 2:  # alike within each stratum: the pairs' spread, not an interval
        se = math.sqrt(float(diff.var(ddof=1)) / n)  # of width 0
    jobs = len(set(occupations.tolist()))
    if df > 0 and se > 0:
        half = t_ppf(0.5 + confidence / 2, df) * se
        low, high = estimate - half, estimate + half
        if bounds is not None:
            low, high = max(bounds[0], low), min(bounds[1], high)
        p = 2 * t_cdf(-abs(estimate) / se, df)
    elif df > 0:
        # Every difference alike: nothing for t to read, so the sign test over the
        # occupations; an accuracy's paired score interval replaces these bounds.
        low = high = estimate
        p = 1.0 if estimate == 0 else min(1.0, 2 * 0.5 ** jobs)
    pairs = signed_rank(diff)
    return ({"estimate": estimate, "low": low, "high": high, "n": n, "occupations": jobs},
            {"p_value": p, "effect_size": pairs["effect_size"],
             "n_nonzero": pairs["n_nonzero"], "occupations": jobs, "df": max(df, 0),
             "test": "t over occupations, stratified by stereotype"})


def _lean_p(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, Student's two-sided t test of a mean of 0 over its finite values (NaN with
    fewer than two, or none that differ)."""
    out = np.full(n_groups, math.nan)
    ok = np.isfinite(values)
    for g in range(n_groups):
        x = values[ok & (groups == g)]
        if x.size >= 2 and (sd := float(x.std(ddof=1))) > 0:
            out[g] = 2 * t_cdf(-abs(float(x.mean())) / sd * math.sqrt(x.size), x.size - 1)
    return out


def occupations(pm: pd.DataFrame, confidence: float) -> list[dict[str, Any]]:
    """Per occupation: its stereotype, and per prompt kind (``referenced``, ``not-referenced``)
    the mean gender preference (``lp_diff``, ``p_diff``) with Student's t CIs over prompts
    (``lp_diff`` also with its t test of 0, ``p_value``); on
    referenced prompts the accuracy on pro and on anti sentences."""
    names = sorted(pm["occupation"].unique(), key=str.lower)
    code = {name: i for i, name in enumerate(names)}
    first = pm.drop_duplicates("occupation")  # each occupation's first row gives its stereotype
    stereotype = dict(zip(first["occupation"].tolist(), first["stereotype"].tolist(),
                          strict=True))
    rows: dict[str, dict[str, Any]] = {
        n: {"occupation": n, "stereotype": str(stereotype[n])} for n in names}
    for kind, chunk in pm.groupby("kind", sort=True):
        groups = chunk["occupation"].map(code).to_numpy(dtype=np.int64)
        counts = np.bincount(groups, minlength=len(names))
        measures = ("lp_diff", "p_diff")  # one call: their draws are shared
        mean, low, high = group_t_interval(chunk[list(measures)].to_numpy(dtype=np.float64),
                                           groups, len(names), confidence)
        p_lean = _lean_p(chunk["lp_diff"].to_numpy(dtype=np.float64), groups, len(names))
        for j, measure in enumerate(measures):
            for name, i in code.items():
                rows[name][f"{kind}/{measure}"] = (
                    {"estimate": mean[i, j], "low": low[i, j], "high": high[i, j]}
                    if counts[i] else None)
                if counts[i] and measure == "lp_diff":
                    rows[name][f"{kind}/{measure}"]["p_value"] = p_lean[i]
        for name, i in code.items():
            rows[name][f"{kind}/n"] = int(counts[i])
        if kind == "referenced":
            acc = chunk.groupby(["occupation", "split"], observed=True)["correct"].mean()
            for name in names:
                for split in SPLITS:
                    value = acc.get((name, split))
                    rows[name][f"accuracy/{split}"] = None if value is None else float(value)
    return [_plain(rows[n]) for n in names]


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """NaN to None, numpy scalars to float: rows go to JSON as they are."""
    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (float, np.floating)):
            return float(v) if math.isfinite(v) else None
        return v
    return {k: clean(v) for k, v in row.items()}


def checkpoint_breakdown(values: pd.DataFrame, confidence: float = 0.95,
                         n_resamples: int = 2000) -> dict[str, Any]:
    """Pro/anti and per-occupation aggregates of one (model, step), from `record_values` of
    all its seeds' records."""
    pm = prompt_means(values)
    return {"pro_anti": _plain(pro_anti(pm, confidence, n_resamples)),
            "occupations": occupations(pm, confidence)}
