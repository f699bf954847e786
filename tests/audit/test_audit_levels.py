"""`biasscope audit --confidence --resamples`: the summary's level and bootstrap resamples, as
chosen, in every interval and sentence; remembered in summary.json; another level on a rerun
summarises the stored answers again without asking for any (the audit was 95% and 2000
resamples whatever the user wanted)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from biasscope.audit.harness import StoredResponses
from biasscope.cli.main import main
from biasscope.core import intervals
from biasscope.probes import load_probe

PROFESSIONAL = "professional-bias"
ADULT = "adult-counterfactual"


def _bootstrapped(values: Any, bounds: Any) -> bool:
    """`intervals._resampled` for these tests: every mean bootstrapped, as at 20 items and more
    until 2026-12 (a mean with spread is t widened at any size now, and only 0/1 rates still
    go through the resamples' plumbing these tests check)."""
    return True


def _run(tmp_path: Path) -> tuple[list[str], Path]:
    """`audit` arguments answering Adult and professional bias from a file, mixed answers so
    that the intervals have width; the run directory."""
    data = tmp_path / "data"
    write_adult(data, ROWS)
    lines = [{"item_id": i.id, "response": "yes" if n % 3 else "no"}
             for n, i in enumerate(load_probe(ADULT, data_dir=data).items(0))]
    lines += [{"item_id": i.id, "response": "The doctor." if n % 4 else "The nurse."}
              for n, i in enumerate(load_probe(PROFESSIONAL).items(0))]
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "run"
    return ["audit", "--responses", str(responses), "--out", str(out), "--data-dir", str(data),
            "--name", "mine"], out


def _summary(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _intervals(summary: dict[str, Any]) -> dict[tuple[str, str], tuple[float, float]]:
    return {(p, k): (v["low"], v["high"]) for p, e in summary["probes"].items()
            for k, v in e["headline"].items()
            if isinstance(v, dict) and isinstance(v.get("low"), float)
            and v["high"] > v["low"]}


def _never_asked(*_: Any) -> Any:
    raise AssertionError("the answers were asked for again")


def test_another_level_summarises_the_stored_answers_again_and_is_kept(tmp_path, monkeypatch):
    args, out = _run(tmp_path)
    assert main([*args, "--probe", f"{ADULT},{PROFESSIONAL}"]) == 0
    at95 = _summary(out)
    assert at95["analysis"] == {"confidence": 0.95, "n_resamples": 2000}
    monkeypatch.setattr(StoredResponses, "respond", _never_asked)
    # One probe named: the other's entry is summarised again too, at the new level.
    assert main([*args, "--probe", ADULT, "--confidence", "0.9", "--resamples", "300"]) == 0
    at90 = _summary(out)
    assert at90["analysis"] == {"confidence": 0.9, "n_resamples": 300}
    assert list(at90["probes"]) == [ADULT, PROFESSIONAL]
    wide, narrow = _intervals(at95), _intervals(at90)
    assert {p for p, _ in narrow} == {ADULT, PROFESSIONAL}
    for key, (low, high) in narrow.items():
        assert high - low < wide[key][1] - wide[key][0], key
    said = json.dumps([e["sentences"] for e in at90["probes"].values()])
    assert "90% CI" in said and "95%" not in said
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>90% CI</th>" in page and "estimates with 90% CIs" in page
    shown = re.sub(r"<script.*?</script>", "", page, flags=re.S)  # plotly.js holds "95%"
    assert "own 90% intervals" in shown and "95%" not in shown
    # A rerun without the flags keeps them; `report` renders them as stored.
    assert main([*args, "--probe", ADULT]) == 0
    assert _summary(out)["probes"] == at90["probes"]
    assert _summary(out)["analysis"] == at90["analysis"]
    assert main(["report", str(out)]) == 0
    assert "<th>90% CI</th>" in (out / "report.html").read_text(encoding="utf-8")


def test_the_resamples_reach_the_bootstraps(tmp_path, monkeypatch):
    """The same resamples give the same numbers (seeded); other resamples, other bounds of a
    bootstrapped interval (professional bias's pronoun gap over sentences) and the same
    estimates."""
    monkeypatch.setattr(intervals, "_resampled", _bootstrapped)  # means are t widened now
    args, out = _run(tmp_path)
    args = [*args, "--probe", PROFESSIONAL]
    assert main([*args, "--resamples", "300"]) == 0
    first = _summary(out)["probes"][PROFESSIONAL]["headline"]
    monkeypatch.setattr(StoredResponses, "respond", _never_asked)
    assert main([*args, "--resamples", "2000"]) == 0
    assert main([*args, "--resamples", "300"]) == 0
    assert _summary(out)["probes"][PROFESSIONAL]["headline"] == first
    assert main([*args, "--resamples", "2000"]) == 0
    other = _summary(out)["probes"][PROFESSIONAL]["headline"]
    gap = "pronoun_gap"
    assert other[gap]["estimate"] == first[gap]["estimate"]
    assert (other[gap]["low"], other[gap]["high"]) != (first[gap]["low"], first[gap]["high"])


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--confidence", "95", "--confidence 95: must be strictly between 0 and 1: write 0.95 "
                           "for 95%"),
    ("--confidence", "0", "--confidence 0: must be strictly between 0 and 1"),
    ("--confidence", "1.5", "--confidence 1.5: must be strictly between 0 and 1"),
    ("--resamples", "5", "--resamples 5: must be a whole number from 100 to 100000"),
    ("--confidence", "95%", "argument --confidence: '95%' is a percentage: write 0.95"),
])
def test_a_bad_level_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, flag,
                                                                  value, says):
    args, out = _run(tmp_path)
    args = [*args, "--probe", ADULT]
    assert main(args) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    if says.startswith("argument"):
        with pytest.raises(SystemExit) as exited:
            main([*args, flag, value])
        assert exited.value.code == 2
    else:
        assert main([*args, flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_bad_stored_level_names_the_file_and_the_flag(tmp_path, capsys):
    args, out = _run(tmp_path)
    args = [*args, "--probe", ADULT]
    assert main(args) == 0
    summary = _summary(out)
    (out / "summary.json").write_text(json.dumps({**summary, "analysis": {"confidence": 95}}))
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "summary.json: analysis.confidence = 95 must be strictly " \
        "between 0 and 1: write 0.95 for 95%; pass --confidence or delete the field" in err
    assert main([*args, "--confidence", "0.95"]) == 0  # given, it replaces the stored one


def test_report_of_an_audit_refuses_a_level_it_would_not_use(tmp_path, capsys):
    """`biasscope report` shows an audit's summary.json as written: --confidence there was
    ignored without a word; it now says which command summarises at another level."""
    args, out = _run(tmp_path)
    assert main([*args, "--probe", ADULT]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["report", str(out), "--confidence", "0.9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--confidence: `biasscope report` shows an audit run's " \
        f"summary.json as it was written; give --confidence to `biasscope audit --out {out}`" \
        in err, err
    assert main(["report", str(out), "--alpha", "0.05"]) == 2
    assert "--alpha: an audit run's report takes no such setting; leave it out" \
        in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_level_too_fine_for_the_resamples_is_said(tmp_path, capsys, monkeypatch):
    """99.9% from 2000 resamples leaves one draw beyond each bound: summary.json, the report
    and a warning on stderr say so, naming the flags; the default says nothing of it."""
    monkeypatch.setattr(intervals, "_resampled", _bootstrapped)  # means are t widened now
    args, out = _run(tmp_path)
    args = [*args, "--probe", PROFESSIONAL]
    assert main(args) == 0
    assert "thin_tails" not in _summary(out)["analysis"]
    assert main(["report", str(out)]) == 0
    assert "warning:" not in capsys.readouterr().err
    assert main([*args, "--confidence", "0.999"]) == 0
    said = _summary(out)["analysis"]["thin_tails"]
    assert said.startswith("At the 99.9% confidence level, the audit's bootstrap intervals "
                           "of 2000 resamples leave 1 beyond each bound")
    assert f"warning: {said}\n" in capsys.readouterr().err
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "At the 99.9% confidence level, the audit&#x27;s bootstrap" in page
    # `report` says it too, once, as the run's summary.json stores it (it said nothing)
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().err.count("warning: ") == 1
    assert main(["report", str(out), "--output", str(out.parent / "elsewhere.html")]) == 0
    assert capsys.readouterr().err == f"warning: {said}\n"
