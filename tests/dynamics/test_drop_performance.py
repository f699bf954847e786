"""`biasscope drop` of a checkpoint whose step has an imported performance value: the value
goes to the dropped folder with its units, and run.json says so. Before, performance.json
kept it: the run held performance for a step it no longer had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.core.digest import file_sha256

pytest.importorskip("torch")

CSV = "--performance-csv for train0"
VALUES = {"10": 0.2, "20": 0.3, "30": 0.31, "40": 0.32}  # step 40: in the file, not the run


def sweep_args(checkpoint_dirs: list[Path], data: Path, out: Path, *extra: str) -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", glob, "--data-dir", str(data), "--out", str(out),
            "--seeds", "0", "--limit", "6", "--device", "cpu", "--quiet", *extra]


@pytest.fixture(scope="module")
def csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("perf") / "perf.csv"
    path.write_text("step,lambada\n" + "".join(f"{k},{v}\n" for k, v in VALUES.items()))
    return path


@pytest.fixture(scope="module")
def swept(checkpoint_dirs, winobias_dir, csv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("swept") / "run"
    assert main(sweep_args(checkpoint_dirs, winobias_dir, out, "--performance-csv",
                           str(csv))) == 0
    return out


@pytest.fixture
def run(swept, tmp_path) -> Path:
    return Path(shutil.copytree(swept, tmp_path / "run"))


def stored(path: Path) -> dict[str, Any]:
    values: dict[str, Any] = json.loads(path.read_text())["series"]["train0"]["values"]
    return values


def stated(run: Path) -> dict[str, Any]:
    """The performance values the run's analysis states."""
    summary = json.loads((run / "summary.json").read_text())
    values: dict[str, Any] = summary["analysis"]["models"]["train0"]["performance"]["values"]
    return values


def test_a_dropped_step_s_performance_goes_with_its_units(run, csv):
    record = json.loads((run / "run.json").read_text())["settings"]["data"]
    assert stated(run) == {"10": 0.2, "20": 0.3, "30": 0.31}
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    (folder,) = (run / "dropped").iterdir()
    assert stored(run / "performance.json") == {"10": 0.2, "30": 0.31, "40": 0.32}
    assert json.loads((folder / "performance.json").read_text()) == {"series": {"train0": {
        "source": "performance (perf.csv)", "values": {"20": 0.3}}}}
    meta = json.loads((run / "run.json").read_text())
    assert meta["settings"]["data"] == record and record[CSV] == file_sha256(csv)
    assert meta["dropped"] == [{"folder": f"dropped/{folder.name}",
                                "checkpoints": ["train0@checkpoint-20"],
                                "performance": {"train0": [20]}}]
    assert stated(run) == {"10": 0.2, "30": 0.31}
    assert main(["report", str(run), "--quiet"]) == 0  # `biasscope report`: none for step 20
    assert stated(run) == {"10": 0.2, "30": 0.31}
    assert "20" not in stored(run / "performance.json")


def test_a_rerun_with_the_file_leaves_a_dropped_step_out_until_it_lists_it_again(
        run, csv, checkpoint_dirs, winobias_dir):
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    some = [str(d) for d in checkpoint_dirs if not d.name.endswith("-20")]
    args = ["dynamics", *[a for d in some for a in ("--checkpoint-glob", f"train0={d}")],
            "--data-dir", str(winobias_dir), "--out", str(run), "--seeds", "0", "--limit", "6",
            "--device", "cpu", "--quiet", "--performance-csv", str(csv)]
    assert main(args) == 0  # the file copied whole, but for the step the run dropped
    assert "20" not in stored(run / "performance.json")
    assert main(sweep_args(checkpoint_dirs, winobias_dir, run, "--performance-csv",
                           str(csv))) == 0  # lists checkpoint-20 again: scored afresh
    assert stored(run / "performance.json")["20"] == 0.3
    assert stated(run) == {"10": 0.2, "20": 0.3, "30": 0.31}


def test_a_drop_killed_before_it_rewrote_performance_json_states_none_for_the_step(run):
    """run.json, written first, says which steps went: a performance.json still holding one
    (the drop killed before it was rewritten) is read without it."""
    from biasscope.dynamics.analysis import performance
    from biasscope.store.directory import RunStore

    before = (run / "performance.json").read_bytes()
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    (run / "performance.json").write_bytes(before)
    summary = json.loads((run / "summary.json").read_text())
    assert performance.load(RunStore(run), summary)["train0"][1] == {10: 0.2, 30: 0.31,
                                                                      40: 0.32}
    assert main(["report", str(run), "--quiet"]) == 0
    assert stated(run) == {"10": 0.2, "30": 0.31}


def test_a_run_from_before_the_records_compares_its_values_without_the_dropped_step(
        run, csv, checkpoint_dirs, winobias_dir):
    """Its values are its record (test_performance_files): the step dropped from them is not
    a value that differs from the file's."""
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    meta = json.loads((run / "run.json").read_text())
    del meta["settings"]["data"][CSV]
    (run / "run.json").write_text(json.dumps(meta))
    some = [str(d) for d in checkpoint_dirs if not d.name.endswith("-20")]
    args = ["dynamics", *[a for d in some for a in ("--checkpoint-glob", f"train0={d}")],
            "--data-dir", str(winobias_dir), "--out", str(run), "--seeds", "0", "--limit", "6",
            "--device", "cpu", "--quiet", "--performance-csv", str(csv)]
    assert main(args) == 0
    assert json.loads((run / "run.json").read_text())["settings"]["data"][CSV] == (
        file_sha256(csv))


def test_a_sweep_listing_it_again_without_the_file_takes_its_value_back(
        run, checkpoint_dirs, winobias_dir):
    """The same checkpoint (its fingerprint) listed again without --performance-csv: its value
    comes back from the dropped folder. Before, the step had none, and nothing said so."""
    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    assert main(sweep_args(checkpoint_dirs, winobias_dir, run)) == 0
    assert stored(run / "performance.json") == {"10": 0.2, "20": 0.3, "30": 0.31, "40": 0.32}
    assert stated(run) == {"10": 0.2, "20": 0.3, "30": 0.31}


def test_a_checkpoint_listed_again_with_other_weights_is_noted_without_a_value(
        run, checkpoint_dirs, winobias_dir, capsys):
    """The value was measured on the weights dropped: other weights under that name get none,
    and a note says what to give."""
    from biasscope.dynamics.drop import MissingPerformanceWarning

    assert main(["drop", str(run), "train0@checkpoint-20", "--quiet"]) == 0
    (folder,) = (run / "dropped").iterdir()
    kept = json.loads((folder / "checkpoints.json").read_text())
    kept["dropped"][0]["fingerprint"] = "other weights"
    (folder / "checkpoints.json").write_text(json.dumps(kept))
    with pytest.warns(MissingPerformanceWarning, match=(
            "train0 step 20: listed again after `biasscope drop`, with other weights than "
            "those it was dropped with, so it has no performance value; give the model's "
            "series again")):
        assert main(sweep_args(checkpoint_dirs, winobias_dir, run)) == 0
    assert "20" not in stored(run / "performance.json")
    assert "20" not in stated(run)
