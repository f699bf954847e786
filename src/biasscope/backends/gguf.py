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

Its tokenizer is also kept alone, in ``tokenizers/<sha256>/``: transformers builds it from the
file's metadata, 45 s for Gemma 3's 262k tokens, and a call that needs the tokenizer without the
weights (a judge's answer keys, an audit's chat template, every answer of theirs stored) reads it
there where the converted copy is gone. It is written as the copy is (a temporary folder renamed
into place) with ``gguf-tokenizer.json`` last: the file's SHA-256 and header, and each saved
file's size and SHA-256, checked before it is read, and the versions of transformers, tokenizers
and gguf that read it (another version may read the metadata otherwise: then it is read and
saved anew). A conversion copies those files. Where the cache cannot be written, the tokenizer
is read from the metadata each time, as before.

A file's SHA-256 is kept in the fingerprints' cache (`backends.fingerprints`), as a weight
file's is: an unchanged file is hashed once, not once a process. Where the cache lives and how
its folders are written whole is `backends.gguf_paths`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from biasscope.backends.gguf_paths import (
    PROVENANCE,
    SAVED_TOKENIZER,
    SUFFIX,
    TOKENIZERS,
    cache_root,
    is_gguf,
    provenance,
    remove_stale_scratch,
)
from biasscope.backends.gguf_paths import scratch as _scratch
from biasscope.core import digest, steps
from biasscope.core.errors import BiasscopeError, ModelError, install_hint
from biasscope.core.imports import installed_version
from biasscope.core.steps import say

#: Not architectures: transformers' GGUF tables also list these sections.
_NOT_ARCHITECTURES = {"general", "tokenizer"}
_headers: dict[str, dict[str, str]] = {}  # by SHA-256: reading one takes 10 s for Gemma 3
#: What transformers raises on a tokenizer it cannot read or save.
_TOKENIZER_ERRORS = (OSError, ValueError, KeyError, TypeError, RuntimeError, NotImplementedError)
#: What reads a file's tokenizer from its metadata: another version may read it otherwise.
_CONVERTERS = ("transformers", "tokenizers", "gguf")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The file's SHA-256 from the fingerprint cache (`fingerprints.FileDigests`, which keeps a
    weight file's): hashed once for an unchanged file, in any process, and again once its
    size, mtime, ctime, inode or device changed (another file renamed over it, bytes written
    into it that keep its size and mtime)."""
    from biasscope.backends.fingerprints import in_use  # NumPy: `dynamics --help` imports this

    with in_use() as digests:
        return digests.sha256(Path(path))[1]


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
        raise ModelError(f"{path} is not a readable GGUF file ({first}): copy or download "
                         "it again (a truncated copy reads so)") from None
    if not isinstance(architecture, str):
        raise ModelError(f"{path} is not a readable GGUF file (no general.architecture)")
    return {"architecture": architecture, "quantization": quant,
            "name": name if isinstance(name, str) else path.stem}


def header(path: Path, sha: str) -> dict[str, str]:
    """`read_header` of the file whose SHA-256 is ``sha``: from its saved tokenizer's record
    where there is one (parsing the header of a large vocabulary takes seconds), else read,
    once per process."""
    if sha not in _headers:
        saved = _saved_record(cache_root() / TOKENIZERS / sha, sha)
        known = {k: saved[k] for k in ("architecture", "quantization", "name")
                 if isinstance(saved.get(k), str)} if saved else {}
        _headers[sha] = known if len(known) == 3 else read_header(path)
    return _headers[sha]


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
    found = header(path, sha)
    _check_architecture(path, found["architecture"])
    root.mkdir(parents=True, exist_ok=True)

    scratch = _scratch(root, sha)
    try:
        _convert(path, found, scratch)
        (scratch / PROVENANCE).write_text(json.dumps(
            {"file": path.name, "sha256": sha, "size": path.stat().st_size, **found,
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
    """The tokenizer ``path`` holds, without converting the file: a judge whose every answer
    is stored needs its keys' token ids, not the weights a conversion dequantises (minutes).
    Read from the files saved in the cache (`saved_tokenizer`), else from the file itself."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist")
    folder, tokenizer = saved_tokenizer(path)
    return _load(folder, path) if folder is not None else tokenizer


def saved_tokenizer(path: Path) -> tuple[Path | None, Any]:
    """The folder in the cache holding the tokenizer of ``path`` as ``save_pretrained`` wrote
    it (saved now from the file's metadata where it is not there yet), and None; or, where the
    cache cannot be written, None and the tokenizer read from the metadata."""
    from biasscope.backends.lazy import require_torch

    require_torch()
    sha = file_sha256(path)
    parent = cache_root() / TOKENIZERS
    folder = parent / sha
    if _intact(folder, sha):
        return folder, None
    found = header(path, sha)
    _check_architecture(path, found["architecture"])
    if path.stat().st_size >= steps.LARGE_FILE:
        say(f"reading the tokenizer of {path.name} (kept in {parent}/ for later calls)")
    try:
        tokenizer = _tokenizer(path)
    except _TOKENIZER_ERRORS as exc:
        raise ModelError(f"cannot read the tokenizer of {path.name}: {_first(exc)}") from None
    try:
        _save_tokenizer(tokenizer, path, sha, found, parent)
    except (OSError, BiasscopeError, *_TOKENIZER_ERRORS):  # a cache that cannot be written
        return None, tokenizer
    return folder, None


def _save_tokenizer(tokenizer: Any, path: Path, sha: str, found: dict[str, str],
                    parent: Path) -> None:
    """Write ``tokenizer`` into ``parent/<sha>`` whole or not at all (`converted`'s way),
    with the record `_intact` checks it against, written last."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(parent, sha)
    scratch = _scratch(parent, sha)
    try:
        tokenizer.save_pretrained(str(scratch))
        files = {f.relative_to(scratch).as_posix(): [f.stat().st_size, digest.file_sha256(f)]
                 for f in sorted(scratch.rglob("*")) if f.is_file()}
        (scratch / SAVED_TOKENIZER).write_text(json.dumps(
            {"file": path.name, "sha256": sha, **found, "files": files,
             "versions": _versions(), "converters": _converters()}, indent=1) + "\n")
        if (parent / sha).exists():  # a damaged one (`_intact` said so): replaced
            shutil.rmtree(parent / sha, ignore_errors=True)
        try:
            scratch.rename(parent / sha)
        except OSError:  # another process saved the same file's first: use its copy
            if not _intact(parent / sha, sha):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _saved_record(folder: Path, sha: str) -> dict[str, Any] | None:
    """A saved tokenizer's record, if it is of the file ``sha``."""
    try:
        record = json.loads((folder / SAVED_TOKENIZER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("sha256") == sha else None


def _intact(folder: Path, sha: str) -> bool:
    """Whether ``folder`` holds the tokenizer of the file ``sha`` as saved: its record names
    the file, and every file it lists has the size and SHA-256 it was written with; and it
    was read from the metadata by the `_converters` installed now (an upgraded transformers
    or tokenizers may read a file's tokenizer otherwise: it is read again, as a rerun with
    the converted copy gone would under the new versions)."""
    record = _saved_record(folder, sha)
    if record is None or record.get("converters") != _converters():
        return False
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return False
    try:
        return all(isinstance(seen, list) and len(seen) == 2
                   and (folder / name).stat().st_size == seen[0]
                   and digest.file_sha256(folder / name) == seen[1]
                   for name, seen in files.items())
    except (OSError, BiasscopeError):
        return False


def _load(folder: Path, path: Path) -> Any:
    """The tokenizer saved in ``folder``, loaded as a converted copy's is."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except _TOKENIZER_ERRORS as exc:
        raise ModelError(f"cannot read the tokenizer of {path.name} saved in {folder}: "
                         f"{_first(exc)}; delete that folder to read it again from the "
                         "file") from None


def _tokenizer(path: Path) -> Any:
    """The one reading of a file's tokenizer from its metadata: the saved files are it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _converters() -> dict[str, str]:
    """The versions of the packages that read a file's tokenizer from its metadata."""
    return {package: version for package in _CONVERTERS
            if (version := installed_version(package)) is not None}


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
        saved, tokenizer = saved_tokenizer(path)  # its files copied: read once, kept alone
        if saved is None:
            tokenizer.save_pretrained(str(out))
        for file in (_saved_record(saved, saved.name) or {}).get("files", {}) if saved else ():
            (out / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(saved / file, out / file)
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


__all__ = ["PROVENANCE", "SAVED_TOKENIZER", "SUFFIX", "TOKENIZERS", "cache_root", "converted",
           "file_sha256", "header", "is_gguf", "provenance", "read_header", "read_tokenizer",
           "remove_stale_scratch", "saved_tokenizer", "supported_architectures"]
