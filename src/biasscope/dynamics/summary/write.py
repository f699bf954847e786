"""The dynamics job's last step: analyse a run's stored records, write its ``summary.json``
(the one writer of that file after a sweep) and render the HTML report from it.

`biasscope dynamics`, `biasscope report` and the demo all end here, so a re-analysis with
other options is the same call as the first one.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.core.steps import say
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.units import write_summary_json
from biasscope.dynamics.summary.build import full_summary, stored_options
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
    say(f"analysing {num(len(units))} unit{'' if len(units) == 1 else 's'} of {store.root}")
    summary = full_summary(store, options or stored_options(store), data_dir)
    own = store.root / "report.html"
    target = Path(output) if output is not None else own
    say(f"writing the report {target}")
    if target.resolve() == own.resolve():
        with contextlib.suppress(BiasscopeError):  # a read-only run can still be reported
            write_summary_json(store, summary, publish=False)
    else:
        write_json(target.with_name(f"{target.stem}.summary.json"), summary)
    return render_dynamics_report(store, summary, target)
