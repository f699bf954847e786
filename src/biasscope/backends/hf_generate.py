"""Hugging Face ``transformers`` generation: text, logprobs, ``logit_bias`` and option scores.

Decoding is a plain loop over the model's forward with its KV cache rather than
``model.generate``: ``generate`` merges the checkpoint's ``generation_config`` (repetition
penalty, top-p, …) into every call and samples from the global RNG. Here only the request's
params shape the output, and each sampled request draws from its own CPU ``torch.Generator``
seeded with its ``seed``, so its text does not depend on what else shares the batch (up to
float noise from padding). Requests are grouped by params (seed aside) and left-padded.

Logprobs are the log-softmax of the model's raw logits (temperature 1, before ``logit_bias``),
as OpenAI-compatible servers report them: a bias steers the choice, not the reported number.
Vocabulary-padding rows of the output embedding are never chosen and take no softmax mass.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biasscope.backends import lazy
from biasscope.backends.base import (
    GenerateParams,
    GenerateRequest,
    Generation,
    TokenLogprob,
    plain_chat,
)
from biasscope.backends.checkpoints import (
    Checkpoint,
    convert_gguf,
    gguf_identity,
    recorded_source,
    unconverted,
)
from biasscope.backends.context import Context
from biasscope.backends.fingerprints import fingerprint_while_loading, hub_commit
from biasscope.backends.gguf import is_gguf, read_tokenizer
from biasscope.backends.hf_model import (
    HFConfig,
    checkpoint_dtype,
    left_pad,
    load_model,
    load_tokenizer,
    refuse_changed,
    resolve_device,
)
from biasscope.core.errors import ModelError
from biasscope.core.steps import say


def render_chat(tokenizer: Any, messages: Sequence[tuple[str, str]]) -> tuple[str, bool]:
    """The prompt text of a chat, and whether tokenizing it should add special tokens.

    With a chat template: the template with the generation prompt (it writes its own special
    tokens). Without one: `plain_chat`.
    """
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": role, "content": content} for role, content in messages],
            tokenize=False, add_generation_prompt=True)
        return str(text), False
    return plain_chat(messages), True


def identity_before_loading(ckpt: Checkpoint) -> dict[str, str]:
    """What `HFGenerator.identity` will hold of ``ckpt`` that is known before it loads: its
    source and revision, a hub id's ``commit`` where the cache resolves its revision; a GGUF
    file's path, SHA-256 and quantisation (listed with ``convert=False``: hashed and its header
    read, not converted). A run's recorded model is checked against it, so another model is
    refused without a load (or a GGUF file's conversion)."""
    found = {"backend": "hf", "source": recorded_source(ckpt), "revision": ckpt.revision or "",
             **gguf_identity(ckpt)}
    if commit := hub_commit(ckpt.source, ckpt.revision):
        found["commit"] = commit
    return found


#: What `HFGenerator._load` sets: a deferred generator loads on the first read of any.
_LOADED = frozenset({"model", "device", "vocab", "eos", "context", "fingerprints", "_keep_arg",
                     "_pad", "_pieces"})


class HFGenerator:
    """``generate`` requests (and multiple-choice option scores) against one causal LM."""

    def __init__(self, ckpt: Checkpoint, config: HFConfig | None = None, *,
                 model: Any = None, tokenizer: Any = None, deferred: bool = False) -> None:
        """Loads ``ckpt`` as the scorer does, unless ``model`` and ``tokenizer`` are given; a
        GGUF file listed with ``convert=False`` is converted first (`convert_gguf`), so that
        making a checkpoint never converts and loading it is the one step that does.
        ``deferred``: a local folder's or GGUF file's weights load (and a GGUF file converts)
        on first use, not now: a call whose every answer is stored needs only `identity` (its
        files hashed, the dtype they would load in, where the settings say it) and the
        tokenizer (a GGUF file's read from the file, not converted). A hub id loads now: the
        commit its branch resolves to is known once it has (`hub_commit`)."""
        self.ckpt = ckpt
        self.label = ckpt.label
        self.config = config or HFConfig()
        self._given = (model, tokenizer)
        local = is_gguf(ckpt.identity) or Path(ckpt.source).expanduser().is_dir()
        if not (deferred and local):
            self._load()

    def __getattr__(self, name: str) -> Any:
        """A deferred generator's tokenizer (alone) or model (and all it sets), on first read."""
        if name == "tokenizer" and "_given" in self.__dict__:
            given = self._given[1]
            if given is None and unconverted(self.ckpt):  # its copy not made: not made now
                given, self._from_file = read_tokenizer(self.ckpt.identity), True
            self.tokenizer = load_tokenizer(self.ckpt, self.config) if given is None else given
            return self.tokenizer
        if name in _LOADED and "_given" in self.__dict__:
            self._load()
            return self.__dict__[name]
        raise AttributeError(name)

    def _load(self) -> None:
        ckpt, config = self.ckpt, self.config
        model, tokenizer = self._given
        tokenizer = self.__dict__.get("tokenizer", tokenizer)  # read before the weights
        if self.__dict__.pop("_from_file", False):
            tokenizer = None  # a GGUF file's: read again from its copy, as when it was made
        if model is None:
            convert_gguf([ckpt])
            say(f"loading {ckpt.shown}")
        with fingerprint_while_loading(ckpt.source, ckpt.revision,
                                       config.trust_remote_code) as fingerprints:
            self.model = load_model(ckpt, config) if model is None else model
            self.tokenizer = load_tokenizer(ckpt, config) if tokenizer is None else tokenizer
            #: What a local folder's weights and other files are (`backends.fingerprints`);
            #: for a hub id, the commit its revision resolved to (none where it is a commit).
            self.fingerprints = fingerprints()
        self._refuse_changed()
        self.device = next(self.model.parameters()).device
        # As in the scorer: embedding rows past the tokenizer are padding, not vocabulary.
        self.vocab = min(len(self.tokenizer),
                         self.model.get_output_embeddings().weight.shape[0])
        params = inspect.signature(self.model.forward).parameters
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep")
                               if a in params), None)
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        eos_ids = eos if isinstance(eos, list) else [eos]
        self.eos = {int(e) for e in [*eos_ids, self.tokenizer.eos_token_id] if e is not None}
        pad = self.tokenizer.pad_token_id
        self._pad = int(pad) if pad is not None else min(self.eos, default=0)
        self._pieces: dict[int, str] = {}
        self.context = Context.of(self.label, self.model, self.tokenizer)

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, ckpt: Checkpoint | None = None,
                    config: HFConfig | None = None) -> HFGenerator:
        """A generator over weights already in memory (live use during training).

        ``ckpt`` names them; give each training step its own revision (``step{N}``), since
        ``identity()`` keys the response cache and the weights change under it.
        """
        return cls(ckpt or Checkpoint("live", "<in-memory>"), config, model=model,
                   tokenizer=tokenizer)

    @property
    def fingerprint(self) -> str | None:
        """The weights' fingerprint alone: `fingerprints`' name before it held the other
        files' too, kept for one release."""
        return self.fingerprints.get("fingerprint")

    def identity(self) -> dict[str, str]:
        """What decides the answers: a hub id by its revision (and the ``commit`` a branch
        or tag resolved to: a moved ``main`` is another model), a local folder also by its
        weights' fingerprint (weights replaced under the same path are another model) and its
        tokenizer's, chat template's and config's (``files_fingerprint``: a template edited in
        place renders other prompts), a GGUF file by its SHA-256 and quantisation; and the
        dtype the weights run in. A local folder's path is resolved (`recorded_source`):
        ``./m`` and ``/abs/m`` are one model's; a GGUF file's source is the file, not the
        cache copy it loads from."""
        found = {"backend": "hf", "source": recorded_source(self.ckpt),
                 "revision": self.ckpt.revision or ""}
        found.update(gguf_identity(self.ckpt))  # a GGUF file's: which file, which quantisation
        loaded = "model" in self.__dict__
        found.update(self.fingerprints if loaded else self._hashed())
        # `--dtype auto` loads float32 on a CPU and the checkpoint's dtype on a GPU: other
        # answers. Read from its files before it loads; where they do not say, it loads to tell.
        if not loaded and "_predtype" not in self.__dict__:
            self._predtype = self._dtype_before_loading()
        dtype = None if loaded else self._predtype
        found["dtype"] = dtype or str(next(self.model.parameters()).dtype).removeprefix("torch.")
        return found

    def _hashed(self) -> dict[str, str]:
        """`fingerprints` of weights not loaded yet: their files hashed (once), not read into
        memory."""
        if "_prehashed" not in self.__dict__:
            with fingerprint_while_loading(self.ckpt.source, self.ckpt.revision,
                                           self.config.trust_remote_code) as prints:
                self._prehashed = prints()
        return dict(self._prehashed)

    def _refuse_changed(self) -> None:
        """Refuse weights or files that changed on disk between the identity a deferred
        generator gave (`_hashed`, which the run was checked against) and their load, or
        that load in another dtype than the one read from them."""
        if "_prehashed" in self.__dict__:
            refuse_changed(self.label, self._prehashed, self.fingerprints,
                           self.__dict__.get("_predtype"),
                           str(next(self.model.parameters()).dtype).removeprefix("torch."))

    def _dtype_before_loading(self) -> str | None:
        """The dtype the weights will load in, from the settings and the checkpoint's files
        (`checkpoint_dtype`: "auto" on a GPU is the dtype its config names); None where only
        a load tells."""
        return checkpoint_dtype(self.ckpt, self.config.dtype,
                                resolve_device(self.config.device).type)

    def encode(self, request: GenerateRequest) -> list[int]:
        """Prompt token ids: a plain prompt as the scorer tokenizes it (with the tokenizer's
        special tokens), a chat rendered by ``render_chat``."""
        if request.messages is not None:
            text, special = render_chat(self.tokenizer, request.messages)
        else:
            text, special = str(request.prompt), True
        self.context.screen(self.tokenizer, [text], [repr(request.id)], special)
        ids = [int(i) for i in self.tokenizer(text, add_special_tokens=special)["input_ids"]]
        if not ids:
            raise ModelError(f"request {request.id!r}: the prompt tokenizes to nothing")
        return ids

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """One generation per request, in order; requests sharing params share batches."""
        torch = lazy.require_torch()
        prompts = [self.encode(r) for r in requests]
        # Lowering max_tokens helps only where the prompt alone fits: a judge asks for one.
        limit = self.context.limit
        helps = limit is not None and any(len(p) < limit < len(p) + r.params.max_tokens
                                          for p, r in zip(prompts, requests))
        self.context.check([len(p) + r.params.max_tokens for p, r in zip(prompts, requests)],
                           [repr(r.id) for r in requests], "prompt and max_tokens",
                           hint=", lower max_tokens" if helps else "")
        groups: dict[GenerateParams, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(replace(request.params, seed=None), []).append(i)
        results: dict[int, Generation] = {}
        size = self.config.batch_size
        with torch.inference_mode():
            for params, members in groups.items():
                members.sort(key=lambda i: len(prompts[i]), reverse=True)
                for start in range(0, len(members), size):
                    batch = members[start:start + size]
                    outs = self._generate_batch([prompts[i] for i in batch], params,
                                                [requests[i].params.seed for i in batch])
                    results.update(zip(batch, outs))
        return [results[i] for i in range(len(requests))]

    def option_logprobs(self, request: GenerateRequest,
                        options: Sequence[str]) -> tuple[dict[str, float], float]:
        """Log-probability of each option as the continuation of the request's prompt.

        Each option is tokenized on its own (no special tokens) after the prompt's ids, and
        its log-prob sums over all its tokens (raw logits, no ``logit_bias``). The second value
        is the probability mass on none of the options, ``1 - sum(exp(logprob))`` clamped at 0
        (options where one is a token prefix of another overlap and would count twice).
        """
        torch = lazy.require_torch()
        prompt, conts = self.option_ids(request, options)
        scores: dict[str, float] = {}
        size = self.config.batch_size
        with torch.inference_mode():
            if all(len(c) == 1 for c in conts):  # one forward of the prompt scores them all
                logprobs = torch.log_softmax(self._forward([prompt], 1)[0][0, -1], dim=-1)
                scores = {o: float(logprobs[c[0]].double()) for o, c in zip(options, conts)}
                conts = []
            for start in range(0, len(conts), size):
                chunk = conts[start:start + size]
                keep = max(len(c) for c in chunk) + 1
                logits = self._forward([prompt + c for c in chunk], keep)[0]
                logprobs = torch.log_softmax(logits, dim=-1)
                for row, cont in enumerate(chunk):
                    # Position p predicts token p+1: the option's tokens are predicted by the
                    # len(cont) positions before the last one.
                    lp = logprobs[row, keep - 1 - len(cont): keep - 1]
                    target = torch.tensor(cont, device=lp.device)[:, None]
                    scores[options[start + row]] = float(lp.gather(1, target).double().sum())
        return scores, max(0.0, 1.0 - sum(math.exp(v) for v in scores.values()))

    def option_ids(self, request: GenerateRequest, options: Sequence[str]) -> tuple[
            list[int], list[list[int]]]:
        """The prompt's ids and each option's, refused (``Context``) where the prompt and its
        longest option do not fit the model."""
        prompt = self.encode(request)
        conts = [[int(i) for i in self.tokenizer(o, add_special_tokens=False)["input_ids"]]
                 for o in options]
        for option, cont in zip(options, conts):
            if not cont:
                raise ModelError(f"option {option!r} tokenizes to nothing")
        longest = max((len(c) for c in conts), default=0)
        self.context.check([len(prompt) + longest], [repr(request.id)],
                           "prompt and longest option")
        return prompt, conts

    def check_options(self, requests: Sequence[GenerateRequest],
                      options: Sequence[Sequence[str]]) -> None:
        """Refuse, before any is scored, a request too long for the model with its options."""
        for request, choices in zip(requests, options, strict=True):
            self.option_ids(request, choices)

    def _forward(self, ids: list[list[int]], keep: int, cache: bool = False) -> tuple[
            Any, Any, Any, Any]:
        """Left-padded forward: float32 logits of the last ``keep`` positions (b, keep, vocab),
        the attention mask, position ids and the KV cache (when ``cache``)."""
        torch = lazy.require_torch()
        input_ids, mask, positions = left_pad(ids, self._pad)
        mask, positions = mask.to(self.device), positions.to(self.device)
        kwargs: dict[str, Any] = {"attention_mask": mask, "position_ids": positions,
                                  "use_cache": cache}
        if self._keep_arg:
            kwargs[self._keep_arg] = keep
        out = self.model(input_ids=input_ids.to(self.device), **kwargs)
        logits = out.logits[:, -keep:, : self.vocab].float()
        if not bool(torch.isfinite(logits).all()):
            raise ModelError(f"checkpoint {self.label} produced NaN/inf logits; the weights "
                             "may be corrupt, or try --dtype float32")
        return logits, mask, positions, getattr(out, _cache_name()) if cache else None

    def _piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = str(self.tokenizer.decode([token]))
        return self._pieces[token]

    def _text(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _bias(self, pairs: tuple[tuple[int, float], ...]) -> Any:
        torch = lazy.require_torch()
        bias = torch.zeros(self.vocab, device=self.device)
        for token, value in pairs:
            if not 0 <= token < self.vocab:
                raise ModelError(f"logit_bias token id {token} is outside the vocabulary of "
                                 f"{self.label} ({self.vocab} tokens)")
            bias[token] += value
        return bias

    def _generate_batch(self, prompts: list[list[int]], params: GenerateParams,
                        seeds: list[int | None]) -> list[Generation]:
        torch = lazy.require_torch()
        n, top_k = len(prompts), min(params.top_logprobs, self.vocab)
        logits, mask, positions, cache = self._forward(prompts, 1, cache=True)
        logits = logits[:, -1]
        bias = self._bias(params.logit_bias) if params.logit_bias else None
        rngs = [torch.Generator() for _ in seeds]
        for rng, seed in zip(rngs, seeds):
            if seed is None:
                rng.seed()  # fresh entropy: unseeded requests are not reproducible
            else:
                rng.manual_seed(seed)
        out: list[list[int]] = [[] for _ in range(n)]
        reasons: list[str | None] = [None] * n
        chosen_lp: list[Any] = []
        tops: list[Any] = []
        for step in range(params.max_tokens):
            scores = logits if bias is None else logits + bias
            if params.temperature > 0:
                probs = torch.softmax(scores / params.temperature, dim=-1).cpu()
                picked = [int(torch.multinomial(probs[r], 1, generator=rngs[r]))
                          if reasons[r] is None else self._pad for r in range(n)]
                tokens = torch.tensor(picked, device=self.device)
            else:
                tokens = scores.argmax(dim=-1)
            if params.wants_logprobs:
                logprobs = torch.log_softmax(logits, dim=-1)
                chosen_lp.append(logprobs.gather(1, tokens[:, None])[:, 0])
                if top_k:
                    tops.append(logprobs.topk(top_k, dim=-1))
            for r, token in enumerate(tokens.tolist()):
                if reasons[r] is not None:
                    continue
                out[r].append(token)
                if token in self.eos or (params.stop and any(
                        s in self._text(out[r]) for s in params.stop)):
                    reasons[r] = "stop"
            if all(reasons) or step == params.max_tokens - 1:
                break
            mask = torch.cat([mask, mask.new_ones((n, 1))], dim=1)
            positions = positions[:, -1:] + 1
            step_out = self.model(input_ids=tokens[:, None], attention_mask=mask,
                                  position_ids=positions, use_cache=True,
                                  **{_cache_name(): cache})
            cache = getattr(step_out, _cache_name())
            logits = step_out.logits[:, -1, : self.vocab].float()
        return self._generations(prompts, params, out, reasons, chosen_lp, tops)

    def _generations(self, prompts: list[list[int]], params: GenerateParams,
                     out: list[list[int]], reasons: list[str | None], chosen_lp: list[Any],
                     tops: list[Any]) -> list[Generation]:
        """Each row's text cut at its stop string, with the log-probs of the tokens kept."""
        torch = lazy.require_torch()
        lps = torch.stack(chosen_lp, 1).double().cpu().tolist() if chosen_lp else None
        top_vals = torch.stack([t.values for t in tops], 1).double().cpu().tolist() if tops else []
        top_ids = torch.stack([t.indices for t in tops], 1).cpu().tolist() if tops else []
        results = []
        for r, ids in enumerate(out):
            body = ids[:-1] if ids[-1] in self.eos else ids
            text = self._text(body)
            cut = min((i for i in (text.find(s) for s in params.stop) if i >= 0), default=-1)
            keep = len(body)
            if cut >= 0:  # text before the stop; tokens that start before it
                text = text[:cut]
                keep = next((k for k in range(len(body)) if len(self._text(body[:k])) >= cut),
                            len(body))
            tokens_lp = None
            if lps is not None:
                tokens_lp = tuple(TokenLogprob(
                    self._piece(t), lps[r][k],
                    tuple((self._piece(j), v) for j, v in zip(top_ids[r][k], top_vals[r][k]))
                    if top_ids else ()) for k, t in enumerate(body[:keep]))
            results.append(Generation(text, reasons[r] or "length", tokens_lp,
                                      len(prompts[r]), len(ids)))
        return results


@functools.cache
def _cache_name() -> str:
    """The KV cache's argument and output field: ``cache`` in recent transformers (5.24), whose old
    name ``past_key_values`` still works but logs a deprecation line to the user's terminal on
    every first generation."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
