"""What a calibration claim is: one printed verdict, simulated under one realistic null.

The test modules `test_calibration_*.py` run each claim small (CI time); `scripts/calibrate.py`
runs them large and writes the "Calibration" table of docs/validation.md. A claim's `simulate`
returns how often the claim was made (false-claim rate, under a null where it is false) or how
often an interval covered the truth (coverage), out of `n` simulated data sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Claim:
    claim: str  # the words a report prints, e.g. "changes trend at step S"
    null: str  # the data it is simulated on, e.g. "AR(1) rho 0.8"
    size: str  # checkpoints / items / wordings, e.g. "20 log-spaced checkpoints"
    kind: Literal["false-claim", "coverage"]
    nominal: float  # alpha for a false claim, the confidence level for coverage
    simulate: Callable[[int, int], tuple[int, int]]  # (n_sims, seed) -> (hits, n)


def within(claim: Claim, hits: int, n: int) -> tuple[bool, str]:
    """A false-claim rate at most alpha + 3 simulation SEs; coverage at least nominal - 3 SEs."""
    rate = hits / n
    se = math.sqrt(claim.nominal * (1 - claim.nominal) / n)
    ok = rate <= claim.nominal + 3 * se if claim.kind == "false-claim" else (
        rate >= claim.nominal - 3 * se)
    return ok, f"{claim.claim} under {claim.null} ({claim.size}): {rate:.4f} of {n} " \
               f"(nominal {claim.nominal}, 3 SE {3 * se:.4f})"


def assert_calibrated(claim: Claim, n_sims: int, seed: int = 0) -> None:
    """The claim simulated ``n_sims`` times is `within` its nominal level (a test's body)."""
    ok, said = within(claim, *claim.simulate(n_sims, seed))
    assert ok, said
