"""The breakdowns of one model in summary.json and in plain sentences: pro against anti per
checkpoint (p-values corrected over the model's checkpoints, like the gap tests), and the
occupations that carry the bias at the last checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from biasscope.core import numbers, stats
from biasscope.core.numbers import entry_with_ci as _ci

WHAT = {"accuracy": "accuracy", "jsdp_correct": "JSD-P of the correct option"}


def _num(value: Any) -> str:
    return numbers.num(value)


def _signed(value: Any) -> str:
    return numbers.num(value, signed=True)


def correct_pro_anti(breakdown: Mapping[int, dict[str, Any]], correction: stats.Correction,
                     alpha: float) -> None:
    """Add ``p_adjusted`` and ``significant`` to each checkpoint's pro/anti tests, corrected
    over the model's checkpoints per measure (one curve, one family), in place."""
    steps = sorted(breakdown)
    for measure in WHAT:
        tests = [breakdown[s]["pro_anti"].get(f"{measure}/test") for s in steps]
        p = np.array([t["p_value"] if t and t["p_value"] is not None else math.nan
                      for t in tests], dtype=np.float64)
        adjusted = stats.adjust_pvalues(p, correction)
        for test, value in zip(tests, adjusted, strict=True):
            if test is not None:
                test["p_adjusted"] = float(value) if math.isfinite(value) else None
                test["significant"] = bool(math.isfinite(value) and value < alpha)


def pro_anti_sentence(model: str, step: int, pro_anti: Mapping[str, Any], confidence: float,
                      several: bool) -> str | None:
    """WinoBias's headline (accuracy on pro against anti sentences) in one sentence; the
    paired difference and its test only where sentences pair up."""
    acc_pro, acc_anti = pro_anti.get("accuracy/pro"), pro_anti.get("accuracy/anti")
    diff, test = pro_anti.get("accuracy/difference"), pro_anti.get("accuracy/test")
    if not (acc_pro and acc_anti):
        return None
    where = f" at step {step}" if several else ""
    said = (f"{model}{where}: accuracy on the referenced prompts is {_ci(acc_pro, confidence)} "
            f"on pro-stereotypical and {_ci(acc_anti, confidence)} on anti-stereotypical "
            "sentences")
    if not (diff and test and numbers.finite(diff.get("estimate"))):
        return (said + "; no two sentences here differ only in the pronoun, so there is no "
                "paired pro − anti difference.")
    verdict = "significant" if test.get("significant") else "not significant"
    adjusted = test.get("p_adjusted")
    corrected = (f", {numbers.pvalue(adjusted)} corrected over the checkpoints"
                 if numbers.finite(adjusted) and adjusted != test.get("p_value") else "")
    jobs = test.get("occupations")  # absent from runs analysed before: Wilcoxon's test
    how = (f"t over {jobs} occupations, stratified by their stereotype," if jobs is not None
           else "Wilcoxon signed-rank")
    said += (f"; pro − anti = {_ci(diff, confidence, signed=True)} over {pro_anti['n_pairs']} "
             f"pairs that differ only in the pronoun ({how} {numbers.p_is(test.get('p_value'))}"
             f"{corrected}, {verdict}, r = "
             f"{numbers.num(test['effect_size'], 2, signed=True)}).")  # r: two decimals
    jsd = pro_anti.get("jsdp_correct/difference") or {}
    if numbers.finite(jsd.get("estimate")):
        said += (" The correct option's JSD-P is higher on anti than on pro by "
                 f"{_ci(jsd, confidence, signed=True)}.")
    return said


def ranked(occupations: list[dict[str, Any]], kind: str = "not-referenced",
           measure: str = "lp_diff") -> list[dict[str, Any]]:
    """Occupations by the size of their preference on ``kind`` prompts, largest first."""
    have = [o for o in occupations if (o.get(f"{kind}/{measure}") or {}).get("estimate")
            is not None]
    return sorted(have, key=lambda o: -abs(o[f"{kind}/{measure}"]["estimate"]))


def occupation_sentences(model: str, step: int, occupations: list[dict[str, Any]],
                         confidence: float, several: bool, top: int = 10) -> list[str]:
    """The ``top`` occupations the model genders most where the sentence gives no gender,
    summarised (how many lean each way, the range, how many lean significantly after Holm over
    every occupation ranked, how many follow the stereotype); each value with its CI is in the
    figure and summary.json. Counting the top ten's own 95% CIs clear of 0, as before, found
    one in 95.5% to 99.75% of runs of a model without any lean (CHANGELOG)."""
    every = ranked(occupations)
    order = every[:top]
    if not order:
        return []
    values = [o["not-referenced/lp_diff"] for o in order]
    leans = ["male" if v["estimate"] > 0 else "female" for v in values]
    as_stereotype = sum(lean == o["stereotype"] for lean, o in zip(leans, order, strict=True))
    tested = [o["not-referenced/lp_diff"].get("p_value") for o in every]
    held = stats.adjust_pvalues(np.array([math.nan if p is None else p for p in tested],
                                         dtype=np.float64), "holm")
    significant = int(np.sum(held[:len(order)] < 1 - confidence))
    names = {lean: ", ".join(str(o["occupation"]) for o, side in zip(order, leans, strict=True)
                             if side == lean) for lean in ("male", "female")}
    who = "; ".join(f"leaning {lean}: {names[lean]}" for lean in ("male", "female")
                    if names[lean])
    how = (f"all lean {leans[0]}" if len(set(leans)) == 1 else
           f"{leans.count('male')} lean male and {leans.count('female')} female")
    estimates = sorted(v["estimate"] for v in values)
    span = (f"{_signed(estimates[0])} to {_signed(estimates[-1])}" if len(values) > 1
            else _signed(estimates[0]))
    where = f" at step {step}" if several else ""
    n = len(order)
    return [f"{model}{where}: of the occupations the sentence gives no gender for, the {n} "
            f"it genders most {how} (log P(male) − log P(female) {span}; {significant} of {n} "
            f"lean significantly: t over its prompts, Holm over the {len(every)} occupations, "
            f"α = {1 - confidence:g}; {as_stereotype} of {n} as the stereotype): {who}."]
