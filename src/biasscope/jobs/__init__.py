"""Every job by the kind its ``run.json`` records: the entry point that writes such a run, and
the renderer that ``biasscope report RUN`` shows it with.

The one place that knows all the jobs, so it sits above them: a run is re-rendered by the job
that wrote it, with the analysis settings given over those stored. A new job is one entry.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.store.directory import RunStore
from biasscope.store.locks import run_lock
from biasscope.store.run_json import recorded_kind

# store, output (None: the run's own report), analysis settings given, --data-dir
Renderer = Callable[[RunStore, Path | None, Mapping[str, Any] | None, str | None], Path]


def _named(dotted: str) -> Any:
    """What ``dotted`` (``package.module.name``) names, its module imported now: a report
    imports its own job alone (the audit's imports weigh most of a second)."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Job:
    """A kind of run: ``entry`` names what writes it (one call, the command's whole work),
    ``render`` shows it again from its stored records."""

    entry: str
    render: Renderer

    @property
    def run(self) -> Callable[..., Any]:
        found: Callable[..., Any] = _named(self.entry)
        return found


def _dynamics(store: RunStore, out: Path | None, analysis: Mapping[str, Any] | None,
              data_dir: str | None) -> Path:
    from biasscope.dynamics.summary import unfinished
    from biasscope.dynamics.summary.write import reanalyse, summary_beside
    from biasscope.report.html import missing_sentence

    page = reanalyse(store, out, analysis, data_dir)
    # The summary the report was rendered from (given levels, or stored ones).
    _warn_thin(summary_beside(page) if out is not None else store.summary_json)
    if missing := store.missing_units():
        print(f"warning: {missing_sentence(missing, store.root)}", file=sys.stderr)
    if section := unfinished.unscored(store, store.read_json("run.json")):
        print(f"warning: {unfinished.sentence(section, store.root)}", file=sys.stderr)
    return page


def _warn_thin(summary: Path) -> None:
    """The sentence of ``summary`` (the summary.json a report was rendered from) that its
    level is too fine for its resamples (`biasscope.core.levels.said_thin`), on stderr as the
    command that wrote it says it: the page says it at its top, where a user who reads only
    the terminal does not look. Read as stored, nothing recomputed."""
    from biasscope.core.levels import said_thin

    with contextlib.suppress(OSError, ValueError):  # a read-only run may hold none
        if said := said_thin(json.loads(summary.read_text(encoding="utf-8"))):
            print(f"warning: {said}", file=sys.stderr)


def _intervention(store: RunStore, out: Path | None, analysis: Mapping[str, Any] | None,
                  data_dir: str | None) -> Path:
    """An intervention run stopped before its first analysis holds only the arms' records:
    their dynamics report. A finished one is reported with its stored analysis settings, so
    analysis flags given are refused, not ignored: ``--confidence`` and ``--resamples`` are
    `biasscope intervene`'s, whose rerun analyses the stored evaluations again."""
    from biasscope.intervene import job as intervene_job

    if not (store.root / intervene_job.FILE).is_file():
        return _dynamics(store, out, analysis, data_dir)
    if analysis:
        _refuse_analysis(store, analysis, "intervene", intervene_job.FILE,
                         "analyses its stored evaluations again without training")
    return intervene_job.render(store, out, data_dir)


def _summary(writer: str, again: str | None = None) -> Renderer:
    """A renderer of a job whose report shows its ``summary.json`` (no analysis settings);
    ``writer`` names its report writer. The run's own report is rendered under the run's
    lock, as the job writes summary.json and its report: read before a run's new summary and
    written after its new report, it would say less than summary.json. Analysis settings
    given are refused, not ignored: ``again``, the command whose rerun summarises the run's
    stored answers at other levels (``--confidence``, ``--resamples``), is named. A level
    too fine for the resamples is said on stderr, as the job said it (`_warn_thin`). A run
    stopped before its summary (Ctrl-C, a kill) is named with the command that finishes it:
    the writers' own line named `biasscope audit` for a judge's run too."""
    def render(store: RunStore, out: Path | None, analysis: Any, _data_dir: Any) -> Path:
        if analysis:
            _refuse_analysis(store, analysis, again)
        if again and not store.summary_json.is_file():
            raise BiasscopeError(
                f"{store.root} has no summary.json yet (its `biasscope {again}` stopped before "
                f"writing it): run `biasscope {again} --out {store.root}` again with the run's "
                "other flags to finish it; what it stored is kept")
        write = _named(writer)
        with run_lock(store) if out is None else contextlib.nullcontext():
            page = Path(write(store, out))
            _warn_thin(store.summary_json)  # the summary it rendered, before a job rewrites it
        return page
    return render


def _refuse_analysis(store: RunStore, analysis: Mapping[str, Any], again: str | None,
                     shown: str = "summary.json",
                     again_does: str = "summarises its stored answers again without asking "
                                       "the model") -> None:
    """One line saying that ``analysis`` (settings given to ``biasscope report``) does not
    apply to this run's report (which shows ``shown``), and what does: ``again`` (which
    ``again_does``) where they are the levels."""
    from biasscope.core.levels import NAMES
    from biasscope.dynamics.analysis.config import FIELDS, flag_of

    flags = ", ".join(flag_of(name) if name in FIELDS else repr(name) for name in analysis)
    kind = recorded_kind(store)
    a = f"a{'n' if kind[:1] in ('a', 'e', 'i', 'o', 'u') else ''} {kind}"
    if again and set(analysis) <= set(NAMES):
        raise BiasscopeError(
            f"{flags}: `biasscope report` shows {a} run's {shown} as it was written; give "
            f"{flags} to `biasscope {again} --out {store.root}` with the run's other flags, "
            f"which {again_does}")
    raise BiasscopeError(f"{flags}: {a} run's report takes no such setting; leave "
                         f"{'it' if len(analysis) == 1 else 'them'} out")


_AUDIT_REPORT = "biasscope.report.audit.write_audit_report"
JOBS: dict[str, Job] = {
    "dynamics": Job("biasscope.dynamics.job.run", _dynamics),
    "intervention": Job("biasscope.intervene.job.run", _intervention),
    "audit": Job("biasscope.audit.job.run", _summary(_AUDIT_REPORT, "audit")),
    "judge": Job("biasscope.judge.job.judge", _summary(_AUDIT_REPORT, "judge")),
    "judge-audit": Job("biasscope.judge.job.biases", _summary(_AUDIT_REPORT, "judge-audit")),
    "sensitivity": Job("biasscope.sensitivity.job.run",
                       _summary("biasscope.report.sensitivity.write_sensitivity_report",
                                "sensitivity")),
    "counterfactual": Job("biasscope.counterfactual.job.run", _summary(
        "biasscope.report.counterfactual.write_counterfactual_report", "counterfactual")),
}


def check_output(store: RunStore, out: Path) -> None:
    """Refuse an ``--output`` that would replace what is not a report: a file inside the run
    (its run.json, records or summary; only its own report.html may be rewritten), or an
    existing file that is no HTML page. The run and the user's files outlive a typo."""
    target = out.resolve()
    if target == (store.root / "report.html").resolve():
        return
    if target.is_relative_to(store.root.resolve()):
        raise BiasscopeError(f"--output {out} is inside the run {store.root}, where it would "
                             "replace the run's own files; write the report outside the run, "
                             "or leave --output out for RUN/report.html")
    if target.is_dir():
        raise BiasscopeError(f"--output {out} is a folder; give the path of an .html file")
    if target.exists():
        with target.open("rb") as f:
            head = f.read(512).lstrip().lower()
        if not head.startswith((b"<!doctype html", b"<html")):
            raise BiasscopeError(f"--output {out} exists and is not an HTML page; a report would "
                                 "replace it: choose another path")


def render(run: str | Path, output: str | Path | None = None,
           analysis: Mapping[str, Any] | None = None, data_dir: str | None = None
           ) -> tuple[Path, str | None]:
    """The report of ``run`` again from its stored records (``output``: elsewhere, leaving the
    run untouched), and the URL it was published to: a remote run's own report goes beside
    its records."""
    for name, value in (("run", run), ("output", output), ("data_dir", data_dir)):
        if not isinstance(value, (str, os.PathLike)) and (value is not None or name == "run"):
            raise BiasscopeError(f"{name}: give a path (text or a Path), not "
                                 f"{type(value).__name__} {value!r}")
    if analysis is not None and not isinstance(analysis, Mapping):
        raise BiasscopeError(f"analysis: give a dict such as {{'alpha': 0.05}}, not "
                             f"{type(analysis).__name__} {analysis!r}")
    store = RunStore(run)
    out = Path(output) if output else None
    if out is not None:
        check_output(store, out)
    kind = recorded_kind(store)
    if kind not in JOBS:
        raise BiasscopeError(f"{store.run_json} records a run of kind {kind!r}, which this "
                             f"biasscope does not know ({', '.join(JOBS)}): was it made by a "
                             "newer biasscope?")
    page = JOBS[kind].render(store, out, analysis, data_dir)
    if out is None and store.remote:
        store.publish(page)
        return page, f"{store.remote}/{page.name}"
    return page, None
