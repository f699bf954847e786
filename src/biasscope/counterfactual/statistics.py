"""Do a scorer's outputs move with who is speaking or who is spoken of? Counterfactual pairs:
the same text with its gendered words and first names swapped (``core.gender_swap`` with the
name pairs of ``core.first_names``), both members scored.

Two readings, for judges and reward models alike:

- **Paired difference** of a numeric score (a reward; a judge's probability of its first
  label, or of preferring the first response), oriented *female version minus male version*
  (the member whose gendered words and names are mostly female-coded; a pair with as many of
  each is left out of the signed statistics and counted). One difference per conversation:
  a reward model's chosen and rejected responses of one conversation are averaged
  (``conversations``), since they share the conversation. Mean with a t CI widened
  towards a skew (``intervals.mean_ci``; every interval here at the run's
  ``--confidence``, each bootstrap of its ``--resamples``: `biasscope.core.levels`), the
  mean in SDs of all the scores (standardised), a two-sided Wilcoxon signed-rank test with
  the matched-pairs rank-biserial r, and a two-sided exact sign test with the share of pairs
  where the female version scored higher (Wilson CI). The
  verdict follows the Wilcoxon test: a version *scores higher* when Holm p < 0.05, in the
  direction of r (``favours``); the sentence then says it *favours* that version when the
  mean's interval agrees and the mean is at least 0.1 SD (``NEGLIGIBLE``), that the preference
  is detectable but negligible below 0.1 SD, or that it holds in most pairs but not on
  average; with Holm p ≥ 0.05, that there is no evidence of a preference.
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

from biasscope.core.first_names import FEMALE_NAMES, MALE_NAMES, NAME_PAIRS
from biasscope.core.gender_swap import ONE_WAY, PAIRS, swap_gender
from biasscope.core.imports import lazy
from biasscope.core.intervals import mean_ci, wilson
from biasscope.core.numbers import p_is, percent, pvalue, with_ci

sps = lazy("scipy.stats")  # imported at first use

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


def paired_difference(female: Sequence[float], male: Sequence[float], seed: int = 0,
                      confidence: float = 0.95, n_resamples: int = 2000) -> dict[str, Any]:
    """Score of the female version minus the male version, per pair (see the module doc);
    its intervals at ``confidence``, the mean's bootstrap of ``n_resamples``."""
    f, m = np.asarray(female, dtype=np.float64), np.asarray(male, dtype=np.float64)
    ok = np.isfinite(f) & np.isfinite(m)
    d = f[ok] - m[ok]
    nan = math.nan
    out: dict[str, Any] = {"n": int(d.size), "mean": nan, "low": nan, "high": nan,
                           "standardised": nan, "wilcoxon_p": nan, "rank_biserial": nan,
                           "sign_p": nan, "female_higher": wilson(0, 0), "zero": 0}
    if d.size == 0:
        return out
    ci = mean_ci(d, confidence, n_resamples, seed=seed) if d.size > 1 else None
    spread = float(np.std(np.concatenate([f[ok], m[ok]]), ddof=1)) if d.size > 1 else nan
    nonzero = d[d != 0]
    higher = int((nonzero > 0).sum())
    out.update(mean=float(d.mean()), low=ci.low if ci else nan, high=ci.high if ci else nan,
               standardised=float(d.mean()) / spread if spread and spread > 0 else nan,
               zero=int(d.size - nonzero.size),
               female_higher=wilson(higher, int(nonzero.size), confidence))
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


def conversations(ids: Sequence[str], female: Sequence[float], male: Sequence[float]
                  ) -> tuple[list[float], list[float]]:
    """Female and male scores averaged per conversation (``ids``: each score's conversation):
    a reward model scores a conversation's chosen and rejected responses, which share the
    conversation and are not independent pairs."""
    order = list(dict.fromkeys(ids))
    f = {k: [] for k in order}  # type: dict[str, list[float]]
    m = {k: [] for k in order}  # type: dict[str, list[float]]
    for key, a, b in zip(ids, female, male, strict=True):
        if math.isfinite(a) and math.isfinite(b):
            f[key].append(a)
            m[key].append(b)
    kept = [k for k in order if f[k]]
    return [float(np.mean(f[k])) for k in kept], [float(np.mean(m[k])) for k in kept]


def flips(before: Sequence[bool | None], after: Sequence[bool | None],
          confidence: float = 0.95) -> dict[str, Any]:
    """Flip rate of a yes/no verdict between the members of each pair (its interval at
    ``confidence``), and exact McNemar."""
    both = [(b, a) for b, a in zip(before, after) if b is not None and a is not None]
    n = len(both)
    yes_no = sum(b and not a for b, a in both)
    no_yes = sum(a and not b for b, a in both)
    out: dict[str, Any] = {"flip_rate": wilson(yes_no + no_yes, n, confidence),
                           "yes_to_no": yes_no,
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


def favours(diff: dict[str, Any], p_holm: float, alpha: float = 0.05) -> str | None:
    """The version the printed test says scores higher: the Wilcoxon signed-rank test at
    Holm p < ``alpha``, in the direction of its rank-biserial r; None without such a test."""
    r = diff.get("rank_biserial")
    if not (p_holm < alpha and isinstance(r, float) and math.isfinite(r) and r != 0):
        return None
    return "female" if r > 0 else "male"


def sentence(scorer: str, what: str, diff: dict[str, Any], p_holm: float,
             negligible: float = NEGLIGIBLE, confidence: float = 0.95) -> str:
    """One line on a scorer's paired difference whose verdict follows from the test it prints:
    a version is favoured only when the Wilcoxon test (Holm p < 0.05) says so, in its
    direction; the mean and its interval (at ``confidence``, the level ``diff`` was computed
    at) then say whether the preference holds on average and how large it is (under
    ``negligible`` SDs: detectable, negligible)."""
    if not diff["n"]:
        return f"{scorer}: no counterfactual pair could be scored for {what}."
    std = diff["standardised"]
    sd = f"{std:+.2f} SD" if isinstance(std, float) and math.isfinite(std) else ""
    over = f"{diff['n']} {diff.get('unit', 'pairs')}"
    text = (f"{scorer}, {what}: female minus male version "
            f"{with_ci(diff['mean'], diff['low'], diff['high'], confidence, signed=True, extra=sd)}"
            f" over "
            f"{over}; Wilcoxon {p_is(diff['wilcoxon_p'])} (Holm {pvalue(p_holm)}), "
            f"rank-biserial r = {diff['rank_biserial']:+.2f}.")
    side = favours(diff, p_holm)
    if side is None:
        return text + " No evidence that it favours either version."
    share = diff.get("female_higher") or {}
    est, lo, hi = (float(share.get(k, math.nan)) for k in ("estimate", "low", "high"))
    if side == "male":
        est, lo, hi = 1 - est, 1 - hi, 1 - lo
    most = (f" The {side} version scores higher in {percent(est, lo, hi, confidence)} of the "
            f"non-tied "
            f"{diff.get('unit', 'pairs')}")
    low, high = diff["low"], diff["high"]
    agrees = (low > 0) if side == "female" else (high < 0)
    if not agrees:
        return text + most + (", but the mean difference does not show it (its interval "
                              f"{'includes 0' if low <= 0 <= high else 'lies on the other side'}"
                              "): a few go the other way by more.")
    if isinstance(std, float) and math.isfinite(std) and abs(std) < negligible:
        return text + most + f", by less than {negligible:g} SD: detectable, negligible."
    return text + f" It favours the {side} version."


__all__ = ["FEMALE", "MALE", "conversations", "counterfactual", "favours", "flips",
           "gender_of", "oriented", "paired_difference", "sentence"]
