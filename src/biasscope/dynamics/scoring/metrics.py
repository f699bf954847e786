"""A sweep's numbers per checkpoint: each unit's metrics come from its probe
(``PROBES[name].unit_metrics``; the next-token ones live in `biasscope.probes.next_token`,
re-exported here), and their mean and spread over seeds are computed here."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from biasscope.probes.next_token import (
    accuracy,
    average_rank,
    correct,
    dynamics_metrics,
    jsd_by_parts,
    jsd_parts,
    option_logprob_matrix,
    option_probs,
    record_jsd_parts,
    stereotype_accuracy,
)


def seed_mean_std(per_seed: Mapping[int, Mapping[str, float]]) -> tuple[
        dict[str, float], dict[str, float]]:
    """Mean and sample standard deviation (ddof=1; 0 for one seed) of each metric over seeds."""
    keys = sorted({k for m in per_seed.values() for k in m})
    mean, std = {}, {}
    for key in keys:
        values = np.array([m.get(key, np.nan) for m in per_seed.values()], dtype=np.float64)
        finite = values[np.isfinite(values)]
        mean[key] = float(finite.mean()) if finite.size else float("nan")
        std[key] = float(finite.std(ddof=1)) if finite.size > 1 else 0.0 if finite.size else float(
            "nan")
    return mean, std


__all__ = ["accuracy", "average_rank", "correct", "dynamics_metrics", "jsd_by_parts",
           "jsd_parts", "option_logprob_matrix", "option_probs", "record_jsd_parts",
           "seed_mean_std", "stereotype_accuracy"]
