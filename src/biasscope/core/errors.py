"""Errors a user can fix. The CLI prints them as one line and exits non-zero, no traceback."""

from __future__ import annotations

import importlib
from typing import Any


class BiasscopeError(Exception):
    """A problem with the user's input, data, model or environment, explained in one line."""


class DataError(BiasscopeError):
    """A dataset file is missing, corrupt or malformed."""


class ModelError(BiasscopeError):
    """A model or checkpoint cannot be loaded or produced unusable outputs."""


def install_hint(extras: str) -> str:
    """How to add ``extras``: biasscope is installed from a clone (it is on no package index),
    so ``pip install 'biasscope[...]'`` would fail."""
    return f"pip install -e '.[{extras}]' in the biasscope clone"


def optional(module: str, extra: str, feature: str) -> Any:
    """Import ``module`` from an optional extra, or say in one line which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BiasscopeError(f"{feature} needs the '{extra}' extra: "
                             f"{install_hint(extra)}") from None
