"""LAMBADA's numbers per unit: what a sweep's summary.json holds for each checkpoint."""

from __future__ import annotations

import numpy as np
import pandas as pd


def lambada_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Last-word accuracy (greedy match) and perplexity exp(-mean log-prob of the last word)."""
    if records.empty:
        return {"accuracy": float("nan"), "perplexity": float("nan")}
    logprob = records["logprob"].to_numpy(dtype=np.float64)
    return {"accuracy": float(records["greedy"].astype(bool).mean()),
            "perplexity": float(np.exp(-logprob.mean()))}
