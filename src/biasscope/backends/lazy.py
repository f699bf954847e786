"""torch and transformers, imported when a local model is first used: ``import biasscope``
stays light, and a missing extra is one line that says what to install.

Callers import this module and call ``lazy.require_torch()``: a module imported by a command
binds no copy of it, so a stand-in (a test's, a notebook's) is not kept past its use."""

from __future__ import annotations

from typing import Any

from biasscope.core.errors import ModelError, install_hint


def require_torch() -> Any:
    try:
        import torch
        import transformers
    except ImportError:
        raise ModelError(
            "Hugging Face scoring needs the 'hf' extra: " + install_hint("hf")) from None
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return torch
