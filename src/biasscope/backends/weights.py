"""Getting a checkpoint's weights into memory ahead of their use.

A sweep prefetches the next checkpoint while the current one is scored, but transformers
leaves safetensors weights memory-mapped: whatever loading did not read would be read at
first use, inside the scoring. These read the files into the page cache before the load and
touch every weight page after it, so the whole read happens in the prefetch thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import Checkpoint


def read_ahead(ckpt: Checkpoint) -> None:
    """Read a checkpoint's weight files once, sequentially, into the page cache. The
    memory-mapped load that follows then finds every page in memory: page faults that wait on
    the disk would hold the process's memory-map lock and stall the scoring thread's
    allocations for as long as the read takes."""
    with open(os.devnull, "wb") as sink:
        for path in _weight_files(ckpt):
            _read_through(path, sink.fileno())


def _weight_files(ckpt: Checkpoint) -> list[Path]:
    """The safetensors files of a local checkpoint, or of a hub revision already in the local
    hub cache (one not yet downloaded is fetched by ``from_pretrained`` itself, with plain
    writes that leave it in the page cache)."""
    root = Path(ckpt.source).expanduser()
    if root.is_dir():
        return sorted(root.glob("*.safetensors"))
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return []

    def cached(name: str) -> Path | None:
        found = try_to_load_from_cache(ckpt.source, name, revision=ckpt.revision)
        return Path(found) if isinstance(found, str) else None

    single = cached("model.safetensors")
    if single is not None:
        return [single]
    index = cached("model.safetensors.index.json")
    if index is None:
        return []
    try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (OSError, ValueError, KeyError, AttributeError):
        return []
    return [p for p in map(cached, shards) if p is not None]


def tensor_names(ckpt: Checkpoint) -> list[str] | None:
    """The names of a checkpoint's weights from its safetensors headers (the JSON at the start
    of each file: no weight is read), or None where it has no safetensors file at hand."""
    files, names = _weight_files(ckpt), []
    for path in files:
        header = safetensors_header(path)
        if header is None:
            return None
        names += [k for k in header if k != "__metadata__"]
    return names if files else None


def safetensors_header(path: Path) -> dict[str, Any] | None:
    """A safetensors file's header (the JSON at its start: each tensor's dtype, shape and
    offsets), or None where it cannot be read."""
    try:
        with path.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size)) if 0 < size < 1 << 28 else None
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


#: safetensors' floating dtypes that transformers loads a model in, by torch's names (fp8 and
#: fp4 it skips when it reads a checkpoint's dtype from its weights).
FLOATS = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}


def saved_dtypes(root: Path) -> set[str]:
    """The floating dtypes a local folder's safetensors weights were saved in (headers read, no
    weight), by torch's names: what transformers loads under ``dtype="auto"`` where the config
    names none. A header that cannot be read, another floating dtype (fp8), or an index naming
    a dtype of its own (which transformers takes first) adds "?": then no one dtype is known."""
    found: set[str] = set()
    for index in root.glob("*.safetensors.index.json"):
        try:
            if (json.loads(index.read_text()).get("metadata") or {}).get("dtype"):
                found.add("?")
        except (OSError, ValueError, AttributeError):
            found.add("?")
    for path in sorted(root.glob("*.safetensors")):
        header = safetensors_header(path)
        if header is None:
            return {"?", *found}
        kinds = {str(t.get("dtype")) for k, t in header.items()
                 if k != "__metadata__" and isinstance(t, dict)}
        found |= {FLOATS.get(k, "?") for k in kinds if k.startswith(("F", "BF"))}
    return found


def _read_through(path: Path, sink: int) -> None:
    """Every page of ``path`` into the page cache. sendfile to /dev/null reads them without
    copying anything to user space: a few percent of read()'s CPU time, which would otherwise
    be taken from the scoring beside it."""
    with path.open("rb", buffering=0) as handle:
        size, offset = os.fstat(handle.fileno()).st_size, 0
        try:
            while offset < size:
                sent = os.sendfile(sink, handle.fileno(), offset, size - offset)
                if not sent:
                    break
                offset += sent
            return
        except (OSError, AttributeError):  # no sendfile into a file here (macOS, Windows)
            pass
        handle.seek(offset)
        buffer = bytearray(1 << 24)
        while handle.readinto(buffer):
            pass


def fault_in(model: Any) -> None:
    """Read every page of the model's CPU weights now. transformers leaves safetensors weights
    memory-mapped on CPU, so whatever loading did not read would come from disk at first use:
    inside the scoring, where a prefetch cannot hide it. A strided read of one element per
    4 KiB page costs ~0.1 s for a resident 410m model."""
    import torch

    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.device.type == "cpu" and tensor.numel():
                tensor.reshape(-1)[:: max(1, 4096 // tensor.element_size())].sum()
