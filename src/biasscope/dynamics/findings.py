"""The breakdowns of one model in summary.json and in plain sentences: pro against anti per
checkpoint (p-values corrected over the model's checkpoints, like the gap tests), and the
occupations that carry the bias at the last checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from biasscope.core import stats
from biasscope.report import numbers

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
    """WinoBias's headline (accuracy on pro against anti sentences) in one sentence."""
    acc_pro, acc_anti = pro_anti.get("accuracy/pro"), pro_anti.get("accuracy/anti")
    diff, test = pro_anti.get("accuracy/difference"), pro_anti.get("accuracy/test")
    if not (acc_pro and acc_anti and diff and test):
        return None
    jsd = pro_anti.get("jsdp_correct/difference") or {}
    where = f" at step {step}" if several else ""
    p = test.get("p_adjusted", test.get("p_value"))
    verdict = ("significant" if test.get("significant") else "not significant")
    return (f"{model}{where}: accuracy on the referenced prompts is {_num(acc_pro['estimate'])} "
            f"on pro-stereotypical and {_num(acc_anti['estimate'])} on anti-stereotypical "
            f"sentences; pro − anti = {_signed(diff['estimate'])} ({confidence:.0%} CI "
            f"{_signed(diff['low'])} to {_signed(diff['high'])}, {pro_anti['n_pairs']} pairs "
            f"that differ only in the pronoun; Wilcoxon signed-rank p = {_num(p)}, {verdict}, "
            f"r = {_signed(test['effect_size'])}). The correct option's JSD-P is "
            f"{_signed(jsd.get('estimate'))} higher on anti than on pro (CI "
            f"{_signed(jsd.get('low'))} to {_signed(jsd.get('high'))}).")


def ranked(occupations: list[dict[str, Any]], kind: str = "not-referenced",
           measure: str = "lp_diff") -> list[dict[str, Any]]:
    """Occupations by the size of their preference on ``kind`` prompts, largest first."""
    have = [o for o in occupations if (o.get(f"{kind}/{measure}") or {}).get("estimate")
            is not None]
    return sorted(have, key=lambda o: -abs(o[f"{kind}/{measure}"]["estimate"]))


def occupation_sentences(model: str, step: int, occupations: list[dict[str, Any]],
                         confidence: float, several: bool, top: int = 10) -> list[str]:
    """The ``top`` occupations the model genders most where the sentence gives no gender."""
    order = ranked(occupations)[:top]
    if not order:
        return []
    where = f" at step {step}" if several else ""
    parts = []
    for o in order:
        value = o["not-referenced/lp_diff"]
        lean = "male" if value["estimate"] > 0 else "female"
        agrees = "as" if lean == o["stereotype"] else "against"
        excludes = (value["low"] is not None and value["high"] is not None
                    and (value["low"] > 0 or value["high"] < 0))
        if value["low"] is None or value["high"] is None:  # one prompt: nothing to resample
            interval = f"{o.get('not-referenced/n', 1)} prompt, no CI"
        else:
            interval = (f"{confidence:.0%} CI {_signed(value['low'])} to "
                        f"{_signed(value['high'])}{'' if excludes else ', CI includes 0'}")
        parts.append(f"{o['occupation']} leans {lean} ({_signed(value['estimate'])}, "
                     f"{interval}; {agrees} the stereotype)")
    return [f"{model}{where}: the {len(order)} occupations it genders most where the sentence "
            "does not say (log P(male) − log P(female) on not-referenced prompts): "
            + "; ".join(parts) + "."]
