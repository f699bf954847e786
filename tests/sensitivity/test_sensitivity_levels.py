"""`biasscope sensitivity --confidence --resamples`: every index, sentence, caption and figure at
the level chosen (they read 95% whatever was wanted, and the command took no level); kept in
summary.json; a rerun at another level summarises the stored rewards again, loading no reward
model and asking the perturber nothing; a level too fine for the resamples is said. Which
principle leads is said at 1 − confidence, as a judge's leaderboard; the sanity verdict keeps
its own α."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.report.sensitivity import confounds_tables, sanity_section, words_table
from biasscope.report.tables import named
from biasscope.sensitivity.indices import sensitivity_indices
from biasscope.sensitivity.sanity import accuracy, summarise_sanity
from biasscope.sensitivity.summary import sentences
from test_leader import frame


def _widths(summary: dict[str, Any]) -> dict[str, float]:
    rows = summary["directions"]["toward"]["indices"]
    return {f"{r['principle']}:{name}": r[f"{name}_high"] - r[f"{name}_low"] for r in rows
            for name in ("mean_effect", "median_effect", "std_effect",
                         "mean_effect_normalised")}


def _files(out: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from sensitivity_fixture import write_reward_model

    return write_reward_model(tmp_path_factory.mktemp("models") / "rm")


@pytest.fixture
def argv(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    prompts, principles = tmp_path / "prompts.jsonl", tmp_path / "principles.txt"
    prompts.write_text("".join(json.dumps({"prompt": f"Ask my wife {i}?", "response":
                                           "No, " + "ask him " * i + "be kind."}) + "\n"
                               for i in range(8)))
    principles.write_text("Be kind.\nBe brief.\n")
    return ["sensitivity", "--perturber", "canned:It is rude.|Be kind, ask her.",
            "--principles", str(principles), "--prompts", str(prompts), "--sanity-pairs", "0",
            "--no-chat-template", "--cache", str(tmp_path / "cache.sqlite"), "--out",
            str(tmp_path / "run"), "--reward-model", str(model)]


def test_a_rerun_at_another_level_loads_nothing_and_says_the_level(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import biasscope.backends.reward as reward
    from biasscope.backends.canned import CannedGenerator
    from no_loads import loads_counted

    out = tmp_path / "run"
    assert main(argv) == 0
    at95 = json.loads((out / "summary.json").read_text())
    assert at95["analysis"] == {"confidence": 0.95, "n_resamples": 2000}
    loads = loads_counted(monkeypatch, reward, fail=True, loader="_load_classifier")

    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("the perturber was asked again")

    monkeypatch.setattr(CannedGenerator, "generate", never)
    # not refused as another setting: run.json records no level
    assert main([*argv, "--confidence", "0.9", "--resamples", "300"]) == 0
    assert loads == []
    at90 = json.loads((out / "summary.json").read_text())
    assert at90["analysis"] == {"confidence": 0.9, "n_resamples": 300}
    wide, narrow = _widths(at95), _widths(at90)
    assert len(narrow) == 8
    for key, width in narrow.items():
        assert 0 < width < wide[key], key
    said = " ".join(at90["directions"]["toward"]["sentences"])
    assert "90% CI" in said and "95%" not in said
    assert at90["intervals"].startswith("90% intervals resample prompts (300 times)")
    page = (out / "report.html").read_text(encoding="utf-8")
    # the figures' scripts kept (their axes say the level), plotly's own code left out
    shown = re.sub(r"<script[^>]*>(?!if \(document\.getElementById).*?</script>", "", page,
                   flags=re.S)
    for words in ("90% intervals resample prompts (300 times)", "90% prompt-bootstrap",
                  "Wilson 90% interval", "Fisher-z 90% intervals",
                  "normalised index (bars: 90% CI)",
                  "90% CI low", "90% CI high"):  # the tables' headers (they said "CI low")
        assert words in shown, words
    assert "95%" not in shown
    # A rerun without the flags keeps them; `report` renders them as stored.
    assert main(argv) == 0
    assert json.loads((out / "summary.json").read_text()) == at90 and loads == []
    assert main(["report", str(out)]) == 0
    assert "Fisher-z 90% intervals" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--confidence", "95", "--confidence 95: must be strictly between 0 and 1: write 0.95 "
                           "for 95%"),
    ("--resamples", "5", "--resamples 5: must be a whole number from 100 to 100000"),
])
def test_a_bad_level_is_refused_in_one_line_and_nothing_is_written(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str,
        value: str, says: str) -> None:
    assert main(argv) == 0
    before = _files(tmp_path / "run")
    capsys.readouterr()
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert _files(tmp_path / "run") == before


def test_report_of_a_sensitivity_run_names_the_command_that_takes_a_level(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(argv) == 0
    before = _files(out)
    capsys.readouterr()
    assert main(["report", str(out), "--resamples", "500"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--resamples: `biasscope report` shows a sensitivity " \
        f"run's summary.json as it was written; give --resamples to `biasscope sensitivity " \
        f"--out {out}`" in err, err
    assert _files(out) == before


def test_a_level_too_fine_for_the_resamples_is_said(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """99.9% from 2000 resamples leaves one draw beyond each bound: summary.json, a warning on
    stderr and the report's top say so; the default says nothing of it."""
    out = tmp_path / "run"
    assert main(argv) == 0
    assert "thin_tails" not in json.loads((out / "summary.json").read_text())["analysis"]
    assert "beyond each bound" not in capsys.readouterr().err
    assert main([*argv, "--confidence", "0.999"]) == 0
    said = json.loads((out / "summary.json").read_text())["analysis"]["thin_tails"]
    assert said.startswith("At the 99.9% confidence level, the indices' bootstrap intervals "
                           "of 2000 resamples leave 1 beyond each bound")
    captured = capsys.readouterr()
    assert f"warning: {said}\n" in captured.err and said not in captured.out
    page = (out / "report.html").read_text(encoding="utf-8")
    assert re.search(r"<p>At the 99\.9% confidence level, the indices&#x27;", page)
    # `report` says it too, once, as the run's summary.json stores it (it said nothing)
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().err == f"warning: {said}\n"


def test_which_principle_leads_is_said_at_one_minus_the_confidence() -> None:
    """The leader's comparison has p = 0.03: shown at 95%, as a judge's leaderboard shows a
    system above another at 1 − confidence; not at 99% (it was shown at α = 0.05 whatever
    the level)."""
    rewards = frame([0.0, 0.4])

    def leads(confidence: float) -> tuple[dict[str, Any], str]:
        result: dict[str, Any] = {"preambles": 0, "failed": 0}
        indices = sensitivity_indices(rewards, confidence, n_resamples=200)
        text = sentences(indices, result, rewards, confidence)[0]
        return result["leaders"]["rm"], text

    found, text = leads(0.95)
    assert found["leads"] and found["alpha"] == pytest.approx(0.05)
    assert "rises most for principle p1" in text and "(95% CI" in text
    found, text = leads(0.99)
    assert not found["leads"] and found["alpha"] == pytest.approx(0.01)
    assert "is not shown larger than p0's (paired over prompts, p ≥ 0.01 each)" in text
    assert "(99% CI" in text


def test_the_sanity_interval_takes_the_level_and_its_verdict_keeps_its_own_alpha() -> None:
    """31 of 50 pairs: p = 0.12 against chance. The 80% interval is above 0.5, but the verdict
    is the test's at α = 0.05 (the 95% exact interval), whatever the level shown."""
    chosen, rejected = [1.0] * 31 + [-1.0] * 19, [0.0] * 50
    at95, at80 = accuracy(chosen, rejected), accuracy(chosen, rejected, 0.8)
    assert at80["low"] > 0.5 > at95["low"] and at80["high"] < at95["high"]
    assert at80["verdict"] == at95["verdict"] == "at chance"
    stored = {"settings": {"source": "held-out"}, "models": {"rm": {"chosen": chosen,
                                                                   "rejected": rejected}}}
    said = summarise_sanity(stored, 0.8)["sentences"][0]
    assert "(80% CI" in said and "95%" not in said and "at chance" in said
    # The table heads its bounds at that level, its verdict at its own α (they read "low",
    # "high" and "verdict": an 80% interval above one half beside "at chance").
    html = sanity_section(summarise_sanity(stored, 0.8), 0.8)
    for key, words in (("low", "80% CI low"), ("high", "80% CI high"),
                       ("verdict", "verdict, exact test at α = 0.05")):
        assert f"<th>{named(key, words)}</th>" in html, key
    assert "95%" not in html


def test_the_confound_tables_head_their_bounds_with_their_level() -> None:
    """The length-adjusted effects', the unchanged share's and the correlations' bounds said
    "adjusted effect low", "share low", "low": their level was in the captions alone. A
    group's columns, whose names end in the group's (``n_low`` for a group "low"), are no
    bounds."""
    row = {"model": "rm", "principle": "p1", "n": 8, "adjusted_effect": 1.0,
           "adjusted_effect_low": 0.5, "adjusted_effect_high": 1.5, "slope_per_100_chars": 0.1,
           "slope_per_100_chars_low": 0.0, "slope_per_100_chars_high": 0.2}
    found = {"length": [row], "unchanged_below": 0.05, "exclude_unchanged": False,
             "unchanged": [{"model": "rm", "principle": "p1", "n": 8, "unchanged": 1,
                            "unchanged_share": {"estimate": 0.125, "low": 0.02,
                                                "high": 0.47}}],
             "correlations": [{"model": "rm", "principle_a": "p1", "principle_b": "p2",
                               "n": 8, "r": 0.5, "low": -0.2, "high": 0.9}]}
    html = "".join(confounds_tables(found, 0.9))
    for key, bound in (("adjusted_effect_low", "low"), ("slope_per_100_chars_high", "high"),
                       ("share_low", "low"), ("share_high", "high"), ("low", "low"),
                       ("high", "high")):
        assert f"<th>{named(key, f'90% CI {bound}')}</th>" in html, key
    assert "95%" not in html
    groups = words_table([{"model": "rm", "n_high": 2, "n_low": 2, "mean_high": 0.1,
                           "mean_low": 0.2, "mean_difference": -0.1}], confidence=0.9)
    assert "CI" not in groups and "<th>n low</th>" in groups
