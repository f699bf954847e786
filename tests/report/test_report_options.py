"""`biasscope report` options: every analysis setting is range-checked (typed or remembered in
summary.json) with a one-line error, and a report written elsewhere leaves the run alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.probes import Probe, load_probe
from test_report import make_run, pythia


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory, winobias: Probe) -> Path:
    root = make_run(tmp_path_factory.mktemp("reported") / "run", winobias,
                    pythia(steps=(0, 2000)))
    assert main(["report", str(root)]) == 0
    return root


@pytest.fixture
def run(reported: Path, tmp_path: Path) -> Path:
    """A fresh copy of a reported run (copying is cheaper than analysing again)."""
    return Path(shutil.copytree(reported, tmp_path / "run"))


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("biasscope: error: "), err
    return err


def test_output_elsewhere_leaves_the_run_alone(run: Path, tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in (run / "summary.json", run / "report.html")}
    out = tmp_path / "elsewhere" / "bh.html"
    assert main(["report", str(run), "--output", str(out), "--correction", "bh",
                 "--alpha", "0.05"]) == 0
    assert {p.name: p.read_bytes() for p in (run / "summary.json", run / "report.html")} \
        == before
    beside = json.loads((tmp_path / "elsewhere" / "bh.summary.json").read_text())["analysis"]
    assert (beside["correction"], beside["alpha"]) == ("bh", 0.05)
    assert "Benjamini-Hochberg" in out.read_text(encoding="utf-8")
    # The run's own report still follows the run's own (remembered) options.
    assert main(["report", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["analysis"]["correction"] == "holm"
    # Naming the run's own report is the default, not "elsewhere".
    assert main(["report", str(run), "--output", str(run / "report.html"), "--alpha",
                 "0.05"]) == 0
    assert json.loads((run / "summary.json").read_text())["analysis"]["alpha"] == 0.05
    assert not (run / "report.summary.json").exists()


@pytest.mark.parametrize(("inside", "says"), [
    ("run.json", "inside the run"), ("summary.json", "inside the run"),
    ("records/x.html", "inside the run"), ("../notes.txt", "is not an HTML page"),
    ("..", "is a folder")])
def test_an_output_that_would_replace_what_is_no_report_is_refused(
        run: Path, capsys: pytest.CaptureFixture[str], inside: str, says: str) -> None:
    """Before: --output RUN/run.json wrote the report over the run's run.json."""
    (run.parent / "notes.txt").write_text("mine\n")
    before = {p: p.read_bytes() for p in [*run.rglob("*"), run.parent / "notes.txt"]
              if p.is_file()}
    assert main(["report", str(run), "--output", str(run / inside)]) == 2
    assert says in one_line(capsys)
    assert {p: p.read_bytes() for p in before} == before
    assert main(["report", str(run), "--output", str(run.parent / "page.html")]) == 0
    assert main(["report", str(run), "--output", str(run.parent / "page.html")]) == 0
    (run.parent / "notes.summary.json").write_text("[1]\n")  # the summary's place beside
    capsys.readouterr()
    assert main(["report", str(run), "--output", str(run.parent / "notes.html")]) == 2
    assert "is no biasscope summary" in one_line(capsys)
    assert (run.parent / "notes.summary.json").read_text() == "[1]\n"


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--alpha", "nan", "must be a finite number"),
    ("--alpha", "5", "must be strictly between 0 and 1: write 0.05 for 5%"),
    ("--alpha", "0", "must be strictly between 0 and 1"),
    ("--alpha", "1", "must be strictly between 0 and 1"),
    ("--min-gap", "-0.01", "must be from 0 to ½ ln 2"),
    ("--min-gap", "inf", "must be a finite number"),
    ("--min-gap", "0.9", "must be from 0 to ½ ln 2"),
    ("--min-gap", "0.35", "must be from 0 to ½ ln 2"),
    ("--budget", "2", "must be from 0 to 1 (a fraction of the final performance): "
                      "write 0.02 for 2%"),
    ("--budget", "-0.1", "must be from 0 to 1"),
    ("--budget", "nan", "must be a finite number"),
])
def test_out_of_range_options_are_one_line_errors(reported: Path, tmp_path: Path, capsys,
                                                  flag: str, value: str, says: str) -> None:
    before = (reported / "summary.json").read_bytes()
    capsys.readouterr()
    assert main(["report", str(reported), flag, value, "--output",
                 str(tmp_path / "x.html")]) == 2
    assert f"{flag} {value}: {says}" in one_line(capsys)  # as written: 5, not 5.0
    assert (reported / "summary.json").read_bytes() == before  # so the run still reports
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--confidence", "95", "--confidence 95: must be strictly between 0 and 1: write 0.95 "
                           "for 95%"),
    ("--confidence", "99.9", "--confidence 99.9: must be strictly between 0 and 1: write "
                             "0.999 for 99.9%"),
    ("--confidence", "1", "--confidence 1: must be strictly between 0 and 1"),
    ("--confidence", "0", "--confidence 0: must be strictly between 0 and 1"),
    ("--confidence", "nan", "--confidence nan: must be a finite number"),
    ("--resamples", "50", "--resamples 50: must be a whole number from 100 to 100000"),
    ("--resamples", "0", "--resamples 0: must be a whole number from 100 to 100000"),
    ("--resamples", "200000", "--resamples 200000: must be a whole number from 100 to 100000"),
    ("--resamples", "2.5", "argument --resamples: '2.5' is not a whole number (give e.g. 2000)"),
    ("--confidence", "95%", "argument --confidence: '95%' is a percentage: write 0.95"),
])
def test_confidence_and_resamples_are_refused_in_one_line(reported: Path, tmp_path: Path,
                                                          capsys, flag: str, value: str,
                                                          says: str) -> None:
    """95 for 95% (the level as a percentage) says what to write; too few resamples leave
    every bound on the few outermost draws."""
    before = (reported / "summary.json").read_bytes()
    capsys.readouterr()
    argv = ["report", str(reported), flag, value, "--output", str(tmp_path / "x.html")]
    if says.startswith("argument"):  # refused as argparse parses it
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    else:
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert (reported / "summary.json").read_bytes() == before
    assert not (tmp_path / "x.html").exists()


def test_a_report_at_another_confidence_and_resamples_rewrites_the_summary(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report RUN --confidence 0.9 --resamples 300`: the summary is analysed again with
    them and says the level; a later `report RUN` keeps them, as it keeps --alpha."""
    assert main(["report", str(run), "--confidence", "0.9", "--resamples", "300"]) == 0
    analysis = json.loads((run / "summary.json").read_text())["analysis"]
    assert (analysis["confidence"], analysis["n_resamples"]) == (0.9, 300)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "Error bars are 90% bootstrap confidence intervals over prompts, 300 resamples" \
        in page
    assert main(["report", str(run)]) == 0
    analysis = json.loads((run / "summary.json").read_text())["analysis"]
    assert (analysis["confidence"], analysis["n_resamples"]) == (0.9, 300)
    # A level too fine for them names the flag that makes the bounds finer.
    assert main(["report", str(run), "--confidence", "0.99"]) == 0
    said = json.loads((run / "summary.json").read_text())["analysis"]["sentences"][0]
    assert "At the 99% confidence level, the WinoBias bootstrap intervals of 300" in said
    assert "give --resamples 2000 (the analysis' n_resamples) or more" in said
    # ... and says it on stderr, as `biasscope dynamics` does (it was in the summary alone).
    assert f"warning: {said}\n" in capsys.readouterr().err


def test_a_report_elsewhere_says_its_own_summary_s_thin_tails(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A report written outside the run says the level of the summary beside it, not the
    run's: a fine level given there warns; the run's own report, left at 0.95, does not."""
    out = tmp_path / "fine.html"
    assert main(["report", str(run), "--output", str(out), "--confidence", "0.999"]) == 0
    said = json.loads((tmp_path / "fine.summary.json").read_text())["analysis"]["thin_tails"]
    assert f"warning: {said}\n" in capsys.readouterr().err
    assert main(["report", str(run)]) == 0
    assert "warning:" not in capsys.readouterr().err


@pytest.mark.parametrize(("field", "value", "says"), [
    ("alpha", None, "must be a finite number"),
    ("alpha", 5, "must be strictly between 0 and 1: write 0.05 for 5%; pass --alpha or"),
    ("correction", "bonferroni", "must be one of holm, bh"),
    ("n_resamples", "2000", "is text, not a whole number (give e.g. 2000)"),
    ("n_resamples", True, "must be a whole number from 100 to 100000"),
    ("n_resamples", 10, "must be a whole number from 100 to 100000; pass --resamples or"),
    ("confidence", 1.5, "must be strictly between 0 and 1"),
    ("confidence", 95, "must be strictly between 0 and 1: write 0.95 for 95%; pass "
                       "--confidence or"),
    ("min_gap", "0.01", "is text, not a number (give e.g. 0.0)"),
])
def test_a_bad_remembered_option_names_the_file_and_field(run: Path, capsys, field: str,
                                                          value: object, says: str) -> None:
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["analysis"][field] = value
    path.write_text(json.dumps(summary))
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    err = one_line(capsys)
    assert f"{path}: analysis.{field} = {json.dumps(value)} {says}" in err
    assert "delete the field" in err
    if field == "alpha" and value is None:  # the option given again replaces the stored one
        assert main(["report", str(run), "--alpha", "0.05"]) == 0


def test_summary_of_another_shape_falls_back_to_the_defaults(run: Path) -> None:
    (run / "summary.json").write_text("[1, 2]")
    assert main(["report", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["analysis"]["alpha"] == 0.01


def test_the_library_checks_too() -> None:
    with pytest.raises(BiasscopeError, match=r"analysis setting alpha = 5: must be strictly"):
        AnalysisConfig(alpha=5)
    with pytest.raises(BiasscopeError, match=r"analysis setting correction = 'bonf'"):
        AnalysisConfig(correction="bonf")  # type: ignore[arg-type]


def test_dynamics_checks_its_analysis_options_before_the_sweep(tmp_path: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["dynamics", "--model", "org/never-loaded", "--out", str(tmp_path / "run"),
                 "--alpha", "5"]) == 2
    assert "--alpha 5: must be strictly between 0 and 1" in one_line(capsys)
    assert not (tmp_path / "run" / "records").exists()
    for flag, value in (("--confidence", "95"), ("--resamples", "10")):
        assert main(["dynamics", "--model", "org/never-loaded", "--out",
                     str(tmp_path / "run"), flag, value]) == 2
        assert f"{flag} {value}" in one_line(capsys)
        assert not (tmp_path / "run" / "records").exists()
