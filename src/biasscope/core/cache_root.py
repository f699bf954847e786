"""The root of biasscope's cache on this machine: ``$BIASSCOPE_CACHE_DIR``, else
``~/.cache/biasscope``. Downloaded datasets lie under its ``data/`` (`biasscope.data.sources`),
remote runs' staging copies under its ``runs/`` (`biasscope.store.remote`): one variable with
one meaning, read in one place. (The data cache once took the variable as itself, which put
the datasets' folders beside ``runs/``; `biasscope.data.sources` still finds files there.)
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "BIASSCOPE_CACHE_DIR"


def cache_root() -> Path:
    """``$BIASSCOPE_CACHE_DIR`` (``~`` expanded), else ``~/.cache/biasscope``."""
    chosen = os.environ.get(VARIABLE)
    return Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "biasscope"
