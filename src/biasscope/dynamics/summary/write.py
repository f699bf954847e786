"""The dynamics job's last step: analyse a run's stored records, write its ``summary.json``
(the one writer of that file after a sweep) and render the HTML report from it.

`biasscope dynamics`, `biasscope report` and the demo all end here, so a re-analysis with
other options is the same call as the first one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.core.steps import say
from biasscope.dynamics.analysis import occupations, performance
from biasscope.dynamics.analysis.config import AnalysisConfig, stored_options
from biasscope.dynamics.scoring.units import write_summary_json
from biasscope.dynamics.summary import reuse
from biasscope.dynamics.summary.build import full_summary
from biasscope.report.html import render_dynamics_report
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json


def write_dynamics_report(run_dir: Path | str | RunStore, output: Path | None = None,
                          options: AnalysisConfig | None = None,
                          data_dir: str | None = None) -> Path:
    """Analyse ``run_dir`` (a ``biasscope dynamics`` run) and render it to one HTML file;
    return its path.

    ``output`` defaults to ``<run_dir>/report.html``, with the recomputed summary in the run's
    ``summary.json``. Elsewhere, the run is left untouched and the summary goes next to the
    report (``X.summary.json`` beside ``X.html``): a re-analysis with other options must not
    change the run's summary under its own report. Files are written atomically.
    ``data_dir``: where to find the occupation statistics (else ``$BIASSCOPE_DATA_DIR`` or
    the cache; the report says so when they are not there).
    """
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(run_dir)
    if not store.root.is_dir():
        raise BiasscopeError(f"run directory {store.root} does not exist")
    store.read_json("run.json")  # a folder that is no run is said before "no records"
    units = store.unit_files()
    if not units:
        raise BiasscopeError(f"{store.root} has no records: run `biasscope dynamics` first")
    options = options or stored_options(store)
    statistics = occupations.for_run(store.summary_json, data_dir)
    key = reuse.inputs_key(store, options, statistics)
    own = store.root / "report.html"
    target = Path(output) if output is not None else own
    mine = target.resolve() == own.resolve()
    beside = summary_beside(target)
    if not mine and beside.exists() and not _is_summary(beside):
        raise BiasscopeError(f"{beside} exists and is no biasscope summary; the report "
                             f"{target} keeps its summary there: choose another --output")
    found = reuse.stored([store.summary_json] if mine else [beside, store.summary_json], key,
                         store.summary_json if statistics.reused else None)
    if found is not None:
        summary = found[0]
        say(f"reusing the analysis in {found[1]} (same records, options and code)")
    else:
        say(f"analysing {num(len(units))} unit{'' if len(units) == 1 else 's'} of "
            f"{store.root}")
        summary = {**full_summary(store, options, data_dir, statistics), reuse.FIELD: key}
    say(f"writing the report {target}")
    if mine:
        with contextlib.suppress(BiasscopeError):  # a read-only run can still be reported
            write_summary_json(store, summary, publish=False)
    else:
        write_json(beside, summary)
    return render_dynamics_report(store, summary, target)


def summary_beside(report: Path) -> Path:
    """Where the summary of a report written outside its run goes (``X.summary.json`` beside
    ``X.html``)."""
    return report.with_name(f"{report.stem}.summary.json")


def _is_summary(path: Path) -> bool:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(loaded, dict) and "analysis" in loaded


def reanalyse(store: RunStore, output: Path | None = None,
              analysis: Mapping[str, Any] | None = None, data_dir: str | None = None
              ) -> Path:
    """``biasscope report`` of a dynamics run: the analysis again with the settings given over
    those stored, then the report (``output``: elsewhere, leaving the run untouched). Here,
    not in `biasscope.dynamics.job`, so that a report imports none of the sweep's modules."""
    chosen: AnalysisConfig = stored_options(store, analysis)
    if output is None:  # a series a killed sweep staged, kept where run.json records it
        with contextlib.suppress(BiasscopeError):  # a read-only run: read in memory (`load`)
            performance.settle(store)
    return write_dynamics_report(store, output, chosen, data_dir)
