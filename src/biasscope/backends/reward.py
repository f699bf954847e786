"""Hugging Face reward models: one scalar per conversation from a sequence-classification head.

The conversation is rendered as its tokenizer's chat template writes it (the final response as
an assistant message, no generation prompt) and tokenized without adding special tokens, as
``apply_chat_template(tokenize=True)`` does; or, without a template, in hh-rlhf's plain format.

Batches are right-padded. Decoder reward models (Llama, Gemma, GPT-NeoX, …) read the score at
the rightmost token that is not ``config.pad_token_id``; right padding keeps every real token at
its unpadded position, so a batched score equals the unbatched one. When the checkpoint names a
pad id it is used as is: that is where the model reads its score, batched or not (even when a
template ends with that very token). When it names none, each batch pads with an id that no
sequence in it ends with, so the score is read at the last real token, as a lone unpadded
sequence would be.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasscope.backends import lazy
from biasscope.backends.base import Scored
from biasscope.backends.checkpoints import (
    Checkpoint,
    convert_gguf,
    from_model,
    gguf_identity,
    recorded_source,
)
from biasscope.backends.fingerprints import fingerprint_while_loading
from biasscope.backends.gguf import is_gguf
from biasscope.backends.hf_model import (
    HFConfig,
    check_weights,
    checkpoint_dtype,
    load_tokenizer,
    refuse_changed,
    resolve_device,
    resolve_dtype,
)
from biasscope.backends.labels import Named, model_labels
from biasscope.backends.loading import loading, refuse_remote_code
from biasscope.backends.reward_config import TRANSFORMS, RewardConfig
from biasscope.core.errors import BiasscopeError, ModelError
from biasscope.core.renamed import renamed
from biasscope.core.steps import say

PLAIN_ROLES = {"user": "Human", "assistant": "Assistant", "system": "System"}


class CutConversationWarning(UserWarning):
    """Conversations longer than the reward model's limit were cut before scoring (a
    biasscope warning: the command prints it as one note, not with Python's source line)."""


def plain_format(conversation: Scored) -> str:
    """hh-rlhf's format: ``\\n\\nHuman: …\\n\\nAssistant: …``, the response last.

    System turns are written as ``\\n\\nSystem: …`` (hh-rlhf has none).
    """
    turns, response = conversation
    parts = []
    for role, content in (*turns, ("assistant", response)):
        if role not in PLAIN_ROLES:
            raise BiasscopeError(f"conversation role {role!r}: use user, assistant or system")
        parts.append(f"\n\n{PLAIN_ROLES[role]}: {content}")
    return "".join(parts)


def _load_classifier(ckpt: Checkpoint, config: RewardConfig) -> Any:
    """The sequence-classification model of ``ckpt``, refusing one whose head is not in it."""
    lazy.require_torch()
    from transformers import AutoModelForSequenceClassification

    check_weights(ckpt.source, config.allow_pickle)
    if config.trust_remote_code:
        refuse_remote_code(ckpt.source, ckpt.revision)
    device = resolve_device(config.device)
    try:
        with loading(f"reward model {ckpt.label}"):  # damaged weights, shapes unlike the config
            model, info = AutoModelForSequenceClassification.from_pretrained(
                ckpt.source, revision=ckpt.revision, dtype=resolve_dtype(config.dtype, device),
                trust_remote_code=config.trust_remote_code, output_loading_info=True,
                use_safetensors=None if config.allow_pickle else True)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot load reward model {ckpt.label}: {first}") from None
    # A causal LM loads too, with a freshly initialised (random) head: refuse to score with it.
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    head = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(prefix))
    if head:
        raise ModelError(f"{ckpt.label} has no trained reward head ({', '.join(head[:3])} "
                         "missing from the checkpoint): is it a sequence-classification model?")
    return model.to(device).eval()


class HFRewardModel:
    """``reward`` requests against a Hugging Face sequence-classification model.

    One label is the reward. Two labels (a classifier of bad vs good) give
    ``logit[1] - logit[0]``: the log-odds of label 1, so ``probability`` is its softmax
    probability. More labels are refused.
    """

    def __init__(self, spec: str, config: RewardConfig | None = None, *,
                 deferred: bool = False) -> None:
        """``spec``: a hub id (``id@revision`` pins one) or a local model directory.
        ``deferred``: a local folder's weights load when it first scores, not now: a call
        whose every reward is stored needs only `identity`, from its files (hashed; the dtype
        its config names, `checkpoint_dtype`). Its tokenizer loads now, and its config is
        read, so that a chat template or a head it lacks is refused before any perturbation.
        A hub id (its branch's commit is known once it has loaded), a GGUF file, and weights
        whose dtype only their load tells (quantised, of mixed dtypes) load now."""
        self.config = config = config or RewardConfig()
        self.ckpt = from_model(spec, convert=False)[0]
        self.label = self.ckpt.label
        self.truncated = 0
        local = not is_gguf(self.ckpt.identity) and Path(self.ckpt.source).expanduser().is_dir()
        if not (deferred and local and self._dtype_before_loading() is not None):
            self._load()
            return
        with fingerprint_while_loading(self.ckpt.source, self.ckpt.revision,
                                       self.config.trust_remote_code) as fingerprints:
            self.tokenizer = self._tokenizer()
            _labels(self.label, _model_config(self.ckpt, config))
            self._prehashed = fingerprints()

    def __getattr__(self, name: str) -> Any:
        """A deferred reward model's weights (and all their load sets), on first read."""
        if name in _LOADED and "_prehashed" in self.__dict__:
            self._load()
            return self.__dict__[name]
        raise AttributeError(name)

    def _tokenizer(self) -> Any:
        hf = HFConfig(device=self.config.device, dtype=self.config.dtype,
                      trust_remote_code=self.config.trust_remote_code)
        tokenizer = load_tokenizer(self.ckpt, hf)
        if self.config.chat_template and not getattr(tokenizer, "chat_template", None):
            raise ModelError(f"the tokenizer of {self.label} has no chat template: pass "
                             "--no-chat-template to score the plain hh-rlhf format "
                             "(\\n\\nHuman: …\\n\\nAssistant: …)")
        return tokenizer

    def _load(self) -> None:
        config = self.config
        convert_gguf([self.ckpt])
        say(f"loading reward model {self.label}")
        with fingerprint_while_loading(self.ckpt.source, self.ckpt.revision,
                                       self.config.trust_remote_code) as fingerprints:
            if "tokenizer" not in self.__dict__:
                self.tokenizer = self._tokenizer()
            self.model = _load_classifier(self.ckpt, config)
            #: What a local folder's weights and other files are (`backends.fingerprints`);
            #: for a hub id, the commit its revision resolved to (none where it is a commit).
            self.fingerprints = fingerprints()
        if "_prehashed" in self.__dict__:
            refuse_changed(self.label, self._prehashed, self.fingerprints,
                           self._dtype_before_loading(), _dtype(self.model))
        self.labels = _labels(self.label, self.model.config)
        self.device = next(self.model.parameters()).device
        self.vocab = int(self.model.get_input_embeddings().weight.shape[0])
        pad = self.model.config.pad_token_id
        self._pad = int(pad) if isinstance(pad, int) and 0 <= pad < self.vocab else None
        self.max_length = config.max_length or self._model_limit()
        self._use_cache = "use_cache" in inspect.signature(self.model.forward).parameters

    def _dtype_before_loading(self) -> str | None:
        return checkpoint_dtype(self.ckpt, self.config.dtype,
                                resolve_device(self.config.device).type)

    @property
    def fingerprint(self) -> str | None:
        """The weights' fingerprint alone: `fingerprints`' name before it held the other
        files' too, kept for one release."""
        return self._prints().get("fingerprint")

    def _prints(self) -> dict[str, str]:
        """`fingerprints`, or those hashed before a deferred model's weights load."""
        return dict(self.__dict__.get("fingerprints") or self.__dict__["_prehashed"])

    def identity(self) -> dict[str, str]:
        """What decides the rewards: a hub id by its revision (and the ``commit`` a branch
        or tag resolved to), a local folder also by its
        weights' fingerprint (weights replaced under the same path are another model) and its
        tokenizer's, chat template's and config's (``files_fingerprint``), and the dtype the
        weights run in. A local folder's path is resolved (`recorded_source`). A deferred
        model's is known from its files, and checked against them once it loads."""
        found = _settled(self.ckpt, self.config)
        found.update(self._prints())
        # `--dtype auto` is float32 on a CPU and the checkpoint's own dtype on a GPU: other
        # rewards, so the dtype the weights load in, read from their config where not loaded.
        loaded = "model" in self.__dict__
        found["dtype"] = _dtype(self.model) if loaded else str(self._dtype_before_loading())
        return found

    def render(self, conversation: Scored) -> str:
        """The text the model scores."""
        if not self.config.chat_template:
            return plain_format(conversation)
        turns, response = conversation
        messages = [{"role": r, "content": c} for r, c in (*turns, ("assistant", response))]
        from jinja2 import TemplateError  # a transformers dependency

        try:
            return str(self.tokenizer.apply_chat_template(messages, tokenize=False))
        except (TemplateError, ValueError) as exc:  # e.g. "roles must alternate"
            raise ModelError(f"the chat template of {self.label} cannot render a conversation: "
                             f"{exc}; try --no-chat-template") from None

    def encode(self, conversations: Sequence[Scored]) -> list[list[int]]:
        """Token ids, cut to ``max_length`` (warning how many were cut)."""
        texts = [self.render(c) for c in conversations]
        special = not self.config.chat_template  # a template writes its own special tokens
        ids = [[int(i) for i in row]
               for row in self.tokenizer(texts, add_special_tokens=special)["input_ids"]]
        for row, text in zip(ids, texts):
            if not row:
                raise ModelError(f"{self.label}: a conversation tokenizes to nothing: "
                                 f"{text[:60]!r}")
        limit = self.max_length
        if limit is None:
            return ids
        cut = sum(len(row) > limit for row in ids)
        if cut:
            self.truncated += cut
            fix = ("raise RewardConfig.max_length, up to the model's own limit, to score them "
                   "whole" if self.config.max_length else "that is the model's limit: "
                   "shorten them, or use a reward model with a longer context, to score them "
                   "whole")
            warnings.warn(f"{self.label}: {cut} of {len(ids)} conversations are longer than "
                          f"{limit} tokens and were cut from the left (the first special token "
                          f"and the response's end kept); {fix}", CutConversationWarning,
                          stacklevel=3)
        special_ids = set(getattr(self.tokenizer, "all_special_ids", ()))
        return [row if len(row) <= limit else _keep_end(row, limit, special_ids) for row in ids]

    def score(self, conversations: Sequence[Scored]) -> list[float]:
        """One reward per (turns, response), in order, after ``transform``."""
        torch = lazy.require_torch()
        if not conversations:
            return []
        ids = self.encode(conversations)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        raw: dict[int, float] = {}
        size = self.config.batch_size
        with torch.inference_mode():
            for start in range(0, len(order), size):
                batch = order[start:start + size]
                raw.update(zip(batch, self._forward([ids[i] for i in batch], batch)))
        return [_transform(raw[i], self.config.transform) for i in range(len(ids))]

    def _forward(self, ids: list[list[int]], rows: list[int]) -> list[float]:
        torch = lazy.require_torch()
        pad = self._pad_for(ids)
        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, seq in enumerate(ids):
            input_ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, :len(seq)] = 1
        kwargs: dict[str, Any] = {"use_cache": False} if self._use_cache else {}
        out = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                         **kwargs)
        logits = out.logits.double()
        reward = logits[:, 0] if self.labels == 1 else logits[:, 1] - logits[:, 0]
        finite = torch.isfinite(reward)
        if not bool(finite.all()):
            bad = rows[int((~finite).nonzero()[0, 0])]
            raise ModelError(f"reward model {self.label} produced a NaN/inf reward (first at "
                             f"conversation {bad}); the weights may be corrupt, or try "
                             "--dtype float32")
        return [float(r) for r in reward.cpu().tolist()]

    def _pad_for(self, ids: list[list[int]]) -> int:
        """The pad id of one batch; the model then reads the score where it would unbatched."""
        if self._pad is not None:
            return self._pad
        ends = {row[-1] for row in ids}
        tok = self.tokenizer
        candidates = chain((tok.pad_token_id, tok.eos_token_id, tok.unk_token_id),
                           range(self.vocab))
        pad = next(int(c) for c in candidates
                   if c is not None and 0 <= c < self.vocab and c not in ends)
        for config in {id(c): c for c in (self.model.config, _text_config(self.model))}.values():
            config.pad_token_id = pad
        return pad

    def _model_limit(self) -> int | None:
        """The longest input the model takes: the tokenizer's limit or the position table's."""
        limits = [getattr(self.tokenizer, "model_max_length", None),
                  getattr(_text_config(self.model), "max_position_embeddings", None)]
        usable = [int(x) for x in limits if isinstance(x, int) and 0 < x < 10**7]
        return min(usable) if usable else None


def _settled(ckpt: Checkpoint, config: RewardConfig) -> dict[str, str]:
    """The part of a reward model's identity its spec and config settle, before it loads."""
    return {"backend": "hf-reward", "source": recorded_source(ckpt),
            "revision": ckpt.revision or "", **gguf_identity(ckpt),
            "transform": config.transform,
            "format": "chat-template" if config.chat_template else "hh-rlhf",
            "max_length": str(config.max_length or "")}


#: What `HFRewardModel._load` sets: a deferred reward model loads on the first read of any.
_LOADED = frozenset({"model", "fingerprints", "labels", "device", "vocab", "_pad", "max_length",
                     "_use_cache"})


def _dtype(model: Any) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def _model_config(ckpt: Checkpoint, config: RewardConfig) -> Any:
    """The checkpoint's config (config.json read, no weight), as its load reads it."""
    from transformers import AutoConfig

    if config.trust_remote_code:
        refuse_remote_code(ckpt.source, ckpt.revision)
    try:
        with loading(f"reward model {ckpt.label}"):
            return AutoConfig.from_pretrained(ckpt.source, revision=ckpt.revision,
                                              trust_remote_code=config.trust_remote_code)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"cannot load reward model {ckpt.label}: {first}") from None


def _labels(label: str, config: Any) -> int:
    """The number of labels of a reward model's head (its config's), refused unless 1 or 2."""
    labels = int(config.num_labels)
    if labels not in (1, 2):
        raise ModelError(f"{label} has {labels} labels: a reward model has 1 "
                         "(or 2, scored as logit[1] - logit[0])")
    return labels


def identities_before_loading(named: Sequence[Named], config: RewardConfig, option: str
                              ) -> dict[str, dict[str, str]]:
    """Each reward model's label and what its identity holds before it loads: what `_settled`
    says, and the dtype its weights will load in where that is known (the one asked; ``auto``
    on a CPU is float32, on a GPU the one a local folder's config names, `checkpoint_dtype`;
    a hub id's, or a quantised checkpoint's, is known only once loaded). A run's
    recorded settings are checked against these before any model loads, so a typo costs no
    load of minutes. A GGUF file's is known by its path and SHA-256 (`gguf_identity`: hashed,
    not converted)."""
    ckpts = [from_model(spec, convert=False)[0] for _, spec in named]
    labels = model_labels(named, [c.label for c in ckpts], option)
    device = resolve_device(config.device).type
    found = {}
    for label, ckpt in zip(labels, ckpts):
        dtype = checkpoint_dtype(ckpt, config.dtype, device)
        found[label] = {**_settled(ckpt, config), **({"dtype": dtype} if dtype else {})}
    return found


def whole_identity(before: Mapping[str, str]) -> dict[str, str] | None:
    """The identity a reward model of `identities_before_loading`'s entry ``before`` will
    have once loaded, its local folder's fingerprints hashed now (cached, so its load does
    not hash again), a hub id's ``commit`` that of its own revision (a branch or tag, as the
    load resolves it); None where the dtype it loads in is not known before."""
    if "dtype" not in before:
        return None
    with fingerprint_while_loading(before["source"], before.get("revision") or None
                                   ) as fingerprints:
        return {**before, **fingerprints()}


def _text_config(model: Any) -> Any:
    get = getattr(model.config, "get_text_config", None)
    return get() if callable(get) else model.config


def _keep_end(ids: list[int], limit: int, special: set[int]) -> list[int]:
    """The last ``limit`` tokens, keeping a leading special token (BOS, CLS) in front."""
    head = 1 if limit > 1 and ids[0] in special else 0
    return ids[:head] + ids[len(ids) - (limit - head):]


def _transform(logit: float, transform: str) -> float:
    if transform == "logit":
        return logit
    # Stable log-sigmoid: -log(1 + e^-x) = min(x, 0) - log1p(e^-|x|).
    log_sigmoid = min(logit, 0.0) - math.log1p(math.exp(-abs(logit)))
    return log_sigmoid if transform == "logprob" else math.exp(log_sigmoid)


__all__ = ["TRANSFORMS", "HFRewardModel", "RewardConfig", "identities_before_loading",
           "plain_format", "whole_identity"]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"RewardOptions": "RewardConfig"}, globals().__getitem__)
