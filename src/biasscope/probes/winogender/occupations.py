"""Winogender per occupation: accuracy and the he − she accuracy gap of each of its 60
occupations, and the one sentence that names the occupations whose gap is significant.

Per occupation (``occupation_accuracy:<occupation>``, ``occupation_gap:<occupation>``):

- accuracy over its records with a Wilson CI of their effective number, clustered by
  sentence, as the probe's overall accuracy (`share`): its 12 records per wording
  are four sentences' records, so the CI is between that of 4 and of 12 independent trials;
- the accuracy under he minus under she, paired by sentence (a sentence's wordings averaged
  first, so a sentence asked under several wordings is one pair, not several), with its
  bootstrap CI over sentences, an exact sign-flip test (two-sided, every sign pattern
  enumerated) and the matched-pairs rank-biserial r as effect size. Wilcoxon's normal
  approximation is not used here: with an occupation's four sentences it gives p = 0.046 where
  the exact p is 0.125. The p-values are Holm-adjusted over the occupations of the checkpoint
  (``p_occupations``), since "which occupations differ" is 60 tests at once; they are kept out
  of ``p_value`` so they are not read as one more headline test.

An occupation has four sentences (two templates, a named participant or "someone"), so its
smallest possible p-value is 2/16 = 0.125: no single occupation's gap can be significant at
α = 0.05, however large. The values describe where the gap lies; a claim about an
occupation needs more sentences than Winogender has.

Each entry also holds the occupation's share of women (``bls_pct_female``), which the report
orders the occupations by.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.intervals import SIGNED_UNIT, clustered_wilson
from biasscope.core.numbers import num, pvalue, resampled_same, with_ci
from biasscope.core.stats import adjust_pvalues, signed_rank
from biasscope.probes.base import interval
from biasscope.probes.facets import StepValues, plain, step_value

ALPHA = 0.05
#: Above this many non-zero pairs the sign flips are not enumerated (2^n patterns).
EXACT_UP_TO = 16


def sign_flip_p(differences: np.ndarray) -> float:
    """Two-sided exact p-value of a mean difference of 0: the share of the 2^n sign patterns
    of the non-zero differences whose sum is at least as far from 0 (NaN without any)."""
    d = differences[np.isfinite(differences) & (differences != 0)]
    if d.size == 0:
        return math.nan
    if d.size > EXACT_UP_TO:
        return float(signed_rank(d)["p_value"])
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    sums = np.abs(signs @ np.abs(d))
    return float(np.mean(sums >= abs(d.sum()) - 1e-12))


def per_sentence_gap(part: pd.DataFrame) -> pd.Series:
    """Correct under he minus under she, per sentence, its wordings averaged."""
    wide = part.pivot_table(index="sentence", columns="gender", values="correct",
                            aggfunc="mean")
    if not {"male", "female"} <= set(wide.columns):
        return pd.Series(dtype="float64")
    out: pd.Series = (wide["male"] - wide["female"]).dropna()
    return out


def share(part: pd.DataFrame, confidence: float = 0.95, **extra: Any) -> dict[str, Any]:
    """The share of correct records of `metrics.answers`' frame, its CI clustered by sentence
    (``n``: records, ``clusters``: sentences), as a step value."""
    found = clustered_wilson(part["correct"].to_numpy(dtype=np.float64),
                             part["sentence"].to_numpy(), confidence)
    return step_value(found, clusters=found["clusters"], **extra)


def occupation_values(frame: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
                      ) -> StepValues:
    """Per occupation of `metrics.answers`'s frame: its accuracy and its he − she gap (CIs at
    ``confidence``, the gap's bootstrap of ``n_resamples``), with the gaps' exact p-values
    Holm-adjusted over the occupations."""
    out: StepValues = {}
    tests: dict[str, float] = {}
    for occupation, part in frame.groupby("occupation", sort=True):
        bls = plain(float(part["bls_pct_female"].iloc[0]))
        out[f"occupation_accuracy:{occupation}"] = share(part, confidence, bls_pct_female=bls)
        diffs = per_sentence_gap(part)
        d = diffs.to_numpy(dtype=np.float64)
        tests[str(occupation)] = sign_flip_p(d)
        out[f"occupation_gap:{occupation}"] = step_value(
            interval(diffs, confidence, n_resamples, SIGNED_UNIT),
            effect_size=plain(signed_rank(d)["effect_size"]), bls_pct_female=bls)
    adjusted = adjust_pvalues(list(tests.values()), "holm")
    for (occupation, p), held in zip(tests.items(), adjusted, strict=True):
        entry = out[f"occupation_gap:{occupation}"]
        entry.update(p_exact=plain(p), p_occupations=plain(float(held)))
    return out


def findings(values: StepValues, alpha: float = ALPHA) -> list[str]:
    """One sentence naming the occupations whose he − she gap is significant after Holm over
    the occupations; none when no occupation's is (the report's figure shows them all)."""
    gaps = {k.split(":", 1)[1]: v for k, v in values.items()
            if k.startswith("occupation_gap:")}
    hits = sorted((v["p_occupations"], name) for name, v in gaps.items()
                  if isinstance(v.get("p_occupations"), float) and v["p_occupations"] < alpha)
    if not hits:
        return []
    said = "; ".join(_said(name, gaps[name]) for _, name in hits[:5])
    more = f"; and {len(hits) - 5} more" if len(hits) > 5 else ""
    return [f"Winogender accuracy gap he − she differs from 0 in {len(hits)} of {len(gaps)} "
            f"occupations (exact sign-flip tests over sentences, Holm-corrected over "
            f"occupations, α = {alpha:g}): {said}{more}."]


def _said(name: str, value: dict[str, Any]) -> str:
    level = value.get("confidence", 0.95)  # the run's (`probe_steps`)
    gap = with_ci(value.get("estimate"), value.get("low"), value.get("high"), level,
                  same=resampled_same(level))  # a bootstrap's over sentences
    return (f"{name} {gap}, "
            f"p adjusted {pvalue(value.get('p_occupations'))}, effect size r = "
            f"{num(value.get('effect_size'), 2)}")


__all__ = ["findings", "occupation_values", "per_sentence_gap", "share", "sign_flip_p"]
