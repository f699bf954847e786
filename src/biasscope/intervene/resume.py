"""Resuming a full fine-tune from a Trainer checkpoint with every weight it saved.

The Trainer saves a checkpoint with ``save_pretrained``, which writes the names the hub uses
(GPT-NeoX's output layer as ``embed_out``, a tied output layer not at all), but resumes with a
plain ``load_state_dict(strict=False)`` under the model class's own names: the output layer
kept its starting weights and only a logged warning said so. Here the weights are read back
the way they were written (``from_pretrained`` of the checkpoint: its renames and ties), and
any weight the checkpoint lacks, or has beyond the model's, stops the run. LoRA checkpoints
(adapters only) are resumed by the Trainer as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biasscope.backends.loading import loading
from biasscope.core.errors import ModelError


def load_weights(model: Any, checkpoint: str | Path) -> None:
    """Copy the weights saved in ``checkpoint`` into ``model`` (same class and config); every
    weight of the model must be in it and nothing else."""
    dtype = next(model.parameters()).dtype
    with loading(f"Trainer checkpoint {checkpoint}"):
        loaded, info = type(model).from_pretrained(str(checkpoint), dtype=dtype,
                                                   output_loading_info=True,
                                                   use_safetensors=True)
    bad = {kind: sorted(info.get(f"{kind}_keys") or ()) for kind in ("missing", "unexpected",
                                                                     "mismatched")}
    if any(bad.values()):
        found = "; ".join(f"{kind} {', '.join(map(str, keys[:3]))}"
                          f"{', ...' if len(keys) > 3 else ''}" for kind, keys in bad.items()
                          if keys)
        raise ModelError(f"cannot resume from {checkpoint}: its weights do not match the "
                         f"model ({found}); delete {checkpoint} to train the arm "
                         "again from the start")
    try:
        model.load_state_dict(loaded.state_dict(), strict=True)
    except RuntimeError as exc:  # shapes unlike the model's (another config)
        raise ModelError(f"cannot resume from {checkpoint}: {str(exc).splitlines()[0]}"
                         ) from None


def trainer_class() -> type:
    """`transformers.Trainer` resuming full fine-tunes through `load_weights`."""
    from transformers import Trainer

    class Resuming(Trainer):
        def _load_from_checkpoint(self, resume_from_checkpoint: str,
                                  model: Any = None) -> None:
            target = model if model is not None else self.model
            if hasattr(target, "peft_config"):  # LoRA: the adapters only
                super()._load_from_checkpoint(resume_from_checkpoint, model)
                return
            load_weights(target, resume_from_checkpoint)

    return Resuming
