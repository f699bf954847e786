"""``biasscope sensitivity``: how strongly reward models respond to constitutional principles."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.sensitivity import job

    templates = {name: getattr(args, f"{name}_template") for name in
                 ("critique", "revision", "away") if getattr(args, f"{name}_template") is not None}
    done = job.run(A.from_args(job.SensitivityConfig, args, templates=templates,
                               analysis=A.levels_given(args)))
    if done.prompts.sentence():
        print(done.prompts.sentence())
    print(done.perturber.usage.line())
    for sentence in (done.summary.get("sanity") or {}).get("sentences", []):
        print(sentence)
    print(f"run: {done.store.root}  summary: {done.store.summary_json}  report: {done.report}")
    A.warn_thin(done.summary)
    failed = done.summary.get("incomplete") or {}
    if failed.get("missing"):
        from biasscope.report.sensitivity import missing_text

        print(f"biasscope: {missing_text(failed['missing'])}", file=sys.stderr)
    if failed.get("failed_requests"):
        return A.failed(failed["failed_requests"], failed["requests"], "perturbations",
                        failed["first_error"])
    return 1 if failed else 0


def register(sub: Any) -> None:
    from biasscope.sensitivity.settings import LOCAL_HELP, RewardScoring, SensitivityConfig

    sens = sub.add_parser("sensitivity", help="constitutional sensitivity of reward models")
    for name, about in (("critique", "critique request ({conversation}, {query}, {response}, "
                         "{principle})"), ("revision", "revision request (also {critique})"),
                        ("away", "revision request for --direction away")):
        sens.add_argument(f"--{name}-template", help=f"file: {about}")
    for config in (SensitivityConfig, RewardScoring):
        A.settings(sens, config)
    A.backend_args(sens, helps=LOCAL_HELP)  # one --dtype: every local model's
    A.levels_args(sens)
    sens.set_defaults(func=run)
