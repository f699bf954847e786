"""A root of a function of one variable by Brent's method, here rather than from SciPy:
``scipy.optimize`` takes a tenth of a second to import, and the report's one root (the gap a
Mann-Whitney test could have detected) needs nothing else from it.

The iteration is Brent's (1973) as ``scipy.optimize.brentq`` runs it, step for step (inverse
quadratic interpolation or the secant where it shrinks the bracket fast enough, bisection
otherwise), so the root is the number SciPy finds; tests/core/test_roots.py checks it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: SciPy's default relative tolerance, four machine epsilons.
RTOL = 4 * 2.220446049250313e-16


def brent_root(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12,
               rtol: float = RTOL, maxiter: int = 100) -> float:
    """A root of ``f`` in [a, b], where ``f(a)`` and ``f(b)`` have opposite signs, to within
    ``xtol + rtol·|root|``. ValueError when the signs are not opposite or it does not
    converge in ``maxiter`` steps."""
    previous, current = float(a), float(b)
    f_previous, f_current = float(f(previous)), float(f(current))
    if f_previous == 0:
        return previous
    if f_current == 0:
        return current
    if math.copysign(1, f_previous) == math.copysign(1, f_current):
        raise ValueError("f(a) and f(b) must have different signs")
    other = f_other = 0.0  # the far end of the bracket
    step = last_step = 0.0
    for _ in range(maxiter):
        if (f_previous != 0 and f_current != 0
                and math.copysign(1, f_previous) != math.copysign(1, f_current)):
            other, f_other = previous, f_previous
            step = last_step = current - previous
        if abs(f_other) < abs(f_current):  # keep the best guess in current
            previous, current, other = current, other, current
            f_previous, f_current, f_other = f_current, f_other, f_current
        tolerance = (xtol + rtol * abs(current)) / 2
        half = (other - current) / 2
        if f_current == 0 or abs(half) < tolerance:
            return current
        if abs(last_step) > tolerance and abs(f_current) < abs(f_previous):
            if previous == other:  # secant
                trial = -f_current * (current - previous) / (f_current - f_previous)
            else:  # inverse quadratic interpolation
                slope_previous = (f_previous - f_current) / (previous - current)
                slope_other = (f_other - f_current) / (other - current)
                trial = -f_current * (f_other * slope_other - f_previous * slope_previous) / (
                    slope_other * slope_previous * (f_other - f_previous))
            if 2 * abs(trial) < min(abs(last_step), 3 * abs(half) - tolerance):
                last_step, step = step, trial
            else:
                last_step = step = half
        else:
            last_step = step = half
        previous, f_previous = current, f_current
        current += step if abs(step) > tolerance else (tolerance if half > 0 else -tolerance)
        f_current = float(f(current))
    raise ValueError(f"no root found in {maxiter} steps")
