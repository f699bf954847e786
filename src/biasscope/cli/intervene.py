"""``biasscope intervene``: fine-tune with and without an intervention, watched live."""

from __future__ import annotations

import argparse
import os
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.intervene import InterveneConfig, Training, analysis, run

    result = run(A.from_args(InterveneConfig, args, probes=A.probe_list(args, ["winobias-gender"]),
                             seeds=(args.seed,), training=A.from_args(Training, args),
                             analysis=analysis.Options(budget=args.budget)))
    print(result.summary["sentence"])
    print(f"run: {result.store.root}  report: {result.report}  "
          f"intervention: {result.intervention_report}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("intervene", help="fine-tune twice (control, intervention) and compare")
    p.add_argument("--model", required=True, help="hub id, local model dir or .gguf file")
    p.add_argument("--text", default="ethics-commonsense", help="ethics-commonsense, or a file: "
                   "one document per line, or JSONL with 'text'")
    p.add_argument("--method", default="cda", choices=["cda", "cda-one-sided", "drop-gendered"])
    p.add_argument("--performance", choices=["perplexity"], default="perplexity",
                   help="held-out perplexity (always measured)")
    for flag, kind, default in (("--steps", A.positive_int, 200), ("--every", A.positive_int, 25),
                                ("--batch-size", A.positive_int, 8), ("--lr", A.positive_float,
                                5e-5), ("--seq-len", A.positive_int, 128), ("--limit",
                                A.positive_int, 200), ("--eval-docs", A.positive_int, 100),
                                ("--held-out", A.probability, 0.1), ("--budget",
                                A.non_negative_float, 0.02), ("--seed", A.seed, 0)):
        p.add_argument(flag, type=kind, default=default, help=f"default {default}")
    p.add_argument("--freeze-embeddings", dest="train_embeddings", action="store_false")
    A.probe_arg(p, "probe scored at every evaluation", "winobias-gender")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    p.add_argument("--out", required=True, type=A.run_dir, help="run directory (resumes)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)
