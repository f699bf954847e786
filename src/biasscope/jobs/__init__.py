"""Every job by the kind its ``run.json`` records: what ``biasscope report RUN`` re-renders.

The one place that knows all the jobs, so it sits above them: a run is re-rendered by the job
that wrote it, with the analysis options given over those stored.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasscope.dynamics.job import reanalyse
from biasscope.report.audit import write_audit_report
from biasscope.report.counterfactual import write_counterfactual_report
from biasscope.report.html import missing_sentence
from biasscope.report.sensitivity import write_sensitivity_report
from biasscope.store.directory import RunStore


def render(run: str | Path, output: str | Path | None = None,
           analysis: Mapping[str, Any] | None = None, data_dir: str | None = None
           ) -> tuple[Path, str | None]:
    """The report of ``run`` again from its stored records (``output``: elsewhere, leaving the
    run untouched), and the URL it was published to: a remote run's own report goes beside
    its records."""
    store = RunStore(run)
    out = Path(output) if output else None
    kind = store.read_json("run.json").get("kind") if store.run_json.is_file() else None
    if kind in ("audit", "judge", "judge-audit"):
        page = write_audit_report(store, out)
    elif kind == "sensitivity":
        page = write_sensitivity_report(store, out)
    elif kind == "counterfactual":
        page = write_counterfactual_report(store, out)
    elif (store.root / "intervention.json").is_file():
        from biasscope.intervene import render as intervention_report

        page = intervention_report(store, out, data_dir)
    else:
        page = reanalyse(store, out, analysis, data_dir)
        if missing := store.missing_units():
            print(f"warning: {missing_sentence(missing, store.root)}", file=sys.stderr)
    if out is None and store.remote:
        store.publish(page)
        return page, f"{store.remote}/{page.name}"
    return page, None
