"""Peers side by side: biasscope's sweep, lm-evaluation-harness and a bare PyTorch loop, on the
same prompts, the same model and the same batch size, each in a fresh process.

Usage::

    python bench/bench_peers.py [--data-dir /work/realdata] [--limit 512,160]
        [--shapes pythia-14m,pythia-70m] [--batch-size 32] [--threads 1] [--repeats 3]
        [--lmeval-python /tmp/lmeval-venv/bin/python] [--out BENCHMARKS.md]

The templates case, ``--templates N`` (e.g. 8): the first ``--limit`` items of seed 0 under
each of the first N built-in WinoBias wordings (``--templates N`` of a sweep), biasscope
against the bare loop on the same prompts in one pass; one JSON line per method (lm-eval
left out).

Methods (every one a fresh Python process; whole-process wall time is measured around it):

``biasscope xS``
    ``run_dynamics`` of one checkpoint over seeds 0..S-1 into a new run directory: the real
    sweep (one pass per checkpoint: each distinct prompt once, shared prefixes once), unit
    files and summary written.
``bare xS``
    The fastest honest plain loop of ``bench_scoring.py`` (length-sorted right-padded batches,
    the base model, the LM head on each prompt's last position, log-softmax, gather, rank), one
    pass per seed, as a sweep without sharing would do.
``lm-eval xS``
    lm-evaluation-harness's ``simple_evaluate`` with its ``hf`` model on a custom
    ``multiple_choice`` task whose documents are the same prompts (all seeds' orders) and whose
    choices are the three single-token continuations `` male``, `` female``, `` not``; run
    with the interpreter given by ``--lmeval-python`` (its own environment: never the
    project's).

"work" is the time of the method's own call (model load, tokenization, scoring, and for
biasscope the unit files), measured inside the process; prompts/s is prompts x seeds over it.
Peak RSS is the process's ``ru_maxrss``. Agreement: the largest absolute difference of any
option log-prob from biasscope's, matched by item and seed. Models are random-initialised
GPT-NeoX with the Pythia-14m and Pythia-70m shapes and the word-level 50,277-token tokenizer of
``bench_scoring.py`` (no model hub); prompts are the first ``--limit`` items of each seed of
the ``winobias-gender`` probe on the given data files (the real WinoBias files by default).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHOICES = ("male", "female", "not")  # joined to the prompt by lm-eval's " " delimiter
MARK = "peers"
TARGETS = "5 seeds >= 2.0x bare x5 prompts/s; 1 seed >= 1.0x bare x1; peak RSS <= 1.3x bare"

# --------------------------------------------------------------------------------------------
# Children: each prints one JSON line, {"work_s", "maxrss_mib", "scores": {id: [lp, ...]}}.


def _done(work: float, score: float, scores: dict[str, list[float]]) -> None:
    # VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec.
    found = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    rss = int(found.group(1)) / 1024 if found else 0.0
    print(json.dumps({"work_s": work, "score_s": score, "maxrss_mib": rss, "scores": scores}))


class Stopwatch:
    """Wraps a method of a class so that every call's time adds up in ``total``."""

    def __init__(self, owner: Any, name: str) -> None:
        self.total = 0.0
        real = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - start

        setattr(owner, name, timed)


class FirstItems:
    """The probe's first ``limit`` items of each seed, as every method here scores them
    (``--limit`` of a sweep draws a stratified sample of whole pairs instead)."""

    def __init__(self, probe: Any, limit: int) -> None:
        self.probe, self.limit = probe, limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.probe, name)

    def items(self, seed: int) -> Any:
        return self.probe.items(seed)[: self.limit]


def bench_probe(data: Path, limit: int, templates: int = 0) -> Any:
    """WinoBias's first ``limit`` items per seed; with ``templates``, under each of the first
    ``templates`` built-in wordings (``--templates N``), the first ``limit`` of each."""
    from biasscope.probes.winobias import from_data

    if not templates:
        return FirstItems(from_data(data), limit)
    from biasscope.probes.wordings import Worded, builtin

    wordings = builtin("winobias-gender", templates)
    return Worded(wordings, [FirstItems(from_data(data, template=w.template), limit)
                             for w in wordings])


def child_biasscope(model: Path, data: Path, seeds: int, limit: int, batch: int,
                    threads: int, templates: int = 0) -> None:
    import torch

    torch.set_num_threads(threads)
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf import HFScorer
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring.sweep import run_dynamics

    probe = bench_probe(data, limit, templates)
    out = Path(tempfile.mkdtemp(prefix="peers-run-"))
    watch = Stopwatch(HFScorer, "score_next_token_shared")
    tokenizing = Stopwatch(HFScorer, "encode_next_token")  # inside the above; the bare loop's
    # passes get their prompts tokenized, so its time is taken out
    start = time.perf_counter()
    store = run_dynamics(probe, [Checkpoint(model.name, str(model))], out / "run",
                         seeds=range(seeds), scoring=HFConfig(device="cpu", batch_size=batch),
                         quiet=True)
    work = time.perf_counter() - start
    records = store.records()
    _done(work, watch.total - tokenizing.total, {str(i): [float(x) for x in lp]
                              for i, lp in zip(records["item_id"], records["option_logprobs"])})


def child_bare(model: Path, data: Path, seeds: int, limit: int, batch: int,
               threads: int, templates: int = 0) -> None:
    import torch

    torch.set_num_threads(threads)
    sys.path.insert(0, str(HERE))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bench_scoring import bare_method, make_workload

    probe = bench_probe(data, limit, templates)
    start = time.perf_counter()
    net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model)
    run = bare_method(net, batch, full=False)
    scores: dict[str, list[float]] = {}
    score = 0.0
    for seed in range(seeds):  # one pass per seed, as a sweep without sharing does
        items = probe.items(seed)
        began = time.perf_counter()
        option_lp, _, _ = run(make_workload(tokenizer, net, items))
        score += time.perf_counter() - began
        scores.update({it.id: lp for it, lp in zip(items, option_lp)})
    _done(time.perf_counter() - start, score, scores)


def child_lmeval(model: Path, docs: Path, batch: int, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    tasks = docs.parent / f"tasks-{docs.stem}"
    tasks.mkdir(exist_ok=True)
    name = f"biasscope_peers_{docs.stem}"
    (tasks / f"{name}.yaml").write_text(json.dumps({  # JSON is YAML
        "task": name, "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(docs)}}, "test_split": "test",
        "output_type": "multiple_choice", "doc_to_text": "prompt",
        "doc_to_choice": list(CHOICES), "doc_to_target": "answer", "target_delimiter": " ",
        "metric_list": [{"metric": "acc"}]}))
    watch = Stopwatch(HFLM, "loglikelihood")
    start = time.perf_counter()
    result = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={model},dtype=float32,device=cpu",
        tasks=[name], task_manager=TaskManager(include_path=str(tasks)), batch_size=batch,
        log_samples=True, verbosity="ERROR")
    work = time.perf_counter() - start
    scores = {s["doc"]["id"]: [float(r[0][0]) for r in s["resps"]]
              for s in result["samples"][name]}
    _done(work, watch.total, scores)


# --------------------------------------------------------------------------------------------
# Parent.


def prepare(workdir: Path, shapes: Sequence[str], data: Path, limits: dict[str, int],
            seeds: int, templates: int = 0) -> dict[str, Path]:
    """A saved model dir per shape, and lm-eval documents (1 and ``seeds`` seeds) per shape."""
    sys.path.insert(0, str(HERE))
    from bench_scoring import build_model, build_tokenizer
    from biasscope.probes.winobias import from_data

    probe = from_data(data)
    items = {s: probe.items(s) for s in range(seeds)}
    worded = bench_probe(data, 10**9, templates).items(0) if templates else []
    tokenizer = build_tokenizer([it.prompt for s in items for it in items[s]]
                                + [it.prompt for it in worded])
    models = {}
    for shape in shapes:
        path = workdir / shape
        build_model(shape).save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        models[shape] = path
        for count in sorted({1, seeds}):
            with (workdir / f"docs-{shape}-{count}.jsonl").open("w") as handle:
                for s in range(count):
                    for it in items[s][: limits[shape]]:
                        handle.write(json.dumps({"id": it.id, "prompt": it.prompt,
                                                 "answer": it.answer}) + "\n")
    return models


def spawn(python: str, argv: list[str], threads: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": str(ROOT / "src")}
    start = time.perf_counter()
    proc = subprocess.run([python, str(Path(__file__).resolve()), *argv], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:2]} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def agreement(ours: dict[str, list[float]], theirs: dict[str, list[float]]
              ) -> tuple[float, float]:
    """Largest |difference| of an option log-prob, as is and with each prompt's mean offset
    removed (what a different log-normaliser leaves: lm-eval's log-softmax also spans the
    model's 27 embedding padding rows, which are no tokens)."""
    common = ours.keys() & theirs.keys()
    if len(common) != len(theirs):
        raise SystemExit(f"only {len(common)} of {len(theirs)} items matched biasscope's")
    plain = shifted = 0.0
    for key in common:
        diffs = [a - b for a, b in zip(ours[key], theirs[key], strict=True)]
        offset = sum(diffs) / len(diffs)
        plain = max(plain, *(abs(d) for d in diffs))
        shifted = max(shifted, *(abs(d - offset) for d in diffs))
    return plain, shifted


def load() -> float:
    return os.getloadavg()[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=("biasscope", "bare", "lmeval"))
    parser.add_argument("--data-dir", type=Path, default=Path("/work/realdata"))
    parser.add_argument("--shapes", default="pythia-14m,pythia-70m")
    parser.add_argument("--limit", default="512,160", help="prompts per seed, per shape")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every method")
    parser.add_argument("--lmeval-python", default="/tmp/lmeval-venv/bin/python")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--docs", type=Path)
    parser.add_argument("--child-seeds", type=int, default=1)
    parser.add_argument("--child-limit", type=int, default=0)
    parser.add_argument("--templates", type=int, default=0, help="the templates case: N "
                        "built-in WinoBias wordings x 1 seed, biasscope against the bare loop")
    args = parser.parse_args(argv)
    if args.child == "lmeval":
        child_lmeval(args.model, args.docs, args.batch_size, args.threads)
        return 0
    if args.child:
        run = child_biasscope if args.child == "biasscope" else child_bare
        run(args.model, args.data_dir, args.child_seeds, args.child_limit, args.batch_size,
            args.threads, args.templates)
        return 0
    if args.templates:
        return templates_case(args)

    shapes = args.shapes.split(",")
    limits = dict(zip(shapes, (int(x) for x in args.limit.split(","))))
    started, load_before = dt.datetime.now(dt.timezone.utc), load()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        workdir = Path(tmp)
        models = prepare(workdir, shapes, args.data_dir, limits, args.seeds)
        for shape in shapes:
            common = ["--model", str(models[shape]), "--batch-size", str(args.batch_size),
                      "--threads", str(args.threads)]
            for seeds in sorted({1, args.seeds}):
                data = ["--data-dir", str(args.data_dir), "--child-seeds", str(seeds),
                        "--child-limit", str(limits[shape])]
                rounds = []
                for _ in range(args.repeats):  # interleaved, so load drifts hit every method
                    rounds.append({
                        "biasscope": spawn(sys.executable,
                                           ["--child", "biasscope", *common, *data], args.threads),
                        "bare": spawn(sys.executable, ["--child", "bare", *common, *data],
                                      args.threads),
                        "lm-eval": spawn(args.lmeval_python, [
                            "--child", "lmeval", *common,
                            "--docs", str(workdir / f"docs-{shape}-{seeds}.jsonl")],
                            args.threads),
                    })
                rows += summarise(shape, seeds, rounds)
                for row in rows[-3:]:
                    print(json.dumps(row), file=sys.stderr)
    section = render(rows, args, started, load_before, load())
    print(section)
    if args.out:
        write_section(args.out, section)
    return 0


def templates_case(args: argparse.Namespace) -> int:
    """``--templates N``: biasscope's sweep of N wordings x 1 seed against the bare loop on
    the same prompts (one pass), in alternating rounds; prints the rows as JSON lines."""
    shapes = args.shapes.split(",")
    limits = dict(zip(shapes, (int(x) for x in args.limit.split(","))))
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        models = prepare(Path(tmp), shapes, args.data_dir, limits, 1, args.templates)
        for shape in shapes:
            argv = ["--model", str(models[shape]), "--batch-size", str(args.batch_size),
                    "--threads", str(args.threads), "--data-dir", str(args.data_dir),
                    "--child-seeds", "1", "--child-limit", str(limits[shape]),
                    "--templates", str(args.templates)]
            rounds = [{m: spawn(sys.executable, ["--child", m, *argv], args.threads)
                       for m in ("biasscope", "bare")} for _ in range(args.repeats)]
            for method in ("biasscope", "bare"):
                ratio = [r["bare"]["score_s"] / r[method]["score_s"] for r in rounds]
                print(json.dumps({
                    "case": f"templates x{args.templates}", "shape": shape, "method": method,
                    "prompts": len(rounds[0][method]["scores"]),
                    "score_s": median(r[method]["score_s"] for r in rounds),
                    "work_s": median(r[method]["work_s"] for r in rounds),
                    "rss_mib": median(r[method]["maxrss_mib"] for r in rounds),
                    "vs_bare": [median(ratio), min(ratio), max(ratio)],
                    "max_abs_diff": agreement(rounds[0]["biasscope"]["scores"],
                                              rounds[0][method]["scores"])}))
    return 0


def summarise(shape: str, seeds: int, rounds: list[dict[str, dict[str, Any]]]
              ) -> list[dict[str, Any]]:
    """One row per method: medians over the rounds, and the ratios as medians of the per-round
    ratios (each round's methods ran back to back), with their range."""
    rows = []
    for method in ("biasscope", "bare", "lm-eval"):
        runs = [r[method] for r in rounds]
        prompts = len(runs[0]["scores"])
        vs_bare = [r["bare"]["score_s"] / r[method]["score_s"] for r in rounds]
        rows.append({
            "shape": shape, "method": method, "seeds": seeds, "prompts": prompts,
            "wall_s": median(r["wall_s"] for r in runs),
            "work_s": median(r["work_s"] for r in runs),
            "score_s": median(r["score_s"] for r in runs),
            "rate": prompts / median(r["score_s"] for r in runs),
            "rss": median(r["maxrss_mib"] for r in runs),
            "vs_bare": (median(vs_bare), min(vs_bare), max(vs_bare)),
            "vs_lmeval": median(r["lm-eval"]["wall_s"] / r[method]["wall_s"] for r in rounds),
            "diff": (None if method == "biasscope" else
                     agreement(rounds[0]["biasscope"]["scores"], runs[0]["scores"]))})
    return rows


def render(rows: list[dict[str, Any]], args: argparse.Namespace, started: dt.datetime,
           before: float, after: float) -> str:
    import platform

    import torch
    import transformers

    def find(shape: str, method: str, seeds: int) -> dict[str, Any]:
        return next(r for r in rows if (r["shape"], r["method"], r["seeds"]) == (shape, method,
                                                                                    seeds))

    command = "python bench/bench_peers.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if len(sys.argv) > 1 else []))
    lines = [
        "## Peers: biasscope, lm-evaluation-harness and a bare loop (CPU)", "",
        f"Run {started:%Y-%m-%d %H:%M} UTC with `{command.strip()}` (batch {args.batch_size}, "
        f"float32, torch threads {args.threads} in every process; {args.repeats} rounds, each "
        "running every method once in turn: medians over the rounds, ratios as the median of "
        "the per-round ratios, their range in brackets).", "",
        f"Machine: {len(os.sched_getaffinity(0))} cores shared with other engineers' work; "
        f"torch {torch.__version__}, transformers {transformers.__version__}, Python "
        f"{platform.python_version()}; lm-eval {lmeval_version(args.lmeval_python)} in its own "
        f"virtualenv; 1-minute load average {before:.1f} before and {after:.1f} after the run.",
        "",
        "| shape | method | seeds | prompts | process wall (s) | work (s) | scoring (s) | "
        "scoring prompts/s | "
        "vs bare, same seeds | vs lm-eval wall | peak RSS (MiB) | RSS vs bare | "
        "max abs log-prob diff vs biasscope (offset removed) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |"]
    verdicts = []
    for r in rows:
        diff = "-" if r["diff"] is None else f"{r['diff'][0]:.1e} ({r['diff'][1]:.1e})"
        ratio, low, high = r["vs_bare"]
        lines.append(
            f"| {r['shape']} | {r['method']} | {r['seeds']} | {r['prompts']} | "
            f"{r['wall_s']:.1f} | {r['work_s']:.1f} | {r['score_s']:.1f} | {r['rate']:.1f} | "
            f"{ratio:.2f}x [{low:.2f}-{high:.2f}] | {r['vs_lmeval']:.2f}x | "
            f"{r['rss']:.0f} | {r['rss'] / find(r['shape'], 'bare', r['seeds'])['rss']:.2f}x | "
            f"{diff} |")
    for shape in {r["shape"] for r in rows}:
        five, one = find(shape, "biasscope", args.seeds), find(shape, "biasscope", 1)
        bare5 = find(shape, "bare", args.seeds)
        verdicts.append(
            f"- {shape}: {args.seeds} seeds {five['vs_bare'][0]:.2f}x the bare loop "
            f"(target 2.0x); 1 seed {one['vs_bare'][0]:.2f}x (target 1.0x); "
            f"lm-eval's whole-process wall time {five['vs_lmeval']:.1f}x "
            f"biasscope's at {args.seeds} seeds (target 5x on pythia-14m); peak RSS "
            f"{five['rss'] / bare5['rss']:.2f}x the bare loop's (target <= 1.3x).")
    lines += ["", "Against the targets (" + TARGETS + "; 5x lm-eval's wall time on 14m):", "",
              *sorted(verdicts), "",
              "`scoring` is the time in the scoring call alone (biasscope's "
              "`score_next_token_shared` less its tokenization, the bare loop's passes over "
              "tokenized prompts, lm-eval's `loglikelihood`, its tokenization included), "
              "and prompts/s and the ratios are taken from it; `work` is the method's whole "
              "call inside its process (load, tokenize, score; biasscope also writes its "
              "unit files and summary); `process wall` adds "
              "interpreter start and imports, where lm-eval's own import and task setup "
              "weigh most. The bare loop and lm-eval score every seed's prompts in full; "
              "biasscope scores each distinct prompt once and each shared prefix once (token tries "
              "in one forward), with the LM head reduced block by block. "
              "Agreement is the last column: the bare loop's log-softmax spans the tokenizer's "
              "50,277 tokens as biasscope's does; lm-eval's spans all 50,304 output rows "
              "(27 are embedding padding, no tokens), which shifts every option of a prompt "
              "by the same amount; in brackets, what is left once that per-prompt offset is "
              "removed."]
    return "\n".join(lines) + "\n"


def lmeval_version(python: str) -> str:
    proc = subprocess.run([python, "-c", "import importlib.metadata as m; "
                           "print(m.version('lm_eval'))"], capture_output=True, text=True)
    return proc.stdout.strip() or "?"


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's marked section of ``path``, or append it."""
    text = path.read_text() if path.exists() else ""
    block = f"<!-- bench:{MARK}:start -->\n{section}<!-- bench:{MARK}:end -->\n"
    pattern = re.compile(rf"<!-- bench:{MARK}:start -->\n.*?<!-- bench:{MARK}:end -->\n", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else (
        text.rstrip("\n") + "\n\n" + block)
    path.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
