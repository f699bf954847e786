"""Performance series a fairness curve is read against (the source overlays LAMBADA)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasscope.probes.perplexity import perplexity


def lambada_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Last-word accuracy (greedy match) and perplexity exp(-mean log-prob of the last word)."""
    if records.empty:
        return {"accuracy": float("nan"), "perplexity": float("nan")}
    logprob = records["logprob"].to_numpy(dtype=np.float64)
    return {"accuracy": float(records["greedy"].astype(bool).mean()),
            "perplexity": float(np.exp(-logprob.mean()))}


def perplexity_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Held-out perplexity over documents, token-weighted, and the tokens it is over."""
    if records.empty:
        return {"perplexity": float("nan"), "tokens": 0.0}
    return {"perplexity": perplexity(records["logprob"].to_numpy(dtype=np.float64),
                                     records["tokens"].to_numpy(dtype=np.float64)),
            "tokens": float(records["tokens"].sum())}
