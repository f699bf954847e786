"""A sweep killed outright (SIGKILL: no except, no finally) between recording a performance
series' files in run.json and writing the series into performance.json leaves no series that
run.json does not vouch for. Before, performance.json was written first, and a kill before
run.json left a series the report used with no record of the file it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from biasscope.cli.main import main
from biasscope.core.digest import file_sha256

pytest.importorskip("torch")

CSV = "--performance-csv for small"


@pytest.fixture(autouse=True)
def no_html(monkeypatch: pytest.MonkeyPatch) -> None:
    """summary.json is written; the HTML page has its own tests."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "render_dynamics_report",
                        lambda store, summary, target: target)


def argv(out: Path, checkpoint_dirs: list[Path], data: Path, *extra: str) -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", f"small={glob}", "--data-dir", str(data),
            "--out", str(out), "--seeds", "0", "--limit", "6", "--device", "cpu", "--quiet",
            *extra]


def killed(where: str, args: list[str]) -> None:
    """``biasscope ARGS`` in a child process that dies as SIGKILL leaves it (``os._exit``)
    as soon as ``where`` (a dotted name, patched) is called."""
    code = textwrap.dedent(f"""
        import os
        from unittest import mock
        from biasscope.cli.main import main
        with mock.patch({where!r}, lambda *a, **k: os._exit(9)):
            main({args!r})
        """)
    path = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 9, done.stderr


def recorded(out: Path) -> dict[str, str]:
    data: dict[str, str] = json.loads((out / "run.json").read_text())["settings"]["data"]
    return data


def performance(out: Path) -> dict[str, object] | None:
    """The model's performance as the run's analysis states it."""
    summary = json.loads((out / "summary.json").read_text())
    value: dict[str, object] | None = summary["analysis"]["models"]["small"]["performance"]
    return value


def test_killed_before_run_json_records_the_file_no_series_is_reported(
        tmp_path, checkpoint_dirs, winobias_dir):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    killed("biasscope.dynamics.job.run_dynamics",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert CSV not in recorded(out)
    assert not (out / "performance.json").exists()  # before: the series, vouched for by none
    assert main(["report", str(out), "--quiet"]) == 0
    assert performance(out) is None
    assert not (out / "performance.pending.json").exists()  # thrown away, never read
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0  # a rerun without the flag
    assert performance(out) is None and CSV not in recorded(out)


def test_killed_after_run_json_records_the_file_the_next_call_keeps_the_series(
        tmp_path, checkpoint_dirs, winobias_dir):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    killed("biasscope.dynamics.imported.Imported.save",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert recorded(out)[CSV] == file_sha256(csv)
    assert not (out / "performance.json").exists()
    csv.unlink()  # the run keeps what it staged: the file is not needed again
    assert main(["report", str(out), "--quiet"]) == 0
    assert performance(out) == {"source": "performance (perf.csv)",
                                "values": {"10": 0.2, "20": 0.3, "30": 0.31},
                                "missing_steps": []}
    assert not (out / "performance.pending.json").exists()
    series = json.loads((out / "performance.json").read_text())["series"]["small"]
    assert series["values"] == {"10": 0.2, "20": 0.3, "30": 0.31}


def test_a_rerun_killed_after_its_units_keeps_its_series_for_the_next_call(
        tmp_path, checkpoint_dirs, winobias_dir):
    """The next sweep, not only the report, keeps what run.json records."""
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    killed("biasscope.dynamics.imported.Imported.save",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0
    assert performance(out) == {"source": "performance (perf.csv)",
                                "values": {"10": 0.1, "20": 0.2, "30": 0.25},
                                "missing_steps": []}
    assert not (out / "performance.pending.json").exists()
