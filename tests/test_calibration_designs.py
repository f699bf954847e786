"""The design claims of `calibration_designs`, small enough for CI (about 15 s on one core):
each printed verdict's false-claim rate at most α plus three simulation SEs, each interval's
coverage at least nominal minus three, under the nulls of issue #37 (items crossed with
wordings, tiny pilots, paired differences that are all 0, two responses per conversation).
`scripts/calibrate.py` runs the same claims large and writes docs/validation.md's table."""

from __future__ import annotations

import pytest

from calibration_base import Claim, within
from calibration_designs import CLAIMS

N_SIMS = 200  # 3 SE: 0.046 at α = 0.05; a coverage of 0.95 must reach 0.904


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim} | {c.null} | {c.size}")
def test_the_claim_is_calibrated(claim: Claim) -> None:
    hits, n = claim.simulate(N_SIMS, 0)
    ok, said = within(claim, hits, n)
    assert ok, said


def test_every_claim_of_the_issue_is_simulated() -> None:
    said = {c.claim.split(" (")[0] for c in CLAIMS}
    assert {"equivalent", "different", "holds across N of N wordings",
            "favours the female/male version", "the flips favour men/women"} <= said
    assert {c.kind for c in CLAIMS} == {"false-claim", "coverage"}
