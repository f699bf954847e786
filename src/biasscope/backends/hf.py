"""Hugging Face ``transformers`` scoring: next-token option log-probs and the answer's rank.

Prompts are left-padded into length-sorted batches with explicit position ids, so the last
column is every prompt's last real token and the LM head runs on that column alone
(``logits_to_keep=1``). Each batch's full-vocabulary logits are reduced at once to option
log-probs and ranks; nothing vocabulary-sized outlives its batch. Prompts are tokenized once
per distinct tokenizer, and the next checkpoint loads in a background thread while the current
one is scored: its weight files read into the page cache, then loaded, then every page touched,
so no part of the read is left to the scoring. Checkpoints whose tokenizer files are identical
share one loaded tokenizer.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.base import ContinuationScore, NextTokenScore
from biasscope.backends.context import Context
from biasscope.backends.head import reduce_next_token, require_finite
from biasscope.backends.loading import PICKLE_WEIGHTS, TOKENIZER_FILES, loading
from biasscope.backends.weights import fault_in, read_ahead
from biasscope.errors import ModelError
from biasscope.items import Item
from biasscope.runs.checkpoints import Checkpoint

DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class HFOptions:
    """How checkpoints are loaded and scored."""

    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 32
    first_token: bool = False
    trust_remote_code: bool = False
    allow_pickle: bool = False  # load pickle weights (they can run code): an explicit opt-in


def _torch() -> Any:
    try:
        import torch
        import transformers
    except ImportError:
        raise ModelError(
            "Hugging Face scoring needs the 'hf' extra: pip install 'biasscope[hf]'") from None
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return torch


def resolve_device(name: str) -> Any:
    torch = _torch()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        return torch.device("mps" if mps is not None and mps.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ModelError(f"unknown device {name!r}: use auto, cpu, cuda, cuda:N or mps") from None
    mps = getattr(torch.backends, "mps", None)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"--device {name}: no CUDA device here (torch {torch.__version__}); "
                         "use --device cpu or auto")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ModelError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s), numbered from 0")
    if device.type == "mps" and not (mps is not None and mps.is_available()):
        raise ModelError(f"--device {name}: MPS is not available here; use --device cpu or auto")
    return device


def _dtype(name: str, device: Any) -> Any:
    torch = _torch()
    if name not in DTYPES:
        raise ModelError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    if name == "auto":
        return torch.float32 if device.type == "cpu" else "auto"
    return getattr(torch, name)


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


def load_model(ckpt: Checkpoint, options: HFOptions) -> Any:
    """The causal LM of one checkpoint, on its device, in eval mode (safetensors weights only,
    unless ``options.allow_pickle``)."""
    _torch()
    from transformers import AutoModelForCausalLM

    check_weights(ckpt.source, options.allow_pickle)
    device = resolve_device(options.device)
    try:
        with loading(f"checkpoint {ckpt.label}"):  # damaged weights, shapes unlike the config
            loaded: Any = AutoModelForCausalLM.from_pretrained(
                ckpt.source, revision=ckpt.revision, dtype=_dtype(options.dtype, device),
                trust_remote_code=options.trust_remote_code, output_loading_info=True,
                use_safetensors=None if options.allow_pickle else True,
            )
            model, info = loaded
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not options.allow_pickle and "safetensors" in first and not Path(ckpt.source).is_dir():
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


def load_tokenizer(ckpt: Checkpoint, options: HFOptions) -> Any:
    _torch()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            ckpt.source, revision=ckpt.revision, trust_remote_code=options.trust_remote_code)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, KeyError):
            first = f"no {first} entry"
        hint = ("; its tokenizer files (tokenizer.json, tokenizer_config.json) look damaged: "
                "copy them again from the model's source" if Path(ckpt.source).is_dir() and
                not isinstance(exc, OSError) else "")
        raise ModelError(f"cannot load the tokenizer of {ckpt.label}: {first}{hint}") from None


def tokenizer_key(ckpt: Checkpoint) -> str:
    """Which tokenizer a checkpoint loads. A local dir's is the SHA-256 of its tokenizer files
    (the checkpoints of one training run carry identical copies, loaded once); a hub repo
    keeps one tokenizer across revisions."""
    root = Path(ckpt.source).expanduser()
    if not root.is_dir():
        return f"hub:{ckpt.source}"
    digest = hashlib.sha256()
    found = False
    for path in [root / n for n in TOKENIZER_FILES] + sorted(root.glob("tokenization*.py")):
        if path.is_file():
            found = True
            digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return f"files:{digest.hexdigest()}" if found else f"dir:{root.resolve()}"


def left_pad(ids: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any, Any]:
    """Input ids, attention mask and position ids of left-padded rows: every row's last real
    token sits in the last column, and positions count from each row's first real token."""
    torch = _torch()
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return input_ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Same fingerprint, same token ids: encodings are shared across checkpoints."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(
        sorted(tokenizer.get_vocab().items()))
    extra = f"{type(tokenizer).__name__}|{getattr(tokenizer, 'add_bos_token', None)}"
    return hashlib.sha256((text + extra).encode()).hexdigest()


class Encodings:
    """Token ids of prompts and option continuations, memoised per tokenizer fingerprint."""

    def __init__(self, first_token: bool = False) -> None:
        self.first_token = first_token
        self._prompts: dict[tuple[str, str], list[int]] = {}
        self._options: dict[tuple[str, str], int] = {}

    def prompt_ids(self, tokenizer: Any, fingerprint: str, prompts: Sequence[str]) -> list[
            list[int]]:
        missing = [p for p in dict.fromkeys(prompts) if (fingerprint, p) not in self._prompts]
        if missing:
            encoded = tokenizer(missing, add_special_tokens=True)["input_ids"]
            for prompt, ids in zip(missing, encoded):
                if not ids:
                    raise ModelError(f"prompt tokenizes to nothing: {prompt[:60]!r}")
                self._prompts[(fingerprint, prompt)] = list(ids)
        return [self._prompts[(fingerprint, p)] for p in prompts]

    def continuation_ids(self, tokenizer: Any, fingerprint: str, text: str) -> list[int]:
        key = (fingerprint, "\0continuation\0" + text)
        if key not in self._prompts:
            ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            if not ids:
                raise ModelError(f"continuation {text!r} tokenizes to nothing")
            self._prompts[key] = ids
        return self._prompts[key]

    def chat_ids(self, tokenizer: Any, fingerprint: str, text: str, special: bool) -> list[int]:
        """A rendered chat's ids (``render_chat`` says whether to add special tokens)."""
        key = (fingerprint, f"\0chat{int(special)}\0" + text)
        if key not in self._prompts:
            self._prompts[key] = [int(i) for i in tokenizer(
                text, add_special_tokens=special)["input_ids"]]
        return self._prompts[key]

    def option_id(self, tokenizer: Any, fingerprint: str, text: str, where: str) -> int:
        key = (fingerprint, text)
        if key not in self._options:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            if not ids:
                raise ModelError(f"option {text!r} tokenizes to nothing for {where}")
            if len(ids) > 1 and not self.first_token:
                pieces = tokenizer.convert_ids_to_tokens(ids)
                raise ModelError(
                    f"option {text!r} is {len(ids)} tokens {pieces} for the tokenizer of "
                    f"{where}; pass --first-token to score its first token")
            self._options[key] = int(ids[0])
        return self._options[key]


class HFScorer:
    """``next_token`` requests against one loaded checkpoint."""

    def __init__(self, ckpt: Checkpoint, model: Any, tokenizer: Any, options: HFOptions,
                 encodings: Encodings | None = None) -> None:
        self.ckpt = ckpt
        self.label = ckpt.label
        self.model = model
        self.tokenizer = tokenizer
        self.options = options
        self.encodings = encodings or Encodings(options.first_token)
        self.fingerprint = tokenizer_fingerprint(tokenizer)
        self.device = next(model.parameters()).device
        # Tokens beyond the tokenizer are padding rows of the embedding (Pythia pads 50277 to
        # 50304); they are not vocabulary and take no part in ranks or the softmax.
        self.vocab = min(len(tokenizer), model.get_output_embeddings().weight.shape[0])
        params = inspect.signature(model.forward).parameters
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep")
                               if a in params), None)
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (
            tokenizer.eos_token_id or 0)
        self.context = Context.of(self.label, model, tokenizer)

    def check_context(self, request: str, items: Sequence[Item],
                      messages: Sequence[Any] | None = None) -> None:
        """Refuse, before any scoring, items of a ``request`` that do not fit the model's
        context (``biasscope.backends.context``); the encodings are kept for the scoring."""
        if request == "next_token":
            self.encode_next_token(items)
        elif request == "continuation":
            self.encode_continuation(items)
        elif request == "options" and messages is not None:
            self.option_rows(items, messages)

    def prompt_ids(self, items: Sequence[Item]) -> list[list[int]]:
        """Each item's prompt ids, refused (``Context``) if the prompt alone is too long."""
        prompts, names = [it.prompt for it in items], [it.id for it in items]
        self.context.screen(self.tokenizer, prompts, names)
        return self.encodings.prompt_ids(self.tokenizer, self.fingerprint, prompts)

    def encode_next_token(self, items: Sequence[Item]) -> tuple[list[list[int]], list[list[int]]]:
        """Each item's prompt ids and option token ids (checked against the vocabulary and
        the model's context)."""
        ids = self.prompt_ids(items)
        self.context.check([len(x) for x in ids], [it.id for it in items], "its prompt")
        option_ids = [[self.encodings.option_id(self.tokenizer, self.fingerprint, c, self.label)
                       for c in it.continuations] for it in items]
        for opts in option_ids:
            if max(opts) >= self.vocab:
                raise ModelError(f"{self.label}: option token id {max(opts)} is outside the "
                                 f"model's vocabulary of {self.vocab}")
        return ids, option_ids

    def score_next_token_shared(self, items: Sequence[Item], needed: Sequence[bool],
                                progress: Any = None) -> list[NextTokenScore | None]:
        """The ``needed`` items of a checkpoint's whole item set, each distinct prompt once and
        shared prefixes once (``biasscope.backends.prefix``)."""
        from biasscope.backends.prefix import score_shared

        return score_shared(self, items, needed, progress)

    def score_next_token(self, items: Sequence[Item]) -> list[NextTokenScore]:
        torch = _torch()
        if not items:
            return []
        ids, option_ids = self.encode_next_token(items)
        order = sorted(range(len(items)), key=lambda i: len(ids[i]), reverse=True)
        results: list[NextTokenScore | None] = [None] * len(items)
        size = max(1, self.options.batch_size)
        with torch.inference_mode():
            for start in range(0, len(order), size):
                batch = order[start:start + size]
                for i, score in zip(batch, self._score_batch(
                        [ids[i] for i in batch], [option_ids[i] for i in batch],
                        [items[i].answer for i in batch], [items[i].id for i in batch])):
                    results[i] = score
        return [r for r in results if r is not None]

    def score_continuation(self, items: Sequence[Item]) -> list[ContinuationScore]:
        """Summed log-prob of each item's continuation and whether greedy decoding gives it."""
        torch = _torch()
        full, targets = self.encode_continuation(items)
        order = sorted(range(len(items)), key=lambda i: len(full[i]), reverse=True)
        results: dict[int, ContinuationScore] = {}
        size = max(1, self.options.batch_size)
        with torch.inference_mode():
            for start in range(0, len(order), size):
                batch = order[start:start + size]
                keep = max(len(targets[i]) for i in batch) + 1
                logits = self._last_logits([full[i] for i in batch], keep,
                                           [items[i].id for i in batch])
                logprobs = torch.log_softmax(logits, dim=-1)
                for row, i in enumerate(batch):
                    n = len(targets[i])
                    # Position p predicts token p+1: the continuation's predictions are the
                    # n positions just before the last one.
                    lp = logprobs[row, keep - 1 - n: keep - 1]
                    target = torch.tensor(targets[i], device=lp.device)
                    picked = lp.gather(1, target[:, None]).squeeze(1)
                    greedy = bool((lp.argmax(dim=-1) == target).all())
                    results[i] = ContinuationScore(float(picked.double().sum()), greedy, n)
        return [results[i] for i in range(len(items))]

    def encode_continuation(self, items: Sequence[Item]) -> tuple[list[list[int]],
                                                                   list[list[int]]]:
        """Each item's prompt + answer continuation ids, and the continuation's alone."""
        contexts = self.prompt_ids(items)
        targets = [self.encodings.continuation_ids(
            self.tokenizer, self.fingerprint, it.continuations[it.answer]) for it in items]
        full = [c + t for c, t in zip(contexts, targets)]
        self.context.check([len(f) for f in full], [it.id for it in items],
                           "prompt and continuation")
        return full, targets

    def option_rows(self, items: Sequence[Item], messages: Sequence[Any]
                    ) -> list[tuple[int, list[int], int]]:
        """(item index, chat + option ids, option length) of every option of every item,
        refused (``Context``) where a chat and its longest option do not fit the model."""
        from biasscope.backends.hf_generate import render_chat

        chats = [render_chat(self.tokenizer, turns) for turns in messages]
        if len(chats) != len(items):
            raise ValueError(f"{len(items)} items but {len(chats)} chats")
        names = [it.id for it in items]
        self.context.screen(self.tokenizer, [t for t, _ in chats], names,
                            [s for _, s in chats])
        rows: list[tuple[int, list[int], int]] = []  # (item index, prompt + option ids, n)
        longest: list[int] = []
        for index, (item, (text, special)) in enumerate(zip(items, chats)):
            prompt = self.encodings.chat_ids(self.tokenizer, self.fingerprint, text, special)
            conts = [self.encodings.continuation_ids(self.tokenizer, self.fingerprint, option)
                     for option in item.continuations]
            if not prompt:
                raise ModelError(f"item {item.id}: its chat tokenizes to nothing")
            rows.extend((index, prompt + cont, len(cont)) for cont in conts)
            longest.append(len(prompt) + max(len(c) for c in conts))
        self.context.check(longest, names, "chat and longest option")
        return rows

    def score_options(self, items: Sequence[Item], messages: Sequence[Any]) -> list[Any]:
        """Each option's full log-prob after the item's chat turns (``messages``), as
        ``biasscope probe --scoring options`` scores it (``HFGenerator.option_logprobs``: the
        chat template, else the plain prompt with special tokens; each option tokenized on its
        own), but with every (item, option) sequence of the unit in length-sorted batches."""
        from biasscope.runs.options import OptionScore

        torch = _torch()
        rows = self.option_rows(items, messages)
        order = sorted(range(len(rows)), key=lambda r: len(rows[r][1]), reverse=True)
        logprob = [0.0] * len(rows)
        size = max(1, self.options.batch_size)
        with torch.inference_mode():
            for start in range(0, len(order), size):
                batch = order[start:start + size]
                keep = max(rows[r][2] for r in batch) + 1
                logits = self._last_logits([rows[r][1] for r in batch], keep,
                                           [items[rows[r][0]].id for r in batch])
                logprobs = torch.log_softmax(logits, dim=-1)
                for line, r in enumerate(batch):
                    n = rows[r][2]
                    # Position p predicts token p+1: the option's tokens are predicted by the
                    # n positions before the last one.
                    lp = logprobs[line, keep - 1 - n: keep - 1]
                    target = torch.tensor(rows[r][1][-n:], device=lp.device)[:, None]
                    logprob[r] = float(lp.gather(1, target).double().sum())
        out, at = [], 0
        for item in items:
            out.append(OptionScore(tuple(logprob[at:at + len(item.continuations)])))
            at += len(item.continuations)
        return out

    def _last_logits(self, ids: list[list[int]], keep: int, item_ids: list[str]) -> Any:
        """Float32 logits of the last ``keep`` positions of left-padded ``ids``: (b, keep, V)."""
        input_ids, mask, positions = left_pad(ids, self._pad)
        kwargs: dict[str, Any] = {"attention_mask": mask.to(self.device),
                                  "position_ids": positions.to(self.device), "use_cache": False}
        if self._keep_arg:
            kwargs[self._keep_arg] = keep
        out = self.model(input_ids=input_ids.to(self.device), **kwargs)
        return require_finite(out.logits[:, -keep:, : self.vocab].float(), item_ids, self.label)

    def _score_batch(self, ids: list[list[int]], options: list[list[int]], answers: list[int],
                     item_ids: list[str]) -> list[NextTokenScore]:
        return reduce_next_token(self._last_logits(ids, 1, item_ids)[:, -1], options, answers)


def iter_scorers(checkpoints: Sequence[Checkpoint], options: HFOptions,
                 encodings: Encodings | None = None) -> Iterator[HFScorer]:
    """Scorers for each checkpoint in turn; the next one loads while the caller scores."""
    encodings = encodings or Encodings(options.first_token)
    tokenizers: dict[str, Any] = {}  # one per distinct tokenizer, shared by its checkpoints

    def load(ckpt: Checkpoint) -> tuple[Any, Any]:
        key = tokenizer_key(ckpt)
        if key not in tokenizers:
            tokenizers[key] = load_tokenizer(ckpt, options)
        read_ahead(ckpt)  # the whole read in this thread, overlapping the caller's scoring
        model = load_model(ckpt, options)
        fault_in(model)
        return model, tokenizers[key]

    if not checkpoints:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="biasscope-prefetch") as pool:
        pending: Future[tuple[Any, Any]] = pool.submit(load, checkpoints[0])
        for index, ckpt in enumerate(checkpoints):
            model, tokenizer = pending.result()
            if index + 1 < len(checkpoints):
                pending = pool.submit(load, checkpoints[index + 1])
            yield HFScorer(ckpt, model, tokenizer, options, encodings)
            del model
