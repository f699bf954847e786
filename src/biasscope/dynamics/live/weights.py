"""Which weights a live step was scored on, so that its missing units are scored on those only.

A step whose evaluation raised (or was killed) between two units lacks the rest; they may be
scored later only on the same weights, or one step would mix two models' records. A resumed
Trainer's model is the checkpoint's only when the Trainer restored it whole (transformers 5
leaves GPT-NeoX's output layer as initialised: it saves it as ``embed_out`` and loads the file
with a plain ``load_state_dict(strict=False)``), and ``load_best_model_at_end`` swaps the
model before training ends. So each evaluation records a digest of the weights, and a step is
completed only where the model in hand has the same.
"""

from __future__ import annotations

import hashlib
from typing import Any

from biasscope.store.directory import RunStore
from biasscope.store.files import write_json

FILE = "live.json"
#: Values read per tensor: evenly spaced, off the device; enough to tell two trainings' or
#: two steps' weights apart (every value moves at an update), cheap for a 7B model.
SAMPLE = 4096


def digest(model: Any) -> str | None:
    """SHA-256 of every tensor of ``model``'s state dict: its name, dtype, shape and up to
    `SAMPLE` evenly spaced values. None where the weights are not all here (on the meta
    device, or partitioned away by DeepSpeed ZeRO-3) or cannot be read so (a sharded
    ``DTensor``): such a model cannot be told apart, and scoring it goes on all the same."""
    import torch

    if any(p.is_meta or hasattr(p, "ds_numel") for p in model.parameters()):
        return None
    out = hashlib.sha256()
    try:
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                flat = tensor.detach().reshape(-1)  # a view: state dicts hold contiguous ones
                sample = flat[::max(1, flat.numel() // SAMPLE)].to("cpu").contiguous()
                out.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
                out.update(sample.view(torch.uint8).numpy().tobytes())
    except (AttributeError, RuntimeError, TypeError, ValueError):  # not a plain tensor
        return None
    return out.hexdigest()


def record(out: Any, model_name: str, step: int, value: str | None) -> None:
    """``value`` as the weights ``model_name`` has at ``step``, in the run's ``live.json``
    (before the step's first unit is written: a kill after it leaves the record)."""
    store = RunStore(out)
    path = store.root / FILE
    data = store.read_json(FILE) if path.is_file() else {}
    data.setdefault("weights", {}).setdefault(model_name, {})[str(step)] = value
    store.root.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
    store.publish(path)


def recorded(out: Any, model_name: str, step: int) -> str | None:
    """The digest `record` kept for ``model_name`` at ``step``; None where there is none (a
    run from before biasscope recorded them, or one made by `evaluate_now` alone)."""
    store = RunStore(out)
    if not (store.root / FILE).is_file():
        return None
    value = store.read_json(FILE).get("weights", {}).get(model_name, {}).get(str(step))
    return str(value) if value else None
