"""Heavy modules imported where they are first used, not where they are named.

SciPy's ``stats`` takes most of a second to import; modules that only sometimes reach it (a
probe's metrics, a test in the analysis) name it at the top as ``sps = lazy("scipy.stats")``
and the import happens at the first attribute looked up, so the command line and a sweep that
never computes a statistic start without it.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name`` until an attribute of it is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy(name: str) -> Any:
    """The module ``name``, imported when first used (typed ``Any``, as the module is)."""
    return LazyModule(name)
