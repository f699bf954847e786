"""CrowS-Pairs (and Winogender) through biasscope and through lm-evaluation-harness itself, on
the same model, data and CPU: the numbers side by side per sentence, and CrowS-Pairs' wall time.

lm-evaluation-harness runs in its own environment (``--lmeval-python``) with the local task
configs of ``bench/lmeval_tasks/`` (its own ``crows_pairs`` choice and result functions on the
pinned original CSV; its ``winogender_all`` prompt and choices on the pinned TSVs). Each tool
runs in a fresh process per round, rounds interleaved so that load drifts hit both; the wall
time is the whole process (interpreter start, imports, model load, scoring), and the scoring
time the tool's own call (``sweep`` / ``simple_evaluate``).

Usage::

    PYTHONPATH=src python bench/bench_crows.py --data-dir DIR --lmeval-python VENV/bin/python \
        [--model HF_DIR | --tiny] [--limit N] [--repeats 3] [--out BENCHMARKS.md] [--json F]

``--tiny``: a random-init tiny GPT-NeoX (biasscope.demo.tiny) with a tokenizer trained on the
data, saved as a Hugging Face dir; ``--limit N``: the first N pairs and the first 3N
Winogender sentences (both tools read the same truncated copies). Prints JSON; exits non-zero
when a pair's verdict or Winogender's pick differs, or a log-likelihood by more than 1e-3.
``--reference float64``: lm-evaluation-harness once more in double precision, and each tool's
float32 CrowS-Pairs log-likelihoods against it (float32 rounding shows as both tools being
about as far from it as from each other). ``--version revised``: CrowS-Pairs' revised English
version (``crows-pairs:revised``; the harness's ``crows_pairs_english`` data) instead of the
original CSV, both tools on that file (needs ``crows-pairs/crows_pairs_EN_revised+210.csv`` in
the data dir).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASKS = Path(__file__).resolve().parent / "lmeval_tasks"
REVISED = "crows_pairs_EN_revised+210.csv"
TOLERANCE = 1e-3  # float32 forward passes batched differently


# --- children: one tool, one task, in a fresh process --------------------------------------

def child_biasscope(model: Path, data: Path, probe_name: str, batch: int) -> dict[str, Any]:
    from biasscope import sweep
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring import SweepConfig
    from biasscope.probes import load_probe

    revised = probe_name == "crows-pairs-revised"
    probe = load_probe("crows-pairs", data_dir=data, version="revised") if revised else \
        load_probe(probe_name, data_dir=data)
    # Winogender: an option of several tokens is scored by its first (lm-eval: all of them).
    options = HFConfig(batch_size=batch, device="cpu", dtype="float32",
                       first_token=probe_name == "winogender")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        store = sweep(probe, SweepConfig(from_dirs([model]), Path(out), [0]),
                      lambda cks: iter_scorers(cks, options), quiet=True)
        work = time.perf_counter() - start
        records = store.records()
    if probe_name.startswith("crows-pairs"):
        scores = {f"{pair_key(r.pair)}:{r.sentence}": float(r.logprob)
                  for r in records.itertuples()}
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)

        def one_token(word: str) -> bool:
            return len(tokenizer(" " + word, add_special_tokens=False)["input_ids"]) == 1

        scores = {str(r.item_id).removeprefix("winogender:"): [
            *(float(x) for x in r.option_logprobs),
            float(one_token(str(r.occupation)) and one_token(str(r.participant)))]
            for r in records.itertuples()}
    return {"work_s": work, "scores": scores}


def child_lmeval(model: Path, data: Path, task: str, batch: int, dtype: str = "float32"
                 ) -> dict[str, Any]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    os.chdir(data)  # the task configs read their files relative to the data dir
    start = time.perf_counter()
    result = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={model},dtype={dtype},device=cpu", tasks=[task],
        task_manager=TaskManager(include_path=str(TASKS)), batch_size=batch,
        log_samples=True, verbosity="ERROR")
    work = time.perf_counter() - start
    scores: dict[str, Any] = {}
    for s in result["samples"][task]:
        lls = [float(r[0][0]) for r in s["resps"]]
        if task.startswith("crows"):
            number = pair_key(s["doc"][next(k for k in s["doc"] if k.startswith("Unnamed"))])
            scores[f"{number}:more"], scores[f"{number}:less"] = lls
        else:
            scores[s["doc"]["sentid"].removesuffix(".txt")] = lls
    metrics = {k.split(",")[0]: v for k, v in result["results"][task].items()
               if isinstance(v, float) and "stderr" not in k}
    return {"work_s": work, "scores": scores, "metrics": metrics}


def pair_key(number: Any) -> str:
    """A pair's number as both tools give it: 4, "0004" and "4" alike; "LA0" as it is."""
    return str(int(number)) if str(number).isdigit() else str(number)


# --- parent ------------------------------------------------------------------------------

def spawn(python: str, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "BIASSCOPE_OWN_DATA": "1", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    done = subprocess.run([python, __file__, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{python} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.splitlines()[-1]), "wall_s": wall}


def prepare_data(source: Path, target: Path, limit: int) -> Path:
    """Copies of the pinned files; with ``limit``, the first ``limit`` pairs and 3x sentences."""
    revised = source / "crows-pairs" / REVISED
    for folder, names in (("crows-pairs", ("crows_pairs_anonymized.csv",
                                           *([REVISED] if revised.is_file() else []))),
                          ("winogender", ("all_sentences.tsv", "templates.tsv",
                                          "occupations-stats.tsv"))):
        (target / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy(source / folder / name, target / folder / name)
    if limit:
        import pandas as pd

        path = target / "crows-pairs" / "crows_pairs_anonymized.csv"
        pd.read_csv(path, keep_default_na=False).head(limit).to_csv(path, index=False)
        path = target / "crows-pairs" / REVISED
        if path.is_file():
            pd.read_csv(path, sep="\t", index_col=0).head(limit).to_csv(path, sep="\t")
        path = target / "winogender" / "all_sentences.tsv"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:1 + 3 * limit]))
    return target


def tiny_model(data: Path, target: Path) -> Path:
    """A random-init tiny GPT-NeoX whose tokenizer (trained on the data's sentences, each
    Winogender word repeated) makes every occupation and participant one token."""
    import pandas as pd

    from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer

    crows = pd.read_csv(data / "crows-pairs" / "crows_pairs_anonymized.csv",
                        keep_default_na=False)
    wino = pd.read_csv(data / "winogender" / "all_sentences.tsv", sep="\t", quoting=3)
    words = {w for sid in wino["sentid"] for w in sid.split(".")[:2]}
    texts = [*crows["sent_more"], *crows["sent_less"], *wino["sentence"],
             *[f"refers to the {w}" for w in sorted(words)] * 30]
    tokenizer = train_tokenizer(texts, vocab_size=4000)
    return Path(save(tiny_gpt_neox(len(tokenizer), seed=0), tokenizer, target))


def compare(ours: dict[str, Any], theirs: dict[str, Any], crows: bool) -> dict[str, Any]:
    keys = sorted(set(ours) & set(theirs))
    if crows:
        diff = max(abs(ours[k] - theirs[k]) for k in keys)
        pairs = sorted({k.split(":")[0] for k in keys})

        def verdicts(s: dict[str, Any]) -> list[bool]:
            return [s[f"{p}:more"] > s[f"{p}:less"] for p in pairs]

        def ld(s: dict[str, Any]) -> float:
            return statistics.fmean(abs(s[f"{p}:more"] - s[f"{p}:less"]) for p in pairs)

        a, b = verdicts(ours), verdicts(theirs)
        return {"pairs": len(pairs), "max_abs_ll_difference": diff,
                "verdicts_differ": sum(x != y for x, y in zip(a, b)),
                "biasscope": {"pct_stereotype": statistics.fmean(a), "likelihood_diff": ld(ours)},
                "lm-eval": {"pct_stereotype": statistics.fmean(b),
                            "likelihood_diff": ld(theirs)}}
    # Where both options are one token the two conventions coincide; elsewhere biasscope
    # scores the first token and lm-eval the whole word, and they differ by design.
    single = [k for k in keys if ours[k][2]]
    diff = max((abs(x - y) for k in single for x, y in zip(ours[k], theirs[k])), default=0.0)
    answer = {k: int(k.split(".")[2]) for k in keys}

    def acc(s: dict[str, Any], gender: str = "") -> float:
        picked = [int(s[k][1] > s[k][0]) == answer[k] for k in keys if k.endswith(gender)]
        return statistics.fmean(picked)

    def differ(among: list[str]) -> int:
        return sum((ours[k][1] > ours[k][0]) != (theirs[k][1] > theirs[k][0]) for k in among)

    several = [k for k in keys if not ours[k][2]]
    return {"sentences": len(keys), "one_token_options": len(single),
            "max_abs_ll_difference": diff, "picks_differ": differ(single),
            "several_token_options": len(several), "picks_differ_by_design": differ(several),
            **{tool: {g or "all": acc(s, g) for g in ("", "male", "female", "neutral")}
               for tool, s in (("biasscope", ours), ("lm-eval", theirs))}}


def render(result: dict[str, Any], section: str) -> str:
    t = result["timing"]
    lines = [f"<!-- bench:{section}:start -->",
             f"## CrowS-Pairs: biasscope and lm-evaluation-harness (CPU, {result['model']})", "",
             f"{result['started']}; {result['machine']}; load average {result['load_before']} "
             f"before, {result['load_after']} after; model: {result['model']}; "
             f"lm-eval {result['lmeval_version']} in its own environment; batch size "
             f"{result['batch_size']}; {t['rounds']} interleaved rounds, medians. "
             f"`{result['command']}`", "",
             "| tool | sentences | whole process (s) | scoring call (s) |",
             "| --- | --- | --- | --- |"]
    for tool in ("biasscope", "lm-eval"):
        lines.append(f"| {tool} | {2 * result['crows']['pairs']} | {t[tool]['wall_s']:.1f} | "
                     f"{t[tool]['work_s']:.1f} |")
    lines += ["", f"lm-eval's time over biasscope's, same run: {t['ratio_wall']:.2f}x whole "
              f"process, {t['ratio_work']:.2f}x scoring call. Same numbers: pct_stereotype "
              f"{result['crows']['biasscope']['pct_stereotype']:.4f} both, largest sentence "
              f"log-likelihood difference {result['crows']['max_abs_ll_difference']:.1e}.",
              f"<!-- bench:{section}:end -->"]
    return "\n".join(lines)


def write_section(path: Path, name: str, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--lmeval-python", default="/tmp/lmeval-venv/bin/python")
    parser.add_argument("--model", type=Path)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--reference", choices=("float64",), help="see the docstring")
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)  # children
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of CrowS-Pairs")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--section", default="crows", help="its name in --out")
    parser.add_argument("--render-from", type=Path, help="write --out from a --json file")
    parser.add_argument("--child", choices=("biasscope", "lmeval"))
    parser.add_argument("--task", default="crows-pairs")
    parser.add_argument("--version", choices=("original", "revised"), default="original",
                        help="CrowS-Pairs' version: the original CSV or the revised English "
                             "one lm-evaluation-harness's crows_pairs_english reads")
    args = parser.parse_args(argv)
    if args.child:
        run = child_biasscope if args.child == "biasscope" else child_lmeval
        task = args.task if args.child == "biasscope" else {
            "crows-pairs": "crows_pairs_pinned", "crows-pairs-revised":
            "crows_pairs_revised_pinned", "winogender": "winogender_pinned"}[args.task]
        extra = {"dtype": args.dtype} if args.child == "lmeval" else {}
        print(json.dumps(run(args.model, args.data_dir, task, args.batch_size, **extra)))
        return 0
    if args.render_from and args.out:
        write_section(args.out, args.section,
                      render(json.loads(args.render_from.read_text()), args.section))
        return 0
    if not (args.tiny or args.model):
        parser.error("give --model HF_DIR or --tiny")
    started, load_before = dt.datetime.now(dt.timezone.utc), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-crows-") as tmp:
        data = prepare_data(args.data_dir, Path(tmp) / "data", args.limit)
        model = tiny_model(data, Path(tmp) / "tiny") if args.tiny else args.model.resolve()
        common = ["--model", str(model), "--data-dir", str(data),
                  "--batch-size", str(args.batch_size)]
        crows_task = ["--task", "crows-pairs" if args.version == "original" else
                      "crows-pairs-revised"]
        rounds = []
        for _ in range(args.repeats):
            rounds.append({
                "biasscope": spawn(sys.executable, ["--child", "biasscope", *crows_task, *common]),
                "lm-eval": spawn(args.lmeval_python, ["--child", "lmeval", *crows_task,
                                                      *common])})
        wino = [spawn(py, ["--child", who, "--task", "winogender", *common])
                for who, py in (("biasscope", sys.executable), ("lmeval", args.lmeval_python))]
        reference = spawn(args.lmeval_python, ["--child", "lmeval", *crows_task, *common,
                                               "--dtype", args.reference]
                          ) if args.reference else None
    crows = compare(rounds[0]["biasscope"]["scores"], rounds[0]["lm-eval"]["scores"], True)
    crows["lm-eval reported"] = rounds[0]["lm-eval"]["metrics"]
    if reference is not None:
        crows[f"max_abs_ll_difference_to_lm-eval_{args.reference}"] = {
            tool: compare(rounds[0][tool]["scores"], reference["scores"], True)[
                "max_abs_ll_difference"] for tool in ("biasscope", "lm-eval")}
    winogender = compare(wino[0]["scores"], wino[1]["scores"], False)
    winogender["lm-eval reported"] = wino[1]["metrics"]
    med = {tool: {k: statistics.median(r[tool][k] for r in rounds) for k in ("wall_s", "work_s")}
           for tool in ("biasscope", "lm-eval")}
    version = subprocess.run([args.lmeval_python, "-c", "import importlib.metadata as m;"
                              "print(m.version('lm_eval'))"], capture_output=True, text=True)
    result = {"started": started.strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                         f"{platform.python_version()}",
              "load_before": " ".join(f"{x:.1f}" for x in load_before),
              "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
              "model": "tiny GPT-NeoX (random init)" if args.tiny else args.model.name,
              "command": "python bench/bench_crows.py " + " ".join(
                  a if not a.startswith("/") else Path(a).name for a in sys.argv[1:]),
              "lmeval_version": version.stdout.strip(), "batch_size": args.batch_size,
              "crows_version": args.version, "crows": crows, "winogender": winogender,
              "timing": {**med, "rounds": len(rounds),
                         "ratio_wall": med["lm-eval"]["wall_s"] / med["biasscope"]["wall_s"],
                         "ratio_work": med["lm-eval"]["work_s"] / med["biasscope"]["work_s"]}}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.out:
        write_section(args.out, args.section, render(result, args.section))
    bad = (crows["verdicts_differ"] or winogender["picks_differ"]
           or max(crows["max_abs_ll_difference"], winogender["max_abs_ll_difference"])
           > TOLERANCE)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
