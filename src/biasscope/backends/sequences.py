"""Whole continuations scored through shared-prefix trie rows: summed log-probs of many texts.

The ``continuation`` request asks the summed log-prob of each item's continuation after its
context; CrowS-Pairs asks it of 3,016 sentences whose pairs share long prefixes. Here every
distinct (context + continuation) sequence goes into the trie rows of `biasscope.backends.prefix`
(a shared prefix runs once), and each trie node's token is scored against its parent's hidden
state by the block-wise head (`biasscope.backends.head.Head`): a sequence's log-prob is the sum
over its path's continuation nodes, and greedy decoding gives it when each of those tokens ranks
first (a tie counts as first, where the plain path's argmax picks one). A node shared by two
sequences is scored once. The first batch is checked against the plain path
(``HFScorer.score_continuation``); a model the trie cannot serve is scored the plain way, with
the same one-line notice as next-token scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from biasscope.backends import lazy, prefix
from biasscope.backends.base import ContinuationScore
from biasscope.backends.head import Head
from biasscope.backends.prefix import (
    ATOL,
    CHECK_ROWS,
    NoReuse,
    Progress,
    Trie,
    plan_batches,
    shared_or_plain,
    trie_hidden,
)
from biasscope.core.items import Item

#: Most (parent, token) pairs the head scores at once: bounds its block-wise work.
HEAD_ROWS = 512


def parents(trie: Trie) -> list[int]:
    """Each node's parent in the trie (-1 for a root): the last node one level up so far,
    since ``build_trie`` lays a row out depth first."""
    out: list[int] = []
    path: list[int] = []
    for depth in trie.depths:
        del path[depth:]
        out.append(path[-1] if path else -1)
        path.append(len(out) - 1)
    return out


def paths(trie: Trie) -> list[list[int]]:
    """Each member's nodes, root to last token."""
    up = parents(trie)
    out = []
    for last in trie.lasts:
        nodes: list[int] = []
        node = last
        while node >= 0:
            nodes.append(node)
            node = up[node]
        out.append(nodes[::-1])
    return out


class SharedContinuations:
    """One call's distinct sequences, their context lengths and the results so far."""

    def __init__(self, scorer: Any, items: Sequence[Item], needed: Sequence[bool],
                 progress: Progress | None) -> None:
        self.scorer, self.items, self.progress = scorer, items, progress
        full, targets = scorer.encode_continuation(items)
        index: dict[tuple[tuple[int, ...], int], int] = {}
        self.items_of: list[list[int]] = []
        for i, (seq, target) in enumerate(zip(full, targets)):
            d = index.setdefault((tuple(seq), len(seq) - len(target)), len(index))
            if d == len(self.items_of):
                self.items_of.append([])
            self.items_of[d].append(i)
        self.seqs = [seq for seq, _ in index]
        self.contexts = [context for _, context in index]
        self.needed = [any(needed[i] for i in its) for its in self.items_of]
        self.wanted = [bool(n) for n in needed]
        self.results: list[ContinuationScore | None] = [None] * len(items)
        self.checked = False
        self.reported = 0

    def shared(self, head: Head) -> None:
        width = getattr(self.scorer.model.config, "hidden_size", 1024)
        size = max(1, self.scorer.config.batch_size)
        for batch in plan_batches(self.seqs, size, width):
            rows = [d for trie in batch for d in trie.members]
            if not any(self.needed[d] for d in rows):
                continue
            if len(batch[0].tokens) ** 2 > prefix.MASK_ELEMENTS:  # no mask that large: whole texts
                self.plain(rows)
                continue
            hidden = trie_hidden(self.scorer, batch, self.checked)
            scores = self.score_batch(batch, hidden, head)
            if not self.checked:
                self.check(rows, scores)
            self.keep(rows, scores)

    def score_batch(self, batch: Sequence[Trie], hidden: Any, head: Head
                    ) -> list[ContinuationScore]:
        """Each member's summed log-prob over its continuation's nodes, each node scored once
        (its token's log-prob and rank after its parent's hidden state)."""
        torch = lazy.require_torch()
        wanted: dict[tuple[int, int], int] = {}  # (row, node) -> place in the head's rows
        at: list[tuple[int, int]] = []  # (row, parent) of each place
        tokens: list[int] = []
        member_nodes: list[list[int]] = []
        for row, trie in enumerate(batch):
            up = parents(trie)
            for d, nodes in zip(trie.members, paths(trie)):
                places = []
                for node in nodes[self.contexts[d]:]:
                    key = (row, node)
                    if key not in wanted:
                        wanted[key] = len(at)
                        at.append((row, up[node]))
                        tokens.append(trie.tokens[node])
                    places.append(wanted[key])
                member_nodes.append(places)
        logprob: list[float] = []
        first: list[bool] = []
        for start in range(0, len(at), HEAD_ROWS):
            chunk = at[start:start + HEAD_ROWS]
            rows = torch.tensor([r for r, _ in chunk], device=hidden.device)
            cols = torch.tensor([c for _, c in chunk], device=hidden.device)
            ids = [[t] for t in tokens[start:start + HEAD_ROWS]]
            names = [self.items[self.items_of[batch[r].members[0]][0]].id for r, _ in chunk]
            for score in head.scores(hidden[rows, cols], ids, [0] * len(ids), names,
                                     self.scorer.label):
                logprob.append(score.option_logprobs[0])
                first.append(score.target_rank == 1)
        return [ContinuationScore(sum(logprob[p] for p in places),
                                  all(first[p] for p in places), len(places))
                for places in member_nodes]

    def keep(self, rows: Sequence[int], scores: Sequence[ContinuationScore]) -> None:
        counted = 0
        for d, score in zip(rows, scores):
            for i in self.items_of[d]:
                self.results[i] = score
                counted += self.wanted[i]
        if self.progress is not None:
            self.progress(counted)
            self.reported += counted

    def plain(self, rows: Sequence[int]) -> None:
        wanted = [d for d in rows if self.needed[d]]
        firsts = [self.items[self.items_of[d][0]] for d in wanted]
        self.keep(wanted, self.scorer.score_continuation(firsts))

    def check(self, rows: Sequence[int], scores: Sequence[ContinuationScore]) -> None:
        """The first texts against the plain path, as next-token scoring checks its rows."""
        torch = lazy.require_torch()
        self.checked = True
        firsts = [self.items[self.items_of[d][0]] for d in rows[:CHECK_ROWS]]
        plain = self.scorer.score_continuation(firsts)
        diff = max(abs(a.logprob - b.logprob) / max(1, a.tokens)
                   for a, b in zip(scores, plain))
        tolerance = ATOL if self.scorer.model.dtype in (torch.float32, torch.float64) else 0.25
        if not diff <= tolerance:
            raise NoReuse(f"its trie rows differ from whole texts by {diff:.2g} a token")


def score_continuation_shared(scorer: Any, items: Sequence[Item], needed: Sequence[bool],
                              progress: Progress | None = None
                              ) -> list[ContinuationScore | None]:
    """Continuation scores of the ``needed`` items (None for the others unless they share a
    batch with needed ones): each distinct text once, shared prefixes once."""
    if not items:
        return []
    return shared_or_plain(lambda: SharedContinuations(scorer, items, needed, progress), scorer,
                           progress)
