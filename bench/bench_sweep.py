"""A sweep at the speed of its scoring: ``run_dynamics`` whole, against the bare loop.

Usage::

    python bench/bench_sweep.py [--device cpu|cuda] [--dtype float32|bfloat16|float16]
        [--shapes pythia-14m,pythia-70m,pythia-410m] [--prompts 512,160,64] [--seeds 1,5]
        [--batch-sizes 32,128] [--repeats 3] [--threads N] [--checkpoints 4]
        [--sweep-shape pythia-70m] [--data-dir /work/data] [--out BENCHMARKS.md]

Defaults: on CPU the Pythia-14m, 70m and 410m shapes (512, 160 and 64 prompts per seed); on
CUDA Pythia-160m, 1.4b and 6.9b (all 3,168 WinoBias items per seed), float32 on CPU and
bfloat16 on CUDA.

What it measures
----------------
Every measurement is a fresh Python process, timed from its start to its exit (``process``),
and inside it:

``biasscope``
    ``run_dynamics`` of one checkpoint over seeds 0..S-1 into a new run directory, with an
    empty fingerprint cache (so the checkpoint's weights are hashed, as on a first run):
    ``work`` is the whole call (fingerprint, load, tokenize, score, unit files and
    ``summary.json``), ``score`` the scoring calls alone (``score_next_token_shared`` less its
    tokenization), ``outside`` = work - score. Its parts are timed as well: the wait for the
    first scorer (what loading costs the sweep), the load in the prefetch thread, the hashing
    (background threads), tokenization, the first batch's check against the plain path, and
    the unit files.
``bare``
    ``bench_scoring.bare_method``, the fastest honest plain PyTorch loop (length-sorted
    batches, the base model, the LM head on each prompt's last position), one pass per seed as
    a sweep without sharing would make: ``work`` is ``from_pretrained`` of model and tokenizer,
    tokenization and the passes; ``score`` the passes alone; ``outside`` its load + tokenize.

Methods alternate within each round (``--repeats`` rounds), and which goes first alternates
from round to round: the figures are medians over rounds and the ratios medians of the
per-round ratios, so load drifting between rounds hits both. On CUDA each case first runs
``--warmup`` unmeasured rounds (default 1; 0 on CPU): on an H200 the first process of a case
scored 1.4b at one seed in 9.1 s and the next, identical one in 3.2 s, a cost that would
otherwise fall on whichever method runs first. Each round's figures are kept (``--save``)
and listed, with the scoring thread's CPU time (``time.thread_time`` around the scoring calls
in each method): on a machine shared with other work, a round that lost the CPU shows as wall
time well above that CPU time. Every child ends as its kind of process would: biasscope's as
the ``biasscope`` command does (what is left frozen at exit,
``cli.main.skip_exit_collection``), the bare loop's as a plain script; the time from a child's
last line to its exit is listed per round.

Agreement: the largest absolute difference of any option log-prob between the two, and how
often they pick the same option (argmax), matched by item and seed.

The multi-checkpoint sweep: ``--checkpoints`` K distinct random-initialised checkpoints of
``--sweep-shape`` (``checkpoint-N`` folders of one training run), swept by ``run_dynamics``
with 5 seeds (or the largest of ``--seeds``) in one fresh process, then analysed and reported
(``write_dynamics_report``); per checkpoint the time its load took in the prefetch thread, the
time the sweep waited for it, and its scoring; against the bare loop over the same
checkpoints one after another. The bound a one-deep prefetch can reach is
``wait_1 + sum max(load_i, score_i-1) + score_K``: the first checkpoint's wait (its imports,
the device's start and its load, which no prefetch hides), then per checkpoint the longer of
its load (read-ahead, load and fault-in in the prefetch thread) and the scoring before it.

Models are random-initialised ``GPTNeoXForCausalLM`` with the Pythia shapes (vocabulary
padded to 50,304) and the 50,277-token word-level tokenizer of ``bench_scoring.py``; prompts
are the first P items of each seed of the ``winobias-gender`` probe on the given data files.
Everything is built locally, under a temporary directory, and deleted at the end. The section
``sweep-<device>`` of ``--out`` is replaced and the rest of the file kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHAPES: dict[str, dict[str, int]] = {
    "pythia-14m": {"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
                   "intermediate_size": 512},
    "pythia-70m": {"hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
                   "intermediate_size": 2048},
    "pythia-160m": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                    "intermediate_size": 3072},
    "pythia-410m": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                    "intermediate_size": 4096},
    "pythia-1.4b": {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
                    "intermediate_size": 8192},
    "pythia-6.9b": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                    "intermediate_size": 16384},
}
DEFAULTS = {"cpu": ("pythia-14m,pythia-70m,pythia-410m", "512,160,64", "float32", "pythia-70m"),
            "cuda": ("pythia-160m,pythia-1.4b,pythia-6.9b", "3168,3168,3168", "bfloat16",
                     "pythia-1.4b")}
TARGET_CPU = ("outside scoring at most 1.3x the bare loop's load + tokenize + 0.5 s; the "
              "whole process of one tiny checkpoint at least 2.8x the bare loop's speed at 5 "
              "seeds and 1.0x at 1 seed")


# --------------------------------------------------------------------------------------------
# Children: each prints one JSON line.


class Clock:
    """Wall time of every call of the wrapped functions, added up per label."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # the calling thread's CPU time
        self.calls: dict[str, list[float]] = {}

    def wrap(self, owner: Any, name: str, label: str) -> None:
        real = getattr(owner, name, None)
        if real is None:  # another version of biasscope (a baseline) may lack it
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return real(*args, **kwargs)
            finally:
                self.add(label, time.perf_counter() - start)
                self.cpu[label] = self.cpu.get(label, 0.0) + time.thread_time() - cpu

        setattr(owner, name, timed)

    def add(self, label: str, seconds: float) -> None:
        self.total[label] = self.total.get(label, 0.0) + seconds
        self.calls.setdefault(label, []).append(seconds)


def _cpu() -> float:
    """This process's CPU time so far, every thread's (imports included)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


class Flops:
    """The work the forward passes actually ran, counted from the model's shape: per call of
    the base model 2 x its non-embedding weights x the tokens in the batch (padding included)
    plus the attention products over every row's full width (a masked SDPA computes all of
    it), and 2 x hidden x vocabulary per row the LM head is applied to."""

    def __init__(self) -> None:
        self.tokens = 0
        self.attention = 0  # sum over calls of layers x hidden x rows x width^2
        self.head_rows = 0
        self.weights = 0
        self.head = 0  # hidden x vocabulary

    def attach(self, model: Any) -> None:
        base = model.base_model
        self.weights = sum(p.numel() for n, p in base.named_parameters() if "embed" not in n)
        config = model.config
        layers, hidden = config.num_hidden_layers, config.hidden_size
        self.head = hidden * model.get_output_embeddings().weight.shape[0]

        def on_base(_: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is not None:
                rows, width = ids.shape[0], ids.shape[-1]
                self.tokens += rows * width
                self.attention += layers * hidden * rows * width * width

        def on_head(_: Any, args: tuple[Any, ...]) -> None:
            self.head_rows += args[0].numel() // args[0].shape[-1]

        base.register_forward_pre_hook(on_base, with_kwargs=True)
        model.get_output_embeddings().register_forward_pre_hook(on_head)

    def count_head(self, owner: Any, name: str) -> None:
        """biasscope's head multiplies by the weight itself: count its rows there."""
        real = getattr(owner, name)

        def counted(head: Any, hidden: Any, *args: Any, **kwargs: Any) -> Any:
            self.head_rows += hidden.shape[0]
            return real(head, hidden, *args, **kwargs)

        setattr(owner, name, counted)

    def total(self) -> dict[str, float]:
        flops = 2 * self.weights * self.tokens + 4 * self.attention + 2 * self.head * \
            self.head_rows
        return {"flops": float(flops), "tokens": float(self.tokens),
                "head_rows": float(self.head_rows)}


def _peak_memory(device: str) -> float:
    if not device.startswith("cuda"):
        return 0.0
    import torch

    return float(torch.cuda.max_memory_allocated())


def _first_items(data: Path, limit: int) -> Any:
    sys.path.insert(0, str(HERE))
    from bench_peers import bench_probe

    return bench_probe(data, limit)


def _time_scorers(clock: Clock) -> None:
    """Time how long the sweep waits for each scorer (the load a prefetch did not hide)."""
    import biasscope.backends.hf as hf

    real = hf.iter_scorers

    def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        inner = real(*args, **kwargs)
        while True:
            start = time.perf_counter()
            try:
                scorer = next(inner)
            except StopIteration:
                return
            clock.add("wait", time.perf_counter() - start)
            yield scorer

    hf.iter_scorers = timed
    import biasscope.dynamics.scoring.sweep as sweep

    if getattr(sweep, "iter_scorers", None) is real:  # the sweep took its own reference
        sweep.iter_scorers = timed


def _clocked() -> Clock:
    import biasscope.backends.hf as hf
    import biasscope.backends.prefix as prefix
    import biasscope.dynamics.scoring.executors as executors
    import biasscope.dynamics.scoring.fingerprints as fingerprints
    import biasscope.dynamics.scoring.sweep as sweep
    from biasscope.store.directory import RunStore

    clock = Clock()
    clock.wrap(hf.HFScorer, "score_next_token_shared", "scoring")
    clock.wrap(hf.HFScorer, "encode_next_token", "tokenize")
    clock.wrap(prefix.SharedScoring, "check", "check")
    for name in ("read_ahead", "load_model", "fault_in", "load_tokenizer"):
        clock.wrap(hf, name, "load")
    clock.wrap(fingerprints, "file_sha256", "hash")
    clock.wrap(fingerprints, "sha256_file", "hash")  # before issue 39
    clock.wrap(sweep, "init_run", "init")
    clock.wrap(executors, "records_frame", "units")
    clock.wrap(RunStore, "write_unit", "units")
    clock.wrap(sweep, "write_summary", "summary")
    _time_scorers(clock)
    return clock


def as_the_command_ends() -> None:
    """biasscope's process ends as the ``biasscope`` command's does (what it leaves is frozen,
    so the shutdown skips its collections; ``cli.main.skip_exit_collection``), where the
    version measured has that. The bare loop's is a plain script's."""
    from biasscope.cli import main as cli

    ending = getattr(cli, "skip_exit_collection", None)
    if ending is not None:
        ending()


def child_biasscope(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring.sweep import run_dynamics

    probe = _first_items(args.data_dir, args.limit)
    clock = _clocked()
    flops = _counted(Flops())
    out = Path(tempfile.mkdtemp(prefix="sweep-run-", dir=args.scratch))
    os.environ["BIASSCOPE_FINGERPRINT_CACHE"] = str(out / "fingerprints.json")  # a first run
    options = HFConfig(device=args.device, dtype=args.dtype, batch_size=args.batch_size)
    start = time.perf_counter()
    store = run_dynamics(probe, [Checkpoint(args.model.name, str(args.model))], out / "run",
                         seeds=range(args.seeds), scoring=options, quiet=True)
    _sync(args.device)
    work = time.perf_counter() - start
    records = store.records()
    scores = {f"{i}": [float(x) for x in lp]
              for i, lp in zip(records["item_id"], records["option_logprobs"])}
    score = clock.total.get("scoring", 0.0) - clock.total.get("tokenize", 0.0)
    score_cpu = clock.cpu.get("scoring", 0.0) - clock.cpu.get("tokenize", 0.0)
    return {"work_s": work, "score_s": score, "score_cpu_s": score_cpu, "parts": clock.total,
            "parts_cpu": clock.cpu,
            "cpu_s": _cpu(), "scores": scores, **flops.total(),
            "peak_bytes": _peak_memory(args.device)}


def _counted(flops: Flops) -> Flops:
    """``flops`` attached to every model biasscope loads, and to its head."""
    import biasscope.backends.head as head
    import biasscope.backends.hf as hf

    real = hf.load_model

    def load(*args: Any, **kwargs: Any) -> Any:
        model = real(*args, **kwargs)
        flops.attach(model)
        return model

    hf.load_model = load
    flops.count_head(head.Head, "scores")
    flops.count_head(head.Head, "logits")
    return flops


def child_bare(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(HERE))
    from bench_scoring import bare_method, make_workload

    probe = _first_items(args.data_dir, args.limit)
    start = time.perf_counter()
    items = [probe.items(seed) for seed in range(args.seeds)]  # as the sweep builds its units'
    from transformers import AutoModelForCausalLM, AutoTokenizer  # as biasscope's load does

    net = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype))
    net = net.to(args.device).eval()
    flops = Flops()
    flops.attach(net)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    run = bare_method(net, args.batch_size, full=False)
    scores: dict[str, list[float]] = {}
    score = score_cpu = 0.0
    for seed_items in items:  # one pass per seed, as a sweep without sharing makes
        work = make_workload(tokenizer, net, seed_items)
        _sync(args.device)
        began, cpu = time.perf_counter(), time.thread_time()
        option_lp, _, _ = run(work)
        _sync(args.device)
        score += time.perf_counter() - began
        score_cpu += time.thread_time() - cpu
        scores.update({it.id: lp for it, lp in zip(seed_items, option_lp)})
    return {"work_s": time.perf_counter() - start, "score_s": score,
            "score_cpu_s": score_cpu, "cpu_s": _cpu(),
            "scores": scores, **flops.total(), "peak_bytes": _peak_memory(args.device)}


def child_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """K checkpoints through run_dynamics, then the analysis and report."""
    import torch

    torch.set_num_threads(args.threads)
    import biasscope.backends.hf as hf
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring.sweep import run_dynamics
    from biasscope.dynamics.summary import write as reporting

    probe = _first_items(args.data_dir, args.limit)
    clock = _clocked()
    per: list[dict[str, float]] = []
    real_read, real_fault, real_score = (hf.read_ahead, hf.fault_in,
                                         hf.HFScorer.score_next_token_shared)

    def read(*a: Any, **k: Any) -> Any:  # a checkpoint's load begins (the prefetch thread)
        per.append({"began": time.perf_counter()})
        return real_read(*a, **k)

    def fault(*a: Any, **k: Any) -> Any:  # ... and ends: read-ahead, load and fault-in
        try:
            return real_fault(*a, **k)
        finally:
            per[-1]["load"] = time.perf_counter() - per[-1].pop("began")

    def scoring(self: Any, *a: Any, **k: Any) -> Any:
        began = time.perf_counter()
        try:
            return real_score(self, *a, **k)
        finally:
            index = next(i for i, p in enumerate(per) if "score" not in p)
            per[index]["score"] = time.perf_counter() - began

    hf.read_ahead, hf.fault_in = read, fault
    hf.HFScorer.score_next_token_shared = scoring  # type: ignore[method-assign]
    out = Path(tempfile.mkdtemp(prefix="sweep-many-", dir=args.scratch))
    os.environ["BIASSCOPE_FINGERPRINT_CACHE"] = str(out / "fingerprints.json")
    options = HFConfig(device=args.device, dtype=args.dtype, batch_size=args.batch_size)
    checkpoints = from_dirs(sorted(args.model.glob("checkpoint-*")))
    start = time.perf_counter()
    store = run_dynamics(probe, checkpoints, out / "run", seeds=range(args.seeds),
                         scoring=options, quiet=True)
    _sync(args.device)
    sweep_s = time.perf_counter() - start
    began = time.perf_counter()
    reporting.write_dynamics_report(store)
    analysis_s = time.perf_counter() - began
    waits = clock.calls.get("wait", [])
    for entry, wait in zip(per, waits):
        entry["wait"] = wait
    return {"sweep_s": sweep_s, "analysis_s": analysis_s, "per": per, "parts": clock.total}


def child_bare_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """The bare loop over the same checkpoints, one after another (load, then every seed)."""
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(HERE))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench_scoring import bare_method, make_workload

    probe = _first_items(args.data_dir, args.limit)
    items = [probe.items(seed) for seed in range(args.seeds)]
    start = time.perf_counter()
    for folder in sorted(args.model.glob("checkpoint-*")):
        net = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, args.dtype))
        net = net.to(args.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        run = bare_method(net, args.batch_size, full=False)
        for seed_items in items:
            run(make_workload(tokenizer, net, seed_items))
        del net
    _sync(args.device)
    return {"sweep_s": time.perf_counter() - start}


CHILDREN: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "biasscope": child_biasscope, "bare": child_bare, "sweep": child_sweep,
    "bare-sweep": child_bare_sweep}


# --------------------------------------------------------------------------------------------
# Parent.


def build(workdir: Path, shape: str, data: Path, device: str, dtype: str, seeds: int,
          count: int = 0) -> Path:
    """A saved model folder of ``shape`` (``count`` > 0: a training run's folder holding
    ``checkpoint-1..count``, each other weights)."""
    sys.path.insert(0, str(HERE))
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from bench_scoring import VOCAB_MODEL, build_tokenizer
    from biasscope.probes.winobias import from_data

    probe = from_data(data)
    tokenizer = build_tokenizer([it.prompt for s in range(seeds) for it in probe.items(s)])
    config = GPTNeoXConfig(vocab_size=VOCAB_MODEL, max_position_embeddings=2048,
                           rotary_pct=0.25, use_parallel_residual=True,
                           tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                           **SHAPES[shape])
    where = "cuda" if device.startswith("cuda") else "cpu"  # a 6.9b initialises in seconds there
    folders = [workdir / shape] if not count else [
        workdir / f"{shape}-run" / f"checkpoint-{i + 1}" for i in range(count)]
    for index, folder in enumerate(folders):
        torch.manual_seed(index)
        with torch.device(where):
            model = GPTNeoXForCausalLM(config).to(getattr(torch, dtype)).eval()
        model.save_pretrained(folder, max_shard_size="10GB")  # files as Pythia's on the hub
        tokenizer.save_pretrained(folder)
        del model
    return folders[0] if not count else folders[0].parent


def spawn(child: str, model: Path, args: argparse.Namespace, seeds: int, batch: int,
          limit: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads),
           "MKL_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", child, "--model",
            str(model), "--device", args.device, "--dtype", args.dtype, "--threads",
            str(args.threads), "--child-seeds", str(seeds), "--batch-sizes", str(batch),
            "--child-limit", str(limit), "--data-dir", str(args.data_dir), "--scratch",
            str(args.scratch)]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{child} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = wall
    result["exit_s"] = max(0.0, time.time() - result.pop("done_at", time.time()))
    return result


def agreement(ours: dict[str, list[float]], theirs: dict[str, list[float]]
              ) -> tuple[float, float]:
    """Largest |option log-prob difference|, and the share of items with the same argmax."""
    common = ours.keys() & theirs.keys()
    if len(common) != len(theirs):
        raise SystemExit(f"only {len(common)} of {len(theirs)} items matched")
    worst, same = 0.0, 0
    for key in common:
        a, b = ours[key], theirs[key]
        worst = max(worst, *(abs(x - y) for x, y in zip(a, b, strict=True)))
        same += a.index(max(a)) == b.index(max(b))
    return worst, same / len(common)


def one_checkpoint(model: Path, shape: str, seeds: int, batch: int, limit: int,
                   args: argparse.Namespace) -> dict[str, Any]:
    for _ in range(args.warmup):  # unmeasured: the first process of a case pays alone
        for method in ("bare", "biasscope"):
            spawn(method, model, args, seeds, batch, limit)
    rounds = []
    for index in range(args.repeats):
        order = ("biasscope", "bare") if index % 2 == 0 else ("bare", "biasscope")
        rounds.append({m: spawn(m, model, args, seeds, batch, limit) for m in order})
        print(json.dumps({k: {m: round(v, 2) for m, v in r.items() if m.endswith("_s")}
                          for k, r in rounds[-1].items()}), file=sys.stderr)

    def med(method: str, key: str) -> float:
        return median(r[method][key] for r in rounds)

    def ratio(key: str) -> float:
        return median(r["bare"][key] / r["biasscope"][key] for r in rounds)

    parts = {name: median(r["biasscope"]["parts"].get(name, 0.0) for r in rounds)
             for name in ("wait", "load", "hash", "tokenize", "check", "units", "summary",
                          "init")}
    outside = {m: median(r[m]["work_s"] - r[m]["score_s"] for r in rounds)
               for m in ("biasscope", "bare")}
    worst, same = agreement(rounds[0]["biasscope"]["scores"], rounds[0]["bare"]["scores"])
    return {"shape": shape, "seeds": seeds, "batch": batch, "prompts": limit,
            "process": {m: med(m, "process_s") for m in ("biasscope", "bare")},
            "cpu": {m: med(m, "cpu_s") for m in ("biasscope", "bare")},
            "work": {m: med(m, "work_s") for m in ("biasscope", "bare")},
            "score": {m: med(m, "score_s") for m in ("biasscope", "bare")},
            "score_cpu": {m: med(m, "score_cpu_s") for m in ("biasscope", "bare")},
            "outside": outside, "parts": parts,
            "ratio": {k: ratio(f"{k}_s") for k in ("process", "work", "score", "score_cpu")},
            "rounds": [{m: {k: v for k, v in r[m].items() if k.endswith("_s")} for m in r}
                       for r in rounds],
            "diff": worst, "argmax": same,
            "flops": {m: rounds[0][m]["flops"] for m in ("biasscope", "bare")},
            "tokens": {m: rounds[0][m]["tokens"] for m in ("biasscope", "bare")},
            "peak_gib": {m: max(r[m]["peak_bytes"] for r in rounds) / 2**30
                         for m in ("biasscope", "bare")}}


def many_checkpoints(run_dir: Path, shape: str, seeds: int, batch: int, limit: int,
                     args: argparse.Namespace) -> dict[str, Any]:
    ours = spawn("sweep", run_dir, args, seeds, batch, limit)
    bare = spawn("bare-sweep", run_dir, args, seeds, batch, limit)
    per = ours["per"]
    return {"shape": shape, "count": len(per), "seeds": seeds, "batch": batch, "prompts": limit,
            "sweep_s": ours["sweep_s"], "analysis_s": ours["analysis_s"],
            "process_s": ours["process_s"], "bare_s": bare["sweep_s"],
            "bare_process_s": bare["process_s"], "per": per, "bound_s": prefetch_bound(per),
            "load_is": "read-ahead, load, fault-in",
            "parts": ours["parts"]}


#: Dense (no sparsity) bf16/fp16 tensor-core peaks from the vendors' data sheets, FLOP/s.
DENSE_PEAK = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L40S": 362.05e12,
              "L4": 121e12}


def machine(args: argparse.Namespace) -> dict[str, Any]:
    """What the section says about where it ran (kept with the results, so that they can be
    rendered elsewhere)."""
    import platform

    import torch
    import transformers

    gpu: dict[str, Any] = {}
    if args.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_gib": props.total_memory / 2**30,
               "cuda": torch.version.cuda}
    return {"gpu": gpu, "cores": len(os.sched_getaffinity(0)), "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "command": "python bench/bench_sweep.py " + " ".join(
                shlex.quote(a) for a in sys.argv[1:]),
            "device": args.device, "dtype": args.dtype, "threads": args.threads,
            "repeats": args.repeats, "warmup": args.warmup}


def peak_of(gpu: dict[str, Any], dtype: str) -> float | None:
    if dtype not in ("bfloat16", "float16"):
        return None
    return next((v for k, v in DENSE_PEAK.items() if k in gpu.get("name", "")), None)


def render(results: dict[str, Any]) -> str:
    m, rows, sweep = results["machine"], results["rows"], results.get("sweep")
    cuda = bool(m["gpu"])
    device = "CUDA" if cuda else "CPU"
    gpu = (f"{m['gpu']['name']} ({m['gpu']['memory_gib']:.0f} GiB), CUDA {m['gpu']['cuda']}; "
           if cuda else "")
    card = f"{m['gpu']['name'].split(' ')[1]}, " if m["gpu"].get("name", "").startswith(
        "NVIDIA ") else ""
    warmup = (f"{m['warmup']} unmeasured round(s) per case, then " if m.get("warmup") else
              "no unmeasured round, " if cuda else "")
    loads = [*results.get("loads", [0.0]), None][:2]
    after = f"{loads[1]:.1f}" if loads[1] is not None else "not read (stopped early)"
    lines = [
        f"## A sweep at the speed of its scoring ({device}, {card}{m['dtype']})", "",
        f"Run {results['started']} UTC with `{m['command'].strip()}` (dtype {m['dtype']}, torch "
        f"threads {m['threads']}, {warmup}{m['repeats']} round(s) alternating the methods: "
        "medians, ratios as medians of the per-round ratios). Produced by "
        "`bench/bench_sweep.py` (its docstring describes the method).", "",
        f"Machine: {gpu}{m['cores']} usable CPU cores; torch {m['torch']}, transformers "
        f"{m['transformers']}, Python {m['python']}; 1-minute load average {loads[0]:.1f} "
        f"before and {after} after.", "",
        "One checkpoint, fresh processes (seconds; `x` = bare / biasscope, above 1 biasscope "
        "is faster; `outside` = work - scoring: for the bare loop its load and tokenization):",
        "",
        "| shape | seeds | batch | prompts/seed | process s (biasscope / bare, x) | process CPU "
        "s (biasscope / bare) | work s (biasscope / bare, x) | scoring s (biasscope / bare, x) "
        "| outside s (biasscope / bare) | outside target s | max abs log-prob diff | same "
        "argmax |",
        "| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        target = 1.3 * r["outside"]["bare"] + 0.5
        mark = "" if r["outside"]["biasscope"] <= target else " (over)"
        lines.append(
            lead(r) + f"{r['prompts']} | "
            f"{r['process']['biasscope']:.2f} / {r['process']['bare']:.2f}, "
            f"{r['ratio']['process']:.2f}x | {r['cpu']['biasscope']:.2f} / "
            f"{r['cpu']['bare']:.2f} | {r['work']['biasscope']:.2f} / "
            f"{r['work']['bare']:.2f}, {r['ratio']['work']:.2f}x | "
            f"{r['score']['biasscope']:.2f} / {r['score']['bare']:.2f}, "
            f"{r['ratio']['score']:.2f}x | {r['outside']['biasscope']:.2f} / "
            f"{r['outside']['bare']:.2f}{mark} | {target:.2f} | {r['diff']:.1e} | "
            f"{100 * r['argmax']:.1f}% |")
    lines += round_table(rows)
    lines += flops_table(rows, peak_of(m["gpu"], m["dtype"]), cuda)
    lines += [
        "", "Where biasscope's time outside scoring goes (seconds, medians; `wait` is what the "
        "sweep waited for its scorer, i.e. the load the prefetch could not hide; `load` ran in "
        "the prefetch thread and `hash` in background threads, beside other work):", "",
        "| shape | seeds | batch | wait | load (thread) | hash (background) | tokenize | "
        "first-batch check | unit files | summary | run.json |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        p = r["parts"]
        lines.append(lead(r) + f"{p['wait']:.2f} | "
                     f"{p['load']:.2f} | {p['hash']:.2f} | {p['tokenize']:.2f} | "
                     f"{p['check']:.2f} | {p['units']:.2f} | {p['summary']:.2f} | "
                     f"{p['init']:.2f} |")
    if sweep is not None:
        lines += sweep_lines(sweep)
    lines += long_sweep(results)
    for failure in results.get("failed", []):
        lines += ["", f"Not measured: {failure}"]
    if results.get("note"):
        lines += ["", results["note"]]
    return "\n".join(lines) + "\n"


def lead(r: dict[str, Any]) -> str:
    """A row's first cells in every table of one measured case: shape, seeds, batch."""
    return f"| {r['shape']} | {r['seeds']} | {r['batch']} | "


def round_table(rows: list[dict[str, Any]]) -> list[str]:
    """Each round's figures, and the scoring's CPU time (the scoring thread's own: what other
    work on a shared machine takes from the wall-clock figures does not count in it)."""
    rows = [r for r in rows if "rounds" in r]
    if not rows:
        return []
    lines = ["", "Each round (biasscope / bare, in the order run), and the scoring thread's CPU "
             "time (medians; `x` the median per-round ratio); `interpreter exit` is from the "
             "child's last line to its exit (biasscope's ends as the `biasscope` command does, "
             "its objects frozen so the shutdown skips its collections):", "",
             "| shape | seeds | batch | scoring CPU s (biasscope / bare, x) | scoring s per round "
             "| process s per round | interpreter exit s per round |",
             "| --- | ---: | ---: | --- | --- | --- | --- |"]

    def each(r: dict[str, Any], key: str) -> str:
        return ", ".join(f"{x['biasscope'].get(key, 0.0):.2f} / {x['bare'].get(key, 0.0):.2f}"
                         for x in r["rounds"])

    for r in rows:
        cpu = r["score_cpu"]
        lines.append(lead(r) +
                     f"{cpu['biasscope']:.2f} / {cpu['bare']:.2f}, "
                     f"{r['ratio']['score_cpu']:.2f}x | {each(r, 'score_s')} | "
                     f"{each(r, 'process_s')} | {each(r, 'exit_s')} |")
    return lines


def flops_table(rows: list[dict[str, Any]], peak: float | None, cuda: bool) -> list[str]:
    """Tokens the forward passes ran and the rate they ran at (see ``Flops``)."""
    if not all("flops" in r for r in rows) or not rows:
        return []
    share = (f" and the share of the GPU's dense {peak / 1e12:.0f} TFLOP/s peak (bf16/fp16, "
             "data sheet)" if peak else "")
    lines = ["", "The forward passes' work, counted from the model shape and the tokens each "
             "method actually ran (padding included; attention over each row's full width; the "
             f"LM head per scored row), and the rate over the scoring time{share}:", "",
             "| shape | seeds | batch | tokens run (biasscope / bare) | TFLOP (biasscope / "
             "bare) | TFLOP/s (biasscope / bare) |" + (" share of peak (biasscope / bare) |"
                                                         if peak else "")
             + (" peak GPU memory GiB (biasscope / bare) |" if cuda else ""),
             "| --- | ---: | ---: | --- | --- | --- |" + (" --- |" if peak else "")
             + (" --- |" if cuda else "")]
    for r in rows:
        rate = {k: r["flops"][k] / r["score"][k] if r["score"][k] else 0.0
                for k in ("biasscope", "bare")}
        line = (lead(r) +
                f"{r['tokens']['biasscope']:,.0f} / {r['tokens']['bare']:,.0f} | "
                f"{r['flops']['biasscope'] / 1e12:.1f} / {r['flops']['bare'] / 1e12:.1f} | "
                f"{rate['biasscope'] / 1e12:.1f} / {rate['bare'] / 1e12:.1f} |")
        if peak:
            line += (f" {100 * rate['biasscope'] / peak:.1f}% / "
                     f"{100 * rate['bare'] / peak:.1f}% |")
        if cuda:
            line += f" {r['peak_gib']['biasscope']:.2f} / {r['peak_gib']['bare']:.2f} |"
        lines.append(line)
    return lines


def prefetch_bound(per: list[dict[str, float]]) -> float:
    """What a sweep with a one-deep prefetch cannot go below: the first checkpoint's wait (no
    prefetch hides it: the imports, the device's start and its load, as for any loop), then
    per later checkpoint the longer of its load and the scoring it hides behind, then the last
    scoring. Scoring counts its tokenization, as the sweep's does."""
    loads, scores = [p["load"] for p in per], [p.get("score", 0.0) for p in per]
    first = per[0].get("wait", loads[0])
    return first + sum(max(loads[i], scores[i - 1]) for i in range(1, len(per))) + scores[-1]


def sweep_lines(sweep: dict[str, Any]) -> list[str]:
    bound = prefetch_bound(sweep["per"])
    lines = [
        "", f"Sweep of {sweep['count']} distinct {sweep['shape']} checkpoints x "
        f"{sweep['seeds']} seeds ({sweep['prompts']} prompts per seed, batch "
        f"{sweep['batch']}), one process, fingerprints not cached: `run_dynamics` "
        f"{sweep['sweep_s']:.2f} s, then the analysis and report {sweep['analysis_s']:.2f} s "
        f"(process {sweep['process_s']:.2f} s); the bare loop over the same checkpoints one "
        f"after another {sweep['bare_s']:.2f} s (process {sweep['bare_process_s']:.2f} s). The "
        f"one-deep prefetch bound from the numbers below (the first checkpoint's wait, then "
        f"per checkpoint the longer of its load and the scoring before it, then the last "
        f"scoring): {bound:.2f} s (`run_dynamics` / bound = {sweep['sweep_s'] / bound:.2f}).",
        "", f"| checkpoint | load s (prefetch thread: {sweep.get('load_is', 'load_model alone')}) "
        "| waited s | scoring s (tokenization included) |",
        "| ---: | ---: | ---: | ---: |"]
    for i, p in enumerate(sweep["per"], 1):
        lines.append(f"| {i} | {p['load']:.2f} | {p.get('wait', 0.0):.2f} | "
                     f"{p.get('score', 0.0):.2f} |")
    return lines


def weight_bytes(shape: str, dtype: str) -> float:
    """The checkpoint's size on disk: Pythia's parameter count for the shape (untied input and
    output embeddings) at the dtype's width."""
    d, layers, inner = (SHAPES[shape][k] for k in ("hidden_size", "num_hidden_layers",
                                                    "intermediate_size"))
    per_layer = 4 * d * d + 2 * d * inner + 9 * d + inner
    width = 4 if dtype == "float32" else 2
    return float((layers * per_layer + 2 * 50304 * d + 2 * d) * width)  # Pythia's padded vocabulary


def long_sweep(results: dict[str, Any], count: int = 154) -> list[str]:
    """What Pythia's whole 154-checkpoint suite would take at the largest shape measured at
    its most seeds: per checkpoint the longer of its load (hidden behind the previous
    checkpoint's scoring) and the rest of its work, the load at the rate the sweep's later
    checkpoints were read (a first load also pays for imports and CUDA's start)."""
    rows, sweep, dtype = results["rows"], results.get("sweep"), results["machine"]["dtype"]
    if not rows:
        return []
    r = max(rows, key=lambda r: (SHAPES[r["shape"]]["hidden_size"], r["seeds"], -r["batch"]))
    size = weight_bytes(r["shape"], dtype)
    later = [p["load"] for p in (sweep or {}).get("per", [])[1:]]
    if later:
        rate = weight_bytes(sweep["shape"], dtype) / median(later)  # type: ignore[index]
        how = (f"read at the {rate / 1e9:.1f} GB/s of the sweep's later checkpoints "
               "(from the page cache: a slower disk raises it)")
    else:
        rate = size / r["parts"]["load"]
        how = "as long as this row's load (imports included)"
    load = size / rate
    rest = r["work"]["biasscope"] - r["parts"]["wait"]
    total = r["parts"]["wait"] + count * max(load, rest)
    return ["", f"A {count}-checkpoint sweep of the {r['shape']} shape at {r['seeds']} "
            f"seed{'s' if r['seeds'] != 1 else ''} "
            f"(batch {r['batch']}, {r['prompts']} prompts per seed), from its row above: the "
            f"first checkpoint's wait ({r['parts']['wait']:.1f} s) plus {count} x max(its load "
            f"{load:.1f} s, {size / 1e9:.1f} GB {how}; the rest of a checkpoint's work "
            f"{rest:.1f} s) = about {total / 60:.0f} min, where a plain loop that loads and then "
            f"scores each one takes about {count * (load + r['score']['bare']) / 60:.0f} min "
            "(load + the bare loop's scoring)."]


def write_section(path: Path, mark: str, section: str) -> None:
    """Replace this benchmark's marked section of ``path``, or append it."""
    text = path.read_text() if path.exists() else ""
    block = f"<!-- bench:{mark}:start -->\n{section}<!-- bench:{mark}:end -->\n"
    pattern = re.compile(rf"<!-- bench:{mark}:start -->\n.*?<!-- bench:{mark}:end -->\n", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else (
        text.rstrip("\n") + "\n\n" + block)
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--prompts", default=None, help="prompts per seed, per shape")
    parser.add_argument("--seeds", default="1,5")
    parser.add_argument("--batch-sizes", default="32,128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=None,
                        help="unmeasured rounds per case before the measured ones (default: 1 "
                        "on CUDA, where a case's first process pays a one-time cost; 0 on CPU)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads in every process (default: 1 on CPU, where more "
                        "threads than free cores make OpenMP spin against other work; the "
                        "usable cores on CUDA)")
    parser.add_argument("--checkpoints", type=int, default=4, help="K of the sweep; 0: none")
    parser.add_argument("--sweep-shape", default=None)
    parser.add_argument("--data-dir", type=Path, default=Path("/work/data"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--note", default="")
    parser.add_argument("--child", choices=sorted(CHILDREN))
    parser.add_argument("--model", type=Path)
    parser.add_argument("--child-seeds", type=int, default=1)
    parser.add_argument("--child-limit", type=int, default=0)
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--save", type=Path, default=None,
                        help="the results as JSON, rewritten after every measurement")
    parser.add_argument("--render-from", type=Path, default=None,
                        help="write the section from a --save file (e.g. made on a GPU machine)")
    args = parser.parse_args(argv)
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    shapes_text, prompts_text, dtype, sweep_shape = DEFAULTS[kind]
    args.dtype = args.dtype or dtype
    args.threads = args.threads or (len(os.sched_getaffinity(0)) if kind == "cuda" else 1)
    args.warmup = (1 if kind == "cuda" else 0) if args.warmup is None else args.warmup
    if args.child:
        args.seeds, args.limit = args.child_seeds, args.child_limit
        args.batch_size = int(args.batch_sizes)
        result = CHILDREN[args.child](args)
        if args.child in ("biasscope", "sweep"):
            as_the_command_ends()
        print(json.dumps({**result, "done_at": time.time()}), flush=True)
        return 0
    if args.render_from:
        saved = json.loads(args.render_from.read_text())
        print(render(saved))
        if args.out:
            write_section(args.out, mark_of(saved["machine"]), render(saved))
        return 0
    shapes = (args.shapes or shapes_text).split(",")
    limits = dict(zip(shapes, (int(x) for x in (args.prompts or prompts_text).split(","))))
    seeds = [int(s) for s in args.seeds.split(",")]
    batches = [int(b) for b in args.batch_sizes.split(",")]
    results: dict[str, Any] = {
        "started": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}", "note": args.note,
        "machine": machine(args), "rows": [], "sweep": None, "failed": [],
        "loads": [os.getloadavg()[0]]}

    def save() -> None:
        if args.save:
            args.save.write_text(json.dumps(results, indent=1))

    def measured(what: str, measure: Callable[..., Any], *given: Any) -> Any:
        """One measurement; a failure is named in the section and the rest still run."""
        try:
            return measure(*given)
        except (SystemExit, Exception) as exc:  # reported in the section, not hidden
            results["failed"].append(f"{what}: {str(exc).strip().splitlines()[-1][:300]}")
            print(f"{what} failed: {exc}", file=sys.stderr)
            return None
        finally:
            save()

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        workdir = Path(tmp)
        args.scratch = workdir
        for shape in shapes:
            model = measured(f"building {shape}", build, workdir, shape, args.data_dir,
                             args.device, args.dtype, max(seeds))
            for seed_count in seeds:
                for batch in batches:
                    if model is None:
                        continue
                    row = measured(f"{shape}, {seed_count} seeds, batch {batch}",
                                   one_checkpoint, model, shape, seed_count, batch,
                                   limits[shape], args)
                    if row is not None:
                        results["rows"].append(row)
                        save()
                        print(json.dumps({k: v for k, v in row.items() if k != "parts"}),
                              file=sys.stderr)
            if model is not None:
                shutil.rmtree(model, ignore_errors=True)  # disk for the next shape
        if args.checkpoints:
            shape = args.sweep_shape or sweep_shape

            def many() -> dict[str, Any]:
                run_dir = build(workdir, shape, args.data_dir, args.device, args.dtype,
                                max(seeds), count=args.checkpoints)
                return many_checkpoints(run_dir, shape, max(seeds), batches[0],
                                        limits.get(shape, max(limits.values())), args)

            results["sweep"] = measured(f"the {args.checkpoints}-checkpoint sweep", many)
    results["loads"].append(os.getloadavg()[0])
    save()
    section = render(results)
    print(section)
    if args.out:
        write_section(args.out, mark_of(results["machine"]), section)
    return 0


def mark_of(machine: dict[str, Any]) -> str:
    """Each GPU model and dtype has its own section (CPU keeps its old name)."""
    if not machine["gpu"]:
        return "sweep-cpu"
    words = re.sub(r"^NVIDIA\s+", "", machine["gpu"]["name"]).split()
    card = re.sub(r"[^a-z0-9]+", "-", words[0].lower()) if words else "gpu"
    return f"sweep-cuda-{card}-{machine['dtype']}"


if __name__ == "__main__":
    raise SystemExit(main())
