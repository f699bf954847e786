"""Loading a Hugging Face ``transformers`` checkpoint: device, dtype, weights and tokenizer.

Shared by every local-model backend (scoring, generation, reward): one place decides what a
checkpoint loads and refuses (pickle weights unless asked for, remote code unless trusted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasscope.backends import lazy
from biasscope.backends.checkpoints import Checkpoint
from biasscope.backends.loading import PICKLE_WEIGHTS, loading, refuse_remote_code
from biasscope.backends.weights import FLOATS, saved_dtypes
from biasscope.core.config import POSITIVE_INT, check_settings, setting
from biasscope.core.errors import ModelError
from biasscope.core.renamed import renamed

DTYPES = ("auto", "float32", "float16", "bfloat16")


def device_name(text: str) -> str:
    """``text``, if it is a device a local model loads on: auto, cpu, mps, cuda or cuda:N;
    ValueError if not. Checked when a config is made, without torch, so ``--device gpu`` is
    refused before a run starts, even one that asks only a server."""
    if re.fullmatch(r"auto|cpu|mps|cuda(:(0|[1-9][0-9]*))?", text):
        return text
    raise ValueError(f"{text!r} is not a device: give auto, cpu, cuda, cuda:N (N from 0) or mps")


@dataclass(frozen=True)
class HFConfig:
    """How checkpoints are loaded and scored."""

    device: str = setting("auto", "auto, cpu, cuda, cuda:N or mps", parse=device_name)
    dtype: str = setting("auto", "weights' dtype", choices=DTYPES)
    batch_size: int = setting(32, "prompts per forward pass", check=POSITIVE_INT)
    first_token: bool = setting(False, "score multi-token answer words by their first token")
    trust_remote_code: bool = setting(False, "run the model repo's own code (off by default)")
    allow_pickle: bool = setting(False, "load pickle weights (.bin/.pt), which can run code; "
                                 "off by default")

    def __post_init__(self) -> None:
        check_settings(self)


def resolve_device(name: str) -> Any:
    torch = lazy.require_torch()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        return torch.device("mps" if mps is not None and mps.is_available() else "cpu")
    try:
        device_name(name)
    except ValueError as exc:
        raise ModelError(f"--device {exc}") from None
    # The index from the text: torch wraps a large one round ("cuda:255" is the current GPU).
    kind, _, index = name.partition(":")
    mps = getattr(torch.backends, "mps", None)
    if kind == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"--device {name}: no CUDA device here (torch {torch.__version__}); "
                         "use --device cpu or auto")
    if kind == "cuda" and int(index or 0) >= torch.cuda.device_count():
        raise ModelError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s), numbered from 0")
    if kind == "mps" and not (mps is not None and mps.is_available()):
        raise ModelError(f"--device {name}: MPS is not available here; use --device cpu or auto")
    return torch.device(name)


def resolve_dtype(name: str, device: Any) -> Any:
    torch = lazy.require_torch()
    if name not in DTYPES:
        raise ModelError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    if name == "auto":
        return torch.float32 if device.type == "cpu" else "auto"
    return getattr(torch, name)


def dtype_before_loading(source: str | Path, name: str, device: str) -> str | None:
    """The dtype a local checkpoint's weights will load in under ``--dtype name`` on a
    ``device`` ("cpu", "cuda", "mps": `resolve_device`'s type), read from its files, not its
    weights: a run's identity holds it, so a rerun with nothing to score is checked without a
    load. A dtype asked is that one; "auto" on a CPU is float32 (`resolve_dtype`); elsewhere
    transformers loads the dtype the config names (``dtype``, else the older ``torch_dtype``),
    else that of the weights as saved (one floating dtype in every safetensors header). None
    where only a load tells: a hub id, a quantised checkpoint (its quantiser may change the
    dtype), weights saved in mixed or no floating dtypes, or files that cannot be read."""
    if name not in DTYPES:
        raise ModelError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    if name != "auto":
        return name
    if device == "cpu":
        return "float32"
    root = Path(source).expanduser()
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("quantization_config") is not None:
        return None
    said = config.get("dtype") or config.get("torch_dtype")
    if said is not None:  # as transformers reads it: torch's attribute of that name
        known = isinstance(said, str) and said in {*_ALIASES, *FLOATS.values()}
        return _ALIASES.get(said, said) if known else None
    saved = saved_dtypes(root)
    return saved.pop() if len(saved) == 1 else None


_ALIASES = {"float": "float32", "half": "float16", "double": "float64"}


def checkpoint_dtype(ckpt: Checkpoint, name: str, device: str) -> str | None:
    """`dtype_before_loading` of ``ckpt``; a GGUF file's under "auto" is float32, the dtype
    of the cache copy it loads from (`gguf._convert` writes it so), whether made yet or not."""
    from biasscope.backends.gguf import is_gguf

    if is_gguf(ckpt.identity) and name == "auto":
        return "float32"
    return dtype_before_loading(ckpt.source, name, device)


def refuse_changed(label: str, before: dict[str, str], now: dict[str, str], said: str | None,
                   loaded: str) -> None:
    """Refuse a deferred model's weights whose load does not match the identity the run was
    checked against: files changed on disk between the two (``before``, ``now``: their
    fingerprints), or a dtype (``loaded``) other than the one read from them (``said``)."""
    if before == now and said not in (None, loaded):  # a config transformers reads otherwise
        raise ModelError(f"model {label} loaded in {loaded}, not in the {said} its files say; "
                         f"nothing of it was scored: pass --dtype {said}")
    if before == now:
        return
    changed = [k for k in sorted({*before, *now}) if before.get(k) != now.get(k)]
    raise ModelError(f"model {label} changed on disk while this call ran "
                     f"({', '.join(changed)}); nothing of it was scored: run the same "
                     "command again to check it anew")


def check_weights(source: str | Path, allow_pickle: bool = False) -> None:
    """Refuse a local checkpoint whose only weights are pickles, unless ``allow_pickle``:
    unpickling a downloaded or shared file runs whatever code it carries, so it is an explicit
    opt-in, never a silent fallback. (``use_safetensors=True`` guards hub ids.)"""
    path = Path(source).expanduser()
    if allow_pickle or not path.is_dir() or any(path.glob("*.safetensors")):
        return
    pickles = sorted({p.name for pattern in PICKLE_WEIGHTS for p in path.glob(pattern)})
    if pickles:
        shown = ", ".join(pickles[:3]) + (", ..." if len(pickles) > 3 else "")
        raise ModelError(f"checkpoint {path} has only pickle weights ({shown}), which can run "
                         "code when loaded: convert them to safetensors, or pass --allow-pickle "
                         "if you trust the directory")


def load_model(ckpt: Checkpoint, config: HFConfig) -> Any:
    """The causal LM of one checkpoint, on its device, in eval mode (safetensors weights only,
    unless ``config.allow_pickle``)."""
    lazy.require_torch()
    from transformers import AutoModelForCausalLM

    check_weights(ckpt.source, config.allow_pickle)
    if config.trust_remote_code:
        refuse_remote_code(ckpt.source, ckpt.revision)
    device = resolve_device(config.device)
    try:
        with loading(f"checkpoint {ckpt.label}"):  # damaged weights, shapes unlike the config
            loaded: Any = AutoModelForCausalLM.from_pretrained(
                ckpt.source, revision=ckpt.revision, dtype=resolve_dtype(config.dtype, device),
                trust_remote_code=config.trust_remote_code, output_loading_info=True,
                use_safetensors=None if config.allow_pickle else True,
            )
            model, info = loaded
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not config.allow_pickle and "safetensors" in first and not Path(ckpt.source).is_dir():
            raise ModelError(f"cannot load checkpoint {ckpt.label}: the hub repo has no "
                             "safetensors weights; pass --allow-pickle to load its pickle weights "
                             "if you trust it") from None
        raise ModelError(f"cannot load checkpoint {ckpt.label}: {first}") from None
    missing = sorted(info.get("missing_keys", ()))  # transformers fills them with random values
    if missing:
        raise ModelError(f"checkpoint {ckpt.label} lacks {len(missing)} weights ("
                         f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): its "
                         "weight files are incomplete or belong to another model")
    return model.to(device).eval()


def load_tokenizer(ckpt: Checkpoint, config: HFConfig) -> Any:
    lazy.require_torch()
    from transformers import AutoTokenizer

    if config.trust_remote_code:
        refuse_remote_code(ckpt.source, ckpt.revision)
    try:
        return AutoTokenizer.from_pretrained(
            ckpt.source, revision=ckpt.revision, trust_remote_code=config.trust_remote_code)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, KeyError):
            first = f"no {first} entry"
        hint = ("; its tokenizer files (tokenizer.json, tokenizer_config.json) look damaged: "
                "copy them again from the model's source" if Path(ckpt.source).is_dir() and
                not isinstance(exc, OSError) else "")
        raise ModelError(f"cannot load the tokenizer of {ckpt.label}: {first}{hint}") from None


def tokenizer_key(ckpt: Checkpoint) -> str:
    """Which tokenizer a checkpoint loads. A local dir's is the fingerprint of its tokenizer
    files (`tokenizer_files`: the checkpoints of one training run carry byte-identical copies,
    loaded once), from the hashes the sweep takes for its identity (`fingerprints.in_use`: no
    file read twice); a hub repo keeps one tokenizer across revisions."""
    from biasscope.backends.fingerprints import in_use, start_fingerprint, tokenizer_files

    root = Path(ckpt.source).expanduser()  # (imported here: numpy is no import of --help)
    if not root.is_dir():
        return f"hub:{ckpt.source}"
    if not tokenizer_files(root):
        return f"dir:{root.resolve()}"
    with in_use() as digests:
        return f"files:{start_fingerprint(root, digests, tokenizer_files)()}"


def left_pad(ids: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any, Any]:
    """Input ids, attention mask and position ids of left-padded rows: every row's last real
    token sits in the last column, and positions count from each row's first real token."""
    torch = lazy.require_torch()
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return input_ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"HFOptions": "HFConfig"}, globals().__getitem__)
