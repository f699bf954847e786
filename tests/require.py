"""Tests that need optional components skip without them, except where CI demands them.

CI (``.ci/run``) sets ``BIASSCOPE_REQUIRE_<WHAT>=1`` for each component it installs, so a
broken install fails there instead of silently skipping the tests that use it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence

import pytest


def missing_modules(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(missing: Sequence[str], flag: str, install: str) -> None:
    """Skip (the test, or the module calling at import) when anything is ``missing``; fail
    instead when ``$flag`` is 1."""
    if not missing:
        return
    what = f"{', '.join(missing)} missing"
    if os.environ.get(flag) == "1":
        pytest.fail(f"{what} but {flag}=1: {install}", pytrace=False)
    pytest.skip(f"{what}; {install}", allow_module_level=True)
