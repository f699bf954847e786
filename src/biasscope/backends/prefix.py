"""Next-token scoring of many prompts at once: each distinct prompt once, shared prefixes once.

A sweep's seeds only reorder an item's options, so one checkpoint's units repeat prompts and
share long prefixes (everything up to ``Options:``; the two questions about one sentence share
the sentence). Here the union of a checkpoint's items is tokenized exactly as the plain path
tokenizes it, de-duplicated, sorted, and cut into groups of neighbours whose common token
prefix is worth running once (``plan_groups``). Each group's prefix runs once (left-padded
batches through the base model), its key/value cache rows are copied for every continuation,
and the continuations run right after the prefix, right-padded: every row's real tokens stay
contiguous, so sliding-window layers (whose masks count columns) see the distances the plain
path sees. The LM head runs on each row's last real token only, and the reduction is the plain
path's (``reduce_next_token``): option log-probs agree with it to float rounding, ranks are
taken over the same vocabulary. Prompts sharing nothing take the plain path.

Results do not depend on which units are still to do: batches are planned over the whole item
set, by token content only, and a batch is computed whole or skipped, so a resumed checkpoint
gets the very numbers an uninterrupted one would have written.

A model whose cache cannot be reused this way (no ``past_key_values``, a cache other than
``DynamicCache`` of plain or sliding-window layers, or a first batch that disagrees with the
plain path) is scored by the plain path, with a one-line notice on stderr.
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from biasscope.backends.base import NextTokenScore
from biasscope.backends.hf import _torch, left_pad, reduce_next_token, require_finite
from biasscope.items import Item

if TYPE_CHECKING:
    from biasscope.backends.hf import HFScorer

#: Shortest prefix worth a group (tokens), and what one extra row costs, in tokens of work.
MIN_PREFIX = 4
ROW_COST = 2
#: Most distinct prompts one group may span in sorted order (bounds the planning work).
SPAN = 64
#: How many rows of the first continuation batch are checked against the plain path.
CHECK_ROWS = 4
_NOTICES: set[tuple[str, str]] = set()

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Group:
    """Distinct prompts (indices) sharing their first ``prefix`` tokens."""

    prefix: int
    members: tuple[int, ...]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def plan_groups(seqs: Sequence[Sequence[int]], min_prefix: int = MIN_PREFIX,
                row_cost: int = ROW_COST, span: int = SPAN) -> tuple[list[Group], list[int]]:
    """Groups that share a prefix, and the prompts left alone, minimising the forward work.

    In sorted order every set of prompts sharing a prefix is a contiguous run, so a dynamic
    programme over cut points finds the cheapest partition, counting tokens run plus
    ``row_cost`` per row: a group of k prompts with prefix L costs
    ``L + row_cost + sum(len - L + row_cost)``, a lone prompt ``len + row_cost``. A prefix
    leaves each member at least one token, whose logits are the scores.
    """
    order = sorted(range(len(seqs)), key=lambda i: tuple(seqs[i]))
    n = len(order)
    lcp = [0] + [common_prefix(seqs[order[k - 1]], seqs[order[k]]) for k in range(1, n)]
    best = [0] * (n + 1)
    cut: list[tuple[int, int]] = [(0, 0)] * (n + 1)  # (start of the last part, its prefix)
    for j in range(1, n + 1):
        total = len(seqs[order[j - 1]])
        best[j], cut[j] = best[j - 1] + total + row_cost, (j - 1, 0)
        shared, shortest = lcp[j - 1], total
        for i in range(j - 2, max(-1, j - 1 - span), -1):
            size = len(seqs[order[i]])
            shortest = min(shortest, size)
            prefix = min(shared, shortest - 1)
            if prefix < min_prefix:
                break  # prefixes only shrink as the run grows
            total += size
            k = j - i
            cost = best[i] + prefix + row_cost + total - k * prefix + k * row_cost
            if cost < best[j]:
                best[j], cut[j] = cost, (i, prefix)
            shared = min(shared, lcp[i])
    groups: list[Group] = []
    alone: list[int] = []
    j = n
    while j > 0:
        i, prefix = cut[j]
        if prefix:
            groups.append(Group(prefix, tuple(order[i:j])))
        else:
            alone.extend(order[i:j])
        j = i
    return groups[::-1], alone[::-1]


class NoReuse(Exception):
    """This model's cache cannot be reused as planned; the message says why."""


def select_rows(cache: Any, rows: Any) -> Any:
    """A new cache holding copies of ``rows`` of ``cache`` (the original stays as it is)."""
    chosen = copy.copy(cache)
    chosen.layers = []
    for layer in cache.layers:
        part = copy.copy(layer)
        part.keys = layer.keys.index_select(0, rows)
        part.values = layer.values.index_select(0, rows)
        chosen.layers.append(part)
    return chosen


def check_cache(cache: Any, rows: int) -> None:
    """Raise NoReuse unless ``cache`` is a DynamicCache of full or sliding-window layers."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    if type(cache) is not DynamicCache:
        raise NoReuse(f"its cache is a {type(cache).__name__}, not a DynamicCache")
    for layer in cache.layers:
        if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer):
            raise NoReuse(f"its cache has {type(layer).__name__} layers")
        keys = getattr(layer, "keys", None)
        if keys is None or keys.dim() != 4 or keys.shape[0] != rows:
            raise NoReuse("its cache layers do not hold one row per prompt")


class SharedScoring:
    """One checkpoint's item set: distinct prompts, their groups, and the results so far."""

    def __init__(self, scorer: HFScorer, items: Sequence[Item], needed: Sequence[bool],
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
        self.size = max(1, scorer.options.batch_size)
        self.checked = False
        self.reported = 0  # items counted in progress so far

    # --- reduction -------------------------------------------------------------------------

    def finish(self, rows: Sequence[int], logits: Any) -> None:
        """Reduce (rows, V) logits of distinct prompts to the scores of all their items."""
        torch = _torch()
        where = [(r, i) for r, d in enumerate(rows) for i in self.items_of[d]]
        picked = logits.index_select(0, torch.tensor([r for r, _ in where],
                                                     device=logits.device))
        scores = reduce_next_token(picked, [self.option_ids[i] for _, i in where],
                                   [self.items[i].answer for _, i in where])
        for (_, i), score in zip(where, scores):
            self.results[i] = score
        if self.progress is not None:  # items of written units ride along, uncounted
            counted = sum(self.wanted[i] for _, i in where)
            self.progress(counted)
            self.reported += counted

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
                                                  self.item_ids(batch))
                self.finish(batch, logits[:, -1])

    # --- shared prefixes -------------------------------------------------------------------

    def shared(self, groups: Sequence[Group]) -> None:
        """Each group's prefix once, then its continuations on copies of the prefix cache."""
        order = sorted(groups, key=lambda g: (-g.prefix, self.seqs[g.members[0]]))
        for start in range(0, len(order), self.size):
            batch = order[start:start + self.size]
            rows = sorted(((r, d) for r, g in enumerate(batch) for d in g.members),
                          key=lambda rd: (len(self.seqs[rd[1]]) - batch[rd[0]].prefix,
                                          self.seqs[rd[1]]))
            subs = [rows[k:k + self.size] for k in range(0, len(rows), self.size)]
            subs = [sub for sub in subs if any(self.needed[d] for _, d in sub)]
            if not subs:
                continue
            cache, mask = self.run_prefixes(batch)
            for sub in subs:
                self.run_continuations(batch, cache, mask, sub)

    def run_prefixes(self, batch: Sequence[Group]) -> tuple[Any, Any]:
        scorer = self.scorer
        input_ids, mask, positions = left_pad(
            [list(self.seqs[g.members[0]][: g.prefix]) for g in batch], scorer._pad)
        base = scorer.model.base_model
        kwargs: dict[str, Any] = {}
        if base is scorer.model and scorer._keep_arg:
            kwargs[scorer._keep_arg] = 1
        out = base(input_ids=input_ids.to(scorer.device), attention_mask=mask.to(scorer.device),
                   position_ids=positions.to(scorer.device), use_cache=True, **kwargs)
        cache = getattr(out, "past_key_values", None)
        check_cache(cache, len(batch))
        return cache, mask.to(scorer.device)

    def run_continuations(self, batch: Sequence[Group], cache: Any, prefix_mask: Any,
                          sub: Sequence[tuple[int, int]]) -> None:
        torch = _torch()
        scorer = self.scorer
        conts = [self.seqs[d][batch[r].prefix:] for r, d in sub]
        width = max(len(c) for c in conts)
        input_ids = torch.full((len(sub), width), scorer._pad, dtype=torch.long)
        mask = torch.zeros((len(sub), width), dtype=torch.long)
        for row, cont in enumerate(conts):
            input_ids[row, : len(cont)] = torch.tensor(cont, dtype=torch.long)
            mask[row, : len(cont)] = 1
        lengths = torch.tensor([batch[r].prefix for r, _ in sub], dtype=torch.long)
        positions = lengths[:, None] + torch.arange(width)[None, :]
        last = torch.tensor([len(c) - 1 for c in conts], dtype=torch.long)
        rows = torch.tensor([r for r, _ in sub], device=scorer.device)
        kwargs: dict[str, Any] = {
            "attention_mask": torch.cat([prefix_mask.index_select(0, rows),
                                         mask.to(scorer.device)], dim=1),
            "position_ids": positions.to(scorer.device),
            "past_key_values": select_rows(cache, rows), "use_cache": True}
        if scorer._keep_arg == "logits_to_keep":  # per-row positions: the LM head on one each
            kwargs["logits_to_keep"] = last[:, None].to(scorer.device)
        out = scorer.model(input_ids=input_ids.to(scorer.device), **kwargs)
        logits = out.logits
        if logits.shape[1] == 1:
            logits = logits[:, 0]
        else:
            logits = logits[torch.arange(len(sub)), last.to(logits.device)]
        distinct = [d for _, d in sub]
        logits = require_finite(logits[:, : scorer.vocab].float(), self.item_ids(distinct),
                                scorer.label)
        if not self.checked:
            self.check(distinct, logits)
        self.finish(distinct, logits)

    def check(self, rows: Sequence[int], logits: Any) -> None:
        """The first continuations against the plain path: a model that computes positions or
        masks its own way shows here, and is scored the plain way instead."""
        torch = _torch()
        self.checked = True
        rows = rows[:CHECK_ROWS]
        plain = self.scorer._last_logits([list(self.seqs[d]) for d in rows], 1,
                                         self.item_ids(rows))[:, -1]
        got = torch.log_softmax(logits[: len(rows)], dim=-1)
        want = torch.log_softmax(plain, dim=-1)
        tolerance = 1e-3 if self.scorer.model.dtype in (torch.float32, torch.float64) else 0.25
        diff = float((got - want).abs().max())
        if not diff <= tolerance:
            raise NoReuse(f"its cached continuations differ from whole prompts by {diff:.2g}")


def reusable(model: Any) -> str | None:
    """Why ``model``'s cache cannot be reused, judged from its signature; None if it can."""
    for part in (model, model.base_model):
        if "past_key_values" not in inspect.signature(part.forward).parameters:
            return f"{type(part).__name__}.forward takes no past_key_values"
    return None


def notice(scorer: HFScorer, reason: str) -> None:
    """One line per model class and reason, however many checkpoints share them."""
    key = (type(scorer.model).__name__, reason)
    if key not in _NOTICES:
        _NOTICES.add(key)
        print(f"biasscope: {scorer.label}: no prefix reuse for {key[0]} ({reason}); scoring "
              "each distinct prompt in full", file=sys.stderr, flush=True)


def score_shared(scorer: HFScorer, items: Sequence[Item], needed: Sequence[bool],
                 progress: Progress | None = None) -> list[NextTokenScore | None]:
    """Scores of the ``needed`` items of ``items`` (None for the others, unless they share a
    batch with needed ones): distinct prompts once, shared prefixes once."""
    torch = _torch()
    if not items:
        return []
    work = SharedScoring(scorer, items, needed, progress)
    reason = reusable(scorer.model)
    with torch.inference_mode():
        if reason is None:
            groups, alone = plan_groups(work.seqs)
            try:
                work.shared(groups)
            except NoReuse as exc:
                reason = str(exc)
            else:
                work.plain(alone)
        if reason is not None:
            notice(scorer, reason)
            if progress is not None and work.reported:
                progress(-work.reported)  # counted again by the plain pass
            work = SharedScoring(scorer, items, needed, progress)
            work.plain(range(len(work.seqs)))
    return work.results
