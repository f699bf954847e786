"""Checkpoint I/O at scale: load time against scoring time, and what background prefetch buys.

Usage::

    python bench/bench_io.py [--shapes pythia-70m,pythia-410m] [--checkpoints 4]
                             [--prompts 200] [--prompts-410m N] [--modes cold,warm]
                             [--read-mibps 0,200] [--threads N] [--batch-size 32]
                             [--out BENCHMARKS.md]

What it does
------------
1. Builds, in a temporary directory on the local disk, ``--checkpoints`` random-initialised
   ``GPTNeoXForCausalLM`` checkpoints per shape (the real Pythia-70m / Pythia-410m dimensions,
   vocabulary padded to 50,304), each saved with ``save_pretrained`` as safetensors in float32
   (``--dtype``) next to a copy of the tokenizer, in ``<shape>/step<N>`` directories read back
   with ``biasscope.backends.checkpoints.from_dirs``, as a real sweep would. The prompts are items
   of the ``winobias-gender`` probe built from synthetic WinoBias Type 2 files, and the
   tokenizer is the 50,277-token byte-level word tokenizer of ``bench/bench_scoring.py``
   (both reused from there). Everything is deleted at the end.
2. Per shape, in a fresh process, after a warm-up (one load, one short scoring pass):

   ``per checkpoint``
       for every checkpoint, the load time (``load_tokenizer`` + ``load_model`` +
       ``HFScorer(...)``: from nothing to a scorer ready to run), the fault-in time
       (``fault_in``: the weight pages the memory-mapped load left on disk) and the scoring
       time (``score_next_token`` on the P items), measured apart, with the process CPU time
       and the bytes read from the block device.
   ``sequential sweep``
       load, score, drop; next checkpoint: what a sweep costs without prefetch.
   ``prefetch sweep``
       ``for scorer in iter_scorers(checkpoints, options): scorer.score_next_token(items)``:
       biasscope's sweep, where the next checkpoint loads (and is faulted in) in a background
       thread while the current one is scored.

   The time the loop waits for each scorer is recorded, and the sweep totals are compared
   with two bounds computed from the per-checkpoint numbers of the same run: ``sum(load +
   score)`` (no overlap at all) and the best a one-deep prefetch can do, ``load_1 +
   sum_{i>=2} max(load_i, score_{i-1}) + score_K``, which for equal checkpoints is ``K *
   max(load, score) + min(load, score)`` (``sum(max(load, score))`` is shown as well).
   Tokenization is out of every timing: one ``Encodings`` cache is filled before the
   warm-up and shared by everything (as ``iter_scorers`` shares it across checkpoints).
3. Page cache. The checkpoints have just been written, so they sit in the OS page cache. In
   ``cold`` mode (needs root) every per-checkpoint load and every sweep starts after
   ``sync; echo 3 > /proc/sys/vm/drop_caches``, so weights really come from the disk; in
   ``warm`` mode every file is read once beforehand and loads are served from memory. Without
   root, ``cold`` is refused and only ``warm`` is run; the report states which was done.
   ``--read-mibps 0,200`` runs each shape twice: at the disk's own speed, then (cold only)
   with the worker in a cgroup whose reads from that disk are capped at 200 MiB/s, the
   speed of a network filesystem or an object store, where loading dominates.
4. Writes (or replaces) the ``<!-- bench:io:start/end -->`` section of ``BENCHMARKS.md``,
   keeping everything else in the file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import bench_scoring  # noqa: E402  (the shared data, tokenizer and model builders)

build_model, build_tokenizer = bench_scoring.build_model, bench_scoring.build_tokenizer
load_items, machine = bench_scoring.load_items, bench_scoring.machine
write_winobias = bench_scoring.write_winobias

SHAPES: dict[str, dict[str, int]] = {
    "pythia-70m": bench_scoring.SHAPES["pythia-70m"],
    # Pythia-410m: d_model 1024, 24 layers, 16 heads, d_ff 4 * 1024.
    "pythia-410m": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                    "intermediate_size": 4096},
}
bench_scoring.SHAPES.update(SHAPES)  # build_model looks shapes up there
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
STEP = 1000  # checkpoint k is saved as step{(k + 1) * STEP}


# --------------------------------------------------------------------------------------------
# Page cache and I/O accounting.


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access(DROP_CACHES, os.W_OK)


def drop_caches() -> None:
    os.sync()
    DROP_CACHES.write_text("3\n")


def warm_files(paths: Sequence[Path]) -> None:
    """Read every file under ``paths`` once, so it sits in the page cache."""
    for root in paths:
        for f in sorted(Path(root).rglob("*")):
            if f.is_file():
                with f.open("rb") as fh:
                    while fh.read(1 << 24):
                        pass


def read_bytes() -> int:
    """Bytes this process has caused to be read from block devices (``/proc/self/io``)."""
    try:
        found = re.search(r"^read_bytes:\s*(\d+)", Path("/proc/self/io").read_text(), re.M)
        return int(found.group(1)) if found else -1
    except OSError:
        return -1


def prepare(mode: str, dirs: Sequence[Path]) -> None:
    if mode == "cold":
        drop_caches()
    else:
        warm_files(dirs)


def block_device(path: Path) -> str:
    """``major:minor`` of the block device holding ``path``."""
    dev = os.stat(path).st_dev
    found = f"{os.major(dev)}:{os.minor(dev)}"
    if not Path(f"/sys/dev/block/{found}").exists():
        raise SystemExit(f"{path} is not on a block device ({found}); --read-mibps cannot "
                         "throttle it: pass --workdir on a disk")
    return found


def throttle_group(path: Path, mibps: int) -> Path:
    """A cgroup whose reads from ``path``'s block device are capped at ``mibps`` MiB/s (blkio
    on cgroup v1, io.max on v2): storage as slow as a network filesystem or an object store,
    for the processes put in it. Needs root."""
    device, rate = block_device(path), mibps * 2**20
    v1 = Path("/sys/fs/cgroup/blkio")
    if v1.is_dir():
        group = v1 / "biasscope-bench-io"
        group.mkdir(exist_ok=True)
        (group / "blkio.throttle.read_bps_device").write_text(f"{device} {rate}\n")
        return group
    v2 = Path("/sys/fs/cgroup")
    group = v2 / "biasscope-bench-io"
    group.mkdir(exist_ok=True)
    (v2 / "cgroup.subtree_control").write_text("+io\n")
    (group / "io.max").write_text(f"{device} rbps={rate}\n")
    return group


def rss_mib() -> float:
    found = re.search(r"^VmRSS:\s*(\d+)", Path("/proc/self/status").read_text(), re.M)
    return int(found.group(1)) / 1024 if found else float("nan")


# --------------------------------------------------------------------------------------------
# The worker: one shape, one process.


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import Encodings, HFScorer, iter_scorers
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer
    from biasscope.backends.weights import fault_in

    if args.threads:
        torch.set_num_threads(args.threads)
    root = Path(args.model_root)
    ckpts = from_dirs(sorted(p for p in root.iterdir() if p.is_dir()), model=args.shape)
    dirs = [Path(c.source) for c in ckpts]
    items = load_items(Path(args.data_dir), args.n_prompts)
    options = HFConfig(device="cpu", dtype=args.dtype, batch_size=args.batch_size)
    enc = Encodings(options.first_token)

    def load(ckpt: Any) -> Any:
        tok = load_tokenizer(ckpt, options)
        return HFScorer(ckpt, load_model(ckpt, options), tok, options, enc)

    # Warm-up: imports, kernel selection, one load, the tokenization cache filled once.
    scorer = load(ckpts[0])
    enc.prompt_ids(scorer.tokenizer, scorer.fingerprint, [it.prompt for it in items])
    scorer.score_next_token(items[: args.batch_size])
    lengths = sorted(len(x) for x in enc.prompt_ids(scorer.tokenizer, scorer.fingerprint,
                                                    [it.prompt for it in items]))
    params = sum(p.numel() for p in scorer.model.parameters())
    file_bytes = sum(f.stat().st_size for f in dirs[0].glob("*.safetensors"))
    del scorer
    gc.collect()

    out: dict[str, Any] = {
        "shape": args.shape, "checkpoints": len(ckpts), "prompts": len(items),
        "params": params, "file_bytes": file_bytes, "threads": torch.get_num_threads(),
        "tokens": {"min": lengths[0], "median": statistics.median(lengths),
                   "max": lengths[-1]}, "modes": {}}
    for mode in args.modes:
        res: dict[str, Any] = {"per_ckpt": []}
        # (a) per checkpoint: load and scoring measured apart.
        for ckpt in ckpts:
            prepare(mode, [Path(ckpt.source)])
            rb0, c0, t0 = read_bytes(), time.process_time(), time.perf_counter()
            scorer = load(ckpt)
            t1, c1, rb1 = time.perf_counter(), time.process_time(), read_bytes()
            rss_loaded = rss_mib()
            fault_in(scorer.model)
            t2, c2, rb2 = time.perf_counter(), time.process_time(), read_bytes()
            scorer.score_next_token(items)
            t3, c3, rb3 = time.perf_counter(), time.process_time(), read_bytes()
            res["per_ckpt"].append({
                "load_s": t1 - t0, "load_cpu_s": c1 - c0, "load_read_mib": (rb1 - rb0) / 2**20,
                "touch_s": t2 - t1, "touch_read_mib": (rb2 - rb1) / 2**20,
                "score_s": t3 - t2, "score_cpu_s": c3 - c2, "score_read_mib": (rb3 - rb2) / 2**20,
                "rss_after_load_mib": rss_loaded})
            del scorer
            gc.collect()
            print(f"  {args.shape} {mode} {ckpt.revision}: "
                  f"{json.dumps(res['per_ckpt'][-1], default=lambda x: round(x, 3))}", flush=True)
        # (b) the sweeps, sequential first then prefetch, then once more in reverse order so
        # that drift in background load does not favour either.
        kinds = ("sequential", "prefetch")
        for kind in kinds:
            res[f"{kind}_s"], res[f"{kind}_wait_s"] = [], []
        order = kinds + kinds[::-1] if args.sweeps == 2 else kinds
        for kind in order:
            prepare(mode, dirs)
            gc.collect()
            t0 = time.perf_counter()
            waits, mark = [], t0
            if kind == "sequential":
                for ckpt in ckpts:
                    scorer = load(ckpt)
                    waits.append(time.perf_counter() - mark)
                    scorer.score_next_token(items)
                    del scorer
                    mark = time.perf_counter()
            else:
                for scorer in iter_scorers(ckpts, options, enc):
                    waits.append(time.perf_counter() - mark)
                    scorer.score_next_token(items)
                    del scorer
                    mark = time.perf_counter()
            res[f"{kind}_s"].append(time.perf_counter() - t0)
            res[f"{kind}_wait_s"].append(waits)
            print(f"  {args.shape} {mode} {kind} sweep: {time.perf_counter() - t0:.2f}s",
                  flush=True)
        out["modes"][mode] = res
    return out


# --------------------------------------------------------------------------------------------
# Building the checkpoints, and the report.


def build_checkpoints(workdir: Path, shape: str, count: int, tokenizer: Any, dtype: str) -> Path:
    import torch

    root = workdir / shape
    for k in range(count):
        model = build_model(shape, seed=k).to(getattr(torch, dtype))
        path = root / f"step{(k + 1) * STEP}"
        model.save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        del model
        gc.collect()
    return root


def bounds(per: Sequence[dict[str, float]]) -> dict[str, float]:
    """No-overlap and best-overlap sweep times from the per-checkpoint measurements."""
    full = [p["load_s"] + p["touch_s"] for p in per]  # from nothing to every weight resident
    score = [p["score_s"] for p in per]  # weights resident: compute only
    k = len(per)
    pipeline = full[0] + score[-1] + sum(max(full[i], score[i - 1]) for i in range(1, k))
    return {"sum": sum(full) + sum(score), "sum_max": sum(map(max, full, score)),
            "pipeline": pipeline}


def med(per: Sequence[dict[str, float]], key: str) -> float:
    return statistics.median(p[key] for p in per)


def storage(result: dict[str, Any]) -> str:
    rate = result.get("read_mibps") or 0
    return f"{rate} MiB/s" if rate else "local disk"


def rows(results: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str, Any]]:
    for r in results:
        for mode, m in r["modes"].items():
            yield r, mode, m


def render(args: argparse.Namespace, results: Sequence[dict[str, Any]], cold_ok: bool) -> str:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    threads = results[0]["threads"]
    k = results[0]["checkpoints"]
    throttled = sorted({r["read_mibps"] for r in results if r.get("read_mibps")})
    lines = [
        "## Checkpoint I/O: load vs scoring, and prefetch (CPU)", "",
        f"Run {when} with `{args.argv}` ({args.wall / 60:.1f} min in all). Produced by "
        "`bench/bench_io.py` (its docstring describes the method).", "",
        f"Machine: {machine('cpu', threads)}; checkpoints on the local virtio disk (`/tmp` on "
        f"the root filesystem); 1-minute load average {args.load_before:.1f} before the run "
        f"and {args.load_after:.1f} after it.", "",
        f"Setup: per shape, K = {k} random-init checkpoints (`save_pretrained`, safetensors, "
        f"{args.dtype}), loaded with `HFConfig(device='cpu', dtype='{args.dtype}', "
        f"batch_size={args.batch_size})` and scored on the same P `winobias-gender` prompts "
        "(`score_next_token`; tokenization excluded, one shared warm `Encodings`).", "",
        "Page cache: " + (
            "**cold** rows ran after `sync; echo 3 > /proc/sys/vm/drop_caches` (as root) "
            "before every per-checkpoint load and before every sweep, so the weights came from "
            "the disk (the `read MiB` column confirms it); **warm** rows had every file read "
            "once beforehand, so the page cache served them."
            if cold_ok else "not root, so caches could not be dropped: every row is **warm** "
            "(the files had just been written and sit in the page cache)."), "",
    ]
    if throttled:
        lines += [
            "Storage: **local disk** rows read the virtio disk at full speed; rows marked "
            + ", ".join(f"**{t} MiB/s**" for t in throttled) + " ran the worker process in a "
            "blkio cgroup whose reads from that disk were capped at that rate (`--read-mibps`; "
            "`blkio.throttle.read_bps_device`): the speed of a network filesystem or an object "
            "store, where a sweep over many checkpoints is bound by reading weights.", ""]
    lines += [
        "Per checkpoint (median over the K checkpoints): **load** = `load_tokenizer` + "
        "`load_model` + `HFScorer(...)`, i.e. `from_pretrained` to a ready scorer; "
        "**fault-in** = `biasscope.backends.weights.fault_in` right after: `from_pretrained` "
        "leaves safetensors weights memory-mapped, and whatever the load did not read would "
        "otherwise be read at first use, inside the scoring; **score** = `score_next_token` "
        "on the P prompts with the weights resident. `read MiB` = bytes read from the block device "
        "during load / fault-in (`/proc/self/io`).", "",
        "| shape | storage | mode | P | file MiB | load s | fault-in s | read MiB (load / "
        "fault-in) | load CPU s | score s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, mode, m in rows(results):
        per = m["per_ckpt"]
        lines.append(
            f"| {r['shape']} | {storage(r)} | {mode} | {r['prompts']} "
            f"| {r['file_bytes'] / 2**20:.0f} | {med(per, 'load_s'):.2f} "
            f"| {med(per, 'touch_s'):.2f} | {med(per, 'load_read_mib'):.0f} / "
            f"{med(per, 'touch_read_mib'):.0f} | {med(per, 'load_cpu_s'):.2f} "
            f"| {med(per, 'score_s'):.2f} |")
    lines += [
        "", f"Sweeps over the K = {k} checkpoints (wall s; median, then every run; each kind "
        f"run {args.sweeps}x" + (", interleaved seq, prefetch, prefetch, seq" if args.sweeps == 2
                                 else "") + "). **sequential**: load, score, next. "
        "**prefetch**: biasscope's `iter_scorers` (the next checkpoint loads and is faulted in "
        "by a background thread while the current one is scored). Bounds from the "
        "per-checkpoint numbers, with L = load + fault-in and S = score: **sum** = sum(L + S), "
        "no overlap; **pipeline** = L_1 + sum_i>=2 max(L_i, S_i-1) + S_K, the best a one-deep "
        "prefetch can do (the first load and the last scoring overlap nothing; for equal "
        "checkpoints K max(L, S) + min(L, S)); **sum(max)** = sum(max(L, S)). **S in "
        "prefetch** = the fastest prefetch sweep's time outside its waits, per checkpoint: "
        "what one scoring took while the next checkpoint loaded beside it (compare S alone "
        "in the table above).", "",
        "| shape | storage | mode | sequential s | prefetch s | sum s | pipeline s "
        "| sum(max) s | S in prefetch s | prefetch / sequential | prefetch / sum "
        "| prefetch / pipeline |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, mode, m in rows(results):
        b = bounds(m["per_ckpt"])
        seq, pre = (statistics.median(m[f"{kind}_s"]) for kind in ("sequential", "prefetch"))
        cells = {kind: f"{statistics.median(m[f'{kind}_s']):.2f} (" + ", ".join(
            f"{x:.2f}" for x in m[f"{kind}_s"]) + ")" for kind in ("sequential", "prefetch")}
        best = min(range(len(m["prefetch_s"])), key=lambda i: m["prefetch_s"][i])
        busy = (m["prefetch_s"][best] - sum(m["prefetch_wait_s"][best])) / r["checkpoints"]
        lines.append(
            f"| {r['shape']} | {storage(r)} | {mode} | {cells['sequential']} "
            f"| {cells['prefetch']} | {b['sum']:.2f} | {b['pipeline']:.2f} "
            f"| {b['sum_max']:.2f} | {busy:.2f} | {pre / seq:.2f}x | {pre / b['sum']:.2f}x "
            f"| {pre / b['pipeline']:.2f}x |")
    lines += ["", "Time the sweep loop waited for each scorer (fastest run of each kind; the "
              "first entry is the first load, which nothing hides):", ""]
    for r, mode, m in rows(results):
        for kind in ("sequential", "prefetch"):
            best = min(range(len(m[f"{kind}_s"])), key=lambda i: m[f"{kind}_s"][i])
            waits = " / ".join(f"{w:.2f}" for w in m[f"{kind}_wait_s"][best])
            lines.append(f"- {r['shape']} {storage(r)} {mode} {kind}: {waits} s")
    if args.note:
        lines += ["", args.note]
    return "\n".join(lines) + "\n"


def write_report(path: Path, section: str) -> None:
    start, end = "<!-- bench:io:start -->", "<!-- bench:io:end -->"
    block = f"{start}\n{section}{end}\n"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--shapes", default="pythia-70m,pythia-410m")
    parser.add_argument("--checkpoints", type=int, default=4, help="checkpoints per shape")
    parser.add_argument("--prompts", type=int, default=200, help="prompts scored per checkpoint")
    parser.add_argument("--prompts-410m", type=int, default=None,
                        help="prompts for pythia-410m (default: --prompts)")
    parser.add_argument("--modes", default=None,
                        help="cold,warm (default: cold,warm as root, warm otherwise)")
    parser.add_argument("--sweeps", type=int, default=2, choices=(1, 2),
                        help="runs of each sweep kind (1: seq, prefetch; 2: seq, pre, pre, seq)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16",
                                                               "float16"))
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--read-mibps", default="0",
                        help="comma-separated read-rate caps in MiB/s, 0 = the disk's own speed "
                        "(e.g. 0,200: each shape once at full speed, once capped; a cap runs "
                        "cold only and needs root)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where to write the checkpoints (default: a temp dir in $TMPDIR)")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--note", default="")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--model-root", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--n-prompts", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cgroup", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cold_ok = can_drop_caches()
    if args.modes is None:
        args.modes = "cold,warm" if cold_ok else "warm"
    args.modes = [m for m in args.modes.split(",") if m]
    if "cold" in args.modes and not cold_ok:
        parser.error("cold mode needs root (writing /proc/sys/vm/drop_caches)")
    rates = [int(r) for r in args.read_mibps.split(",") if r]
    if any(rates) and not cold_ok:
        parser.error("--read-mibps needs root (a cgroup, and dropped caches)")
    if args.worker:
        if args.cgroup:  # this process and the threads it starts read at the capped rate
            (args.cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")
        args.result.write_text(json.dumps(worker(args)))
        return 0

    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}: choose from {list(SHAPES)}")
    prompts = {s: (args.prompts_410m if s == "pythia-410m" and args.prompts_410m
                   else args.prompts) for s in shapes}
    args.load_before, started = os.getloadavg()[0], time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="biasscope-io-", dir=args.workdir) as tmp:
        work = Path(tmp)
        data_dir = write_winobias(work / "data", max(prompts.values()) // 8 + 1)
        tokenizer = build_tokenizer([it.prompt for it in load_items(data_dir,
                                                                    max(prompts.values()))])
        for shape in shapes:
            t0 = time.perf_counter()
            root = build_checkpoints(work, shape, args.checkpoints, tokenizer, args.dtype)
            print(f"built {args.checkpoints} {shape} checkpoints in {root} "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
            for rate in rates:
                result = work / f"{shape}-{rate}.json"
                modes = ["cold"] if rate else args.modes
                cmd = [sys.executable, __file__, "--worker", "--shape", shape, "--model-root",
                       str(root), "--data-dir", str(data_dir), "--n-prompts",
                       str(prompts[shape]), "--result", str(result), "--modes",
                       ",".join(modes), "--sweeps", str(args.sweeps), "--batch-size",
                       str(args.batch_size), "--dtype", args.dtype]
                if args.threads:
                    cmd += ["--threads", str(args.threads)]
                group = throttle_group(root, rate) if rate else None
                if group:
                    cmd += ["--cgroup", str(group)]
                try:
                    subprocess.run(cmd, check=True)
                finally:
                    if group:
                        group.rmdir()  # empty again: its only process has exited
                results.append({**json.loads(result.read_text()), "read_mibps": rate})
            subprocess.run(["rm", "-rf", str(root)], check=True)  # free the disk now
    args.load_after, args.wall = os.getloadavg()[0], time.perf_counter() - started
    shown = list(argv if argv is not None else sys.argv[1:])
    if "--note" in shown:
        del shown[shown.index("--note"):shown.index("--note") + 2]
    shown = [a for a in shown if not a.startswith("--note=")]
    args.argv = shlex.join(["python", "bench/bench_io.py", *shown])
    section = render(args, results, cold_ok and "cold" in args.modes)
    print(section)
    write_report(args.out, section)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
