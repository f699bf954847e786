"""Old public names kept importable for one release after a rename, with a warning naming the new.

A module that renamed a public class sets ``__getattr__ = renamed(__name__, {old: new},
globals().__getitem__)`` (PEP 562): ``from module import Old`` then gives the class now called
``New`` and warns once per place, so code written against the old name keeps running while it
is updated. The assignment sits under ``if not TYPE_CHECKING`` so that mypy still reports any
unknown name of the module, the old ones included.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any


def warn_renamed(old: str, new: str) -> None:
    """The one-line warning of a name that still works until the next release."""
    warnings.warn(f"{old} is now {new}; the old name goes in the next release",
                  DeprecationWarning, stacklevel=3)


def renamed(module: str, names: Mapping[str, str],
            lookup: Callable[[str], Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers each old name in ``names`` with ``lookup(new)``."""

    def attribute(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(name, new)
        return lookup(new)

    return attribute
