"""`biasscope judge --confidence --resamples`: the level and bootstrap resamples of the
judge's summary as chosen (it was 95% and 2000 whatever was wanted), kept in summary.json,
and a rerun at another level is no other judge setting: the verdicts come from the cache."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.canned import CannedGenerator
from biasscope.cli.main import main

PAIRS = [{"id": f"p{k}", "prompt": f"Question {k}?", "a": "yes " * (1 + k % 5),
          "b": "no " * (1 + k % 3), "model_a": "m1" if k % 2 else "m2",
          "model_b": "m2" if k % 2 else "m1"} for k in range(30)]


def _judge(tmp_path: Path, *extra: str) -> list[str]:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PAIRS))
    return ["judge", "--model", "first=canned:A|B|A|A|B", "--model", "second=canned:A|A|B|A",
            "--input", str(data), "--out", str(tmp_path / "run"), "--cache",
            str(tmp_path / "cache.sqlite"), *extra]


def _summary(tmp_path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((tmp_path / "run" / "summary.json").read_text())
    return found


def _widths(summary: dict[str, Any]) -> dict[str, float]:
    head = summary["probes"]["judge"]["headline"]
    return {k: v["high"] - v["low"] for k, v in head.items()
            if isinstance(v, dict) and isinstance(v.get("low"), float) and v["high"] > v["low"]}


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("the judge was asked again")


def test_a_judge_rerun_at_another_level_asks_nothing_and_says_it(tmp_path, monkeypatch,
                                                                 capsys):
    assert main(_judge(tmp_path)) == 0
    at95 = _summary(tmp_path)
    assert at95["analysis"] == {"confidence": 0.95, "n_resamples": 2000}
    monkeypatch.setattr(CannedGenerator, "generate", _never)
    # not refused as another judge setting: run.json records no level
    assert main(_judge(tmp_path, "--confidence", "0.9", "--resamples", "300")) == 0, \
        capsys.readouterr().err
    at90 = _summary(tmp_path)
    assert at90["analysis"] == {"confidence": 0.9, "n_resamples": 300}
    wide, narrow = _widths(at95), _widths(at90)
    assert {"verdict_rate", "win_rate_a:first", "krippendorff_alpha"} <= set(narrow)
    for key, width in narrow.items():
        assert width < wide[key], key
    entry = at90["probes"]["judge"]
    said = json.dumps([entry["sentences"], entry["tables"]])
    assert "90% CI" in said and "95%" not in said
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    shown = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    assert "<th>90% CI</th>" in shown and "95%" not in shown
    # kept by a rerun without the flags; the same resamples give the same numbers
    assert main(_judge(tmp_path)) == 0
    assert _summary(tmp_path) == at90


def test_the_judges_resamples_reach_its_bootstraps(tmp_path, monkeypatch):
    """Another count of resamples: other bounds of a bootstrapped interval (the judges'
    agreement), the same estimate."""
    assert main(_judge(tmp_path, "--resamples", "300")) == 0
    first = _summary(tmp_path)["probes"]["judge"]["headline"]["krippendorff_alpha"]
    monkeypatch.setattr(CannedGenerator, "generate", _never)
    assert main(_judge(tmp_path, "--resamples", "2000")) == 0
    other = _summary(tmp_path)["probes"]["judge"]["headline"]["krippendorff_alpha"]
    assert other["estimate"] == first["estimate"]
    assert (other["low"], other["high"]) != (first["low"], first["high"])


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--confidence", "95", "--confidence 95: must be strictly between 0 and 1: write 0.95 "
                           "for 95%"),
    ("--confidence", "0", "--confidence 0: must be strictly between 0 and 1"),
    ("--confidence", "1.5", "--confidence 1.5: must be strictly between 0 and 1"),
    ("--resamples", "5", "--resamples 5: must be a whole number from 100 to 100000"),
])
def test_a_bad_level_is_refused_before_the_judge_is_asked(tmp_path, monkeypatch, capsys, flag,
                                                          value, says):
    monkeypatch.setattr(CannedGenerator, "generate", _never)
    assert main(_judge(tmp_path, flag, value)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "run").exists()


def test_report_of_a_judge_run_names_the_command_for_another_level(tmp_path, capsys):
    assert main(_judge(tmp_path)) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--resamples", "300"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --resamples to `biasscope judge --out" in err


def _audit(tmp_path: Path, *extra: str, texts: bool = False) -> list[str]:
    """judge-audit of pairs some of which the first judge wrote (self-preference), or of
    texts under two labels (name sensitivity)."""
    data = tmp_path / "input.jsonl"
    rows = ([{"id": f"t{k}", "text": f"Day {k} was {'good' if k % 3 else 'bad'}."}
             for k in range(24)] if texts else
            [{**r, "model_a": "first" if k % 3 else "m2"} for k, r in enumerate(PAIRS)])
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"POSITIVE": "The text is happy.",
                                  "NEGATIVE": "The text is sad."}))
    return ["judge-audit", "--model", "first=canned:A|B|A|A|B|tie|POSITIVE",
            "--model", "second=canned:A|A|B|A|NEGATIVE", "--input", str(data),
            "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache.sqlite"),
            *(["--labels", str(labels)] if texts else []), *extra]


@pytest.mark.parametrize("texts", [False, True])
def test_a_judge_audit_rerun_at_another_level_asks_nothing_and_says_it(tmp_path, monkeypatch,
                                                                       capsys, texts):
    assert main(_audit(tmp_path, texts=texts)) == 0, capsys.readouterr().err
    at95 = _summary(tmp_path)
    monkeypatch.setattr(CannedGenerator, "generate", _never)
    assert main(_audit(tmp_path, "--confidence", "0.9", texts=texts)) == 0, \
        capsys.readouterr().err
    at90 = _summary(tmp_path)
    assert at90["analysis"] == {"confidence": 0.9, "n_resamples": 2000}
    wide = _widths({"probes": {"judge": at95["probes"]["judge-audit"]}})
    narrow = _widths({"probes": {"judge": at90["probes"]["judge-audit"]}})
    assert {"position_consistency:first", "first_slot_rate:first"} <= set(narrow)
    assert ({"name_sensitivity:first"} if texts
            else {"self_preference:first", "win_rate_a:first"}) <= set(narrow)
    for key, width in narrow.items():
        assert width < wide[key], key
    entry = at90["probes"]["judge-audit"]
    said = json.dumps([entry["sentences"], entry["tables"]])
    assert said.count("90% CI") > 2 and "95%" not in said


@pytest.mark.parametrize("command", ["judge", "judge-audit"])
def test_a_level_too_fine_for_the_resamples_is_said(tmp_path, capsys, command):
    """99.9% from 2000 resamples leaves one draw beyond each bound: summary.json, the report
    and a warning on stderr say so, naming the flags; the default says nothing of it."""
    argv = _judge(tmp_path) if command == "judge" else _audit(tmp_path)
    assert main(argv) == 0
    assert "thin_tails" not in _summary(tmp_path)["analysis"]
    assert "warning:" not in capsys.readouterr().err
    assert main([*argv, "--confidence", "0.999"]) == 0
    said = _summary(tmp_path)["analysis"]["thin_tails"]
    whose = "the judge's" if command == "judge" else "the judge audit's"
    assert said.startswith(f"At the 99.9% confidence level, {whose} bootstrap intervals of "
                           "2000 resamples leave 1 beyond each bound")
    assert "give --resamples 20000" in said
    assert f"warning: {said}\n" in capsys.readouterr().err
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "At the 99.9% confidence level" in page
    # `report` says it too, once, as the run's summary.json stores it (it said nothing)
    assert main(["report", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().err == f"warning: {said}\n"
