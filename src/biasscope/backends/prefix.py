"""Next-token scoring of many prompts at once: each distinct prompt once, shared prefixes once.

A sweep's seeds only reorder an item's options, so one checkpoint's units repeat prompts and
share long prefixes (everything up to ``Options:``; the two questions about one sentence share
the sentence). Here the union of a checkpoint's items is tokenized exactly as the plain path
tokenizes it, de-duplicated and sorted, and runs of neighbours are packed into rows
(``plan_rows``): each row holds the token trie of its prompts, so a prefix shared by several
prompts is one stretch of tokens, at any depth (the sentence once for both questions, each
question once for its option orders). A token attends to its ancestors in the trie only,
through a 4-D attention mask, at the position of its depth: every prompt sees exactly the tokens
and positions it sees alone (sliding-window layers get the window counted in positions), while
each prefix runs once and its keys and values serve all its continuations within one forward.
The LM head runs on each prompt's last token only, one vocabulary block at a time
(``head.Head``): option log-probs agree with the plain path to float rounding, and ranks are
taken over the same vocabulary.

Results do not depend on which units are still to do: rows and batches are planned over the
whole item set, by token content only, and a batch is computed whole or skipped, so a resumed
checkpoint gets the very numbers an uninterrupted one would have written.

A model this cannot serve (attention that takes no 4-D mask, layer kinds other than full and
sliding-window attention, a head other than a linear layer, or a first batch that disagrees
with the plain path) is scored by the plain path, with a one-line notice on stderr.
"""

from __future__ import annotations

import gc
import inspect
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from biasscope.backends import lazy
from biasscope.backends.base import NextTokenScore
from biasscope.backends.head import Head, reduce_next_token
from biasscope.backends.hf_model import HFConfig
from biasscope.core.items import Item


class Scorer(Protocol):
    """What the shared scoring needs of a loaded checkpoint (``backends.hf.HFScorer``)."""

    label: str
    model: Any
    device: Any
    vocab: int
    config: HFConfig

    def encode_next_token(self, items: Sequence[Item]
                          ) -> tuple[list[list[int]], list[list[int]]]: ...

    def _last_logits(self, ids: list[list[int]], keep: int, item_ids: list[str]) -> Any: ...


#: Most distinct prompts one row may span in sorted order (bounds the planning work).
SPAN = 64
#: Longest row (tokens) unless a single prompt is longer; a batch's budget may lower it.
MAX_ROW = 1024
#: Work a row costs beyond its tokens, in tokens (padding, bookkeeping).
ROW_COST = 2
#: Most padding a batch of rows takes, as a share of its tokens: rows are sorted longest
#: first and padded to the first one's width, so a short row in a long row's batch costs the
#: long row's work (at batch 128, 46% more tokens than at 32 on Pythia-410m, 5 seeds).
PADDING = 1 / 8
#: Most entries of a batch's 4-D mask (rows x width x width; 256 MiB in float32): a prompt
#: longer than its square root (8192 tokens) is scored by the plain path instead.
MASK_ELEMENTS = 1 << 26
#: On CUDA a batch's width is rounded up to a multiple of this: fewer distinct shapes for the
#: kernels to be chosen (and, in a fresh process, loaded) for, and a mask whose rows the
#: memory-efficient attention takes as given (it copies a mask whose rows are not a multiple
#: of 8 elements long, in every layer).
CUDA_ALIGN = 16
#: How many prompts of the first batch are checked against the plain path, and to what
#: log-prob difference (float32; half precision gets 0.25).
CHECK_ROWS = 4
ATOL = 1e-4
#: Attention implementations that apply a 4-D float mask as given.
MASKED_ATTENTION = ("sdpa", "eager")
LAYER_KINDS = ("full_attention", "sliding_attention")
_NOTICES: set[tuple[str, str]] = set()
#: Models (class, configuration, dtype, device) whose trie rows passed the check in this
#: process: the next checkpoints of a sweep run the same code on other weights, and skip it.
_VOUCHED: set[tuple[str, str, str, str]] = set()

Progress = Callable[[int], None]


class NoReuse(Exception):
    """This model cannot be scored through trie rows; the message says why."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def plan_rows(seqs: Sequence[Sequence[int]], width: int, max_row: int = MAX_ROW,
              span: int = SPAN) -> list[tuple[int, ...]]:
    """Distinct prompts (indices) cut into rows, each a run of neighbours in sorted order.

    A sorted run's trie has ``len(first) + sum(len(s) - lcp(s, previous))`` tokens. A dynamic
    programme over cut points minimises the forward work: per row its tokens ``t`` times
    ``1 + t / (6 * width)`` (the masked attention grows with ``t``, the layers' matrix products
    with ``6 * width`` per token) plus ``ROW_COST``. No row exceeds ``max_row`` tokens unless
    it is a single prompt.
    """
    order = sorted(range(len(seqs)), key=lambda i: tuple(seqs[i]))
    n = len(order)
    lengths = [len(seqs[i]) for i in order]
    fresh = [lengths[0] if n else 0] + [
        lengths[k] - common_prefix(seqs[order[k - 1]], seqs[order[k]]) for k in range(1, n)]

    scale = 6 * max(1, width)
    cost = [t * (1 + t / scale) + ROW_COST for t in range(max_row + 1)]  # rows within max_row
    best = [0.0] * (n + 1)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        alone = lengths[j - 1]  # a prompt longer than max_row is a row of its own
        best_j = best[j - 1] + (cost[alone] if alone <= max_row else
                                alone * (1 + alone / scale) + ROW_COST)
        cut_j = j - 1
        tail = 0  # tokens the prompts after the first add: sum of fresh[i + 1 .. j - 1]
        for i in range(j - 2, max(-1, j - 1 - span), -1):
            tail += fresh[i + 1]
            tokens = lengths[i] + tail
            if tokens > max_row:
                break  # rows only grow as they reach further back
            total = best[i] + cost[tokens]
            if total < best_j:
                best_j, cut_j = total, i
        best[j], cut[j] = best_j, cut_j
    rows: list[tuple[int, ...]] = []
    j = n
    while j > 0:
        rows.append(tuple(order[cut[j]:j]))
        j = cut[j]
    return rows[::-1]


@dataclass(frozen=True)
class Trie:
    """One row: its tokens in depth-first order, each token's depth (its position) and the end
    of its subtree (token ``i`` sees token ``j`` iff ``j <= i < end[j]``), and each member
    prompt's last token."""

    members: tuple[int, ...]
    tokens: tuple[int, ...]
    depths: tuple[int, ...]
    ends: tuple[int, ...]
    lasts: tuple[int, ...]


def build_trie(members: Sequence[int], seqs: Sequence[Sequence[int]]) -> Trie:
    """The trie of ``members``, which must be in sorted order (as ``plan_rows`` gives them)."""
    tokens: list[int] = []
    depths: list[int] = []
    paths: list[list[int]] = []
    shared: list[int] = []  # tokens each prompt shares with the one before it
    path: list[int] = []
    previous: Sequence[int] = ()
    for d in members:
        seq = seqs[d]
        shared.append(common_prefix(previous, seq))
        path = path[: shared[-1]]
        for depth in range(len(path), len(seq)):
            path.append(len(tokens))
            tokens.append(seq[depth])
            depths.append(depth)
        paths.append(path)
        previous = seq
    # A subtree ends after the last prompt through it: walking back, each prompt sets the
    # nodes the next prompt does not share.
    ends = list(range(1, len(tokens) + 1))
    after = 0
    for path, before in zip(reversed(paths), reversed(shared)):
        for node in path[after:]:
            ends[node] = path[-1] + 1
        after = before
    return Trie(tuple(members), tuple(tokens), tuple(depths), tuple(ends),
                tuple(p[-1] for p in paths))


def tree_masks(tries: Sequence[Trie], window: int | None, sliding_layers: bool,
               dtype: Any, align: int = 1, device: Any = None) -> tuple[Any, Any, Any]:
    """Input ids (pad 0), position ids and the additive 4-D mask(s) of right-padded rows, on
    ``device``: a tensor, or ``{layer kind: mask}`` for models that mix full and sliding-window
    layers. Padding tokens see themselves only, so no row of the mask is empty; the width is
    rounded up to a multiple of ``align`` where the mask stays within ``MASK_ELEMENTS``.
    Refuses a batch whose mask would pass it (``SharedScoring.batches`` never plans one).

    Only the rows' tokens, depths and subtree ends travel; the (rows, width, width) mask is
    built where it is used: on a GPU the host's work bounds the scoring (an H200 profile,
    `BENCHMARKS.md`), and the GPU builds it in microseconds."""
    torch = lazy.require_torch()
    width = max(len(t.tokens) for t in tries)
    if len(tries) * width * width > MASK_ELEMENTS:
        raise ValueError(f"{len(tries)} rows of {width} tokens: a mask past MASK_ELEMENTS")
    aligned = -(-width // align) * align
    if len(tries) * aligned * aligned <= MASK_ELEMENTS:
        width = aligned
    rows = torch.zeros((3, len(tries), width), dtype=torch.long)  # ids, depths, ends
    rows[2] = torch.arange(1, width + 1)
    for row, trie in enumerate(tries):
        n = len(trie.tokens)
        rows[:, row, :n] = torch.tensor((trie.tokens, trie.depths, trie.ends))
    ids, depths, ends = rows.to(device) if device is not None else rows
    cols = torch.arange(width, device=ends.device)
    seen = (cols[None, :] <= cols[:, None])[None] & (cols[None, :, None] < ends[:, None, :])
    lowest = torch.finfo(dtype).min

    def additive(allowed: Any) -> Any:
        mask = torch.full(allowed.shape, lowest, dtype=dtype, device=allowed.device)
        return mask.masked_fill_(allowed, 0)[:, None]

    if window is None:
        return ids, depths, additive(seen)
    near = seen & (depths[:, :, None] - depths[:, None, :] < window)
    if not sliding_layers:
        return ids, depths, additive(near)
    return ids, depths, {"full_attention": additive(seen), "sliding_attention": additive(near)}


def plan_batches(seqs: Sequence[Sequence[int]], size: int, width: int) -> list[list[Trie]]:
    """Rows of the plan, longest first, in batches of at most the tokens of a plain batch of
    the longest prompts (``size`` x the longest prompt) and a mask of at most
    ``MASK_ELEMENTS``, whose padding stays within `PADDING` of their tokens; a row whose mask
    alone would pass that is a batch of its own."""
    budget = size * max(len(s) for s in seqs)
    longest = min(MAX_ROW, budget, math.isqrt(MASK_ELEMENTS))
    tries = [build_trie(row, seqs) for row in plan_rows(seqs, width, max_row=longest)]
    tries.sort(key=lambda t: (-len(t.tokens), seqs[t.members[0]]))
    out: list[list[Trie]] = []
    real = 0  # the current batch's tokens, padding not counted
    for trie in tries:
        rows, wide = len(out[-1]) + 1 if out else 0, len(out[-1][0].tokens) if out else 0
        if (out and rows * wide <= budget and rows * wide * wide <= MASK_ELEMENTS
                and rows * wide <= (1 + PADDING) * (real + len(trie.tokens))):
            out[-1].append(trie)
            real += len(trie.tokens)
        else:
            out.append([trie])
            real = len(trie.tokens)
    return out


def trie_hidden(scorer: Scorer, batch: Sequence[Trie], checked: bool) -> Any:
    """The base model's last hidden states over a batch of trie rows, (rows, width, hidden);
    ``NoReuse`` when a model not yet ``checked`` refuses the 4-D mask."""
    config = scorer.model.config
    window = getattr(config, "sliding_window", None)
    sliding = "sliding_attention" in (getattr(config, "layer_types", None) or ())
    device = scorer.device
    ids, positions, masks = tree_masks(batch, window, sliding, scorer.model.dtype,
                                       alignment(device), device)
    try:
        with attention_kernels(device):
            out = scorer.model.base_model(input_ids=ids, position_ids=positions,
                                          attention_mask=masks, use_cache=False)
    except (TypeError, ValueError, RuntimeError, AttributeError) as exc:
        if checked or "memory" in str(exc):  # out of memory is no refusal
            raise
        raise NoReuse(f"its forward refused a 4-D mask ({type(exc).__name__})") from None
    return out.last_hidden_state


def alignment(device: Any) -> int:
    """What a batch's width is rounded up to a multiple of on ``device`` (`CUDA_ALIGN`); on a
    CPU every padding token costs its work, and buys nothing."""
    return CUDA_ALIGN if getattr(device, "type", device) == "cuda" else 1


def attention_kernels(device: Any) -> AbstractContextManager[Any]:
    """On CUDA, SDPA's kernels without cuDNN's attention. With a float mask in half precision
    torch picks cuDNN's, which builds and compiles a kernel for each new shape at run time (the
    first process on a machine paid seconds for it) and then spends about 0.7 ms of CPU per
    call: on an H200 the trie rows of a 1.4b model kept the GPU busy for 0.47 s of 1.5-2.7 s
    of scoring, and cuDNN's calls took a quarter of the profiled CPU (`BENCHMARKS.md`). The
    memory-efficient kernel takes the same mask, precompiled."""
    if getattr(device, "type", device) != "cuda":
        return nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch before 2.3: no cuDNN attention to avoid
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                        SDPBackend.MATH])


def reusable(model: Any) -> str | None:
    """Why ``model`` cannot take trie rows, judged from its configuration; None if it can."""
    config = model.config
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in MASKED_ATTENTION:
        return f"its {attention} attention takes no 4-D mask"
    kinds = set(getattr(config, "layer_types", None) or ()) - set(LAYER_KINDS)
    if kinds:
        return f"it has {', '.join(sorted(kinds))} layers"
    forward = inspect.signature(model.base_model.forward).parameters
    if not {"attention_mask", "position_ids"} <= forward.keys():
        return f"{type(model.base_model).__name__}.forward takes no attention_mask/position_ids"
    return None


class SharedScoring:
    """One checkpoint's item set: distinct prompts, their rows, and the results so far."""

    def __init__(self, scorer: Scorer, items: Sequence[Item], needed: Sequence[bool],
                 progress: Progress | None) -> None:
        self.scorer = scorer
        self.items = items
        self.progress = progress
        ids, self.option_ids = scorer.encode_next_token(items)
        index: dict[tuple[int, ...], int] = {}
        self.items_of: list[list[int]] = []
        self.needed: list[bool] = []
        for i, seq in enumerate(ids):
            d = index.setdefault(tuple(seq), len(index))
            if d == len(self.items_of):
                self.items_of.append([])
                self.needed.append(False)
            self.items_of[d].append(i)
            self.needed[d] = self.needed[d] or bool(needed[i])
        self.wanted = [bool(n) for n in needed]  # per item: the progress counts these
        self.seqs = list(index)
        self.results: list[NextTokenScore | None] = [None] * len(items)
        self.size = max(1, scorer.config.batch_size)
        self.checked = code_path(scorer.model) in _VOUCHED
        self.reported = 0  # items counted in progress so far

    def item_ids(self, rows: Sequence[int]) -> list[str]:
        return [self.items[self.items_of[d][0]].id for d in rows]

    # --- the plain path --------------------------------------------------------------------

    def plain(self, rows: Sequence[int]) -> None:
        """Whole prompts, longest first, in the plain path's batches; unneeded batches skipped."""
        order = sorted(rows, key=lambda d: (-len(self.seqs[d]), self.seqs[d]))
        for start in range(0, len(order), self.size):
            batch = order[start:start + self.size]
            if any(self.needed[d] for d in batch):
                logits = self.scorer._last_logits([list(self.seqs[d]) for d in batch], 1,
                                                  self.item_ids(batch))[:, -1]
                self.reduce(batch, logits, None)

    def reduce(self, rows: Sequence[int], states: Any, head: Head | None) -> None:
        """Scores of every item of the distinct prompts ``rows`` from their logits (no head) or
        last hidden states (a head), one row of ``states`` per prompt."""
        torch = lazy.require_torch()
        where = [(r, i) for r, d in enumerate(rows) for i in self.items_of[d]]
        if len(where) > len(rows):  # some prompt serves several items
            picked = torch.tensor([r for r, _ in where], device=states.device)
            states = states.index_select(0, picked)
        options = [self.option_ids[i] for _, i in where]
        answers = [self.items[i].answer for _, i in where]
        if head is None:
            scores = reduce_next_token(states, options, answers)
        else:
            scores = head.scores(states, options, answers, [self.items[i].id for _, i in where],
                                 self.scorer.label)
        for (_, i), score in zip(where, scores):
            self.results[i] = score
        if self.progress is not None:  # items of written units ride along, uncounted
            counted = sum(self.wanted[i] for _, i in where)
            self.progress(counted)
            self.reported += counted

    # --- trie rows -------------------------------------------------------------------------

    def batches(self) -> list[list[Trie]]:
        """The plan's rows in batches (`plan_batches`)."""
        width = getattr(self.scorer.model.config, "hidden_size", 1024)
        return plan_batches(self.seqs, self.size, width)

    def shared(self, head: Head) -> None:
        torch = lazy.require_torch()
        for batch in self.batches():
            rows = [d for trie in batch for d in trie.members]
            if not any(self.needed[d] for d in rows):
                continue
            if len(batch[0].tokens) ** 2 > MASK_ELEMENTS:  # no mask that large: whole prompts
                self.plain(rows)
                continue
            hidden = trie_hidden(self.scorer, batch, self.checked)
            at_row = torch.tensor([r for r, t in enumerate(batch) for _ in t.lasts])
            at_col = torch.tensor([c for t in batch for c in t.lasts])
            last = hidden[at_row.to(hidden.device), at_col.to(hidden.device)]
            if not self.checked:
                self.check(rows, last, head)
            self.reduce(rows, last, head)

    def check(self, rows: Sequence[int], last: Any, head: Head) -> None:
        """The first prompts against the plain path: a model that computes positions, masks or
        logits its own way shows here, and is scored the plain way instead."""
        torch = lazy.require_torch()
        self.checked = True
        rows = rows[:CHECK_ROWS]
        plain = self.scorer._last_logits([list(self.seqs[d]) for d in rows], 1,
                                         self.item_ids(rows))[:, -1]
        diff = head.check(last[: len(rows)], plain)
        tolerance = ATOL if self.scorer.model.dtype in (torch.float32, torch.float64) else 0.25
        if not diff <= tolerance:
            raise NoReuse(f"its trie rows differ from whole prompts by {diff:.2g}")
        _VOUCHED.add(code_path(self.scorer.model))


def code_path(model: Any) -> tuple[str, str, str, str]:
    """What decides how a model treats trie rows (not its weights): its class, its whole
    configuration, its dtype and its device's kind."""
    config = model.config
    text = config.to_json_string() if hasattr(config, "to_json_string") else repr(vars(config))
    kind = type(model)
    device = getattr(getattr(model, "device", None), "type", "")
    return f"{kind.__module__}.{kind.__qualname__}", text, str(model.dtype), str(device)


def notice(scorer: Scorer, reason: str) -> None:
    """One line per model class and reason, however many checkpoints share them."""
    key = (type(scorer.model).__name__, reason)
    if key not in _NOTICES:
        _NOTICES.add(key)
        print(f"biasscope: {scorer.label}: no prefix reuse for {key[0]} ({reason}); scoring "
              "each distinct prompt in full", file=sys.stderr, flush=True)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Planning allocates some 100k small objects, and each burst would start a full garbage
    collection walking every object torch and transformers hold (0.2 s a checkpoint); nothing
    made here forms a cycle, so collection waits until the scoring is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def score_shared(scorer: Scorer, items: Sequence[Item], needed: Sequence[bool],
                 progress: Progress | None = None) -> list[NextTokenScore | None]:
    """Scores of the ``needed`` items of ``items`` (None for the others, unless they share a
    batch with needed ones): distinct prompts once, shared prefixes once."""
    if not items:
        return []
    return shared_or_plain(lambda: SharedScoring(scorer, items, needed, progress), scorer,
                           progress)


def shared_or_plain(make: Callable[[], Any], scorer: Any, progress: Progress | None
                    ) -> list[Any]:
    """The results of ``make()``'s work (a `SharedScoring`-like batch plan) through shared
    prefixes; where the model cannot reuse them, said once, every sequence whole."""
    torch = lazy.require_torch()
    work = make()
    head = Head.of(scorer.model, scorer.vocab)
    reason = head if isinstance(head, str) else reusable(scorer.model)
    with torch.inference_mode(), collection_paused():
        if reason is None and isinstance(head, Head):
            try:
                work.shared(head)
            except NoReuse as exc:
                reason = str(exc)
        if reason is not None:
            notice(scorer, reason)
            if progress is not None and work.reported:
                progress(-work.reported)  # counted again by the plain pass
            work = make()
            work.plain(range(len(work.seqs)))
    return list(work.results)
