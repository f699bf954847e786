"""``intervene --confidence`` and ``--resamples``, as every other summarising command takes
them: checked before anything runs, handed to the analysis, kept from the run's last analysis
(intervention.json's ``options``) where not given, as ``--budget`` is, and named by ``biasscope
report``'s refusal.
Before, the command had neither: its analysis ran at 95% from 2000 resamples whatever the user
wanted, and only a notebook could change them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import biasscope.intervene as intervene
from biasscope.cli.main import main


def _argv(out: Path, *extra: str) -> list[str]:
    return ["intervene", "--model", str(out.parent / "no-model"), "--out", str(out), *extra]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The configs `intervene` is run with (nothing trains)."""
    configs: list[Any] = []

    def run(config: Any) -> Any:
        configs.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(intervene, "run", run)
    return configs


def test_the_levels_given_reach_the_analysis_and_the_others_stay_as_stored(tmp_path, asked):
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(_argv(out, "--confidence", "0.9", "--resamples", "500", "--budget", "0.05"))
    got = asked.pop().analysis
    assert (got.confidence, got.n_resamples, got.budget) == (0.9, 500, 0.05)
    with pytest.raises(SystemExit):
        main(_argv(out))
    assert (asked[-1].analysis.confidence, asked[-1].analysis.n_resamples) == (0.95, 2000)
    out.mkdir()
    (out / "intervention.json").write_text(json.dumps(
        {"options": {"confidence": 0.9, "n_resamples": 500, "budget": 0.05}}))
    with pytest.raises(SystemExit):
        main(_argv(out, "--resamples", "1000"))
    got = asked.pop().analysis
    assert (got.confidence, got.n_resamples, got.budget) == (0.9, 1000, 0.05)


def test_a_rerun_without_budget_keeps_the_run_s_and_one_with_it_uses_it(tmp_path, asked):
    """A rerun without ``--budget`` went back to 2% while it kept the levels: the stored
    evaluations were analysed again under another budget, recommending another step (and
    moving the saved weights) under the same run. A budget given is used, and stored by it."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "intervention.json").write_text(json.dumps({"options": {"budget": 0.1}}))
    with pytest.raises(SystemExit):
        main(_argv(out))
    assert asked.pop().analysis.budget == 0.1
    with pytest.raises(SystemExit):
        main(_argv(out, "--budget", "0"))
    assert asked.pop().analysis.budget == 0.0
    with pytest.raises(SystemExit):
        main(_argv(tmp_path / "new"))
    assert asked.pop().analysis.budget == 0.02


def test_a_bad_budget_is_refused_in_its_flag_s_words(tmp_path, asked, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_argv(tmp_path / "run", "--budget", "-1"))
    assert exc.value.code == 2 and asked == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget" in err[0], err


@pytest.mark.parametrize(("extra", "said"), [
    (["--confidence", "95"], "--confidence 95: must be strictly between 0 and 1"),
    (["--resamples", "10"], "--resamples 10: must be a whole number from 100 to 100000"),
    (["--confidence", "95%"], "argument --confidence: '95%' is a percentage: write 0.95")])
def test_a_bad_level_is_one_line_before_anything_runs(extra, said, tmp_path, asked, capsys):
    try:
        code = main(_argv(tmp_path / "run", *extra))
    except SystemExit as exc:  # argparse's own
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert asked == [] and not (tmp_path / "run").exists()


def test_report_names_the_command_that_takes_them(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "intervention", "settings": {}}))
    (out / "intervention.json").write_text(json.dumps({"options": {}}))
    assert main(["report", str(out), "--resamples", "5000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and (
        f"--resamples: `biasscope report` shows an intervention run's intervention.json as it "
        f"was written; give --resamples to `biasscope intervene --out {out}` with the run's "
        "other flags, which analyses its stored evaluations again without training") in err[0]
