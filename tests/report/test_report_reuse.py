"""A report reuses the analysis its run already stores, and only for exactly the same inputs:
same unit files, options, occupation statistics, performance series and versions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import biasscope
import biasscope.dynamics.summary.write as reporting
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.units import records_frame
from biasscope.dynamics.summary import reuse
from biasscope.probes import Probe, load_probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit
from test_breakdown import write_statistics
from test_report import make_run, pythia, synthetic_scores
from winobias_fixture import SENTENCES, write_winobias

OPTIONS = AnalysisConfig(n_resamples=200)
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture
def analyses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the analyses the report computes (one entry per `full_summary` call)."""
    calls: list[int] = []
    computed = reporting.full_summary

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        return computed(*args, **kwargs)

    monkeypatch.setattr(reporting, "full_summary", counted)
    return calls


def recomputed(run: Path, out: Path, options: AnalysisConfig = OPTIONS,
               data_dir: str | None = None) -> tuple[bytes, bytes]:
    """(summary, HTML) of a report that cannot reuse anything, written to ``out``."""
    saved = reuse.stored
    reuse.stored = lambda *_args: None  # type: ignore[assignment]
    try:
        page = reporting.write_dynamics_report(run, out, options, data_dir)
    finally:
        reuse.stored = saved  # type: ignore[assignment]
    return page.with_name(f"{page.stem}.summary.json").read_bytes(), page.read_bytes()


def test_a_second_report_reuses_the_stored_analysis_byte_for_byte(
        tmp_path: Path, winobias: Probe, analyses: list[int]) -> None:
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000)))
    page = reporting.write_dynamics_report(run, options=OPTIONS)
    first = (run / "summary.json").read_bytes(), page.read_bytes()
    assert len(analyses) == 1
    assert len(json.loads(first[0])[reuse.FIELD]["sha256"]) == 64
    again = reporting.write_dynamics_report(run, options=OPTIONS)
    assert len(analyses) == 1  # read back, not computed
    assert ((run / "summary.json").read_bytes(), again.read_bytes()) == first
    # Elsewhere: the run's summary is reused too, and equals a recomputed one byte for byte.
    other = reporting.write_dynamics_report(run, tmp_path / "out" / "r.html", OPTIONS)
    assert len(analyses) == 1
    reused = other.with_name("r.summary.json").read_bytes(), other.read_bytes()
    assert reused == recomputed(run, tmp_path / "fresh" / "r.html")
    assert reused[0] == first[0]
    # ... and a report elsewhere reuses the summary beside it.
    reporting.write_dynamics_report(run, tmp_path / "out" / "r.html", OPTIONS)
    assert len(analyses) == 2  # the one in recomputed()


def _add_unit(run: Path, probe: Probe) -> None:
    ckpt = pythia(steps=(2000,))[0]
    unit = Unit(ckpt.model, ckpt.revision, probe.name, 0, ckpt.step)
    items = probe.items(0)
    RunStore(run).write_unit(unit, records_frame(unit, items, synthetic_scores(items, 2000, 0)))


def _rewrite_unit(run: Path, probe: Probe) -> None:
    """Seed 1's records at step 1000 replaced by those of another step's model."""
    ckpt = pythia(steps=(1000,))[0]
    unit = Unit(ckpt.model, ckpt.revision, probe.name, 1, ckpt.step)
    items = probe.items(1)
    RunStore(run).write_unit(unit, records_frame(unit, items, synthetic_scores(items, 7000, 1)))


def _lose_unit(run: Path, _probe: Probe) -> None:
    sorted((run / "records").glob("*.parquet"))[-1].unlink()


def _performance(run: Path, _probe: Probe) -> None:
    performance.save(RunStore(run), "EleutherAI/pythia-70m", {0: 0.2, 1000: 0.4}, "accuracy")


CHANGES: dict[str, Callable[[Path, Probe], None]] = {
    "unit added": _add_unit, "unit rewritten": _rewrite_unit, "unit lost": _lose_unit,
    "performance imported": _performance}


@pytest.mark.parametrize("change", list(CHANGES))
def test_changed_records_are_analysed_again(change: str, tmp_path: Path, winobias: Probe,
                                            analyses: list[int]) -> None:
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000)))
    before = reporting.write_dynamics_report(run, options=OPTIONS)
    stale = (run / "summary.json").read_bytes(), before.read_bytes()
    CHANGES[change](run, winobias)
    after = reporting.write_dynamics_report(run, options=OPTIONS)
    assert len(analyses) == 2
    written = (run / "summary.json").read_bytes(), after.read_bytes()
    assert written != stale
    assert written == recomputed(run, tmp_path / "fresh" / "report.html")


@pytest.mark.parametrize("change", ["options", "version", "occupation statistics"])
def test_other_settings_or_versions_are_analysed_again(
        change: str, tmp_path: Path, winobias: Probe, analyses: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000)))
    reporting.write_dynamics_report(run, options=OPTIONS)
    stale = json.loads((run / "summary.json").read_text())
    options, data_dir = OPTIONS, None
    if change == "options":
        options = AnalysisConfig(n_resamples=300)
    elif change == "version":  # another biasscope: its package's __init__ names another one
        package = tmp_path / "biasscope"
        shutil.copytree(reuse.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
        init = package / "__init__.py"
        init.write_text(init.read_text().replace(f'"{biasscope.__version__}"', '"999.0"'))
        monkeypatch.setattr(reuse, "PACKAGE", package)
    else:
        data_dir = str(write_statistics(tmp_path / "data"))
    page = reporting.write_dynamics_report(run, options=options, data_dir=data_dir)
    assert len(analyses) == 2
    written = (run / "summary.json").read_bytes()
    assert json.loads(written)[reuse.FIELD] != stale[reuse.FIELD]
    assert (written, page.read_bytes()) == recomputed(
        run, tmp_path / "fresh" / "report.html", options, data_dir)
    if change == "options":
        assert json.loads(written)["analysis"]["n_resamples"] == 300
    if change == "occupation statistics":
        assert "occupation_statistics" in json.loads(written)["analysis"]["models"][
            "EleutherAI/pythia-70m"]


def test_a_report_without_the_data_dir_reuses_the_analysis_of_a_run_with_it(
        tmp_path: Path, winobias: Probe, analyses: list[int]) -> None:
    """A sweep analysed with --data-dir (occupation statistics from the file), then `biasscope
    report RUN` without it: the statistics come from summary.json, the same shares, so the
    analysis is reused, and an analysis with other shares is not."""
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000)))
    data_dir = str(write_statistics(tmp_path / "data"))
    reporting.write_dynamics_report(run, options=OPTIONS, data_dir=data_dir)
    first = (run / "summary.json").read_bytes()
    reporting.write_dynamics_report(run, options=OPTIONS)
    assert len(analyses) == 1 and (run / "summary.json").read_bytes() == first
    other = write_statistics(tmp_path / "other")
    table = other / "winogender" / "occupations-stats.tsv"
    lines = table.read_text().splitlines()
    head, row = lines[0], lines[1].split("\t")
    row[head.split("\t").index("bls_pct_female")] = "3.5"
    table.write_text("\n".join([head, "\t".join(row), *lines[2:]]) + "\n")
    reporting.write_dynamics_report(run, options=OPTIONS, data_dir=str(other))
    assert len(analyses) == 2


def imported_by_report(run: Path, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` `biasscope report RUN` imports, run in a fresh process."""
    code = ("import sys; from biasscope.cli.main import main; "
            f"main(['report', {str(run)!r}, '--quiet']); "
            f"print(*sorted(m for m in {modules!r} if m in sys.modules), sep=',')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, check=True)
    return [m for m in done.stdout.splitlines()[-1].split(",") if m]


def test_a_reused_report_imports_neither_scipy_nor_other_jobs(tmp_path: Path,
                                                              winobias: Probe) -> None:
    """`biasscope report` of an analysed run, in a fresh process: SciPy (most of a second) is
    imported only by a statistic computed, and the other jobs' modules not at all."""
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000)))
    reporting.write_dynamics_report(run, options=OPTIONS)
    assert imported_by_report(run, ("scipy", "biasscope.audit", "biasscope.counterfactual",
                                    "biasscope.sensitivity", "biasscope.judge")) == []


def test_a_first_report_imports_no_scipy(tmp_path: Path) -> None:
    """`biasscope report` of a run not analysed yet, in a fresh process: its tests and
    intervals are computed without importing SciPy (most of a second for its statistics, a
    tenth for ``scipy.special``), with the numbers SciPy gives (tests/core/test_bootstrap.py,
    test_ranktests.py, test_roots.py, test_normal.py). Sixty
    sentences per file, so that no test is small enough for SciPy's exact distributions."""
    sentences = [(subject, referenced, template.replace("[{p}]", f"[{{p}}] on day {day}"))
                 for day in range(10) for subject, referenced, template in SENTENCES]
    probe = load_probe("winobias-gender", data_dir=write_winobias(tmp_path / "data", sentences))
    run = make_run(tmp_path / "run", probe, pythia(steps=(0, 1000)))
    assert imported_by_report(run, ("scipy", "scipy.stats", "scipy.optimize",
                                    "scipy.special")) == []
    assert "analysed_from" in json.loads((run / "summary.json").read_text())
