"""GGUF checkpoints (llama.cpp, Ollama): dequantised once into a cache keyed by the file's SHA-256.

transformers reads a GGUF file by dequantising every tensor and converting its tokenizer, which
takes minutes for a real model (Gemma 3 270M: 2-6 minutes on two cores), and refuses to save the
result with ``save_pretrained``. So the first use of a file converts it into
``$BIASSCOPE_GGUF_CACHE`` (default ``~/.cache/biasscope/gguf``) ``/<sha256>/``: float32
safetensors weights, ``config.json`` without its ``quantization_config``, the tokenizer files
and ``gguf.json`` (where it came from). Every later use, from any path holding the same bytes,
loads that directory in seconds. The directory is written under a temporary name (with the
host and process id) and renamed into place, so a conversion that is killed leaves no half
cache behind; its temporary folder is removed by the next use of the same file, once no live
process owns it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from biasscope.core import digest, steps
from biasscope.core.digest import Stamp, settled, stamp_of
from biasscope.core.errors import ModelError, install_hint
from biasscope.core.imports import installed_version
from biasscope.core.processes import HOST, alive
from biasscope.core.steps import say

SUFFIX = ".gguf"
PROVENANCE = "gguf.json"
#: Not architectures: transformers' GGUF tables also list these sections.
_NOT_ARCHITECTURES = {"general", "tokenizer"}
_hashes: dict[tuple[str, Stamp], str] = {}
# ``.<sha256[:16]>-<host>~<pid>-<random>``; older biasscope wrote ``.<sha256[:16]>-<random>``.
_SCRATCH = re.compile(r"^\.[0-9a-f]{16}-(?:(?P<host>[A-Za-z0-9-]+)~(?P<pid>\d+)-)?[^/]*$")
_ABANDONED_S = 24 * 3600  # an old-style scratch folder untouched this long is a dead one's


def is_gguf(source: str | os.PathLike[str]) -> bool:
    return str(source).lower().endswith(SUFFIX)


def cache_root() -> Path:
    """``$BIASSCOPE_GGUF_CACHE``, else ``~/.cache/biasscope/gguf``."""
    chosen = os.environ.get("BIASSCOPE_GGUF_CACHE")
    return Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "biasscope" / "gguf"


def file_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per process for an unchanged file: kept against its
    size, mtime, ctime, inode and device (`digest.stamp_of`), as the fingerprint cache keeps
    a weight file's, so another file renamed over it, or bytes written into it that keep its
    size and mtime, are hashed again."""
    stat = path.stat()
    key = (str(path.resolve()), stamp_of(stat))
    if key not in _hashes:
        if stat.st_size >= steps.LARGE_FILE:
            from biasscope.core.numbers import num  # NumPy: `dynamics --help` imports this module

            say(f"hashing {path.name} ({num(stat.st_size / 2**20, 0)} MiB)")
        sha = digest.file_sha256(path)
        after = path.stat()
        if stamp_of(after) != key[1] or not settled(after, time.time_ns()):
            return sha  # changed while read, or a later write could keep its stamp: not kept
        _hashes[key] = sha
    return _hashes[key]


def _gguf() -> Any:
    try:
        import gguf
    except ImportError:
        raise ModelError("GGUF checkpoints need the 'gguf' extra: "
                         + install_hint("hf,gguf")) from None
    return gguf


def read_header(path: Path) -> dict[str, str]:
    """Architecture, quantisation type and model name from the file's metadata (gguf package)."""
    gguf = _gguf()
    try:
        reader = gguf.GGUFReader(str(path))
        fields = reader.fields

        def field(name: str) -> Any:
            return fields[name].contents() if name in fields else None

        architecture = field("general.architecture")
        file_type = field("general.file_type")
        if file_type is not None:
            quant = gguf.LlamaFileType(int(file_type)).name
            quant = re.sub(r"^(MOSTLY|ALL)_", "", quant)
        else:  # older writers: the type most of the matrices have
            kinds = [gguf.GGMLQuantizationType(t.tensor_type).name for t in reader.tensors
                     if len(t.shape) > 1]
            quant = max(set(kinds), key=kinds.count) if kinds else "unknown"
        name = field("general.name")
    except Exception as exc:  # the reader raises many kinds on a damaged file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path} is not a readable GGUF file ({first})") from None
    if not isinstance(architecture, str):
        raise ModelError(f"{path} is not a readable GGUF file (no general.architecture)")
    return {"architecture": architecture, "quantization": quant,
            "name": name if isinstance(name, str) else path.stem}


def supported_architectures() -> list[str]:
    """The GGUF architectures this transformers can dequantise."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        raise ModelError("GGUF checkpoints need the 'hf' extra (transformers): "
                         + install_hint("hf,gguf")) from None
    return sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in _NOT_ARCHITECTURES)


def _check_architecture(path: Path, architecture: str) -> None:
    def norm(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", name.lower())

    known = supported_architectures()
    if norm(architecture) not in {norm(a) for a in known}:
        raise ModelError(f"{path.name}: transformers cannot read GGUF architecture "
                         f"{architecture!r}; it reads {', '.join(known)}")


def converted(path: str | os.PathLike[str]) -> Path:
    """The cache directory holding ``path`` dequantised, converting the file on first use."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist")
    sha = file_sha256(path)
    root = cache_root()
    target = root / sha
    remove_stale_scratch(root, sha)
    if (target / PROVENANCE).is_file():
        return target
    header = read_header(path)
    _check_architecture(path, header["architecture"])
    root.mkdir(parents=True, exist_ok=True)

    scratch = Path(tempfile.mkdtemp(prefix=f".{sha[:16]}-{HOST}~{os.getpid()}-", dir=root))
    try:
        _convert(path, header, scratch)
        (scratch / PROVENANCE).write_text(json.dumps(
            {"file": path.name, "sha256": sha, "size": path.stat().st_size, **header,
             "dtype": "float32", "versions": _versions()}, indent=1) + "\n")
        try:
            scratch.rename(target)
        except OSError:  # another process finished the same file first: use its copy
            if not (target / PROVENANCE).is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def read_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer ``path`` holds, read from its metadata without converting the file: a
    judge whose every answer is stored needs its keys' token ids, not the weights a
    conversion dequantises (minutes)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist")
    _check_architecture(path, read_header(path)["architecture"])
    from biasscope.backends.lazy import require_torch

    require_torch()
    if path.stat().st_size >= steps.LARGE_FILE:
        say(f"reading the tokenizer of {path.name}")
    try:
        return _tokenizer(path)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot read the tokenizer of {path.name}: {first}") from None


def _tokenizer(path: Path) -> Any:
    """The one reading of a file's tokenizer: the cache copy's files are it, saved."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def remove_stale_scratch(root: Path, sha: str) -> list[Path]:
    """Delete the temporary folders of killed conversions of the file ``sha``: those of a
    dead process on this host, and old-style ones (no process id) untouched for a day. A
    conversion still running, here or on another host sharing the cache, keeps its folder."""

    removed = []
    for path in root.glob(f".{sha[:16]}-*") if root.is_dir() else []:
        match = _SCRATCH.match(path.name)
        if match is None or not path.is_dir():
            continue
        stale = False
        if match["pid"] is not None:
            stale = match["host"] == HOST and not alive(int(match["pid"]))
        else:
            with contextlib.suppress(OSError):
                stale = time.time() - path.stat().st_mtime > _ABANDONED_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def provenance(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """What a converted cache directory was made from, or None for any other directory."""
    file = Path(directory) / PROVENANCE
    if not file.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return data


def _versions() -> dict[str, str]:
    return {package: version for package in ("transformers", "gguf", "torch")
            if (version := installed_version(package)) is not None}


def _convert(path: Path, header: dict[str, str], out: Path) -> None:
    """Dequantise ``path`` with transformers and write it to ``out`` as a plain checkpoint."""
    from biasscope.backends.lazy import require_torch

    torch = require_torch()
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    size = path.stat().st_size / 2**20
    say(f"converting {path.name} ({header['architecture']}, {header['quantization']}, "
        f"{size:.0f} MiB) once into {out.parent}/ (later loads read the cache)")
    started = time.monotonic()
    folder, name = str(path.parent), path.name
    try:
        _tokenizer(path).save_pretrained(str(out))
        say(f"  tokenizer converted ({time.monotonic() - started:.0f} s); dequantising the "
            "weights")
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                     dtype=torch.float32)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot convert {path.name}: {first}") from None
    say(f"  weights dequantised ({time.monotonic() - started:.0f} s); saving and checking them")
    state = model.state_dict()
    weights: dict[str, Any] = {}
    seen: set[int] = set()
    for key, tensor in state.items():  # tied copies (lm_head = embeddings) are stored once
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        weights[key] = tensor.detach().contiguous()
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)
    config["architectures"] = [type(model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    model.generation_config.to_json_file(str(out / "generation_config.json"))
    reloaded = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    again = reloaded.state_dict()
    bad = [k for k, v in state.items() if k not in again or not torch.equal(v, again[k])]
    if bad:
        raise ModelError(f"cannot convert {path.name}: weight {bad[0]} does not survive a "
                         "save and reload (a tied weight the config does not declare?)")
    say(f"  saved {sum(f.stat().st_size for f in out.iterdir()) / 2**20:.0f} MiB "
        f"({time.monotonic() - started:.0f} s in all)")
