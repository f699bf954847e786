"""Held-out perplexity's numbers per unit: what a sweep's summary.json holds for each
checkpoint."""

from __future__ import annotations

import numpy as np
import pandas as pd

from biasscope.probes.perplexity.items import perplexity


def perplexity_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Held-out perplexity over documents, token-weighted, and the tokens it is over."""
    if records.empty:
        return {"perplexity": float("nan"), "tokens": 0.0}
    return {"perplexity": perplexity(records["logprob"].to_numpy(dtype=np.float64),
                                     records["tokens"].to_numpy(dtype=np.float64)),
            "tokens": float(records["tokens"].sum())}
