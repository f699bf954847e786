"""`biasscope.core.roots.brent_root` finds the root ``scipy.optimize.brentq`` finds, bit for
bit: on smooth functions, on the step function of the Mann-Whitney power the report solves
(`biasscope.core.power.mann_whitney_detectable`), and at a bracket's ends."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize

from biasscope.core import power
from biasscope.core.roots import brent_root

FUNCTIONS = [
    (lambda x: x ** 3 - 2 * x - 5, 2.0, 3.0),
    (lambda x: math.cos(x) - x, 0.0, 1.0),
    (lambda x: math.exp(x) - 1e-6, -30.0, 5.0),
    (lambda x: math.floor(10 * x) - 3.5, 0.0, 1.0),  # a jump, no zero
    (lambda x: (x - 0.3) ** 3, 0.0, 1.0),  # flat at the root
    (lambda x: math.atan(1e6 * (x - 1 / 3)), -5.0, 5.0),
    (lambda x: x - 2.0, 2.0, 7.0),  # a root at an end
]


@pytest.mark.parametrize(("f", "a", "b"), FUNCTIONS)
@pytest.mark.parametrize("xtol", [2e-12, 1e-12, 1e-4])
def test_the_roots_are_scipys(f: Callable[[float], float], a: float, b: float,
                              xtol: float) -> None:
    """Equal roots, or no convergence in 100 steps for both (a root too flat for xtol)."""
    def outcome(solve: Callable[..., float]) -> float | str:
        try:
            return solve(f, a, b, xtol=xtol)
        except (ValueError, RuntimeError):
            return "no root"

    assert outcome(brent_root) == outcome(optimize.brentq)


def test_the_mann_whitney_power_root_is_scipys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's root, with SciPy's brentq in its place, gives the same number."""
    rng = np.random.default_rng(2)
    cases = [(rng.normal(0, 1, 40), rng.normal(0, 1, 35)),
             (rng.integers(0, 5, 60) / 4, rng.integers(0, 5, 50) / 4),
             (rng.lognormal(0, 1, 300), rng.lognormal(0.1, 1, 280))]
    ours = [power.mann_whitney_detectable(x, y, 0.05 / 3) for x, y in cases]
    monkeypatch.setattr(power, "brent_root", optimize.brentq)
    theirs = [power.mann_whitney_detectable(x, y, 0.05 / 3) for x, y in cases]
    assert ours == theirs and all(math.isfinite(v) for v in ours)


def test_a_bracket_without_a_sign_change_is_refused() -> None:
    with pytest.raises(ValueError, match="different signs"):
        brent_root(lambda x: x * x + 1, -1.0, 1.0)
