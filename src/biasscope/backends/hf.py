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
from contextvars import copy_context
from pathlib import Path
from typing import Any

from biasscope.backends import lazy
from biasscope.backends.base import ContinuationScore, NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.backends.context import Context
from biasscope.backends.head import reduce_next_token, require_finite
from biasscope.backends.hf_model import (
    HFConfig,
    left_pad,
    load_model,
    load_tokenizer,
    tokenizer_key,
)
from biasscope.backends.weights import fault_in, read_ahead
from biasscope.core.errors import ModelError
from biasscope.core.items import Item
from biasscope.core.steps import say


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

    def __init__(self, ckpt: Checkpoint, model: Any, tokenizer: Any, config: HFConfig,
                 encodings: Encodings | None = None) -> None:
        self.ckpt = ckpt
        self.label = ckpt.label
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.encodings = encodings or Encodings(config.first_token)
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
        torch = lazy.require_torch()
        if not items:
            return []
        ids, option_ids = self.encode_next_token(items)
        order = sorted(range(len(items)), key=lambda i: len(ids[i]), reverse=True)
        results: list[NextTokenScore | None] = [None] * len(items)
        size = self.config.batch_size
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
        torch = lazy.require_torch()
        full, targets = self.encode_continuation(items)
        order = sorted(range(len(items)), key=lambda i: len(full[i]), reverse=True)
        results: dict[int, ContinuationScore] = {}
        size = self.config.batch_size
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
        """Each item's prompt + answer continuation ids, and the continuation's alone. An empty
        prompt is the model's start token (BOS, else end-of-text), as lm-evaluation-harness
        scores a whole text; a text that starts with that token takes it as its context."""
        prompted = [it for it in items if it.prompt]
        contexts = iter(self.prompt_ids(prompted) if prompted else [])
        full, targets = [], []
        for it in items:
            target = self.encodings.continuation_ids(self.tokenizer, self.fingerprint,
                                                     it.continuations[it.answer])
            context = next(contexts) if it.prompt else [self.start_token(it)]
            if not it.prompt and target[0] == context[0]:
                context, target = target[:1], target[1:]
            if not target:
                raise ModelError(f"item {it.id}: its text is the model's start token alone")
            full.append(context + target)
            targets.append(target)
        self.context.check([len(f) for f in full], [it.id for it in items],
                           "prompt and continuation")
        return full, targets

    def start_token(self, item: Item) -> int:
        """The token a text with no prompt is scored after: BOS, else end-of-text."""
        token = self.tokenizer.bos_token_id
        token = self.tokenizer.eos_token_id if token is None else token
        if token is None:
            raise ModelError(f"{self.label}: item {item.id} has no prompt and the tokenizer "
                             "has no BOS or end-of-text token to score it after")
        return int(token)

    def score_continuation_shared(self, items: Sequence[Item], needed: Sequence[bool],
                                  progress: Any = None) -> list[ContinuationScore | None]:
        """The ``needed`` items' continuation scores, each distinct text once and shared
        prefixes once (``biasscope.backends.sequences``)."""
        from biasscope.backends.sequences import score_continuation_shared

        return score_continuation_shared(self, items, needed, progress)

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
        from biasscope.backends.base import OptionScore

        torch = lazy.require_torch()
        rows = self.option_rows(items, messages)
        order = sorted(range(len(rows)), key=lambda r: len(rows[r][1]), reverse=True)
        logprob = [0.0] * len(rows)
        size = self.config.batch_size
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


def check_tokenizer(ckpt: Checkpoint, config: HFConfig, encodings: Encodings,
                    tokenizers: dict[str, Any], requests: Sequence[tuple[str, Sequence[Item]]]
                    ) -> None:
    """Load ``ckpt``'s tokenizer into ``tokenizers`` (by `tokenizer_key`, as `iter_scorers`
    keeps them) and encode what its scoring will (``requests``: each request kind and its
    items), refusing now what that would: a tokenizer that does not load, a folder without
    tokenizer files (its prompts tokenize to nothing), an option of several tokens. Seconds,
    and no weights: a sweep checks every checkpoint so before the first is scored."""
    key = tokenizer_key(ckpt)
    if key not in tokenizers:
        tokenizers[key] = load_tokenizer(ckpt, config)
    tokenizer = tokenizers[key]
    fingerprint = tokenizer_fingerprint(tokenizer)
    try:
        for request, items in requests:
            if request == "next_token":
                encodings.prompt_ids(tokenizer, fingerprint, [it.prompt for it in items])
                for it in items:
                    for text in it.continuations:
                        encodings.option_id(tokenizer, fingerprint, text, ckpt.label)
            elif request == "continuation":
                prompted = [it.prompt for it in items if it.prompt]
                encodings.prompt_ids(tokenizer, fingerprint, prompted)
                for it in items:
                    encodings.continuation_ids(tokenizer, fingerprint,
                                               it.continuations[it.answer])
    except ModelError as exc:
        from biasscope.backends.fingerprints import tokenizer_files

        root = Path(ckpt.source).expanduser()
        bare = root.is_dir() and not any(p.name != "config.json" for p in tokenizer_files(root))
        hint = (f"; {root} holds no tokenizer files (tokenizer.json, tokenizer_config.json): "
                "copy them from the model's source" if bare else "")
        said = str(exc) if ckpt.label in str(exc) else f"{ckpt.label}: {exc}"
        raise ModelError(f"{said}{hint}") from None


def iter_scorers(checkpoints: Sequence[Checkpoint], config: HFConfig,
                 encodings: Encodings | None = None, tokenizers: dict[str, Any] | None = None
                 ) -> Iterator[HFScorer]:
    """Scorers for each checkpoint in turn; the next one loads while the caller scores.
    ``tokenizers``: those already loaded (`check_tokenizer`), by `tokenizer_key`."""
    encodings = encodings or Encodings(config.first_token)
    # one per distinct tokenizer, shared by its checkpoints
    tokenizers = {} if tokenizers is None else tokenizers

    def load(ckpt: Checkpoint) -> tuple[Any, Any]:
        say(f"loading {ckpt.shown}")
        key = tokenizer_key(ckpt)
        if key not in tokenizers:
            tokenizers[key] = load_tokenizer(ckpt, config)
        read_ahead(ckpt)  # the whole read in this thread, overlapping the caller's scoring
        model = load_model(ckpt, config)
        fault_in(model)
        return model, tokenizers[key]

    if not checkpoints:
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="biasscope-prefetch") as pool:
        # In the caller's context: a quiet sweep's loads are quiet too (`core.steps`).
        pending: Future[tuple[Any, Any]] = pool.submit(copy_context().run, load,
                                                       checkpoints[0])
        for index, ckpt in enumerate(checkpoints):
            model, tokenizer = pending.result()
            if index + 1 < len(checkpoints):
                pending = pool.submit(copy_context().run, load, checkpoints[index + 1])
            yield HFScorer(ckpt, model, tokenizer, config, encodings)
            del model
