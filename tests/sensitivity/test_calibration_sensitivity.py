"""The sensitivity claims of `calibration_sensitivity`, small enough for CI: the common-change
test between principles and the sanity check's verdict hold their level under reward models
where they are false. `scripts/calibrate.py` runs them large and writes docs/validation.md's
table."""

from __future__ import annotations

import numpy as np
import pytest

from biasscope.sensitivity.confounds import effect_correlations
from calibration_base import Claim, assert_calibrated
from calibration_sensitivity import CLAIMS, common_change_false_claims, rewards


def sims(claim: Claim) -> int:
    """About 2 to 3 s a claim: a data set of the confounds costs 10 to 13 ms (a pivot, six
    tests), of the sanity check 1.5 to 3 ms (SciPy's exact test and interval)."""
    if "rises most" in claim.claim:  # three studentised bootstraps of 4999 draws each
        return 60
    return 200 if "common change" in claim.claim else 600


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim}|{c.null}|{c.size}")
def test_the_claim_is_calibrated(claim: Claim) -> None:
    assert_calibrated(claim, sims(claim))


def test_the_null_is_one_where_the_effects_correlate() -> None:
    """The nulls are not easy ones: the shared original makes fresh revisions' effects
    correlate (about +0.5), which the Pearson test of the effects took for dependence."""
    rows = effect_correlations(rewards(np.random.default_rng(0), 400, kept=0.0))
    assert all(0.4 < r["r"] < 0.6 and r["low"] > 0.3 for r in rows)
    assert all(abs(r["r_beyond_original"]) < 0.1 and r["p_holm"] > 0.05 for r in rows)
    assert common_change_false_claims(20, 0, prompts=400, kept=0.0) == (0, 20)
