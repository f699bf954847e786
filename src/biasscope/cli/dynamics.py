"""``biasscope dynamics``: fairness across training checkpoints."""

from __future__ import annotations

import argparse
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
        executing=A.from_args(job.Executing, args)))
    print(f"run: {result.store.root}  summary: {result.store.summary_json}  "
          f"report: {result.report}")
    return 0


def register(sub: Any) -> None:
    from biasscope.backends.hf_model import HFOptions
    from biasscope.dynamics.job import DynamicsConfig, Executing

    dyn = sub.add_parser("dynamics", help="fairness across training checkpoints")
    dyn.add_argument("--model", action="append", help="hub id (optionally @revision), local "
                     "model dir or .gguf file, bare or as hf:SPEC; repeatable")
    dyn.add_argument("--revisions", help="comma-separated hub revisions, e.g. step1000,step143000")
    dyn.add_argument("--checkpoint-glob", action="append", help="local checkpoint dirs, e.g. "
                     "'out/checkpoint-*' or NAME='out/checkpoint-*' (model NAME); repeatable")
    A.probe_arg(dyn, "probe to score at every checkpoint (default winobias-gender). Probes "
                "asked by chat (bbq, adult-counterfactual, professional-bias) are scored by "
                "each option's log-prob")
    dyn.add_argument("--seeds", default="0-4", type=A.seed_spec,
                     help="option-order seeds, e.g. 0-4 or 0,3")
    dyn.add_argument("--performance", type=A.performance_probe, help="also evaluate a "
                     "performance probe at every checkpoint: lambada, perplexity (ETHICS "
                     "held-out text) or perplexity:FILE (your held-out text)")
    dyn.add_argument("--performance-csv", action="append",
                     help="[MODEL=]FILE of step,value rows (higher is better)")
    dyn.add_argument("--lm-eval-results", action="append",
                     help="[MODEL=]GLOB of lm-evaluation-harness results JSON, one per checkpoint")
    dyn.add_argument("--lm-eval-metric", help="task/metric in those files, e.g. lambada_openai/acc")
    A.analysis_args(dyn)
    for config in (DynamicsConfig, HFOptions, Executing):
        A.settings(dyn, config)
    for old in ("--gpus-per-unit", "--cpus-per-unit"):
        A.renamed(dyn, old, old.replace("unit", "checkpoint") + " (a Ray task scores one "
                  "checkpoint's units)")
    dyn.set_defaults(func=run)
