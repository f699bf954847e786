"""`biasscope.core.normal` gives ``scipy.special.ndtr`` and ``ndtri``: bit for bit on the CI's
SciPy (1.17), within 1e-12 on another, over every branch of Cephes' approximations (erf below
|x|/√2 = 1, erfc's two rational forms below and above 8, the underflow; ndtri's centre,
its two tails, the ends and outside [0, 1])."""

from __future__ import annotations

import numpy as np
import scipy.special as special

from biasscope.core.normal import ndtr, ndtri
from numbers_close import same_as_scipy

EDGES = [0.0, -0.0, 1e-300, -1e-300, np.sqrt(2), -np.sqrt(2), 8 * np.sqrt(2), -8 * np.sqrt(2),
         37.5, -37.5, 38.5, -38.5, 40.0, -40.0, np.inf, -np.inf, np.nan]


def test_ndtr_is_scipys_on_every_branch() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(0, 1, 3000), rng.uniform(-40, 40, 3000),
                        rng.normal(0, 0.05, 500), EDGES])
    same_as_scipy(ndtr(x), special.ndtr(x))
    same_as_scipy([ndtr(float(v)) for v in x[:50]], special.ndtr(x[:50]))


def test_ndtri_is_scipys_on_every_branch() -> None:
    rng = np.random.default_rng(4)
    p = np.concatenate([rng.uniform(0, 1, 3000), 10.0 ** rng.uniform(-300, 0, 3000),
                        1 - 10.0 ** rng.uniform(-16, 0, 1000),
                        [0.0, 1.0, 0.5, 0.025, 0.975, np.exp(-2), 1 - np.exp(-2), 1.2e-14,
                         5e-324, -0.1, 1.1, np.nan]])
    same_as_scipy(ndtri(p), special.ndtri(p))


def test_shapes_follow_the_input() -> None:
    grid = np.linspace(-3, 3, 12).reshape(3, 4)
    assert ndtr(grid).shape == (3, 4) and ndtri(np.full((2, 1), 0.3)).shape == (2, 1)
    assert isinstance(ndtr(1.5), float) and np.ndim(ndtr(np.float64(1.5))) == 0
    assert np.ndim(ndtri(np.array(0.2))) == 0
