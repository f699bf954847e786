"""Runs that cannot lie (issue #23, part 2): what an acceptance run on real data found. A report
never reads a records file changed after it was written; a changed GGUF file is refused before
minutes of conversion; one set of weights under two model names is said; ρ over a
handful of occupations gets no interval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import occupations
from biasscope.store.directory import RunStore

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def dynamics(out: Path, data: Path, *args: str) -> int:
    return main(["dynamics", "--data-dir", str(data), "--out", str(out), "--seeds", "0",
                 "--limit", "6", "--quiet", "--device", "cpu", *args])


def no_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "write_dynamics_report",
                        lambda run, *_, **__: Path(getattr(run, "root", run)) / "r.html")


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = [e for e in capsys.readouterr().err.splitlines() if "error" in e]
    return line


# --- 1: a records file changed after it was written ----------------------------------------

@pytest.fixture
def swept(checkpoint_dirs: list[Path], winobias_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as patch:
        no_report(patch)
        assert dynamics(out, winobias_dir, "--model", str(checkpoint_dirs[0])) == 0
    return out


def tamper(path: Path) -> None:
    """What pandas does to a file in place: another value, the checksum left as it was."""
    frame = pd.read_parquet(path)
    frame.loc[0, "target_rank"] = 99
    frame.to_parquet(path, index=False)


def test_report_refuses_a_records_file_changed_after_it_was_written(
        swept: Path, checkpoint_dirs: list[Path], winobias_dir: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(swept)]) == 0
    before = (swept / "summary.json").read_text()
    (unit,) = RunStore(swept).unit_files()
    tamper(unit)
    capsys.readouterr()
    assert main(["report", str(swept)]) == 2
    line = error_line(capsys)
    assert str(unit) in line and "run the same command" in line
    assert (swept / "summary.json").read_text() == before  # nothing written from it
    with pytest.raises(BiasscopeError, match="changed after it was written"):
        RunStore(swept).records()  # audit and sensitivity runs read through here
    # The advice holds: the same sweep sets the file aside and scores the unit again.
    with pytest.warns(UserWarning, match="cannot be trusted"), pytest.MonkeyPatch.context() as p:
        no_report(p)
        assert dynamics(swept, winobias_dir, "--model", str(checkpoint_dirs[0])) == 0
    assert pd.read_parquet(unit)["target_rank"].iloc[0] != 99
    assert main(["report", str(swept)]) == 0


def test_a_unit_without_a_checksum_is_read_as_before(swept: Path) -> None:
    store = RunStore(swept)
    (unit,) = store.unit_files()
    tamper(unit)
    (store.checksums_dir / f"{unit.name}.sha256").unlink()  # a run from an older biasscope
    assert store.records()["target_rank"].iloc[0] == 99
    assert main(["report", str(swept)]) == 0


# --- 2 and 3: GGUF files --------------------------------------------------------------------

@pytest.fixture
def ggufs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("gguf")
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf-cache"))
    no_report(monkeypatch)
    folder = tmp_path / "ggufs"
    folder.mkdir()
    return folder


def test_a_changed_gguf_is_refused_before_its_conversion(
        ggufs: Path, winobias_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from biasscope.backends import gguf
    from gguf_fixture import write_llama_gguf

    path = write_llama_gguf(ggufs / "tiny-step100.gguf")
    out = tmp_path / "run"
    assert dynamics(out, winobias_dir, "--model", str(path), "--first-token") == 0
    write_llama_gguf(path, seed=1)  # the same name, other weights

    def convert(*_: object) -> None:
        raise AssertionError("converted before the run refused the file")

    monkeypatch.setattr(gguf, "_convert", convert)
    capsys.readouterr()
    assert dynamics(out, winobias_dir, "--model", str(path), "--first-token") == 2
    line = error_line(capsys)
    assert str(path.resolve()) in line and "--rescore-changed" in line


def test_the_same_weights_under_two_model_names_are_said(
        ggufs: Path, winobias_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs branched from one checkpoint share it: allowed, and said in one line. Within
    one model the same weights are refused (tests/dynamics/test_checkpoint_content.py)."""
    from gguf_fixture import write_llama_gguf

    first = write_llama_gguf(ggufs / "a.gguf")
    second = ggufs / "b.gguf"
    shutil.copyfile(first, second)
    out = tmp_path / "run"
    assert dynamics(out, winobias_dir, "--model", str(first), "--first-token") == 0
    capsys.readouterr()
    assert dynamics(out, winobias_dir, "--model", str(second), "--first-token") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "same weights" in line]
    assert len(notes) == 1 and str(first.resolve()) in notes[0]
    assert str(second.resolve()) in notes[0] and "results will be the same" in notes[0]
    assert len(json.loads((out / "run.json").read_text())["checkpoints"]) == 2


# --- 4: ρ over a handful of occupations -----------------------------------------------------

def test_rho_over_too_few_occupations_has_no_interval() -> None:
    assert occupations.fewest_for_interval(0.95) == 5  # 2/4! = 0.083 > 0.05 > 2/5! = 0.017
    assert occupations.fewest_for_interval(0.99) == 6
    x = np.arange(5, dtype=np.float64)
    few = occupations.spearman(x[:3], -x[:3], 0.95, 200)
    assert few["estimate"] == pytest.approx(-1.0) and few["n"] == 3 and few["too_few"]
    assert few["low"] is None and few["high"] is None and few["p_value"] is None
    text = occupations.sentence("m", 7, {"spearman": few}, 0.95, [], False)
    assert "too few occupations for an interval (n=3)" in text and "CI" not in text
    enough = occupations.spearman(x, -x, 0.95, 200)
    assert enough["low"] is not None and "too_few" not in enough
    said = occupations.sentence("m", 7, {"spearman": enough}, 0.95, [], False)
    assert "(at least 95% of resamples gave -1.00, p < 0.0001;" in said  # every one: -1
