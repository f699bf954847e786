"""Train the demo's tiny GPT-NeoX from scratch and save ``checkpoint-<step>`` dirs on the way.

A plain, seeded PyTorch loop (AdamW, warmup then cosine decay) on CPU: the model is a few
hundred thousand parameters, so a GPU would not help. Documents are right-padded per batch (no
packing), so every sequence starts at position 0 as the probe's prompts do. A ``train.json``
written after the last checkpoint marks a finished run: a rerun reuses it, a killed run trains
again from scratch (it is deterministic).

Reproducibility. One thread, whatever the machine: the same torch on the same CPU gives the
same checkpoints bit for bit, and a thread count that followed the machine's cores would not
(2 threads instead of 1 moved the step-355 gap from -0.0609 to -0.0642). Another CPU
(other vector instructions) may round differently, and rounding grows over training; what
that moves, and by how much, is measured in docs/tutorial.md. One thread is also the faster
choice on a shared machine, where a second thread mostly waits for its core.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.demo.corpus import QA_SHARE, SYMMETRIC_GROUP, WHO_SHARE
from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer
from biasscope.probes.winobias import CONTINUATIONS
from biasscope.store.files import write_json

Log = Callable[[str], None]
MARKER = "train.json"
#: What precedes the answer of each kind of question (the gender one, the "who ...?" one).
ANSWERS = ("\nAnswer:", "\nassistant:")


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo. The defaults take about 45 s of CPU time (one thread)."""

    documents: int = 20_000  # training corpus size (steps x batch_size: one epoch)
    qa_share: float = QA_SHARE  # share of documents followed by the gender question
    who_share: float = WHO_SHARE  # share followed by the professional-bias question
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 40
    weight_decay: float = 0.01
    answer_weight: float = 10.0  # loss weight of answer tokens relative to the rest
    hidden: int = 64  # model width
    layers: int = 2
    heads: int = 4
    vocab_size: int = 1024  # an upper bound: the corpus saturates at ~570 (whole words)
    checkpoints: int = 10  # saved at step 0 and log-spaced steps up to ``steps``
    eval_pairings: int = 2  # held-out sentences: 80 per pairing
    seeds: tuple[int, ...] = field(default=(0, 1, 2, 3, 4))  # option-order seeds of the sweep
    threads: int = 1  # a fixed count: other counts sum in another order (see above)

    def checkpoint_steps(self) -> list[int]:
        """Step 0 (chance level), then log-spaced steps: dense early, where bias may emerge."""
        if self.checkpoints < 2 or self.steps < 1:
            raise BiasscopeError("the demo needs at least 2 checkpoints and 1 step")
        first = max(1, self.steps // 64)
        n = self.checkpoints - 1
        ratio = (self.steps / first) ** (1 / max(1, n - 1))
        steps = {0, self.steps} | {round(first * ratio**i) for i in range(n)}
        return sorted(s for s in steps if s <= self.steps)


def _fingerprint(config: DemoConfig, bias: float, seed: int) -> dict[str, Any]:
    return {"bias": bias, "seed": seed, "config": asdict(config)}


def finished(root: Path, config: DemoConfig, bias: float, seed: int) -> list[Path] | None:
    """The checkpoints of a finished training run in ``root``, or None if there is none."""
    marker = root / MARKER
    if not marker.is_file():
        return None
    saved = json.loads(marker.read_text())
    want = _fingerprint(config, bias, seed)
    if {k: saved.get(k) for k in want} != json.loads(json.dumps(want)):
        raise BiasscopeError(
            f"{root} holds a demo trained with other settings (bias {saved.get('bias')}, "
            f"seed {saved.get('seed')}); use another --out")
    dirs = [root / name for name in saved["checkpoints"]]
    if not all((d / "config.json").is_file() for d in dirs):
        return None
    return dirs


def _check_tokens(tokenizer: Any) -> None:
    for text in CONTINUATIONS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise BiasscopeError(f"demo tokenizer splits {text!r} into {len(ids)} tokens; "
                                 "raise vocab_size")


def _lr_factor(step: int, config: DemoConfig) -> float:
    if step < config.warmup:
        return (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def _batches(encoded: Sequence[tuple[list[int], list[float]]], config: DemoConfig, seed: int,
             pad: int, group: int = 1) -> Any:
    """Yield (input_ids, loss weights) per step: shuffled epochs, right-padded.

    Each run of 8 batches is sorted by length first, so batches hold documents of similar
    length and little compute goes to padding. No attention mask is needed: with causal
    attention a real token never sees the padding after it, and padding has weight 0; this
    keeps attention on its fast path. Consecutive documents in runs of ``group`` stay in one
    batch (a neutral corpus's mirrored pairs: every step's gradient is then gender-symmetric).
    """
    import torch

    rng = random.Random(seed)
    size, order, queue = config.batch_size, list[list[int]](), list[list[int]]()
    per_chunk = 8 * size // group
    units = [list(range(i, min(i + group, len(encoded)))) for i in range(0, len(encoded), group)]
    for _ in range(config.steps):
        if not queue:
            while len(order) < per_chunk:
                epoch = list(units)
                rng.shuffle(epoch)
                order += epoch
            chunk = sorted(order[:per_chunk], key=lambda u: max(len(encoded[i][0]) for i in u))
            order = order[per_chunk:]
            flat = [i for unit in chunk for i in unit]
            queue = [flat[i:i + size] for i in range(0, len(flat), size)]
            rng.shuffle(queue)
        rows = [encoded[i] for i in queue.pop()]
        width = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        weights = torch.zeros((len(rows), width))
        for i, (row, weight) in enumerate(rows):
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
            weights[i, :len(row)] = torch.tensor(weight)
        yield ids, weights


def _encode(tokenizer: Any, docs: Sequence[str], answer_weight: float) -> list[
        tuple[list[int], list[float]]]:
    """Token ids (plus end of text) and per-token loss weights: answers count ``answer_weight``."""
    eos = tokenizer.eos_token_id
    out = []
    for doc, enc in zip(docs, tokenizer.backend_tokenizer.encode_batch(list(docs))):
        cut, marker = max((doc.rfind(m), m) for m in ANSWERS)
        start = cut + len(marker) if cut >= 0 else len(doc) + 1
        weights = [answer_weight if lo >= start else 1.0 for lo, _ in enc.offsets]
        out.append(([*enc.ids, eos], [*weights, 1.0]))
    return out


def _loss(logits: Any, ids: Any, weights: Any) -> Any:
    """Weighted next-token cross-entropy (the first token has no prediction, padding weight 0)."""
    import torch

    per_token = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
    w = weights[:, 1:].flatten()
    return (per_token * w).sum() / w.sum()


OnCheckpoint = Callable[[Any, Any, Path, int], None]


def train(root: Path, docs: Sequence[str], config: DemoConfig, bias: float, seed: int,
          log: Log, on_checkpoint: OnCheckpoint | None = None) -> list[Path]:
    """Train on ``docs``, saving ``root/checkpoint-<step>`` at ``config.checkpoint_steps()``;
    ``on_checkpoint(model, tokenizer, saved_dir, step)`` runs right after each save."""
    import numpy as np
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, min(config.threads, os.cpu_count() or 1)))
    try:
        _seed_all(seed, np, torch)
        log(f"training a tokenizer on the corpus (vocabulary of at most "
            f"{num(config.vocab_size)})")
        tokenizer = train_tokenizer(docs, vocab_size=config.vocab_size)
        _check_tokens(tokenizer)
        log("tokenizing the corpus")
        encoded = _encode(tokenizer, docs, config.answer_weight)
        longest = max(len(e[0]) for e in encoded)
        model = tiny_gpt_neox(len(tokenizer), hidden=config.hidden, layers=config.layers,
                              heads=config.heads, max_positions=max(256, 2 * longest),
                              seed=seed)
        # A zero output layer makes step 0 exactly uniform over the vocabulary: the curves
        # start at chance instead of at whatever the random head happens to prefer.
        torch.nn.init.zeros_(model.get_output_embeddings().weight)
        params = sum(p.numel() for p in model.parameters())
        log(f"training a {params / 1e3:.0f}k-parameter GPT-NeoX on {num(len(docs))} documents "
            f"for {config.steps} steps (bias {bias})")
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.95),
                                      weight_decay=config.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: _lr_factor(s, config))
        wanted = config.checkpoint_steps()
        saved = []
        root.mkdir(parents=True, exist_ok=True)
        if 0 in wanted:
            saved.append(save(model, tokenizer, root / "checkpoint-0"))
            if on_checkpoint:
                on_checkpoint(model, tokenizer, saved[-1], 0)
        model.train()
        batches = _batches(encoded, config, seed, tokenizer.pad_token_id,
                           group=SYMMETRIC_GROUP if bias == 0.5 else 1)
        losses: list[float] = []  # since the last checkpoint: one batch's loss is noise
        for step, (ids, weights) in enumerate(batches, start=1):
            loss = _loss(model(input_ids=ids).logits, ids, weights)
            losses.append(loss.item())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if step in wanted:
                saved.append(save(model, tokenizer, root / f"checkpoint-{step}"))
                if on_checkpoint:
                    on_checkpoint(model, tokenizer, saved[-1], step)
                log(f"step {step}/{config.steps}  loss {sum(losses) / len(losses):.3f} (mean "
                    f"of {len(losses)} steps)  saved {saved[-1].name}")
                losses = []
    finally:
        torch.set_num_threads(threads)
    write_json(root / MARKER, {**_fingerprint(config, bias, seed),
                               "checkpoints": [p.name for p in saved]})
    return saved


def _seed_all(seed: int, np: Any, torch: Any) -> None:
    """One seed for Python's, NumPy's and torch's generators: the demo trains the same model."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def stderr_log(quiet: bool) -> Log:
    """Progress lines on stderr, stamped with the seconds since the demo started."""
    start = time.monotonic()

    def log(message: str) -> None:
        if not quiet:
            print(f"demo [{time.monotonic() - start:5.1f}s] {message}", file=sys.stderr,
                  flush=True)
    return log
