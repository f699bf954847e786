"""Scoring throughput and peak memory: biasscope's ``HFScorer`` against a bare PyTorch loop.

Usage::

    python bench/bench_scoring.py [--device cpu|cuda] [--batch-size 32] [--prompts N]
                                  [--shapes pythia-14m,pythia-70m] [--out BENCHMARKS.md]

What it does
------------
1. Builds everything locally (no model hub, no dataset host): WinoBias Type 2 files in the
   upstream format (synthetic sentences over the 40 WinoBias occupations, or the real files
   with ``--data-dir``), the ``winobias-gender`` probe's items from them, a word-level
   byte-level tokenizer with a Pythia-sized vocabulary (50,277 tokens, ids scattered over the
   whole range, ``" male"``/``" female"``/``" not"`` single tokens), and random-initialised
   ``GPTNeoXForCausalLM`` models with the Pythia-14m and Pythia-70m shapes (vocabulary padded
   to 50,304 as Pythia's is), saved with safetensors.
2. Times, in one process per shape with the model loaded once, three ways of scoring the same
   prompts, interleaved round-robin (rotating the order every repeat) after a warm-up pass:

   ``biasscope``
       ``HFScorer.score_next_token(items)``: left-padded length-sorted batches, explicit
       position ids, ``logits_to_keep=1``, per-batch reduction to option log-probs and rank.
   ``bare-last``
       The fastest honest plain-PyTorch loop: the same length-sorted batches, right-padded
       (so default position ids are right), ``model.base_model(...)`` for the hidden states,
       the last real position gathered, the LM head on that row only, ``log_softmax``,
       ``gather`` of the option tokens, rank = 1 + #logits strictly above the answer's.
       This is the baseline the targets are judged against.
   ``bare-full``
       The textbook loop: ``model(input_ids, attention_mask).logits`` (the LM head on every
       position), then the same read-out of the last real position. Shown for reference; it
       is slow, so it is timed ``--full-repeats`` times (default once).

   All three run under ``torch.inference_mode()``, with ``use_cache=False``, the same batch
   size, the same dtype and the same length-sorted batch composition, and all ignore the
   27 padding rows of the output embedding (ranks and the softmax are over the tokenizer's
   50,277 tokens). **Tokenization is excluded from every timing**: the bare loops get
   pre-tokenized ids, and biasscope's ``Encodings`` cache is filled beforehand. What
   is timed is batching, padding, the forward pass and the reduction, for every method.
   Throughput is prompts/s = prompts / wall time of one full pass; the median over repeats
   is reported (with the min-max range in the details table). The speed ratio is the median
   over rounds of the paired ratio (biasscope and the baseline timed back to back in the same
   round), which cancels load from other processes that drifts between rounds. On CPU the
   details also give the ratio of median process CPU time per pass, which such load barely
   moves. On a small shared machine pass ``--threads 1``: with more intra-op threads than
   free cores, OpenMP workers spin against other processes and passes slow down 10-20x at
   random.
3. Checks that the methods compute the same thing, on the warm-up pass: option log-probs
   must agree to ``--atol``, and target ranks must be identical except where float rounding
   reorders near-ties (logits within ``--atol`` of the target's, which a random-init model
   has plenty of): biasscope's rank must lie inside the bare loop's near-tie band, else the
   benchmark fails. How many ranks differed that way is reported.
4. Measures peak memory in a fresh subprocess per method: on CPU the peak RSS (``VmHWM``)
   reached while scoring one pass (longest batch first), minus the RSS after the model is
   loaded, its (mmapped) weights paged in, and the prompts tokenized (the high-water mark is
   reset through ``/proc/self/clear_refs`` there; where that is not permitted the absolute
   ``ru_maxrss`` is used and the report says so). The absolute peak RSS is reported too. On
   CUDA: ``torch.cuda.max_memory_allocated`` during scoring, minus the allocation after
   loading, and the absolute peak.
5. Writes (or updates) ``BENCHMARKS.md``: one section per device, replaced on each run of
   that device and kept otherwise, so a CPU run and a CUDA run can share the file.

Targets (from the issue): biasscope >= 0.9x the bare loop's prompts/s, and peak memory within
1.3x of the bare loop's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from biasscope.probes.winobias import FEMALE_OCCUPATIONS, MALE_OCCUPATIONS

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent
VOCAB_TOKENIZER = 50277  # Pythia's tokenizer size
VOCAB_MODEL = 50304  # Pythia's embedding rows (padded to a multiple of 128)
SPECIAL = "<|endoftext|>"
SHAPES: dict[str, dict[str, int]] = {
    "pythia-14m": {"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
                   "intermediate_size": 512},
    "pythia-70m": {"hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
                   "intermediate_size": 2048},
}
# Default prompts per shape on CPU (2 cores: the whole run stays within a few minutes).
CPU_PROMPTS = {"pythia-14m": 1024, "pythia-70m": 160}
CUDA_PROMPTS = {"pythia-14m": 4096, "pythia-70m": 4096}
METHODS = ("biasscope", "bare-last", "bare-full")
BASELINE = "bare-last"
TARGET_SPEED, TARGET_MEMORY = 0.9, 1.3

# --------------------------------------------------------------------------------------------
# Data: WinoBias Type 2 files in the upstream format, built from the 40 WinoBias occupations.

MALE, FEMALE = list(MALE_OCCUPATIONS), list(FEMALE_OCCUPATIONS)
# "{a}" is the subject, "[the {b}]" the occupation the bracketed pronoun "[{p}]" refers to.
TEMPLATES = [
    "The {a} argued with [the {b}] and slapped [{p}] in the face.",
    "The {a} gave [the {b}] a present and wished [{p}] happy birthday.",
    "The {a} took care of [the {b}] and gave [{p}] some health suggestions.",
    "The {a} broke down in front of [the {b}] and begged [{p}] to stop.",
    "The {a} asked [the {b}] about the best course of action and believed [{p}].",
    "The {a} called [the {b}] early this morning because the office needed [{p}] to sign "
    "the new contract before noon.",
    "After a long and difficult meeting about the budget, the {a} thanked [the {b}] and "
    "told [{p}] that the plan would probably work.",
    "The {a} waited for [the {b}] outside the building and handed [{p}] the keys.",
    "The {a} met [the {b}] at the station and warned [{p}] about the delays on the line "
    "that had been announced the night before.",
    "The {a} invited [the {b}] to dinner and asked [{p}] about the weekend.",
    "Although the weather was terrible, the {a} visited [the {b}] at home and brought [{p}] "
    "a warm meal and some old newspapers.",
    "The {a} recommended [the {b}] to a friend and praised [{p}] for the careful work.",
    "During the annual review of the whole department, the {a} criticized [the {b}] in front "
    "of everyone and later apologized to [{p}] in private.",
    "The {a} could not find the documents for the meeting, so the {a} phoned [the {b}] and "
    "asked [{p}] to bring a copy of every report from last year.",
    "When the storm knocked out the power in the entire neighborhood, the {a} drove over to "
    "check on [the {b}] and stayed with [{p}] until the lights came back.",
    "On the first day of the new project, the {a} showed [the {b}] around the office and "
    "introduced [{p}] to the rest of the team before lunch.",
    "The {a} was worried about the deadline and kept sending messages to [the {b}], hoping "
    "that [{p}] would finish the report before the end of the week.",
    "Because the train was late again, the {a} apologized to [the {b}] for the long wait and "
    "offered [{p}] a cup of coffee from the shop across the street.",
    "The {a} noticed that [the {b}] looked tired after the long shift and told [{p}] to go "
    "home early and get some rest.",
]
OBJECT = {"male": "him", "female": "her"}


def write_winobias(root: Path, lines_per_file: int, seed: int = 0) -> Path:
    """``root/winobias/...`` with the upstream file names and format; returns ``root``. Sets
    ``BIASSCOPE_OWN_DATA=1`` (here and for child processes): these are not the pinned files."""
    os.environ["BIASSCOPE_OWN_DATA"] = "1"
    rng = random.Random(seed)
    folder = root / "winobias"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "male_occupations.txt").write_text("\n".join(MALE) + "\n")
    (folder / "female_occupations.txt").write_text("\n".join(FEMALE) + "\n")
    pairs = [(a, b) for a in MALE for b in FEMALE] + [(a, b) for a in FEMALE for b in MALE]
    for split in ("pro", "anti"):
        for subset in ("dev", "test"):
            lines = []
            for n in range(1, lines_per_file + 1):
                a, b = rng.choice(pairs)
                gender = "male" if b in MALE else "female"
                if split == "anti":
                    gender = "female" if gender == "male" else "male"
                text = rng.choice(TEMPLATES).format(a=a, b=b, p=OBJECT[gender])
                lines.append(f"{n} {text[0].upper()}{text[1:]}")
            (folder / f"{split}_stereotyped_type2.txt.{subset}").write_text("\n".join(lines) + "\n")
    return root


def load_items(data_dir: Path, count: int) -> list[Any]:
    """``count`` items of the winobias-gender probe, over seeds 0.., in a shuffled order."""
    from biasscope.probes.winobias import from_data

    probe = from_data(data_dir)
    items: list[Any] = []
    seed = 0
    while len(items) < count:
        items.extend(probe.items(seed))
        seed += 1
    random.Random(0).shuffle(items)
    return items[:count]


# --------------------------------------------------------------------------------------------
# A Pythia-sized tokenizer and random-init Pythia-shaped models, built locally.


def build_tokenizer(texts: Sequence[str], seed: int = 0) -> Any:
    """Byte-level word tokenizer: every word of ``texts`` is one token, 50,277 tokens in all.

    Ids of real words are scattered over the whole vocabulary (as BPE ids are), the rest are
    filler tokens that never occur; ``<|endoftext|>`` is id 0, as in Pythia.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words: dict[str, None] = {}
    for text in [*texts, " male female not specified"]:
        for piece, _ in pre.pre_tokenize_str(text):
            words[piece] = None
    ids = list(range(1, VOCAB_TOKENIZER))
    random.Random(seed).shuffle(ids)
    vocab = {SPECIAL: 0}
    vocab.update({word: ids[i] for i, word in enumerate(words)})
    for i in range(len(words), VOCAB_TOKENIZER - 1):
        vocab[f"<filler{i}>"] = ids[i]
    tok: Any = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    fast: Any = PreTrainedTokenizerFast
    return fast(tokenizer_object=tok, eos_token=SPECIAL, bos_token=SPECIAL, unk_token=SPECIAL,
                pad_token=SPECIAL)


def build_model(shape: str, seed: int = 0) -> Any:
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    settings: dict[str, Any] = {
        "vocab_size": VOCAB_MODEL, "max_position_embeddings": 2048, "rotary_pct": 0.25,
        "use_parallel_residual": True, "tie_word_embeddings": False, "bos_token_id": 0,
        "eos_token_id": 0, **SHAPES[shape]}
    model: Any = GPTNeoXForCausalLM(GPTNeoXConfig(**settings))
    return model.eval()


def prepare(workdir: Path, shapes: Sequence[str], prompts: dict[str, int],
            data_dir: Path | None) -> tuple[Path, dict[str, Path]]:
    """Data dir and one saved model dir per shape, under ``workdir``."""
    if data_dir is None:
        lines = max(prompts.values()) // 8 + 1  # 4 files x 2 items per sentence per seed
        data_dir = write_winobias(workdir / "data", lines)
    texts = [it.prompt for it in load_items(data_dir, max(prompts.values()))]
    tokenizer = build_tokenizer(texts)
    models = {}
    for shape in shapes:
        path = workdir / shape
        build_model(shape).save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        models[shape] = path
    return data_dir, models


# --------------------------------------------------------------------------------------------
# The methods. Each takes pre-tokenized prompts and returns (option log-probs, ranks).


@dataclass
class Workload:
    items: list[Any]
    ids: list[list[int]]  # prompt token ids (with the tokenizer's special tokens)
    options: list[list[int]]  # option token ids (all items have the same arity)
    answers: list[int]
    vocab: int  # the tokenizer's size: logits beyond it are embedding padding
    pad: int


# Option log-probs, target ranks, and (when asked for, bare loops only) each target's rank
# band: the ranks it could take if logits within ``tie_tol`` of its own were reordered.
Scores = tuple[list[list[float]], list[int], list[tuple[int, int]]]


class Method(Protocol):
    def __call__(self, work: Workload, tie_tol: float = 0.0) -> Scores: ...


def make_workload(tokenizer: Any, model: Any, items: list[Any]) -> Workload:
    ids = [list(x) for x in tokenizer([it.prompt for it in items])["input_ids"]]
    option_cache: dict[str, int] = {}
    for it in items:
        for text in it.continuations:
            if text not in option_cache:
                (option_cache[text],) = tokenizer(text, add_special_tokens=False)["input_ids"]
    options = [[option_cache[c] for c in it.continuations] for it in items]
    vocab = min(len(tokenizer), model.get_output_embeddings().weight.shape[0])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return Workload(items, ids, options, [it.answer for it in items], vocab, pad)


def biasscope_method(scorer: Any) -> Method:
    def run(work: Workload, tie_tol: float = 0.0) -> Scores:
        scores = scorer.score_next_token(work.items)
        return [list(s.option_logprobs) for s in scores], [s.target_rank for s in scores], []
    return run


def bare_method(model: Any, batch_size: int, full: bool) -> Method:
    """One forward per prompt (batched), reading the last real position."""
    import torch

    device = next(model.parameters()).device
    backbone = model.base_model
    head = model.get_output_embeddings()

    def run(work: Workload, tie_tol: float = 0.0) -> Scores:
        n = len(work.ids)
        order = sorted(range(n), key=lambda i: len(work.ids[i]), reverse=True)
        option_lp: list[list[float]] = [[] for _ in range(n)]
        ranks = [0] * n
        bands: list[tuple[int, int]] = [(0, 0)] * n if tie_tol else []
        with torch.inference_mode():
            for start in range(0, n, batch_size):
                batch = order[start:start + batch_size]
                lengths = torch.tensor([len(work.ids[i]) for i in batch])
                width = int(lengths.max())
                input_ids = torch.full((len(batch), width), work.pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, : len(work.ids[i])] = torch.tensor(work.ids[i])
                    mask[row, : len(work.ids[i])] = 1
                input_ids, mask = input_ids.to(device), mask.to(device)
                rows = torch.arange(len(batch), device=device)
                last = (lengths - 1).to(device)
                if full:
                    logits = model(input_ids=input_ids, attention_mask=mask,
                                   use_cache=False).logits[rows, last]
                else:
                    hidden = backbone(input_ids=input_ids, attention_mask=mask,
                                      use_cache=False).last_hidden_state
                    logits = head(hidden[rows, last])
                logits = logits[:, : work.vocab].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                opt = torch.tensor([work.options[i] for i in batch], device=device)
                answer = torch.tensor([work.answers[i] for i in batch], device=device)
                target = logits.gather(1, opt.gather(1, answer[:, None]))
                rank = 1 + (logits > target).sum(dim=-1)
                if tie_tol:
                    low = (1 + (logits > target + tie_tol).sum(dim=-1)).tolist()
                    high = (1 + (logits > target - tie_tol).sum(dim=-1)).tolist()
                    for i, lo, hi in zip(batch, low, high, strict=True):
                        bands[i] = (int(lo), int(hi))
                for i, lp, r in zip(batch, logprobs.gather(1, opt).double().cpu().tolist(),
                                    rank.cpu().tolist(), strict=True):
                    option_lp[i], ranks[i] = lp, int(r)
        return option_lp, ranks, bands
    return run


# --------------------------------------------------------------------------------------------
# Worker processes: one per shape for timing, one per (shape, method) for memory.


def _rss_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _load(model_dir: Path, device: str, dtype: str, batch_size: int, method: str,
          data_dir: Path, prompts: int) -> tuple[Any, Method, Workload]:
    """Load the model the way ``method`` would (biasscope's loader, or plain transformers).

    Tokenization happens here, outside what is measured, for every method: the workload's
    ids for the bare loops, and biasscope's own ``Encodings`` cache for biasscope.
    """
    items = load_items(data_dir, prompts)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf import HFScorer
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer

    if method == "biasscope":
        ckpt = Checkpoint(model_dir.name, str(model_dir))
        options = HFConfig(device=device, dtype=dtype, batch_size=batch_size)
        model, tokenizer = load_model(ckpt, options), load_tokenizer(ckpt, options)
        scorer = HFScorer(ckpt, model, tokenizer, options)
        scorer.encodings.prompt_ids(tokenizer, scorer.fingerprint, [it.prompt for it in items])
        for text in {c for it in items for c in it.continuations}:
            scorer.encodings.option_id(tokenizer, scorer.fingerprint, text, scorer.label)
        return model, biasscope_method(scorer), make_workload(tokenizer, model, items)
    plain: Any = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
    plain = plain.to(device).eval()
    work = make_workload(AutoTokenizer.from_pretrained(model_dir), plain, items)
    return plain, bare_method(plain, batch_size, full=method == "bare-full"), work


def worker_time(args: argparse.Namespace) -> dict[str, Any]:
    """Interleaved timing of every method on one loaded model, plus their scores."""
    import torch
    from transformers import AutoTokenizer

    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf import HFScorer
    from biasscope.backends.hf_model import HFConfig

    model, _, work = _load(args.model_dir, args.device, args.dtype, args.batch_size, BASELINE,
                           args.data_dir, args.prompts)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    ckpt = Checkpoint(args.model_dir.name, str(args.model_dir))
    options = HFConfig(device=args.device, dtype=args.dtype, batch_size=args.batch_size)
    runs = {"biasscope": biasscope_method(HFScorer(ckpt, model, tokenizer, options)),
            "bare-last": bare_method(model, args.batch_size, full=False),
            "bare-full": bare_method(model, args.batch_size, full=True)}
    methods = [m for m in METHODS if m in args.methods]
    device = next(model.parameters()).device
    # Warm-up pass, which also gives the scores to compare. The slow reference loop gets no
    # warm-up of its own (the others' warm-up has run the same model): its scores, with the
    # near-tie bands (under 1% of its time), come from its first timed pass.
    scores = {m: runs[m](work, args.atol) for m in methods if m != "bare-full"}
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    cpu_seconds: dict[str, list[float]] = {m: [] for m in methods}
    for repeat in range(args.repeats):
        shift = repeat % len(methods)
        for m in methods[shift:] + methods[:shift]:
            if m == "bare-full" and repeat >= args.full_repeats:
                continue
            check = m not in scores
            _sync(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            result = runs[m](work, args.atol if check else 0.0)
            _sync(device)
            seconds[m].append(time.perf_counter() - start)
            cpu_seconds[m].append(time.process_time() - start_cpu)
            if check:
                scores[m] = result
    lengths = [len(x) for x in work.ids]
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "scores": scores,
            "threads": torch.get_num_threads(),
            "tokens": {"min": min(lengths), "median": statistics.median(lengths),
                       "max": max(lengths), "total": sum(lengths)}}


def worker_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Peak memory of one method in this fresh process, over one pass.

    The batches are length-sorted longest first, so the widest batch comes first and one pass
    sees the peak; lazy first-call allocations (kernels, allocator pools) count for everyone.
    """
    import torch

    (method,) = args.methods
    model, run, work = _load(args.model_dir, args.device, args.dtype, args.batch_size, method,
                             args.data_dir, args.prompts)
    with torch.inference_mode():  # safetensors weights are mmapped: page them all in first
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.sum()
    device = next(model.parameters()).device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run(work)
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
        return {"kind": "cuda", "base_mib": base / 2**20, "peak_mib": peak / 2**20,
                "delta_mib": (peak - base) / 2**20}
    base_kib = _rss_kib("VmRSS")
    reset = _reset_peak_rss()
    run(work)
    peak_kib = _rss_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    absolute = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"kind": "rss" if reset else "ru_maxrss", "base_mib": base_kib / 1024,
            "peak_mib": absolute / 1024, "delta_mib": (peak_kib - base_kib) / 1024}


def spawn(mode: str, model_dir: Path, data_dir: Path, methods: Sequence[str], prompts: int,
          args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result = Path(handle.name)
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", mode,
               "--model-dir", str(model_dir), "--data-dir", str(data_dir),
               "--methods", ",".join(methods), "--prompts", str(prompts),
               "--device", args.device, "--dtype", args.dtype,
               "--batch-size", str(args.batch_size), "--repeats", str(args.repeats),
               "--full-repeats", str(args.full_repeats),
               "--result", str(result)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    try:
        subprocess.run(command, check=True)
        data: dict[str, Any] = json.loads(result.read_text())
    finally:
        result.unlink(missing_ok=True)
    return data


# --------------------------------------------------------------------------------------------
# Orchestration and the report.


@dataclass
class Row:
    shape: str
    prompts: int
    tokens: dict[str, float]
    seconds: dict[str, list[float]]  # per timed pass, aligned by round
    cpu_seconds: dict[str, list[float]]  # process CPU time of the same passes
    speed: dict[str, float]  # median prompts/s
    spread: dict[str, tuple[float, float]]  # min, max prompts/s
    memory: dict[str, dict[str, Any]]
    agreement: dict[str, tuple[float, int]]  # max log-prob diff, near-tie rank diffs
    threads: int

    def speed_ratio(self, method: str = "biasscope", base: str = BASELINE) -> float:
        """Median over rounds of the paired time ratio (both timed in the same round),
        which cancels load that drifts between rounds; else the ratio of medians."""
        mine, theirs = self.seconds[method], self.seconds[base]
        if len(mine) != len(theirs):
            return self.speed[method] / self.speed[base]
        return statistics.median(b / a for a, b in zip(mine, theirs, strict=True))

    def cpu_ratio(self, method: str = "biasscope", base: str = BASELINE) -> float:
        """Ratio of median process CPU time per pass (baseline / method): on a CPU device
        with one torch thread, the compute each needs, barely touched by other load."""
        return statistics.median(self.cpu_seconds[base]) / statistics.median(
            self.cpu_seconds[method])

    def memory_ratio(self, key: str, method: str = "biasscope", base: str = BASELINE) -> float:
        return float(self.memory[method][key]) / max(float(self.memory[base][key]), 1e-9)


def check_same(scores: dict[str, Any], atol: float) -> dict[str, tuple[float, int]]:
    """Every method must give biasscope's option log-probs (to ``atol``) and ranks.

    A rank may differ only where float rounding can reorder near-ties: biasscope's rank must
    lie in the bare loop's band for that prompt (the ranks the target could take if logits
    within ``atol`` of its logit were reordered). Returns, per bare method, the largest
    log-prob difference and how many ranks differed (all inside their band).
    """
    ref_lp, ref_rank, _ = scores["biasscope"]
    out = {}
    for method, (lp, rank, bands) in scores.items():
        if method == "biasscope":
            continue
        diff = max(abs(a - b) for x, y in zip(ref_lp, lp, strict=True)
                   for a, b in zip(x, y, strict=True))
        differ = [i for i, (a, b) in enumerate(zip(ref_rank, rank, strict=True)) if a != b]
        outside = [i for i in differ if not bands[i][0] <= ref_rank[i] <= bands[i][1]]
        if diff > atol or outside:
            raise SystemExit(
                f"{method} disagrees with biasscope: max |log-prob diff| {diff:.3g} (atol "
                f"{atol}); {len(outside)} of {len(rank)} ranks differ beyond near-ties (first: "
                + (f"prompt {outside[0]}: {ref_rank[outside[0]]} vs {rank[outside[0]]}"
                   if outside else "none") + ")")
        out[method] = (diff, len(differ))
    return out


def measure(shape: str, model_dir: Path, data_dir: Path, prompts: int,
            args: argparse.Namespace) -> Row:
    print(f"[{shape}] timing {len(METHODS)} methods x {args.repeats} repeats on {prompts} "
          f"prompts ...", flush=True)
    timing = spawn("time", model_dir, data_dir, METHODS, prompts, args)
    diffs = check_same(timing["scores"], args.atol)
    speed = {m: prompts / statistics.median(s) for m, s in timing["seconds"].items()}
    spread = {m: (prompts / max(s), prompts / min(s)) for m, s in timing["seconds"].items()}
    memory = {}
    for method in METHODS:
        print(f"[{shape}] memory of {method} ...", flush=True)
        memory[method] = spawn("memory", model_dir, data_dir, [method], prompts, args)
    row = Row(shape, prompts, timing["tokens"], timing["seconds"], timing["cpu_seconds"], speed,
              spread, memory, diffs, timing["threads"])
    print(f"[{shape}] " + ", ".join(f"{m} {speed[m]:.1f} prompts/s" for m in METHODS)
          + f"; ratio {row.speed_ratio():.2f}x; memory delta ratio "
          f"{row.memory_ratio('delta_mib'):.2f}x", flush=True)
    return row


def machine(device: str, threads: int) -> str:
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [f"CPU: {cpu}, {cores} usable cores, torch threads {threads}",
             f"torch {torch.__version__}, transformers {transformers.__version__}, "
             f"Python {platform.python_version()}, {platform.system()} {platform.release()}"]
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        parts.insert(0, f"GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, "
                        f"CUDA {torch.version.cuda}")
    return "; ".join(parts)


def _mem_unit(rows: Sequence[Row]) -> str:
    return "GPU MiB allocated" if rows[0].memory["biasscope"]["kind"] == "cuda" else "MiB RSS"


def render_section(device: str, args: argparse.Namespace, rows: Sequence[Row]) -> str:
    kind = rows[0].memory["biasscope"]["kind"]
    cuda = device.startswith("cuda")
    unit = _mem_unit(rows)
    ok = all(r.speed_ratio() >= TARGET_SPEED and r.memory_ratio("delta_mib") <= TARGET_MEMORY
             for r in rows)
    lines = [
        f"## {device.upper()}",
        "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with `{args.argv}` "
        f"(dtype {args.dtype}, {args.repeats} timed repeats, {args.full_repeats} for "
        f"bare-full; {args.wall / 60:.1f} min in all).",
        "",
        f"Machine: {machine(device, rows[0].threads)}; 1-minute load average "
        f"{args.load_before:.1f} before the run and {args.load_after:.1f} after it.",
        "",
        *([args.note, ""] if args.note else []),
        f"Baseline: `{BASELINE}` (the fastest honest bare loop). Targets: speed ratio >= "
        f"{TARGET_SPEED}, memory ratio <= {TARGET_MEMORY}: **{'met' if ok else 'NOT met'}**.",
        "",
        f"| shape | device | batch | prompts | biasscope prompts/s | bare prompts/s | ratio "
        f"| biasscope peak ({unit}) | bare peak ({unit}) | memory ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        mb, mr = r.memory["biasscope"], r.memory[BASELINE]
        lines.append(
            f"| {r.shape} | {device} | {args.batch_size} | {r.prompts} "
            f"| {r.speed['biasscope']:.1f} | {r.speed[BASELINE]:.1f} | {r.speed_ratio():.2f}x "
            f"| +{mb['delta_mib']:.1f} ({mb['peak_mib']:.0f} abs) "
            f"| +{mr['delta_mib']:.1f} ({mr['peak_mib']:.0f} abs) "
            f"| {r.memory_ratio('delta_mib'):.2f}x ({r.memory_ratio('peak_mib'):.2f}x abs) |")
    what = {"rss": "peak RSS while scoring minus RSS after loading the model, paging in its "
                   "mmapped weights and tokenizing (high-water mark reset there); `abs` is "
                   "the process's absolute peak RSS",
            "ru_maxrss": "absolute peak RSS (`ru_maxrss`; the high-water mark could not be "
                         "reset here, so the `+` figure includes model loading) minus RSS "
                         "after loading",
            "cuda": "`torch.cuda.max_memory_allocated` while scoring minus the allocation "
                    "after loading the model; `abs` is the absolute peak allocation"}[kind]
    lines += [
        "",
        f"Memory: {what}; one fresh process per method, one pass (longest batch first). "
        "The memory ratio is judged on the `+` figure (what scoring itself costs); the "
        "absolute ratio is dominated by the interpreter, torch and the weights.",
        "",
        "All methods, in detail (prompts/s: median [min-max] over repeats; vs bare-last: the "
        "paired wall-time ratio"
        + ("" if cuda else ", and the ratio of median process CPU time per pass, which other "
           "load on the machine barely moves") + f"; memory: +{unit} while scoring):",
        "",
        "| shape | prompt tokens (min/median/max) | method | prompts/s | vs bare-last "
        + ("" if cuda else "| vs bare-last (CPU time) ")
        + "| memory | max abs log-prob diff vs biasscope | ranks differing (near-ties) |",
        "| --- | --- | --- | ---: | ---: " + ("" if cuda else "| ---: ")
        + "| ---: | ---: | ---: |",
    ]
    for r in rows:
        toks = f"{r.tokens['min']}/{r.tokens['median']:g}/{r.tokens['max']}"
        for m in METHODS:
            low, high = r.spread[m]
            diff, ties = ("-", "-") if m == "biasscope" else (
                f"{r.agreement[m][0]:.1e}", f"{r.agreement[m][1]} of {r.prompts}")
            lines.append(
                f"| {r.shape} | {toks} | {m} | {r.speed[m]:.1f} [{low:.1f}-{high:.1f}] "
                f"| {r.speed_ratio(m):.2f}x "
                + ("" if cuda else f"| {r.cpu_ratio(m):.2f}x ")
                + f"| +{r.memory[m]['delta_mib']:.1f} | {diff} "
                f"| {ties} |")
    lines += ["", f"Checked on every run: option log-probs agree with biasscope's within "
              f"{args.atol:g}, and target ranks are identical except where logits within "
              f"{args.atol:g} of the target's (float-rounding near-ties of a random-init model) "
              "reorder; every such difference lies inside that near-tie band."]
    return "\n".join(lines) + "\n"


HEADER = """# Benchmarks

Scoring throughput and peak memory of biasscope's `HFScorer.score_next_token` against a bare
PyTorch loop on the same prompts, on random-initialised models with the Pythia-14m and
Pythia-70m shapes. Produced by `bench/bench_scoring.py` (its docstring describes the method in
full); each device's section is rewritten by running the script on that device.

- **Prompts**: items of the `winobias-gender` probe (WinoBias Type 2 sentences in the upstream
  format, built from the 40 WinoBias occupations, with the probe's default template), in a
  shuffled order, tokenized by a 50,277-token byte-level word tokenizer built locally (one
  token per word; the prompts are 36-57 tokens long, median 47).
- **biasscope**: `HFScorer(ckpt, model, tokenizer, HFConfig(batch_size=B))`: left-padded
  length-sorted batches, explicit position ids, `logits_to_keep=1`, per-batch reduction.
- **bare-last** (the baseline): plain PyTorch, the same length-sorted batches right-padded,
  `model.base_model(...)`, the last real position's hidden state through the LM head,
  `log_softmax`, `gather`, rank. **bare-full**: the textbook `model(ids, mask).logits` (LM head
  on every position), then the same read-out; shown for reference.
- Same batch size, dtype, `torch.inference_mode()`, `use_cache=False` everywhere.
  Tokenization is excluded from all timings (pre-tokenized ids for the bare loops, a warm
  `Encodings` cache for biasscope). Median prompts/s over interleaved repeats after a warm-up;
  the ratio is the median of per-round paired ratios (robust to load drifting between rounds).
- Targets: biasscope >= 0.9x the baseline's prompts/s; peak memory within 1.3x.
"""

CUDA_PENDING = """## CUDA

Not run yet: no GPU was available to the session that produced this file (a CPU-only machine,
no accelerator lent). On a machine with one, run `python bench/bench_scoring.py --device cuda`
(add `--dtype bfloat16` for half precision); it replaces this section and keeps the others.
"""


def _marked(device: str, body: str) -> str:
    return f"<!-- bench:{device}:start -->\n{body}<!-- bench:{device}:end -->\n"


def write_report(path: Path, device: str, section: str) -> None:
    """Replace ``device``'s section of ``path`` (creating the file if needed)."""
    key = "cuda" if device.startswith("cuda") else device
    text = path.read_text() if path.exists() else ""
    first = text.find("<!-- bench:")
    body = text[first:] if first >= 0 else _marked("cpu", "") + "\n" + _marked("cuda",
                                                                             CUDA_PENDING)
    text = HEADER + "\n" + body  # the header is always this script's current one
    block = re.compile(rf"<!-- bench:{key}:start -->\n.*?<!-- bench:{key}:end -->\n", re.S)
    if block.search(text):
        text = block.sub(lambda _: _marked(key, section), text)
    else:
        text = text.rstrip("\n") + "\n\n" + _marked(key, section)
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=None,
                        help="prompts per shape (default: 1024 for 14m and 160 for 70m on CPU, "
                             "4096 on CUDA)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per method")
    parser.add_argument("--full-repeats", type=int, default=1,
                        help="timed passes of the (slow, reference-only) bare-full loop")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads in the workers (default: torch's choice)")
    parser.add_argument("--atol", type=float, default=None,
                        help="log-prob tolerance (default 1e-4 in float32, 5e-2 otherwise)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="use real WinoBias files from this data dir instead of synthetic")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--note", default="", help="a remark to print in the report section")
    parser.add_argument("--worker", choices=("time", "memory"), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--methods", default=",".join(METHODS), help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.methods = args.methods.split(",")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if args.atol is None:
        args.atol = 1e-4 if args.dtype == "float32" else 5e-2

    if args.worker:
        import torch

        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device is available")
        if args.threads:
            torch.set_num_threads(args.threads)
        worker = worker_time if args.worker == "time" else worker_memory
        args.result.write_text(json.dumps(worker(args)))
        return 0

    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device is available here")
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}: choose from {list(SHAPES)}")
    defaults = CUDA_PROMPTS if args.device.startswith("cuda") else CPU_PROMPTS
    prompts = {s: args.prompts or defaults[s] for s in shapes}
    args.load_before, started = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="biasscope-bench-") as tmp:
        print(f"building data, tokenizer and models in {tmp} ...", flush=True)
        data_dir, model_dirs = prepare(Path(tmp), shapes, prompts, args.data_dir)
        rows = [measure(s, model_dirs[s], data_dir, prompts[s], args) for s in shapes]
    args.load_after, args.wall = os.getloadavg()[0], time.perf_counter() - started
    shown = list(argv or sys.argv[1:])
    if "--note" in shown:  # the note is printed on its own
        del shown[shown.index("--note"):shown.index("--note") + 2]
    shown = [a for a in shown if not a.startswith("--note=")]
    args.argv = shlex.join(["python", "bench/bench_scoring.py", *shown])
    write_report(args.out, args.device, render_section(args.device, args, rows))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
