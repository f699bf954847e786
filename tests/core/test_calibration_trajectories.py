"""The trajectory claims hold their level on the nulls a training run produces (prompts with a
persistent effect and noise that is independent, AR(1) or a random walk across checkpoints):
each claim run small, and the false claims of each kind pooled over its nulls, where a few
simulations each add up to a sharp check. scripts/calibrate.py runs them large."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from calibration_base import Claim, within
from calibration_trajectories import CLAIMS

#: Simulations per claim in CI: the bootstrap claims cost a few hundredths of a second each.
SIMS = {"changes trend at step S": 12, "changes fastest between steps A and B (CI)": 30,
        "performance mirrors fairness": 100, "the sharpest change (CI)": 40,
        "significant": 150, "significant from step S": 30,
        "stop at step S (smaller |gap| shown)": 40, "the stop's fairness gain (band)": 40,
        "a probe's stop at step S (from the intervals)": 200}


@pytest.fixture(scope="module")
def results() -> dict[Claim, tuple[int, int]]:
    return {claim: claim.simulate(SIMS[claim.claim], 11) for claim in CLAIMS}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim}|{c.null}|{c.size}")
def test_each_claim_holds_its_level(claim: Claim, results: dict[Claim, tuple[int, int]]
                                   ) -> None:
    ok, said = within(claim, *results[claim])
    assert ok, said


def test_each_kind_of_claim_holds_its_level_over_all_its_nulls(
        results: dict[Claim, tuple[int, int]]) -> None:
    pooled: dict[tuple[str, str, float], list[int]] = defaultdict(lambda: [0, 0])
    for claim, (hits, n) in results.items():
        pooled[(claim.claim, claim.kind, claim.nominal)][0] += hits
        pooled[(claim.claim, claim.kind, claim.nominal)][1] += n
    for (name, kind, nominal), (hits, n) in pooled.items():
        rate, se = hits / n, math.sqrt(nominal * (1 - nominal) / n)
        ok = rate <= nominal + 3 * se if kind == "false-claim" else rate >= nominal - 3 * se
        assert ok, f"{name}: {rate:.4f} of {n} (nominal {nominal}, 3 SE {3 * se:.4f})"


def test_every_trajectory_claim_and_null_of_the_issue_is_simulated() -> None:
    """AR(1) 0.5, 0.8 and random walks for 8, 10 and 20 checkpoints, even and log-spaced."""
    trend = {(c.null, c.size.split(",")[0]) for c in CLAIMS if c.claim.startswith("changes tr")}
    for noise in ("AR(1) 0.5", "AR(1) 0.8", "random walk"):
        for k in (8, 10, 20):
            for spacing in ("even", "log"):
                assert (noise, f"{k} {spacing}-spaced checkpoints") in trend
    names = {c.claim for c in CLAIMS}
    assert {"performance mirrors fairness", "the sharpest change (CI)",
            "significant from step S"} <= names
