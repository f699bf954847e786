"""Numbers recomputed from stored records equal the stored ones within a stated tolerance.

Reductions in numpy and pandas (sums, means, ranks, p-values) may change order or algorithm
between releases: the same records give numbers that differ in the last bits (seen:
1.6754445751761672e-07 against 1.6754445752742979e-07 with numpy 2.4 / pandas 3.1). A test that
recomputes an analysis compares its numbers with `assert_close`; one that checks
"byte-identical" compares stored bytes.
"""

from __future__ import annotations

import math
from typing import Any

REL = 1e-9  # relative: a reduction's rounding, far below any digit a report prints
ABS = 1e-15  # absolute, for numbers that are 0 up to rounding


def differences(a: Any, b: Any, path: str = "", abs_tol: float = ABS) -> list[str]:
    """Where `a` and `b` differ: floats beyond REL/``abs_tol``, anything else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = [f"{path}/{k}: only on one side" for k in sorted(set(a) ^ set(b), key=str)]
        return found + [d for k in a if k in b
                        for d in differences(a[k], b[k], f"{path}/{k}", abs_tol)]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} against {len(b)} entries"]
        return [d for i, (x, y) in enumerate(zip(a, b))
                for d in differences(x, y, f"{path}[{i}]", abs_tol)]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or not all(
                isinstance(v, (int, float)) for v in (a, b)):
            return [f"{path}: {a!r} against {b!r}"]
        if math.isnan(a) and math.isnan(b):
            return []
        close = math.isclose(a, b, rel_tol=REL, abs_tol=abs_tol)
        return [] if close else [f"{path}: {a!r} against {b!r}"]
    return [] if a == b else [f"{path}: {a!r} against {b!r}"]


def assert_close(a: Any, b: Any, abs_tol: float = ABS) -> None:
    found = differences(a, b, abs_tol=abs_tol)
    assert not found, "\n".join(found[:20])


def same_as_scipy(ours: Any, theirs: Any) -> None:
    """The project's own SciPy steps (core/bootstrap.py, core/ranktests.py) give SciPy's
    numbers: bit for bit on the SciPy CI pins (1.17 and later), to 1e-12 on an older one."""
    from importlib import metadata

    import numpy as np

    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if tuple(int(p) for p in metadata.version("scipy").split(".")[:2]) >= (1, 17):
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)
