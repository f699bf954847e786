"""CrowS-Pairs' numbers from sentence records: one row per pair, then the measures.

``pct_stereotype`` and ``likelihood_diff`` are lm-evaluation-harness's ``crows_pairs`` numbers:
a pair counts as stereotyped when ``sent_more`` has the strictly higher log-likelihood, and
``likelihood_diff`` is the mean absolute log-likelihood difference. The harness reads
``sent_more`` as the stereotype whatever the pair's direction, and so does this probe; the
direction is a split of its own. Beside those all-or-nothing numbers, the signed difference
(``sent_more`` − ``sent_less``) per pair and per token (each sentence's log-likelihood over
its token count, since the two sentences can differ in length) tells a model that prefers the
stereotype by a hair from one that prefers it by a mile: their means, and their quantiles
with bootstrap CIs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.bootstrap import block_statistics
from biasscope.core.errors import DataError
from biasscope.core.intervals import percentile_interval

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def pairs(records: pd.DataFrame) -> pd.DataFrame:
    """One row per pair: bias type, direction, both log-likelihoods and token counts, the
    signed difference per pair (``difference``) and per token (``token_difference``) and
    whether ``sent_more`` is the likelier (``stereotyped``). A pair missing a sentence is
    left out; records of several seeds or wordings of a pair are averaged (they are equal)."""
    if records.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=[
            "pair", "bias_type", "direction", "difference", "token_difference", "stereotyped"])
        return empty
    if "logprob" not in records:
        raise DataError("crows-pairs records lack 'logprob': they were not scored as "
                        "continuations")
    frame = records.assign(per_token=records["logprob"] / records["tokens"].clip(lower=1))
    wide = frame.pivot_table(index=["pair", "bias_type", "direction"], columns="sentence",
                             values=["logprob", "per_token", "tokens"], aggfunc="mean")
    wide = wide.dropna()
    out: pd.DataFrame = pd.DataFrame(index=wide.index).reset_index()
    if out.empty:
        return pairs(records.iloc[:0])
    more, less = wide["logprob"]["more"].to_numpy(), wide["logprob"]["less"].to_numpy()
    out["ll_more"], out["ll_less"] = more, less
    out["difference"] = more - less
    out["token_difference"] = (wide["per_token"]["more"] - wide["per_token"]["less"]).to_numpy()
    out["stereotyped"] = (more > less).astype(float)
    return out


def crows_metrics(records: pd.DataFrame) -> dict[str, float]:
    """A unit's headline numbers (summary.json): pct_stereotype, likelihood_diff and the mean
    signed difference per pair and per token."""
    p = pairs(records)
    if p.empty:
        return dict.fromkeys(("pct_stereotype", "likelihood_diff", "mean_difference",
                              "token_difference"), math.nan)
    return {"pct_stereotype": float(p["stereotyped"].mean()),
            "likelihood_diff": float(p["difference"].abs().mean()),
            "mean_difference": float(p["difference"].mean()),
            "token_difference": float(p["token_difference"].mean())}


def quantile_interval(values: Any, q: float, n_resamples: int = 2000,
                      confidence: float = 0.95) -> dict[str, Any]:
    """The ``q`` quantile of ``values`` with its percentile-bootstrap CI over pairs."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"estimate": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    # each block's gathered values are ours: sorted in place, not copied beside them
    draws = np.concatenate(block_statistics(
        lambda v: np.quantile(v, q, axis=1, overwrite_input=True), [x], n_resamples,
        np.random.default_rng(0)))
    ci = percentile_interval(float(np.quantile(x, q)), draws, confidence)
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high, "n": int(x.size)}
