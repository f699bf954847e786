"""``biasscope dynamics``: fairness across training checkpoints."""

from __future__ import annotations

import argparse
import os
from typing import Any

from biasscope.cli import args as A
from biasscope.probes.winobias import NAME


def run(args: argparse.Namespace) -> int:
    from biasscope.backends.checkpoints import parse_seeds
    from biasscope.backends.hf_model import HFOptions
    from biasscope.dynamics import job

    result = job.run(A.from_args(
        job.DynamicsConfig, args, models=args.model or [], seeds=parse_seeds(args.seeds),
        checkpoint_globs=args.checkpoint_glob or [], probes=A.probe_list(args, [NAME]),
        revisions=[r.strip() for r in (args.revisions or "").split(",") if r.strip()],
        scoring=A.from_args(HFOptions, args), analysis=A.analysis_given(args),
        performance=job.Performance(args.performance, args.performance_csv or [],
                                    args.lm_eval_results or [], args.lm_eval_metric),
        executing=A.from_args(job.Executing, args, kind=args.executor)))
    print(f"run: {result.store.root}  summary: {result.store.summary_json}  "
          f"report: {result.report}")
    return 0


def register(sub: Any) -> None:
    dyn = sub.add_parser("dynamics", help="fairness across training checkpoints")
    dyn.add_argument("--model", action="append", help="hub id (optionally @revision), local "
                     "model dir or .gguf file, bare or as hf:SPEC; repeatable")
    dyn.add_argument("--revisions", help="comma-separated hub revisions, e.g. step1000,step143000")
    dyn.add_argument("--checkpoint-glob", action="append", help="local checkpoint dirs, e.g. "
                     "'out/checkpoint-*' or NAME='out/checkpoint-*' (model NAME); repeatable")
    dyn.add_argument("--models-file", help="JSON list of {model, revisions} or "
                     "{checkpoint_glob, name} entries, for many models in one run")
    dyn.add_argument("--performance", choices=["lambada"],
                     help="also evaluate a performance probe at every checkpoint")
    dyn.add_argument("--performance-csv", action="append",
                     help="[MODEL=]FILE of step,value rows (higher is better)")
    dyn.add_argument("--lm-eval-results", action="append",
                     help="[MODEL=]GLOB of lm-evaluation-harness results JSON, one per checkpoint")
    dyn.add_argument("--lm-eval-metric", help="task/metric in those files, e.g. lambada_openai/acc")
    A.analysis_args(dyn)
    A.templates_arg(dyn)
    A.probe_arg(dyn, "probe to score at every checkpoint (default winobias-gender). Probes "
                "asked by chat (bbq, adult-counterfactual, professional-bias) are scored by "
                "each option's log-prob")
    dyn.add_argument("--seeds", default="0-4", type=A.seed_spec,
                     help="option-order seeds, e.g. 0-4 or 0,3")
    dyn.add_argument("--out", required=True, type=A.run_dir,
                     help="run directory, or an fsspec URL such as s3://bucket/run "
                     "(reused runs resume)")
    dyn.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"),
                     help="local copy of the datasets (<data-dir>/winobias/...)")
    dyn.add_argument("--prompt-template", help="file with winobias-gender's prompt template "
                     "({sentence}, {occupation}, {o1}, {o2}, {o3})")
    dyn.add_argument("--batch-size", type=A.positive_int, default=32)
    dyn.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    dyn.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16",
                                                         "bfloat16"])
    dyn.add_argument("--first-token", action="store_true",
                     help="score multi-token answer words by their first token")
    dyn.add_argument("--trust-remote-code", action="store_true",
                     help="run the model repo's own code (off by default)")
    dyn.add_argument("--allow-pickle", action="store_true",
                     help="load pickle weights (.bin/.pt), which can run code; off by default")
    dyn.add_argument("--rescore-changed", action="store_true",
                     help="a checkpoint whose weights changed since --out scored it: set its "
                          "old units aside and score it again (else it is refused)")
    dyn.add_argument("--limit", type=A.positive_int,
                     help="at most N items per probe and seed (smoke tests), the same "
                     "ones for every seed, recorded in run.json: winobias-gender a seeded "
                     "sample of whole pro/anti pairs stratified by subset and answer, bbq of "
                     "whole examples stratified by category; adult the first N/2 pairs, "
                     "others the first N")
    dyn.add_argument("--executor", choices=["local", "ray"], default="local",
                     help="local: this process (default); ray: one Ray task per checkpoint, "
                     "units written straight into --out (needs the 'ray' extra)")
    dyn.add_argument("--ray-address", help="Ray cluster to join, e.g. auto or "
                     "ray://head:10001 (default: a local Ray on this machine)")
    dyn.add_argument("--gpus-per-checkpoint", type=A.non_negative_float, default=0,
                     help="GPUs each Ray task (one checkpoint) requests; 0.5 lets two share "
                     "a GPU (default 0)")
    dyn.add_argument("--cpus-per-checkpoint", type=A.positive_float, default=1,
                     help="CPUs each Ray task requests (default 1)")
    A.renamed(dyn, "--gpus-per-unit", "--gpus-per-checkpoint (a Ray task scores one "
              "checkpoint's units)")
    A.renamed(dyn, "--cpus-per-unit", "--cpus-per-checkpoint (a Ray task scores one "
              "checkpoint's units)")
    dyn.add_argument("--quiet", action="store_true", help="no progress bars")
    dyn.set_defaults(func=run)
