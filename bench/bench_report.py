"""Peak memory and wall time of ``biasscope report`` against the number of units in a run,
for this working tree and for a baseline commit (the code before the report streamed).

Usage::

    python bench/bench_report.py [--units 10,100,1000] [--seeds 5] [--baseline REV]
                                 [--workdir /tmp/biasscope-bench-report] [--out BENCHMARKS.md]

What it does
------------
1. Writes synthetic ``biasscope dynamics`` runs once under ``--workdir`` (reused by later
   runs of the script with the same settings): one model, ``--seeds`` seeds, as many
   checkpoints (steps 0, 1000, ...) as make the number of units; each unit holds the
   ``winobias-gender`` probe's 3,168 items per seed, the size of the real WinoBias files
   (WinoBias Type 2 files in the upstream format, 396 sentences per file, made by
   ``bench_scoring.write_winobias``; or the real files with ``--data-dir``), with option
   log-probs and ranks that drift with the step.
   Units are written by ``RunStore.write_unit`` from ``records_frame``, as a sweep writes them.
2. Exports both versions' ``src`` (``git archive``) under ``--workdir``: ``--baseline`` (default:
   the parent of the commit that added ``src/biasscope/analysis_pass.py``) and ``--after``
   (default ``HEAD``; uncommitted edits of the tree are not measured), and, for each run,
   times ``biasscope report RUN --output X.html`` in a fresh process per version (baseline
   then after, the same run, one after the other), with ``PYTHONPATH`` set to that version's
   ``src`` and ``nice -n 19``. Peak memory is the child's ``ru_maxrss`` from ``os.wait4``
   (its peak resident set); wall time is measured around the child.
3. Compares the ``X.summary.json`` files both versions wrote (byte for byte; a baseline
   older than a feature that adds to the summary differs for that reason).
4. Writes a table into ``--out``, replacing the section between
   ``<!-- bench:report:start -->`` and ``<!-- bench:report:end -->`` (appended if absent).

``--one-checkpoint`` measures instead the report a one-checkpoint, one-seed run writes at the
end of ``biasscope dynamics`` (all 3,168 WinoBias items): in a fresh process per version and
repeat, with the modules of the analysis and the report already imported (as they are when a
sweep ends), the wall and CPU time of ``write_dynamics_report`` (analysis, summary.json and
HTML). The median of ``--repeats`` goes into the section between
``<!-- bench:report-one:start -->`` and ``<!-- bench:report-one:end -->``.

``--cpu`` measures the whole ``biasscope report RUN --output X.html`` process against
``biasscope --help`` (issue 39: the report of 31,680 records at most 1 s of CPU beyond it), for
the runs of ``--units`` (default 10 and 20: 2 and 4 checkpoints of 5 seeds, 31,680 and 63,360
records, to show how it grows): the first report (``X.summary.json`` removed, so the analysis is
computed) and the repeated one (the analysis stored beside it is reused), each in a fresh
process, for ``--baseline`` (default: the parent of the commit that added
``src/biasscope/dynamics/summary/reuse.py``) and ``--after``. CPU time is the child's user +
system time and peak memory its ``ru_maxrss``, both from ``os.wait4``, so other work on a
shared machine does not count; each version runs once first to compile its bytecode. Medians of
``--repeats`` go between ``<!-- bench:report-cpu:start -->`` and
``<!-- bench:report-cpu:end -->``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LINES_PER_FILE = 396  # real WinoBias Type 2: 396 sentences per file, 3,168 probe items per seed
STEP = 1000
START, END = "<!-- bench:report:start -->\n", "<!-- bench:report:end -->\n"


def scores(n: int, answers: np.ndarray, male: np.ndarray, step: int, seed: int) -> list[Any]:
    """Option log-probs favouring the answer more with each step (male answers most)."""
    from biasscope.backends.base import NextTokenScore

    rng = np.random.default_rng(1000 * step + seed)
    logits = rng.normal(0.0, 0.5, size=(n, 3)) - 6.0
    logits[np.arange(n), answers] += 0.5 + step / 100_000 * np.where(male, 1.5, 0.7)
    ranks = rng.integers(1, 40, size=n) + max(0, 200 - step // 1000)
    return [NextTokenScore(tuple(row), int(r)) for row, r in zip(logits.tolist(), ranks)]


def make_runs(workdir: Path, sizes: Sequence[int], seeds: int, data_dir: Path | None = None
              ) -> dict[int, Path]:
    """The runs of ``sizes`` units (reused when already complete); returns size -> run.
    Written in a process of its own, so that this one stays small: a child forked from it
    inherits its peak resident set (Linux keeps the high-water mark across ``exec``), which
    would floor every measured peak at the size of biasscope and pandas loaded here."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        written: dict[int, Path] = pool.apply(_write_runs, (workdir, sizes, seeds, data_dir))
    return written


def _write_runs(workdir: Path, sizes: Sequence[int], seeds: int, data_dir: Path | None
                ) -> dict[int, Path]:
    from bench_scoring import write_winobias
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.dynamics.scoring.runfile import init_run
    from biasscope.dynamics.scoring.units import SweepConfig, records_frame, unit_of
    from biasscope.probes import load_probe
    from biasscope.store.directory import RunStore

    kind = "real" if data_dir else "synthetic"
    runs = {n: workdir / f"run-{n}-units-{seeds}-seeds-{kind}" for n in sizes}
    todo = [n for n in sizes if not (runs[n] / "complete").is_file()]
    if not todo:
        return runs
    data = data_dir or write_winobias(workdir / "data", LINES_PER_FILE)
    probe = load_probe("winobias-gender", data_dir=data)
    items = {s: probe.items(s) for s in range(seeds)}
    model = "bench/pythia-like"
    steps = max(todo) // seeds
    checkpoints = [Checkpoint(model, model, f"step{k * STEP}", k * STEP) for k in range(steps)]
    stores = {}
    for n in todo:
        stores[n] = RunStore(runs[n])
        init_run(stores[n], [probe], SweepConfig(checkpoints[: n // seeds], runs[n],
                                                 list(range(seeds)),
                                                 comparable={"dtype": "auto",
                                                             "first_token": False}))
    started = time.perf_counter()
    for k, ckpt in enumerate(checkpoints):
        for seed, chosen in items.items():
            answers = np.array([i.answer for i in chosen])
            male = np.array([i.options[i.answer] == "male" for i in chosen])
            unit = unit_of(ckpt, probe.name, seed)
            frame = records_frame(unit, chosen, scores(len(chosen), answers, male,
                                                       ckpt.step or 0, seed))
            for n in todo:
                if k < n // seeds:
                    stores[n].write_unit(unit, frame)
        print(f"  wrote checkpoint {k + 1}/{steps} ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr, flush=True)
    for n in todo:
        (runs[n] / "complete").write_text(f"{len(items[0])} items per unit\n")
    return runs


def exported_src(workdir: Path, rev: str | None, added: str = "src/biasscope/analysis_pass.py"
             ) -> tuple[str, Path]:
    """(commit, src folder) of ``rev`` (None: the parent of the commit that added ``added``),
    exported under ``workdir`` by ``git archive`` (a worktree would stay registered in the
    user's repository after the bench)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], check=True, text=True,
                              capture_output=True).stdout.strip()

    if rev is None:
        adding = git("log", "--diff-filter=A", "--format=%H", "--", added).splitlines()
        if not adding:
            raise SystemExit(f"no commit adds {added}: pass --baseline")
        rev = f"{adding[-1]}^"
    commit = git("rev-parse", rev)
    tree = workdir / f"tree-{commit[:12]}"
    if not tree.is_dir():  # unpacked beside, then renamed: a killed bench leaves no half tree
        part = workdir / f"{tree.name}.part"
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(part)], input=archive, check=True)
        part.rename(tree)
    return commit, tree / "src"


@dataclass
class Measure:
    peak_mib: float
    wall_s: float
    summary: bytes


def measure(src: Path, run: Path, out: Path) -> Measure:
    """``biasscope report run --output out`` in a fresh process with ``src`` first on the
    path: its peak RSS (``ru_maxrss`` from ``os.wait4``) and wall time."""
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import sys; from biasscope.cli.main import main; sys.exit(main(sys.argv[1:]))"
    command = ["nice", "-n", "19", sys.executable, "-c", code, "report", str(run), "--output",
               str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{shlex.join(command)} failed with exit code {child.returncode}")
    summary = out.with_name(f"{out.stem}.summary.json").read_bytes()
    return Measure(usage.ru_maxrss / 1024, wall, summary)  # Linux: ru_maxrss in KiB


ONE_START, ONE_END = "<!-- bench:report-one:start -->\n", "<!-- bench:report-one:end -->\n"
TIMED = """
import sys, time
import biasscope.dynamics.summary.write as reporting
wall, cpu = time.perf_counter(), time.process_time()
reporting.write_dynamics_report(sys.argv[1], sys.argv[2])
print(time.perf_counter() - wall, time.process_time() - cpu)
"""


def time_report(src: Path, run: Path, out: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of ``write_dynamics_report`` in a fresh process, imports done."""
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", TIMED, str(run), str(out)], check=True,
                          env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True,
                          text=True)
    wall, cpu = (float(v) for v in done.stdout.split()[-2:])
    return wall, cpu


def one_checkpoint(args: argparse.Namespace) -> str:
    """The one-checkpoint case: medians before and after, as a markdown section."""
    run = make_runs(args.workdir, [1], 1, args.data_dir)[1]
    trees = {"before": exported_src(args.workdir, args.baseline),
             "after": exported_src(args.workdir, args.after)}
    load = os.getloadavg()[0]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
    for i in range(args.repeats):
        for name, (_, src) in trees.items():
            times[name].append(time_report(src, run, args.workdir / "one" / f"{name}.html"))
            print(f"  {name} {i + 1}: wall {times[name][-1][0]:.2f} s, CPU "
                  f"{times[name][-1][1]:.2f} s", file=sys.stderr, flush=True)
    med = {k: (float(np.median([t[0] for t in v])), float(np.median([t[1] for t in v])))
           for k, v in times.items()}
    return "\n".join([
        "## Report of a one-checkpoint run (3,168 WinoBias items, one seed)", "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with `python "
        f"bench/bench_report.py --one-checkpoint --repeats {args.repeats}"
        f"{f' --baseline {args.baseline}' if args.baseline else ''}`; {platform.machine()}, "
        f"{os.cpu_count()} cores (shared; 1-minute load {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after). `write_dynamics_report` (analysis, summary.json "
        "and HTML) in a fresh process per measurement, its modules imported first, as at the "
        f"end of a sweep; medians of {args.repeats}. **before**: "
        f"`{trees['before'][0][:12]}`, **after**: `{trees['after'][0][:12]}`.", "",
        "| version | wall (s) | CPU (s) |", "| --- | ---: | ---: |",
        *(f"| {k} | {w:.2f} | {c:.2f} |" for k, (w, c) in med.items()), ""])


CPU_START, CPU_END = "<!-- bench:report-cpu:start -->\n", "<!-- bench:report-cpu:end -->\n"
@dataclass
class Cost:
    cpu_s: float
    peak_mib: float


def cost(src: Path, *argv: str) -> Cost:
    """CPU time (user + system) and peak RSS of ``biasscope ARGV`` in a fresh process with
    ``src`` first on the path, bytecode written and read as an installed package's is; run as
    ``python -m biasscope``, with what the command does in its own process (its exit)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = ["nice", "-n", "19", sys.executable, "-m", "biasscope", *argv]
    child = subprocess.Popen(command, env={**env, "PYTHONPATH": str(src)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{shlex.join(command)} failed with exit code {code}")
    return Cost(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def report_costs(src: Path, run: Path, out: Path) -> tuple[Cost, Cost, Cost, bool]:
    """(``--help``, first report, repeated report) and whether both reports wrote the same
    summary."""
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = out.with_name(f"{out.stem}.summary.json")
    summary.unlink(missing_ok=True)
    shown = cost(src, "--help")
    first = cost(src, "report", str(run), "--output", str(out), "--quiet")
    written = summary.read_bytes()
    again = cost(src, "report", str(run), "--output", str(out), "--quiet")
    return shown, first, again, summary.read_bytes() == written


def cpu_section(args: argparse.Namespace) -> str:
    """Whole-process CPU time and peak RSS of the report against ``--help``, as markdown."""
    sizes = sorted(int(n) for n in args.units.split(","))
    runs = make_runs(args.workdir, sizes, args.seeds, args.data_dir)
    added = "src/biasscope/dynamics/summary/reuse.py"
    trees = {"before": exported_src(args.workdir, args.baseline, added),
             "after": exported_src(args.workdir, args.after, added)}
    load = os.getloadavg()[0]
    for _, src in trees.values():  # compile each version's bytecode once, untimed
        report_costs(src, runs[sizes[0]], args.workdir / "cpu" / "warm.html")
    got: dict[tuple[str, int], list[tuple[Cost, Cost, Cost, bool]]] = {}
    for i in range(args.repeats):
        for n in sizes:
            for name, (_, src) in trees.items():
                got.setdefault((name, n), []).append(
                    report_costs(src, runs[n], args.workdir / "cpu" / f"{name}-{n}.html"))
                h, f, r, _ = got[(name, n)][-1]
                print(f"  {i + 1}: {name} {n} units: --help {h.cpu_s:.2f} s, first "
                      f"{f.cpu_s:.2f} s, repeated {r.cpu_s:.2f} s of CPU", file=sys.stderr,
                      flush=True)

    def med(key: tuple[str, int], k: int, what: str) -> float:
        return float(np.median([getattr(m[k], what) for m in got[key]]))

    per = int((runs[sizes[0]] / "complete").read_text().split()[0])
    rows = []
    for name in trees:
        for n in sizes:
            key = (name, n)
            shown, first, again = (med(key, k, "cpu_s") for k in range(3))
            same = all(m[3] for m in got[key])
            rows.append(
                f"| {name} | {n * per:,} | {shown:.2f} | {first:.2f} | {first - shown:.2f} | "
                f"{again:.2f} | {again - shown:.2f} | {med(key, 1, 'peak_mib'):.0f} / "
                f"{med(key, 2, 'peak_mib'):.0f} | {'yes' if same else 'no'} |")
    small, large = sizes[0], sizes[-1]
    def slope(name: str, k: int) -> float:
        """Microseconds of CPU per record added from the smallest run to the largest."""
        added = med((name, large), k, "cpu_s") - med((name, small), k, "cpu_s")
        return 1e6 * added / ((large - small) * per)

    def verdict(k: int) -> str:
        beyond = med(("after", small), k, "cpu_s") - med(("after", small), 0, "cpu_s")
        return f"{beyond:.2f} s beyond ({'met' if beyond <= 1.0 else 'not met'})"

    growth = [f"{name}: first {slope(name, 1):.1f} µs, repeated {slope(name, 2):.1f} µs"
              for name in trees] if large > small else []
    return "\n".join([
        "## Report CPU time against `biasscope --help` (issue 39)", "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with `python "
        f"bench/bench_report.py --cpu --units {args.units} --seeds {args.seeds} --repeats "
        f"{args.repeats}{f' --data-dir {args.data_dir}' if args.data_dir else ''}"
        f"{f' --baseline {args.baseline}' if args.baseline else ''}"
        f"{f' --after {args.after}' if args.after != 'HEAD' else ''}`; {platform.machine()}, "
        f"{os.cpu_count()} cores (shared; 1-minute load {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after), Python {platform.python_version()}. "
        f"Synthetic dynamics runs of {args.seeds} seeds per checkpoint, {per:,} "
        "`winobias-gender` records per unit. Each command in a fresh process under `nice`; "
        "CPU is the child's user + system time (`os.wait4`), so the machine's other work "
        f"does not count; medians of {args.repeats}. *first*: `biasscope report RUN --output "
        "X.html` with no `X.summary.json` (the analysis computed); *repeated*: the same "
        "command again (the stored analysis reused where the version can). **before**: "
        f"`{trees['before'][0][:12]}`, **after**: `{trees['after'][0][:12]}`.", "",
        "| version | records | `--help` CPU (s) | first report CPU (s) | beyond `--help` | "
        "repeated report CPU (s) | beyond `--help` | peak RSS first / repeated (MiB) | "
        "same summary |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |", *rows, "",
        *([f"CPU per added record ({small * per:,} to {large * per:,} records): "
           + "; ".join(growth) + "."] if growth else []), "",
        f"Target (issue 39: at most 1 s of CPU beyond `--help` at {small * per:,} records), "
        f"after: first report {verdict(1)}, repeated report {verdict(2)}.", ""])


def render(rows: list[dict[str, Any]], args: argparse.Namespace, commit: str, head: str,
           elapsed: float, load: tuple[float, float]) -> str:
    first = rows[0]
    source = ("the real WinoBias files" if args.data_dir
              else "synthetic WinoBias files of the real size")
    lines = [
        "## Report memory and time against run size",
        "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with "
        f"`python bench/bench_report.py --units {args.units} --seeds {args.seeds}"
        f"{f' --data-dir {args.data_dir}' if args.data_dir else ''}"
        f"{f' --baseline {args.baseline}' if args.baseline else ''}"
        f"{f' --after {args.after}' if args.after != 'HEAD' else ''} --out BENCHMARKS.md` "
        f"({elapsed / 60:.1f} min in all, run generation excluded).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared), Python "
        f"{platform.python_version()}, Linux {platform.release()}; 1-minute load average "
        f"{load[0]:.1f} before and {load[1]:.1f} after.",
        "",
        f"Synthetic `biasscope dynamics` runs of one model with {args.seeds} seeds per "
        "checkpoint, written by `RunStore.write_unit`; every unit holds 3,168 "
        "`winobias-gender` records, as the real WinoBias files give (so 1,000 units are 3.2M "
        f"records), from {source} and synthetic option log-probs and ranks. "
        "`biasscope report RUN --output X.html` (default analysis settings: "
        "2,000 bootstrap resamples) in a fresh process per measurement, under `nice -n 19`; "
        "peak RSS is the child's `ru_maxrss`. **before**: commit "
        f"`{commit[:12]}`; **after**: commit `{head[:12]}` (each exported by `git archive`). "
        "*identical*: both wrote byte-identical `summary.json` files.",
        "",
        "| units | checkpoints | records | peak RSS before (MiB) | peak RSS after (MiB) | "
        "memory after/before | wall before (s) | wall after (s) | time after/before | "
        "identical |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['units']} | {r['units'] // args.seeds} | {r['records']:,} | "
            f"{r['before'].peak_mib:.0f} | {r['after'].peak_mib:.0f} | "
            f"{r['after'].peak_mib / r['before'].peak_mib:.2f}x | {r['before'].wall_s:.1f} | "
            f"{r['after'].wall_s:.1f} | {r['after'].wall_s / r['before'].wall_s:.2f}x | "
            f"{'yes' if r['same'] else 'no'} |")
    last = rows[-1]
    lines += [
        "",
        f"Peak RSS from {first['units']} to {last['units']} units: before "
        f"{last['before'].peak_mib / first['before'].peak_mib:.2f}x, after "
        f"{last['after'].peak_mib / first['after'].peak_mib:.2f}x (target: within 1.5x, flat "
        "in the number of units).",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, body: str, start: str = START, end: str = END) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = start + body + end
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--units", help="run sizes, comma-separated (10,100,1000)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per checkpoint (5)")
    parser.add_argument("--baseline", help="git revision of the code before (default: the "
                        "parent of the commit that added src/biasscope/analysis_pass.py)")
    parser.add_argument("--after", default="HEAD", help="git revision of the code after "
                        "(default HEAD)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/biasscope-bench-report"))
    parser.add_argument("--data-dir", type=Path, help="real WinoBias files (the layout of "
                        "biasscope's --data-dir) instead of synthetic ones")
    parser.add_argument("--out", type=Path, help="markdown file for the results section")
    parser.add_argument("--one-checkpoint", action="store_true", help="time the report of a "
                        "one-checkpoint, one-seed run instead (see above)")
    parser.add_argument("--cpu", action="store_true", help="whole-process CPU time of the "
                        "first and the repeated report against --help instead (see above); "
                        "--units defaults to 10,20")
    parser.add_argument("--repeats", type=int, default=5, help="--one-checkpoint, --cpu: "
                        "repeats (5)")
    args = parser.parse_args(argv)
    args.units = args.units or ("10,20" if args.cpu else "10,100,1000")
    if args.cpu or args.one_checkpoint:  # a section of its own
        measure, start, end = ((cpu_section, CPU_START, CPU_END) if args.cpu
                               else (one_checkpoint, ONE_START, ONE_END))
        args.workdir.mkdir(parents=True, exist_ok=True)
        body = measure(args)
        print(body)
        if args.out is not None:
            write_section(args.out, body, start, end)
        return 0
    sizes = sorted(int(n) for n in args.units.split(","))
    if any(n < 2 * args.seeds or n % args.seeds for n in sizes):
        parser.error("every size must be a multiple of --seeds, with at least 2 checkpoints")
    args.workdir.mkdir(parents=True, exist_ok=True)
    runs = make_runs(args.workdir, sizes, args.seeds, args.data_dir)
    commit, before_src = exported_src(args.workdir, args.baseline)
    head, after_src = exported_src(args.workdir, args.after)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    rows = []
    for n in sizes:
        out = args.workdir / "reports" / f"{n}"
        before = measure(before_src, runs[n], out / "before.html")
        after = measure(after_src, runs[n], out / "after.html")
        same = before.summary == after.summary
        if not same:
            print(f"{n} units: the summaries differ ({out}/before.summary.json, "
                  f"{out}/after.summary.json)", file=sys.stderr)
        records = n * int((runs[n] / "complete").read_text().split()[0])
        rows.append({"units": n, "records": records, "before": before, "after": after,
                     "same": same})
        print(f"{n} units: peak {before.peak_mib:.0f} -> {after.peak_mib:.0f} MiB, "
              f"wall {before.wall_s:.1f} -> {after.wall_s:.1f} s, summaries "
              f"{'identical' if same else 'differ'}",
              file=sys.stderr, flush=True)
    body = render(rows, args, commit, head, time.perf_counter() - started,
                  (load_before, os.getloadavg()[0]))
    print(body)
    if args.out is not None:
        write_section(args.out, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
