"""BBQ's claims of `calibration_bbq`, small enough for CI: s_DIS's test and interval and the
per-category sentence hold their level where a model's lean varies by template but not on
average. `scripts/calibrate.py` runs them large and writes docs/validation.md's table."""

from __future__ import annotations

import numpy as np
import pytest

from biasscope.probes.bbq.metrics import answers
from biasscope.probes.bbq.steps import _template_test
from calibration_base import Claim, assert_calibrated
from calibration_bbq import CLAIMS, records


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim}|{c.null}|{c.size}")
def test_the_claim_is_calibrated(claim: Claim) -> None:
    assert_calibrated(claim, 150)


def test_one_item_per_template_is_the_exact_binomial_test() -> None:
    """Without templates (records stored before question_index was kept) the sign flips of
    ±1/2 per item are the exact binomial test."""
    from scipy.stats import binomtest

    frame = records(np.random.default_rng(3), 1, 10, 1, 0.5).drop(columns="question_index")
    found = answers(frame)
    k, n = int(found["biased"].sum()), len(found)
    assert _template_test(found, False)[0] == pytest.approx(binomtest(k, n).pvalue)
