"""Reports that show what the run holds (issue #23): the snapshot's accuracies per answer, the
occupation statistics a run was analysed with, and units whose records file went missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.checkpoints import Checkpoint
from biasscope.cli.main import main
from biasscope.dynamics.summary.build import AnalysisConfig
from biasscope.probes import Probe, load_probe
from test_breakdown import BLS_TITLE, make_run, write_statistics
from test_report import figures, section

OPTIONS = AnalysisConfig(n_resamples=200)
ACCURACY = "Snapshot: accuracy per correct answer"


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


def _summary(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    return loaded


# --- 10: the snapshot shows the accuracies per answer, with their CIs ------------------------

def test_snapshot_shows_accuracy_per_answer_with_intervals(tmp_path: Path,
                                                           winobias: Probe) -> None:
    run = make_run(tmp_path / "run", winobias, [Checkpoint("a/model", "a/model", "step7", 7),
                                                Checkpoint("b/model", "b/model", "step7", 7)])
    assert main(["report", str(run), "--alpha", "0.01"]) == 0
    summary = _summary(run)
    ckpt = next(c for c in summary["checkpoints"] if c["model"] == "a/model")
    ci = summary["analysis"]["models"]["a/model"]["ci"]["7"]
    for answer in ("male", "female", "not specified"):
        low, high = ci[f"accuracy/{answer}"]
        assert low <= ckpt["mean"][f"accuracy/{answer}"] <= high and low < high
    page = (run / "report.html").read_text(encoding="utf-8")
    assert f"<h2>{ACCURACY}</h2>" in page
    traces = next(t for t, layout in figures(page)
                  if "accuracy" in str(layout.get("yaxis", {}).get("title", ""))
                  and any("correct" in str(x) for tr in t for x in tr["x"]))
    assert [t["name"] for t in traces] == ["a/model", "b/model"]
    first = traces[0]
    assert first["x"] == ["correct “male”", "correct “female”", "correct “not specified”"]
    assert first["y"][0] == pytest.approx(ckpt["mean"]["accuracy/male"])
    low, high = ci["accuracy/male"]
    assert first["error_y"]["array"][0] == pytest.approx(high - first["y"][0])
    assert first["error_y"]["arrayminus"][0] == pytest.approx(first["y"][0] - low)
    # the JSD-P bars' long labels are broken over two lines, not cut off
    jsdp = figures(page)[0][0][0]
    assert "JSD-P of “male”<br>where “not specified”" in jsdp["x"]


# --- 11: `report RUN` without --data-dir keeps the occupation statistics the run had ---------

def test_report_without_data_dir_keeps_the_occupation_statistics(
        tmp_path: Path, winobias: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "empty-cache"))
    run = make_run(tmp_path / "run", winobias, [Checkpoint("a/model", "a/model", "step7", 7)])
    bls = write_statistics(tmp_path / "bls")
    assert main(["report", str(run), "--data-dir", str(bls)]) == 0
    before = _summary(run)["analysis"]
    assert before["models"]["a/model"]["occupation_statistics"]["spearman"]["n"] >= 3
    stored = (run / "summary.json").read_bytes()
    assert main(["report", str(run)]) == 0  # no --data-dir, nothing in the cache
    # The same records and the same shares: the analysis is the one computed from the file.
    assert (run / "summary.json").read_bytes() == stored
    assert "Plotly.newPlot" in section((run / "report.html").read_text(encoding="utf-8"),
                                       BLS_TITLE)
    # Records that changed are analysed again, with the shares summary.json kept.
    (run / "summary.json").write_text(stored.decode().replace('"sha256": "', '"sha256": "0'))
    assert main(["report", str(run)]) == 0
    after = _summary(run)["analysis"]
    occ = after["occupation_statistics"]
    assert occ["unavailable"] is None and occ["bls_pct_female"] == before[
        "occupation_statistics"]["bls_pct_female"]
    assert occ["matched"] == before["occupation_statistics"]["matched"]
    assert occ["path"] == before["occupation_statistics"]["path"] and "reused" in occ
    assert (after["models"]["a/model"]["occupation_statistics"]
            == before["models"]["a/model"]["occupation_statistics"])
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "Plotly.newPlot" in section(page, BLS_TITLE)
    assert "stored in summary.json" in section(page, BLS_TITLE)
    # with --data-dir again the file is read, and the note goes
    assert main(["report", str(run), "--data-dir", str(bls)]) == 0
    assert "reused" not in _summary(run)["analysis"]["occupation_statistics"]


# --- 15: a unit whose records file is gone is said, and the same command scores it again ------

def test_missing_unit_is_said_and_a_rerun_scores_it_again(
        tmp_path: Path, winobias_dir: Path, checkpoint_dirs: list[Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    command = ["dynamics", "--model", str(checkpoint_dirs[0]), "--model",
               str(checkpoint_dirs[1]), "--data-dir", str(winobias_dir), "--seeds", "0",
               "--limit", "12", "--device", "cpu", "--quiet", "--out", str(run)]
    assert main(command) == 0
    units = sorted((run / "records").glob("*.parquet"))
    assert len(units) == 2
    gone = units[1]
    gone.unlink()
    capsys.readouterr()
    assert main(["report", str(run), "--quiet"]) == 0  # no step lines: the warning stays
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: 1 unit of this run has no records")
    assert gone.name in err and f"--out {run}" in err
    summary = _summary(run)
    assert summary["missing_units"] == [gone.name]
    assert len(summary["checkpoints"]) == 1
    page = (run / "report.html").read_text(encoding="utf-8")
    assert gone.name in page and "Run the same `biasscope dynamics` command again" in page
    # as said: the same command into the same --out scores the missing unit again
    assert main(command) == 0
    assert gone.is_file() and len(list((run / "records").glob("*.parquet"))) == 2
    summary = _summary(run)
    assert "missing_units" not in summary and len(summary["checkpoints"]) == 2
    capsys.readouterr()
    assert main(["report", str(run), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert gone.name not in (run / "report.html").read_text(encoding="utf-8")
