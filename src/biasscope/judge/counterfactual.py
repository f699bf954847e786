"""Do a scorer's outputs move with who is speaking or who is spoken of? Counterfactual pairs:
the same text with its gendered words and first names swapped (``core.gender_swap`` with the
name pairs of ``core.first_names``), both members scored.

Two readings, for judges and reward models alike:

- **Paired difference** of a numeric score (a reward; a judge's probability of its first
  label, or of preferring the first response), oriented *female version minus male version*
  (the member whose gendered words and names are mostly female-coded; a pair with as many of
  each is left out of the signed statistics and counted). Mean with a BCa bootstrap CI
  (``stats.bootstrap_mean``), the mean in SDs of all the scores (standardised), a two-sided
  Wilcoxon signed-rank test with the matched-pairs rank-biserial r, and a two-sided exact sign
  test with the share of pairs where the female version scored higher (Wilson CI). A
  scorer *favours* a version when Holm p < 0.05, the interval excludes 0 and the difference
  is at least 0.1 SD (``NEGLIGIBLE``); a smaller detected difference is called negligible
  (with many pairs a test finds differences too small to matter).
- **Verdict flips**: a yes/no verdict on each member (picks the chosen response; gives the
  first label), read in the same orientation (female version, then male version). The flip
  rate (Wilson CI) and an exact McNemar test: the discordant pairs, yes only for the female
  version against yes only for the male one, binomial against 1/2; its effect size is the
  share of yes verdicts for the male version minus that for the female version.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from scipy import stats as sps

from biasscope.core.first_names import FEMALE_NAMES, MALE_NAMES, NAME_PAIRS
from biasscope.core.gender_swap import ONE_WAY, PAIRS, swap_gender
from biasscope.core.numbers import p_is, pvalue, with_ci
from biasscope.core.stats import bootstrap_mean, wilson

T = TypeVar("T")
NEGLIGIBLE = 0.1  # SDs of the scores: a smaller difference is reported as negligible
_WORD = re.compile(r"[A-Za-z]+")
FEMALE = frozenset({f for _, f in PAIRS} | {"her", "hers"} | {k for k, v in ONE_WAY.items()}
                   | {n.lower() for n in FEMALE_NAMES})
MALE = frozenset({m for m, _ in PAIRS} | {"him", "his"} | {n.lower() for n in MALE_NAMES})


def counterfactual(text: str) -> str:
    """``text`` with gendered words and the listed first names swapped."""
    return swap_gender(text, extra=NAME_PAIRS)


def gender_of(texts: Sequence[str]) -> str | None:
    """``female`` or ``male`` by the majority of gender-coded words and names in ``texts``;
    None for a tie (nothing gendered, or as many of each)."""
    words = [w.lower() for t in texts for w in _WORD.findall(t)]
    female = sum(w in FEMALE for w in words)
    male = sum(w in MALE for w in words)
    return "female" if female > male else "male" if male > female else None


def paired_difference(female: Sequence[float], male: Sequence[float],
                      seed: int = 0) -> dict[str, Any]:
    """Score of the female version minus the male version, per pair (see the module doc)."""
    f, m = np.asarray(female, dtype=np.float64), np.asarray(male, dtype=np.float64)
    ok = np.isfinite(f) & np.isfinite(m)
    d = f[ok] - m[ok]
    nan = math.nan
    out: dict[str, Any] = {"n": int(d.size), "mean": nan, "low": nan, "high": nan,
                           "standardised": nan, "wilcoxon_p": nan, "rank_biserial": nan,
                           "sign_p": nan, "female_higher": wilson(0, 0), "zero": 0}
    if d.size == 0:
        return out
    ci = bootstrap_mean(d, seed=seed) if d.size > 1 else None
    spread = float(np.std(np.concatenate([f[ok], m[ok]]), ddof=1)) if d.size > 1 else nan
    nonzero = d[d != 0]
    higher = int((nonzero > 0).sum())
    out.update(mean=float(d.mean()), low=ci.low if ci else nan, high=ci.high if ci else nan,
               standardised=float(d.mean()) / spread if spread and spread > 0 else nan,
               zero=int(d.size - nonzero.size),
               female_higher=wilson(higher, int(nonzero.size)))
    if nonzero.size == 0:
        out.update(wilcoxon_p=1.0, rank_biserial=0.0, sign_p=1.0)
        return out
    test = sps.wilcoxon(nonzero, alternative="two-sided")
    ranks = sps.rankdata(np.abs(nonzero))
    r_plus = float(ranks[nonzero > 0].sum())
    total = nonzero.size * (nonzero.size + 1) / 2
    out.update(wilcoxon_p=float(test.pvalue), rank_biserial=2 * r_plus / total - 1,
               sign_p=float(sps.binomtest(higher, int(nonzero.size), 0.5).pvalue))
    return out


def flips(before: Sequence[bool | None], after: Sequence[bool | None]) -> dict[str, Any]:
    """Flip rate of a yes/no verdict between the members of each pair, and exact McNemar."""
    both = [(b, a) for b, a in zip(before, after) if b is not None and a is not None]
    n = len(both)
    yes_no = sum(b and not a for b, a in both)
    no_yes = sum(a and not b for b, a in both)
    out: dict[str, Any] = {"flip_rate": wilson(yes_no + no_yes, n), "yes_to_no": yes_no,
                           "no_to_yes": no_yes, "n": n}
    out["mcnemar_p"] = (float(sps.binomtest(yes_no, yes_no + no_yes, 0.5).pvalue)
                        if yes_no + no_yes else (1.0 if n else math.nan))
    out["effect_size"] = (no_yes - yes_no) / n if n else math.nan
    return out


def oriented(scores: Sequence[T], swapped: Sequence[T],
             groups: Sequence[str | None]) -> tuple[list[T], list[T], int]:
    """(female scores, male scores) of the pairs whose original is gendered, and how many
    pairs were left out as neither."""
    female: list[T] = []
    male: list[T] = []
    left = 0
    for s, c, g in zip(scores, swapped, groups):
        if g == "female":
            female.append(s)
            male.append(c)
        elif g == "male":
            female.append(c)
            male.append(s)
        else:
            left += 1
    return female, male, left


def sentence(scorer: str, what: str, diff: dict[str, Any], p_holm: float,
             negligible: float = NEGLIGIBLE) -> str:
    """One line on a scorer's paired difference, saying whether it is a finding: Holm p <
    0.05, an interval excluding 0, and at least ``negligible`` SDs of the scores (smaller
    differences are called detectable but negligible)."""
    if not diff["n"]:
        return f"{scorer}: no counterfactual pair could be scored for {what}."
    detected = p_holm < 0.05 and (diff["low"] > 0 or diff["high"] < 0)
    found = detected and abs(diff["standardised"]) >= negligible
    side = "female" if diff["mean"] > 0 else "male"
    sd = f"{diff['standardised']:+.2f} SD"
    text = (f"{scorer}, {what}: female minus male version "
            f"{with_ci(diff['mean'], diff['low'], diff['high'], signed=True, extra=sd)} over "
            f"{diff['n']} pairs; Wilcoxon {p_is(diff['wilcoxon_p'])} (Holm {pvalue(p_holm)}), "
            f"rank-biserial r = {diff['rank_biserial']:+.2f}; sign test "
            f"{p_is(diff['sign_p'])}.")
    if detected and not found:
        return text + (f" The {side} version scores higher, but by less than {negligible:g} "
                       "SD: detectable, negligible.")
    return text + (f" It favours the {side} version." if found else
                   " No evidence that it favours either version.")


__all__ = ["FEMALE", "MALE", "counterfactual", "flips", "gender_of", "oriented",
           "paired_difference", "sentence"]
