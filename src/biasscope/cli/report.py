"""``biasscope report`` (a run's report again, from its stored records) and ``biasscope
demo`` (a tiny biased model trained, swept and reported)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from biasscope.cli import args as A
from biasscope.core.config import PROBABILITY, SEED


def report(args: argparse.Namespace) -> int:
    from biasscope.core.steps import quiet
    from biasscope.jobs import render

    with quiet(args.quiet):
        page, published = render(args.run, args.output, A.analysis_given(args), args.data_dir)
    print(f"{page}  (published to {published})" if published else page)
    return 0


def demo(args: argparse.Namespace) -> int:
    from biasscope.demo import run_demo

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)  # an unwritable --out fails now, not after training
    result = run_demo(out=out, bias=args.bias, seed=args.seed, quiet=args.quiet)
    print(f"run: {result.run_dir}  report: {result.report}")
    return 0


def _output(text: str) -> str:
    """``--output ""`` (an unset ``$VARIABLE``) is refused: it wrote RUN/report.html, the
    run's own report, which a report elsewhere is meant to leave as it is."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give the HTML file to write, or leave "
                                         "--output out to write RUN/report.html")
    return text


def register(sub: Any) -> None:
    shown = sub.add_parser("report", help="rebuild the HTML report of a run from its records")
    shown.add_argument("run", help="run directory or URL")
    shown.add_argument("--output", type=_output, help="HTML path (default: RUN/report.html)")
    shown.add_argument("--data-dir", help="local copy of the datasets, for the occupation "
                       "statistics (<data-dir>/winogender/occupations-stats.tsv)")
    A.analysis_args(shown)
    shown.add_argument("--quiet", action="store_true",
                       help="no line on stderr as the analysis and the report start")
    shown.set_defaults(func=report)

    trained = sub.add_parser("demo", help="train a tiny model with injected bias and sweep it")
    trained.add_argument("--out", default="demo-run", type=A.run_dir,
                         help="run directory for the trained checkpoints, the sweep and its "
                              "report (default demo-run)")
    trained.add_argument("--bias", type=A.typed(PROBABILITY), default=0.95,
                         help="share of stereotypical pronouns in the corpus: 0.5 none, 1.0 "
                              "always, below 0.5 anti-stereotypical (default 0.95)")
    trained.add_argument("--seed", type=A.typed(SEED), default=0,
                         help="seed of the corpus and the training (default 0)")
    trained.add_argument("--quiet", action="store_true",
                         help="no line on stderr as each step starts")
    trained.set_defaults(func=demo)
