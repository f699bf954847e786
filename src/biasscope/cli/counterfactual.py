"""``biasscope counterfactual``: do reward models and judges score a text differently when
its gendered words and first names are swapped?"""

from __future__ import annotations

import argparse
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.counterfactual import job

    done = job.run(A.from_args(job.CounterfactualConfig, args,
                               analysis=A.levels_given(args)))
    thin = done.summary["analysis"].get("thin_tails")  # said once, as a warning
    for sentence in done.summary["sentences"]:
        if sentence != thin:
            print(sentence)
    print(f"report: {done.report}")
    A.warn_thin(done.summary)
    if failed := done.summary.get("incomplete"):
        return A.failed(failed["failed_requests"], failed["requests"], "judge requests",
                        failed["first_error"])
    return 0


def register(sub: Any) -> None:
    from biasscope.counterfactual.settings import CounterfactualConfig
    from biasscope.sensitivity.settings import LOCAL_HELP, RewardScoring

    cf = sub.add_parser("counterfactual", help="demographic counterfactual check of reward "
                        "models and judges")
    for config in (CounterfactualConfig, RewardScoring):
        A.settings(cf, config)
    A.backend_args(cf, helps=LOCAL_HELP)  # one --dtype: every local model's
    A.levels_args(cf)
    cf.set_defaults(func=run)
