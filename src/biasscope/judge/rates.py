"""Shares of a judge's answers with their intervals, and each of several judges' answered
share: the measures of `judge.biases`, `judge.batch` and the counterfactual check read them.

Both orders of an item (or its two versions) are one item asked twice: `clustered_rate`
gives such answers the Wilson interval of their effective size (`clustered_wilson`, items as
clusters) and tests them by sign flips over items (`sign_flip_p`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from biasscope.core.imports import lazy
from biasscope.core.intervals import clustered_wilson
from biasscope.core.wordings import sign_flip_p
from biasscope.judge.core import Judge, Verdict, why_none

sps = lazy("scipy.stats")  # imported at first use


def rate(hits: int, n: int, chance: float | None = None, confidence: float = 0.95
         ) -> dict[str, Any]:
    """A proportion with its Wilson CI at ``confidence``; against ``chance``, an exact
    binomial test and Cohen's h."""
    if n == 0:
        nan = float("nan")
        return {"estimate": nan, "low": nan, "high": nan, "n": 0}
    test = sps.binomtest(hits, n, chance if chance is not None else 0.5)
    ci = test.proportion_ci(confidence_level=confidence, method="wilson")
    out: dict[str, Any] = {"estimate": hits / n, "low": float(ci.low), "high": float(ci.high),
                           "n": n}
    if chance is not None:
        out["p_value"] = float(test.pvalue)
        out["effect_size"] = _cohens_h(hits / n, chance)
    return out


#: Random sign patterns of a test over more than `core.wordings.EXACT_UP_TO` items.
SIGN_FLIPS = 10_000


def clustered_rate(hits: Sequence[bool] | Sequence[float], clusters: Sequence[Hashable],
                   chance: float | Sequence[float] | None = None, confidence: float = 0.95
                   ) -> dict[str, Any]:
    """A proportion of answers that come in clusters (both orders of an item, its samples)
    with the Wilson CI at ``confidence`` of its effective size (`clustered_wilson`; ``n`` answers,
    ``clusters`` items); against ``chance`` (a share, or per answer what it would score
    without the bias), a two-sided sign-flip test over the clusters of each one's hits minus
    their chance (exact up to 12 clusters, else `SIGN_FLIPS` seeded patterns) and Cohen's h
    against the mean chance."""
    y = np.asarray(hits, dtype=np.float64)
    found = clustered_wilson(y, np.asarray([str(c) for c in clusters]), confidence)
    if found["n"] == 0:
        return {k: found[k] for k in ("estimate", "low", "high", "n")}
    out: dict[str, Any] = {k: found[k] for k in ("estimate", "low", "high", "n", "clusters")}
    if chance is not None:
        _, code = np.unique([str(c) for c in clusters], return_inverse=True)
        expected = np.broadcast_to(np.asarray(chance, dtype=np.float64), y.shape)
        excess = np.asarray(np.bincount(code, weights=y - expected), dtype=np.float64)
        out["p_value"] = sign_flip_p(excess, 0.0, SIGN_FLIPS, np.random.default_rng(0))
        out["effect_size"] = _cohens_h(float(found["estimate"]), float(expected.mean()))
    return out


def _cohens_h(share: float, chance: float) -> float:
    return 2 * math.asin(math.sqrt(share)) - 2 * math.asin(math.sqrt(chance))


#: A judge that gave fewer labels than the panel gave verdicts: its name, its labels, of how
#: many questions, why not the others in words (`why_none`).
Short = tuple[str, int, int, str]


def answered(judge: Judge, verdicts: Sequence[Verdict],
             clusters: Sequence[Hashable] | None = None, confidence: float = 0.95
             ) -> tuple[dict[str, Any], list[Short]]:
    """Each of several judges' share of ``verdicts`` it gave a label on (``answered_rate:J``;
    ``clusters``: each verdict's item, where both orders were asked), and those that gave
    fewer than the panel gave verdicts: the panel's count hid a judge that never answers,
    another judge deciding every item."""
    if len(judge.models) < 2:
        return {}, []
    got = sum(v.label is not None for v in verdicts)
    head: dict[str, Any] = {}
    short = []
    for name in [m.label for m in judge.models]:
        whys = [judge.reason(v, name) for v in verdicts]
        mine = [not why for why in whys]
        head[f"answered_rate:{name}"] = (
            rate(sum(mine), len(mine), confidence=confidence) if clusters is None
            else clustered_rate(mine, clusters, confidence=confidence))
        if sum(mine) < got:
            short.append((name, sum(mine), len(mine), why_none(Counter(w for w in whys if w))))
    return head, short


__all__ = ["SIGN_FLIPS", "Short", "answered", "clustered_rate", "rate"]
