"""Power planning checked by simulation: on data with a known effect the tests biasscope runs
reject as often as planned (within a binomial interval), and at no effect as often as α."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from biasscope.cli.main import main
from biasscope.core import power as P
from biasscope.core.equivalence import contrast_equivalence
from biasscope.core.stats import wilson

REPS = 600


def _within(k: int, rate: float) -> bool:
    ci = wilson(k, REPS, 0.99)
    return bool(ci["low"] <= rate <= ci["high"])


@pytest.mark.parametrize("effect", [0.0, 0.25])
def test_planned_power_is_the_rejection_rate(effect: float) -> None:
    n = 30 if effect == 0 else P.items_needed(effect, 0.5, 0.05, 0.8)
    rng = np.random.default_rng(7)
    x, y = rng.normal(effect, 0.5, (REPS, n)), rng.normal(0.0, 0.5, (REPS, n))
    rejected = int((sps.ttest_ind(x, y, axis=1, equal_var=False).pvalue < 0.05).sum())
    planned = 0.05 if effect == 0 else P.power_at(effect, 0.5, n, 0.05)
    assert effect == 0 or planned >= 0.8 > P.power_at(effect, 0.5, n - 1, 0.05)
    assert _within(rejected, planned), (rejected / REPS, planned)


def test_minimum_detectable_effect_has_the_target_power() -> None:
    se, df = 0.01, 40
    mde = P.minimum_detectable_effect(se, df, 0.05, 0.8)
    assert P.two_sided_power(mde, se, df, 0.05) == pytest.approx(0.8, abs=1e-6)
    assert 2.8 * se < mde < 3.0 * se  # (1.96 + 0.84)·se, a little more for t with 40 df
    assert P.minimum_detectable_effect(0.01, 2, 0.05, 0.8) > mde  # tiny df: larger


def test_equivalence_plan_is_met_by_tost() -> None:
    margin, sd = 0.05, 0.1
    n = P.items_for_equivalence(margin, sd, 0.05, 0.8, "paired")
    rng = np.random.default_rng(3)
    hits = sum(contrast_equivalence([rng.normal(0, sd, n)], [1.0], margin, 0.05,
                                    True).verdict == "equivalent" for _ in range(REPS))
    assert _within(hits, P.equivalence_power(0.0, margin, sd / np.sqrt(n), n - 1, 0.05))
    assert hits / REPS >= 0.75
    # at the margin itself TOST claims equivalence at most α of the time
    edge = sum(contrast_equivalence([rng.normal(margin, sd, n)], [1.0], margin, 0.05,
                                    True).verdict == "equivalent" for _ in range(REPS))
    assert edge / REPS <= wilson(int(0.05 * REPS), REPS, 0.99)["high"]


def test_cli_plans_and_refuses_half_a_question(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--effect", "0.03", "--sd", "0.1"]) == 0
    assert "needs 176 items per group" in capsys.readouterr().out
    assert main(["power", "--effect", "0.03"]) == 2
    assert "--pilot" in capsys.readouterr().err
