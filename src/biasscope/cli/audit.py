"""``biasscope audit`` (formerly ``biasscope probe``): ask a model every item of the audit
probes and read its answers with their detectors."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.audit import job

    if args.command == "probe":
        print("biasscope: `biasscope probe` is now `biasscope audit` (a probe is what the audit "
              "asks); the old name goes in a later release", file=sys.stderr)
    result = job.run(A.from_args(job.AuditConfig, args, analysis=A.levels_given(args)))
    summary = result.summary
    if unknown := summary.get("unknown_response_ids") or []:
        print(f"biasscope: {len(unknown)} response ids match no item of these probes, e.g. "
              f"{', '.join(unknown[:5])} (listed in summary.json)", file=sys.stderr)
    print(f"run: {result.store.root}  summary: {result.store.summary_json}  "
          f"report: {result.report}")
    A.warn_thin(summary)
    if summary.get("failed_requests"):
        return A.failed(summary["failed_requests"], summary["requests"], "requests",
                        summary["first_error"])
    return 0


def register(sub: Any) -> None:
    from biasscope.audit.settings import AuditConfig, Prompting

    audit = sub.add_parser("audit", aliases=["probe"], help="fairness audit: "
                           "adult-counterfactual, professional-bias, bbq")
    for config in (AuditConfig, Prompting):
        A.settings(audit, config)
    A.backend_args(audit)
    A.levels_args(audit)
    audit.set_defaults(func=run)
