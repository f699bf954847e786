"""The LM head and the next-token reduction, one block of the vocabulary at a time.

A score needs, per prompt, the log-sum-exp over the whole vocabulary, the option tokens' logits
and how many tokens beat the answer's. Computing the (rows, V) logits first and then reducing
them streams a vocabulary-sized tensor through memory five times (finite check, max, exp, sum,
compare); on a small model with a 50k vocabulary that costs more than the model's body. Here
the head runs on a block of the vocabulary at a time and each block is reduced while it is
still in cache, so nothing vocabulary-sized is materialised. The blocks that hold option tokens
run first: the answer's logit, against which every other block is counted, is the very value
its block computed, so a rank is an exact count of strictly higher logits.

Only heads whose logits are ``hidden @ weight.T + bias`` (soft-capped as Gemma 2 does, if the
config says so) are taken; callers compare ``Head.logits`` with the model's own logits once
before trusting it (``Head.check``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from biasscope.backends import lazy
from biasscope.backends.base import NextTokenScore
from biasscope.core.errors import ModelError

#: Logits per block on a CPU (rows x block floats): a few hundred KiB stay in a core's cache.
CPU_BLOCK_FLOATS = 1 << 17
MIN_BLOCK = 1024
#: Config fields that rescale a model's logits in ways this head does not copy.
LOGIT_SCALES = ("logit_scale", "logits_scaling", "output_multiplier_scale")


def require_finite(logits: Any, item_ids: Sequence[str], label: str) -> Any:
    """``logits`` (rows, ..., V) unchanged, or a ModelError naming the first row's item that has
    a NaN/inf."""
    torch = lazy.require_torch()
    # One cheap reduction per row; only a suspicious row pays for the exact check (a sum of
    # huge finite logits could overflow without any NaN/inf being there).
    if bool(torch.isfinite(logits.flatten(1).sum(dim=1)).all()):
        return logits
    finite = torch.isfinite(logits).flatten(1).all(dim=-1)
    if not bool(finite.all()):
        bad = item_ids[int((~finite).nonzero()[0, 0])]
        raise ModelError(f"checkpoint {label} produced NaN/inf logits (first at item "
                         f"{bad}); the weights may be corrupt, or try --dtype float32")
    return logits


def option_matrix(options: Sequence[Sequence[int]], device: Any) -> Any:
    """(rows, arity) option ids; shorter rows repeat their first option (ignored later)."""
    arity = max(len(o) for o in options)
    return lazy.require_torch().tensor([list(o) + [o[0]] * (arity - len(o)) for o in options],
                           device=device)


def to_scores(option_lp: Any, ranks: Any, options: Sequence[Sequence[int]]
              ) -> list[NextTokenScore]:
    return [NextTokenScore(tuple(lp[: len(o)]), int(r))
            for lp, o, r in zip(option_lp.double().cpu().tolist(), options, ranks.cpu().tolist())]


def reduce_next_token(logits: Any, options: Sequence[Sequence[int]], answers: Sequence[int]
                      ) -> list[NextTokenScore]:
    """Float32 last-position logits (rows, V) -> each row's option log-probs (log-softmax over
    the whole vocabulary) and the answer's rank (1 + tokens with a strictly higher logit)."""
    torch = lazy.require_torch()
    log_z = torch.logsumexp(logits, dim=-1, keepdim=True)
    opt = option_matrix(options, logits.device)
    target = opt.gather(1, torch.tensor(list(answers), device=logits.device)[:, None])
    ranks = 1 + (logits > logits.gather(1, target)).sum(dim=-1)
    return to_scores(logits.gather(1, opt) - log_z, ranks, options)


class Head:
    """``hidden @ weight[:vocab].T + bias``, reduced block by block to next-token scores."""

    def __init__(self, weight: Any, bias: Any, vocab: int, softcap: float | None = None) -> None:
        self.weight = weight
        self.bias = bias
        self.vocab = vocab
        self.softcap = softcap

    @classmethod
    def of(cls, model: Any, vocab: int) -> Head | str:
        """The model's head, or why its logits are not a linear map of the base model's output."""
        torch = lazy.require_torch()
        out = model.get_output_embeddings()
        config = getattr(model, "config", None)
        if model.base_model is model:
            return f"{type(model).__name__} has no separate base model"
        if type(out) is not torch.nn.Linear:
            return f"its output layer is a {type(out).__name__}, not a Linear"
        for name in LOGIT_SCALES:
            value = getattr(config, name, None)
            if value is not None and value != 1:
                return f"its logits are rescaled ({name})"
        return cls(out.weight, out.bias, vocab, getattr(config, "final_logit_softcapping", None))

    def logits(self, hidden: Any) -> Any:
        """The full float32 (rows, vocab) logits: for checks and for the NaN/inf message."""
        return self._block(hidden, 0, self.vocab)

    def check(self, hidden: Any, model_logits: Any) -> float:
        """Largest log-prob difference between this head and the model's own logits."""
        torch = lazy.require_torch()
        ours = torch.log_softmax(self.logits(hidden), dim=-1)
        theirs = torch.log_softmax(model_logits[:, : self.vocab].float(), dim=-1)
        return float((ours - theirs).abs().max())

    def block_size(self, rows: int, device: Any) -> int:
        if getattr(device, "type", "cpu") != "cpu":  # one launch per op beats cache blocking
            return self.vocab
        return max(MIN_BLOCK, CPU_BLOCK_FLOATS // max(1, rows))

    def scores(self, hidden: Any, options: Sequence[Sequence[int]], answers: Sequence[int],
               item_ids: Sequence[str], label: str) -> list[NextTokenScore]:
        """Each row's option log-probs and answer rank, as ``reduce_next_token`` gives them
        from the full logits (to float rounding; ranks exact)."""
        torch = lazy.require_torch()
        rows, device = hidden.shape[0], hidden.device
        block = self.block_size(rows, device)
        starts = list(range(0, self.vocab, block))
        opt = option_matrix(options, device)
        first = sorted({i // block for o in options for i in o})  # from the host's ids: no wait
        kept = {b: self._block(hidden, starts[b], block) for b in first}
        option_logits = torch.zeros(opt.shape, dtype=torch.float32, device=device)
        for b, logits in kept.items():
            inside = (opt >= starts[b]) & (opt < starts[b] + logits.shape[1])
            picked = logits.gather(1, (opt - starts[b]).clamp(0, logits.shape[1] - 1))
            option_logits = torch.where(inside, picked, option_logits)
        target = option_logits.gather(1, torch.tensor(list(answers), device=device)[:, None])
        top = torch.full((rows, 1), -torch.inf, device=device)
        total = torch.zeros((rows, 1), dtype=torch.float64, device=device)
        above = torch.zeros(rows, dtype=torch.long, device=device)
        finite = torch.zeros(rows, dtype=torch.float32, device=device)
        for b in first + [b for b in range(len(starts)) if b not in kept]:
            logits = kept.pop(b) if b in kept else self._block(hidden, starts[b], block)
            finite += logits.sum(dim=-1)
            above += (logits > target).sum(dim=-1)
            peak = torch.maximum(top, logits.amax(dim=-1, keepdim=True))
            mass = logits.sub_(peak).exp_().sum(dim=-1, keepdim=True, dtype=torch.float64)
            total = total * torch.exp(top - peak).double() + mass
            top = peak
        if not bool(torch.isfinite(finite).all()):  # exact check and message on the full logits
            logits = require_finite(self.logits(hidden), item_ids, label)
            return reduce_next_token(logits, options, answers)
        log_z = (top.double() + total.log()).float()
        return to_scores(option_logits - log_z, 1 + above, options)

    def _block(self, hidden: Any, start: int, block: int) -> Any:
        torch = lazy.require_torch()
        end = min(start + block, self.vocab)
        bias = None if self.bias is None else self.bias[start:end]
        logits = torch.nn.functional.linear(hidden, self.weight[start:end], bias)
        if self.softcap:  # as Gemma 2 caps them, in the model's dtype
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits.float()
