"""Student's t without SciPy (`biasscope.core.student`) against SciPy's."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from biasscope.core.student import t_cdf, t_ppf


@pytest.mark.parametrize("df", [1, 2, 3.5, 5, 12, 39, 200, 5000])
def test_t_matches_scipy(df: float) -> None:
    for t in (-40.0, -3.2, -1.0, -0.01, 0.0, 0.3, 2.0, 7.5, 60.0):
        assert t_cdf(t, df) == pytest.approx(sps.t.cdf(t, df), rel=1e-10, abs=1e-14)
    for q in (1e-6, 0.005, 0.025, 0.3, 0.5, 0.8, 0.975, 0.995, 1 - 1e-6):
        assert t_ppf(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-9, abs=1e-12)


def test_t_ppf_refuses_what_has_no_quantile() -> None:
    with pytest.raises(ValueError, match="0 < q < 1"):
        t_ppf(1.0, 5)
