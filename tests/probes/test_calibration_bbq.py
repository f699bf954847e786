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


def test_templates_that_balance_their_items_get_no_interval_of_width_0() -> None:
    """Each template answered once with and once against the stereotype (a model that picks
    the same option for a question and its negation): every template's score is 0, so
    leaving one out moves nothing; the interval is the items' own, not [0, 0]."""
    from biasscope.probes.bbq.metrics import bbq_metrics

    frame = records(np.random.default_rng(0), 1, 20, 2, 0.5)
    frame["label"] = ["Alice", "Bob"] * 20
    score = bbq_metrics(frame)["headline"]["bias_disambiguated"]
    assert score["estimate"] == 0.0 and score["templates"] == 20
    assert score["low"] < -0.2 and score["high"] > 0.2
