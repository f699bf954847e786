"""Is the reward model any good? Its accuracy on held-out preference pairs, beside its
sensitivities, so that a sensitive model can be told from a broken one.

The pairs are hh-rlhf ``harmless-base`` test lines: the same conversation ending in the
``chosen`` and in the ``rejected`` response. A pair counts as correct when the chosen
response gets the strictly higher reward (as RewardBench counts it: a tie is not a success,
and ties are reported). The accuracy carries an exact (Clopper-Pearson) interval at the
summary's level (``--confidence``, 95% by default), the exact binomial test against chance
(0.5) and Cohen's h against 0.5. The verdict is that test's, at its own α (0.05, the exact
95% interval: ``settings.ALPHA``) whatever the level shown: a model whose 95% interval holds
0.5 is *at chance*; one that, of the pairs it does not tie, significantly more often
prefers the rejected response has a sign flipped somewhere (``--transform``, the head, the
chat template).

A reward model trained on part of that test file (``scripts/reward_model.py`` trains on
lines 1001-2500) looks better than it is on pairs it saw: ``lines`` keeps the pairs to a
range of line numbers it did not train on, and the sentence names the range.

Transcripts the loader cannot split (``prompts.parse_hh``) are skipped and counted; a pair
whose chosen and rejected conversations differ before the final response is kept (hh-rlhf
has a few; each member is scored as written).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.backends.base import RewardScorer, Scored
from biasscope.core.errors import BiasscopeError, DataError
from biasscope.core.imports import lazy
from biasscope.core.numbers import p_is, percent
from biasscope.data.sources import data_path
from biasscope.sensitivity.prompts import HH_SPLIT, PathLike, _lines, _read, parse_hh
from biasscope.sensitivity.settings import ALPHA, line_range
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.locks import run_lock

sps = lazy("scipy.stats")  # imported at first use


@dataclass(frozen=True)
class Pairs:
    """Chosen/rejected pairs and where they came from (``settings`` go into run.json)."""

    ids: tuple[str, ...]
    chosen: tuple[Scored, ...]
    rejected: tuple[Scored, ...]
    source: str
    sha256: str
    n: int | None
    seed: int
    skipped: int = 0
    lines: tuple[int, int] | None = None  # first and last line number drawn from

    def settings(self) -> dict[str, Any]:
        # Only a run that chose ``lines`` records them: older runs' settings stay as they were.
        return {"source": self.source, "sha256": self.sha256, "n": self.n, "seed": self.seed,
                **({"lines": list(self.lines)} if self.lines else {}),
                "pairs_sha256": hashlib.sha256(json.dumps(
                    [self.ids, self.chosen, self.rejected]).encode("utf-8")).hexdigest()}


def _scored(text: str, where: str) -> Scored:
    turns, _ = parse_hh(text, where)
    return (turns[:-1], turns[-1][1])


def read_hh_pairs(data_dir: PathLike | None = None, n: int | None = 500, seed: int = 0,
                  split_file: str = HH_SPLIT, lines: tuple[int, int] | None = None) -> Pairs:
    """hh-rlhf chosen/rejected pairs, shuffled by ``seed``, the first ``n`` (None: all);
    with ``lines`` only those from that range of line numbers."""
    if n is not None and n < 1:
        raise BiasscopeError(f"sanity pairs: n must be 1 or more, got {n}")
    path = data_path("hh-rlhf", split_file, data_dir)
    raw = _read(path)
    rows: list[tuple[str, Scored, Scored]] = []
    skipped = 0
    stem = split_file.removesuffix(".gz").removesuffix(".jsonl").replace("/", ":")
    for number, line in _lines(path, raw):
        if lines and not lines[0] <= number <= lines[1]:
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise DataError(f"{where}: not valid JSON; replace the file with a fresh copy"
                            ) from None
        if not isinstance(record, dict) or not all(
                isinstance(record.get(k), str) for k in ("chosen", "rejected")):
            raise DataError(f"{where}: expected hh-rlhf lines {{\"chosen\": ..., "
                            "\"rejected\": ...}")
        try:
            pair = (_scored(record["chosen"], where), _scored(record["rejected"], where))
        except DataError:
            skipped += 1
            continue
        rows.append((f"hh-rlhf:{stem}:{number}", *pair))
    within = f" lines {lines[0]}-{lines[1]}" if lines else ""
    if not rows:
        raise DataError(f"{path}{within}: no usable chosen/rejected pair")
    random.Random(seed).shuffle(rows)
    rows = rows if n is None else rows[:n]
    return Pairs(tuple(r[0] for r in rows), tuple(r[1] for r in rows),
                 tuple(r[2] for r in rows), f"hh-rlhf:{stem}{within}",
                 hashlib.sha256(raw).hexdigest(), n, seed, skipped, lines)


def score_pairs(model: RewardScorer, pairs: Pairs) -> dict[str, list[Any]]:
    """The rewards of both members of every pair (one batch), as stored in ``sanity.json``."""
    rewards = model.score([*pairs.chosen, *pairs.rejected])
    k = len(pairs.ids)
    return {"ids": list(pairs.ids), "chosen": rewards[:k], "rejected": rewards[k:]}


def accuracy(chosen: Sequence[float], rejected: Sequence[float], confidence: float = 0.95
             ) -> dict[str, Any]:
    """Share of pairs with chosen > rejected: its exact (Clopper-Pearson) CI at
    ``confidence`` and the exact test against 0.5, Cohen's h, the ties, and a verdict at
    `ALPHA`: ``above chance`` (the exact interval at 1 − α above 0.5), ``below chance`` (of
    the pairs not tied, significantly more prefer the rejected response: a sign flipped),
    ``at chance``, or ``too few pairs`` (fewer than `MIN_PAIRS`, when it is not shown either
    way). Exact, not Wilson's interval: Wilson's
    says "above" or "below" when a model is at chance up to 6.5% of the time (50 pairs), and
    with 4 of 4 pairs won. Ties are failures of the share (RewardBench) but no evidence of a
    flipped sign: a model that ties a fifth of the pairs and is otherwise at chance has its
    share below 0.5 without preferring the rejected responses."""
    both = [(c, r) for c, r in zip(chosen, rejected) if math.isfinite(c) and math.isfinite(r)]
    n = len(both)
    hits = sum(c > r for c, r in both)
    losses = sum(c < r for c, r in both)
    out: dict[str, Any] = {"estimate": math.nan, "low": math.nan, "high": math.nan, "n": n,
                           "correct": hits, "ties": n - hits - losses}
    if n == 0:
        return {**out, "p_value": math.nan, "effect_size": math.nan, "verdict": "not scored"}
    test = sps.binomtest(hits, n, 0.5)
    ci = test.proportion_ci(confidence, method="exact")
    out.update(estimate=hits / n, low=float(ci.low), high=float(ci.high),
               p_value=float(test.pvalue))
    out["effect_size"] = 2 * math.asin(math.sqrt(hits / n)) - 2 * math.asin(math.sqrt(0.5))
    flipped = losses > hits and sps.binomtest(losses, hits + losses, 0.5).pvalue < ALPHA
    above = test.proportion_ci(1 - ALPHA, method="exact").low > 0.5
    out["verdict"] = "above chance" if above else "below chance" if flipped else "at chance"
    if out["verdict"] == "at chance" and n < MIN_PAIRS:
        out["verdict"] = "too few pairs"
    return out


def _could_beat_chance(n: int) -> bool:
    """Whether n pairs all won would show a model above chance: the exact interval's lower
    end above 0.5, that is the two-sided exact test of n of n at one half, 2 / 2**n, below
    `ALPHA` (here without importing SciPy)."""
    return min(1.0, 2 * 0.5 ** n) < ALPHA


#: The fewest pairs that could show a reward model above chance (6): with fewer, "at chance"
#: would only say that the pairs were few.
MIN_PAIRS = next(n for n in range(1, 100) if _could_beat_chance(n))


def sanity_sentence(model: str, acc: dict[str, Any], source: str, confidence: float = 0.95
                    ) -> str:
    """One line per reward model, its interval said at ``confidence`` (the one `accuracy`
    gave); a warning when it is not above chance."""
    if not acc["n"]:
        return f"{model}: no {source} pair was scored."
    test = (f"exact test against 50% {p_is(acc['p_value'])}, Cohen's h = "
            f"{acc['effect_size']:+.2f}" + (f"; {acc['ties']} ties" if acc["ties"] else ""))
    share = percent(acc["estimate"], acc["low"], acc["high"], confidence, extra=test)
    text = (f"{model}: prefers the chosen response in {acc['correct']} of {acc['n']} {source} "
            f"pairs, {share}.")
    if acc["verdict"] == "too few pairs":
        many = "pairs are" if acc["n"] != 1 else "pair is"
        text += (f" {acc['n']} {many} too few to tell whether it beats chance (at least "
                 f"{MIN_PAIRS} are needed, even if it won every one): score more "
                 "(--sanity-pairs, --sanity-lines).")
    elif acc["verdict"] == "at chance":
        text += (" WARNING: this reward model is at chance on held-out preferences; its "
                 "sensitivities may measure noise, not values.")
    elif acc["verdict"] == "below chance":
        text += (" WARNING: it prefers the rejected responses: check the reward's sign "
                 "(--transform, the classifier head, the chat template) before reading "
                 "its sensitivities.")
    return text


def run_sanity(store: RunStore, models: Sequence[RewardScorer], pairs: Pairs) -> None:
    """Score the pairs with every model not yet in ``sanity.json`` (a rerun scores nothing
    twice; run.json's ``sanity`` setting guarantees the stored pairs are these)."""
    path = store.root / "sanity.json"

    def stored() -> dict[str, Any]:
        found = store.read_json("sanity.json") if path.is_file() else {}
        if found.get("settings") != pairs.settings():
            found = {"settings": pairs.settings(), "skipped": pairs.skipped, "models": {}}
        return found

    # Scored outside the run's lock (a model scores for a while), merged under it: another
    # run into this --out may have stored its models meanwhile.
    scored = {m.label: score_pairs(m, pairs) for m in models if m.label not in
              stored()["models"]}
    with run_lock(store):
        now = stored()
        fresh = {label: s for label, s in scored.items() if label not in now["models"]}
        now["models"].update(fresh)
        if fresh or not path.is_file():
            write_json(path, now)


def summarise_sanity(stored: dict[str, Any], confidence: float = 0.95) -> dict[str, Any]:
    """``summary.json``'s ``sanity``: per model the accuracy (its interval at
    ``confidence``, its verdict at ``alpha``, `ALPHA`), and the sentences."""
    source = str(stored.get("settings", {}).get("source", "held-out"))
    models = {label: accuracy(s["chosen"], s["rejected"], confidence)
              for label, s in stored.get("models", {}).items()}
    return {"source": source, "skipped": stored.get("skipped", 0), "alpha": ALPHA,
            "models": models,
            "sentences": [sanity_sentence(m, a, source, confidence)
                          for m, a in models.items()]}


__all__ = ["Pairs", "accuracy", "line_range", "read_hh_pairs", "run_sanity", "sanity_sentence",
           "score_pairs", "summarise_sanity"]
