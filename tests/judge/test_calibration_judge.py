"""The judge-audit claims of `calibration_judge`, small enough for CI (a few seconds each on
one core): the first-slot, length and self-preference tests hold their level, a whole audit
of several judges without a bias prints none (Holm over its tests), and the win rates'
intervals hold their coverage, where every pair is asked in both orders. The length
control fits a profile likelihood per data set (15 to 50 ms), so its claims run fewer.
`scripts/calibrate.py` runs them large and writes docs/validation.md's table."""

from __future__ import annotations

import pytest

from calibration_base import Claim, assert_calibrated
from calibration_judge import CLAIMS


def sims(claim: Claim) -> int:
    """Simulations in CI, 2 to 3 s a claim: the length control's profile-likelihood fits
    cost a data set 15 ms (50 ms at 5 pairs), a test of 100 pairs its sign flips 14 ms."""
    if "any verdict" in claim.claim:  # a whole audit: 2 to 55 ms (length fit, sign flips)
        return 80
    if "win rate" in claim.claim:
        return 50 if claim.size.startswith("5 ") else 120
    if "length coefficient" in claim.claim or "leaderboard" in claim.claim:
        return 100
    return 200 if claim.size.startswith("100 ") else 400


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim}|{c.null}|{c.size}")
def test_the_claim_is_calibrated(claim: Claim) -> None:
    assert_calibrated(claim, sims(claim))


def test_every_verdict_of_the_audit_is_simulated() -> None:
    said = " ".join(c.claim for c in CLAIMS)
    for verdict in ("first-slot test", "length coefficient", "raw win rate",
                    "length-controlled win rate", "self-preference", "leaderboard's order",
                    "shows one system above another", "any verdict, Holm over the audit's"):
        assert verdict in said
    assert {c.size.split()[0] for c in CLAIMS} >= {"5", "8", "10", "20", "100"}
