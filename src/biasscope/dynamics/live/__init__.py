"""Dynamics during training: a probe measured live on the model being trained.

`BiasCallback` subclasses ``transformers.TrainerCallback``, so it is imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from biasscope.core.renamed import warn_renamed
from biasscope.dynamics.live.evaluate import LiveConfig, evaluate_now

if TYPE_CHECKING:
    from biasscope.dynamics.live.callback import BiasCallback


def __getattr__(name: str) -> Any:
    if name == "BiasCallback":
        from biasscope.dynamics.live.callback import BiasCallback

        return BiasCallback
    if name == "LiveOptions":  # the old name, for one release
        warn_renamed(name, "LiveConfig")
        return LiveConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BiasCallback", "LiveConfig", "evaluate_now"]
