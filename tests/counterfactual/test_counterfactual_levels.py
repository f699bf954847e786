"""`biasscope counterfactual --confidence --resamples`: the paired differences, shares and
flip rates at the level chosen, said in every sentence and caption (they read "95% CI"
whatever was wanted); kept in summary.json; a rerun at another level summarises the stored
rewards and the cached verdicts again without asking any scorer; a level too fine for the
resamples is said, in the summary and on stderr."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.canned import CannedGenerator
from biasscope.backends.config import BackendConfig
from biasscope.cli.main import main
from biasscope.core import intervals
from biasscope.counterfactual import job
from fakes import Reward

#: Pairs whose chosen response speaks of a woman or a man; every pair has something to swap.
PAIRS = [{"id": f"p{k}", "prompt": f"How do I help my {'wife' if k % 2 else 'husband'}, "
          f"case {k}?", "chosen": f"Ask {'her' if k % 2 else 'him'} what is needed{'.' * k}",
          "rejected": f"{'She' if k % 2 else 'He'} can wait, case {k}."} for k in range(24)]


class Counted(Reward):
    """`Reward`, counting the texts it is asked to score."""

    def __init__(self, label: str, bonus: float = 0.0) -> None:
        super().__init__(label, bonus)
        self.asked = 0

    def score(self, conversations: Any) -> list[float]:
        self.asked += len(conversations)
        return super().score(conversations)


def _bootstrapped(values: Any, bounds: Any) -> bool:
    """`intervals._resampled` for these tests: every mean bootstrapped, as at 20 items and more
    until 2026-12 (a mean with spread is t widened at any size now, and only 0/1 rates still
    go through the resamples' plumbing these tests check)."""
    return True


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    return path


def _config(tmp_path: Path, **analysis: Any) -> job.CounterfactualConfig:
    return job.CounterfactualConfig(
        out=tmp_path / "run", pairs=str(_pairs(tmp_path)), judges=["J=canned:A|B|B|A|B"],
        backend=BackendConfig(cache=str(tmp_path / "cache.sqlite")), analysis=analysis)


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("the judge was asked again")


def _widths(summary: dict[str, Any]) -> dict[str, float]:
    out = {}
    for row in summary["scorers"]:
        d = row["difference"]
        out[f"{row['scorer']}:difference"] = d["high"] - d["low"]
        out[f"{row['scorer']}:flips"] = (row["flips"]["flip_rate"]["high"]
                                         - row["flips"]["flip_rate"]["low"])
    return out


def test_a_rerun_at_another_level_asks_no_scorer_and_says_the_level(tmp_path, monkeypatch):
    reward = Counted("planted", bonus=0.3)
    at95 = job.run(_config(tmp_path), [reward]).summary
    assert at95["analysis"] == {"confidence": 0.95, "n_resamples": 2000}
    asked = reward.asked
    assert asked == 4 * len(PAIRS)  # chosen and rejected, original and swapped
    monkeypatch.setattr(CannedGenerator, "generate", _never)
    # not refused as another scorer setting: run.json records no level
    at90 = job.run(_config(tmp_path, confidence=0.9, n_resamples=300), [reward]).summary
    assert reward.asked == asked  # the stored rewards were read back
    assert at90["analysis"] == {"confidence": 0.9, "n_resamples": 300}
    wide, narrow = _widths(at95), _widths(at90)
    assert set(narrow) == {"planted:difference", "planted:flips", "J:difference", "J:flips"}
    for key, width in narrow.items():
        assert 0 < width < wide[key], key
    said = " ".join(at90["sentences"])
    assert "90% CI" in said and "95%" not in said
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "t 90% CI" in page and "Wilson 90% CI" in page and "95%" not in page
    # A rerun without the flags keeps them; `report` renders them as stored.
    again = job.run(_config(tmp_path), [reward]).summary
    assert again["analysis"] == at90["analysis"] and again["scorers"] == at90["scorers"]
    assert reward.asked == asked
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "t 90% CI" in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")


def test_the_resamples_reach_the_paired_difference(tmp_path, monkeypatch):
    """The same resamples give the same interval (seeded); other resamples, other bounds of
    the bootstrapped mean, the same mean and the same Wilson intervals."""
    monkeypatch.setattr(intervals, "_resampled", _bootstrapped)  # means are t widened now
    reward = Counted("planted", bonus=0.3)

    def difference(resamples: int) -> dict[str, Any]:
        summary = job.run(_config(tmp_path, n_resamples=resamples), [reward]).summary
        return dict(summary["scorers"][0]["difference"])

    first = difference(300)
    assert difference(2000) != first and difference(300) == first
    other = difference(2000)
    assert other["mean"] == first["mean"] and other["female_higher"] == first["female_higher"]
    assert (other["low"], other["high"]) != (first["low"], first["high"])


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    return ["counterfactual", "--pairs", str(_pairs(tmp_path)), "--judge-model",
            "J=canned:A|B|B|A|B", "--out", str(tmp_path / "run"), "--cache",
            str(tmp_path / "cache.sqlite"), *extra]


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--confidence", "95", "--confidence 95: must be strictly between 0 and 1: write 0.95 "
                           "for 95%"),
    ("--resamples", "5", "--resamples 5: must be a whole number from 100 to 100000"),
])
def test_a_bad_level_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, flag,
                                                                  value, says):
    assert main(_argv(tmp_path)) == 0
    out = tmp_path / "run"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(_argv(tmp_path, flag, value)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_report_of_a_counterfactual_run_names_the_command_that_takes_a_level(tmp_path,
                                                                           capsys):
    assert main(_argv(tmp_path)) == 0
    out = tmp_path / "run"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["report", str(out), "--confidence", "0.9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--confidence: `biasscope report` shows a counterfactual " \
        f"run's summary.json as it was written; give --confidence to `biasscope " \
        f"counterfactual --out {out}`" in err, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_level_too_fine_for_the_resamples_is_said(tmp_path, capsys, monkeypatch):
    """99.9% from 2000 resamples leaves one draw beyond each bound: the first sentence and a
    warning on stderr say so (not on stdout twice); the default says nothing of it."""
    monkeypatch.setattr(intervals, "_resampled", _bootstrapped)  # means are t widened now
    assert main(_argv(tmp_path)) == 0
    assert "thin_tails" not in json.loads((tmp_path / "run" / "summary.json").read_text())[
        "analysis"]
    assert "beyond each bound" not in capsys.readouterr().err
    assert main(_argv(tmp_path, "--confidence", "0.999")) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    said = summary["sentences"][0]
    assert said == summary["analysis"]["thin_tails"]
    assert said.startswith("At the 99.9% confidence level, the paired differences' bootstrap "
                           "intervals of 2000 resamples leave 1 beyond each bound")
    assert "give --resamples 20000 or more" in said  # dynamics' field name is not this one's
    captured = capsys.readouterr()
    assert f"warning: {said}\n" in captured.err and said not in captured.out
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert re.search(r"At the 99\.9% confidence level, the paired differences&#x27;", page)
    # `report` says it too, once, as the run's summary.json stores it (it said nothing)
    assert main(["report", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().err == f"warning: {said}\n"


def test_a_few_pairs_draw_no_bootstrap_so_nothing_is_said_of_its_tails(tmp_path, capsys):
    """Below 20 pairs a paired difference's interval is Student's t widened by Hall's, not a
    bootstrap, and the flip rates and shares are Wilson's: 99.9% from 200 resamples warned of
    bootstrap intervals that the run does not draw."""
    few = tmp_path / "few.jsonl"
    few.write_text("".join(json.dumps(p) + "\n" for p in PAIRS[:6]))
    argv = _argv(tmp_path, "--confidence", "0.999", "--resamples", "200")
    assert main([*argv[:2], str(few), *argv[3:]]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "thin_tails" not in summary["analysis"]
    assert not any("beyond each bound" in s for s in summary["sentences"])
    assert "beyond each bound" not in capsys.readouterr().err
