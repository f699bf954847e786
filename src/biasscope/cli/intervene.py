"""``biasscope intervene``: fine-tune with and without an intervention, watched live."""

from __future__ import annotations

import argparse
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.intervene import InterveneConfig, InterventionAnalysisConfig, run
    from biasscope.intervene.job import KEPT, kept_analysis

    given = {name: getattr(args, name) for name in KEPT if getattr(args, name) is not None}
    kept = kept_analysis(args.out, {**A.levels_given(args), **given})
    analysis = A.from_args(InterventionAnalysisConfig, args, **kept)
    result = run(A.from_args(InterveneConfig, args, seeds=(args.seed,), analysis=analysis))
    print(result.summary["sentence"])
    print(f"run: {result.store.root}  report: {result.report}  "
          f"intervention: {result.intervention_report}")
    return 0


def register(sub: Any) -> None:
    from biasscope.intervene.settings import InterveneConfig, InterventionAnalysisConfig, Training

    p = sub.add_parser("intervene", help="fine-tune twice (control, intervention) and compare")
    p.add_argument("--performance", choices=["perplexity"], default="perplexity",
                   help="held-out perplexity (always measured)")
    for config in (InterveneConfig, Training):
        A.settings(p, config)
    A.settings(p, InterventionAnalysisConfig, stored=True)  # a rerun keeps the run's (KEPT)
    A.levels_args(p)
    p.set_defaults(func=run)
