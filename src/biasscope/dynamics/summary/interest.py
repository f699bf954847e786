"""Whether a significant gap is big enough to count: the smallest gap of interest, the rows
flagged below it (``below_gap_of_interest``) and the sentences saying so, for the checkpoints
on a model's curve and for each one reported aside alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core import numbers
from biasscope.dynamics.analysis.config import FLAG_GAP, AnalysisConfig


def gap_of_interest(options: AnalysisConfig) -> float:
    """``min_gap`` when the user set one, else ``FLAG_GAP`` (which flags, but never hides)."""
    return options.min_gap if options.min_gap > 0 else FLAG_GAP


def material(tests: dict[str, pd.DataFrame], table: pd.DataFrame, threshold: float
             ) -> np.ndarray:
    """Per row of ``table``: whether the JSD-P gap at its step is at least ``threshold``."""
    jsdp = tests["jsdp_correct"].dropna(subset=["step"])
    size = dict(zip(jsdp["step"].astype(int), jsdp["gap"].abs()))
    return np.array([size.get(int(s), np.nan) >= threshold for s in table["step"]], dtype=bool)


def flag_ranks(tests: dict[str, pd.DataFrame], options: AnalysisConfig, at: str | None = None
               ) -> str | None:
    """Mark significant Average Rank gaps where the JSD-P gap is below the gap of interest
    (``below_gap_of_interest``, in place), and say so; None if there are none.

    A rank gap has no size in probability: where "male" and "female" are nearly tied, the one
    a hair ahead takes the better rank on every prompt, and the test is significant however
    small the difference. The JSD-P gap measures the same male-female difference in
    probability, so its smallest gap of interest decides whether a rank gap is one too.
    ``at``: where, in place of the steps flagged (a checkpoint aside, ``at revision best``).
    """
    if "target_rank" not in tests:
        return None
    table = tests["target_rank"]
    threshold = gap_of_interest(options)
    small = table["significant"].fillna(False).astype(bool).to_numpy() & ~material(
        tests, table, threshold)
    table["below_gap_of_interest"] = small
    if not small.any():
        return None
    steps = [str(int(x)) for x in table.loc[small, "step"].dropna()]
    where = ", ".join(steps[:10]) + (" …" if len(steps) > 10 else "")
    at = at or (f"at {len(steps)} of {len(table)} checkpoints "
                f"(step{'s' if len(steps) > 1 else ''} {where})")
    return (f"{at} the Average Rank gap is significant where the JSD-P gap is below the "
            f"smallest gap of interest {threshold:g}. Ranks have no size in probability (a "
            "hair between \"male\" and \"female\" moves every prompt's rank), so there the "
            "rank gap is no evidence of bias either.")


def flag_small_gaps(table: pd.DataFrame, options: AnalysisConfig, snapshot: bool = False,
                    at: str | None = None) -> str | None:
    """Mark significant JSD-P gaps below the gap of interest (column ``below_gap_of_interest``
    of ``table``, in place) and say so in one sentence; None if there are none. ``at``: where,
    in place of the steps flagged."""
    threshold = gap_of_interest(options)
    small = table["significant"].fillna(False).astype(bool) & (table["gap"].abs() < threshold)
    table["below_gap_of_interest"] = small
    if not small.any():
        return None
    flagged = table[small]
    steps = [str(int(x)) for x in flagged["step"].dropna()]
    where = ", ".join(steps[:10]) + (" …" if len(steps) > 10 else "")
    largest, widest = (float(flagged[c].abs().max()) for c in ("effect_size", "gap"))
    how = ("--min-gap" if options.min_gap > 0 else
           "the default for flagging, as --min-gap is 0; emergence counts significance alone")
    plural = "s" if len(steps) > 1 else ""
    at = at or ("at its checkpoint" if snapshot else
                f"at {len(flagged)} of {len(table)} checkpoints (step{plural} {where})")
    return (f"{at} the JSD-P "
            f"gap is significant but below the smallest gap of interest {threshold:g} ({how}): "
            f"|gap| at most {numbers.num(widest)}, effect size up to ±{largest:.2f}. Prompts "
            "that differ in one word give even an untrained model such gaps, so the gap alone is "
            "no evidence of bias; the accuracies per answer and pro against anti say more.")


def flag_aside(found: Mapping[str, dict[str, Any]], options: AnalysisConfig, at: str
               ) -> list[str]:
    """A checkpoint aside's test rows per value (``found``: one row each, no step) flagged in
    place as the curve's rows are (`flag_small_gaps`, `flag_ranks`), and what they say, each
    ``at`` the checkpoint (``at revision best``)."""
    tables = {value: pd.DataFrame([{**row, "step": 0}]) for value, row in found.items()}
    if "jsdp_correct" not in tables:
        return []
    said = [flag_small_gaps(tables["jsdp_correct"], options, at=at),
            flag_ranks(tables, options, at=at)]
    for value, table in tables.items():
        if "below_gap_of_interest" in table:
            found[value]["below_gap_of_interest"] = bool(table["below_gap_of_interest"].iloc[0])
    return [s for s in said if s is not None]
