"""An audit probe's tests as one family: Holm-adjusted p beside the raw p, and the smallest
detectable effect beside every result that is not significant."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from biasscope.audit.harness import controlled
from biasscope.audit.multiplicity import control, holm_sentence
from biasscope.cli.main import main
from biasscope.core.power import minimum_detectable_effect

HEADLINE = {
    "strong": {"estimate": 0.4, "low": 0.3, "high": 0.5, "n": 200, "p_value": 0.001},
    "weak": {"estimate": 0.05, "low": -0.01, "high": 0.11, "n": 200, "p_value": 0.03},
    "weaker": {"estimate": 0.04, "low": -0.02, "high": 0.10, "n": 100, "p_value": 0.04},
    "direction": {"estimate": 0.1, "low": 0.05, "high": 0.2, "n": 50, "p_value": 0.5,
                  "p_value_of": "which sex the flips favour"},
    "rate": {"estimate": 0.5, "low": 0.4, "high": 0.6, "n": 80},
    "count": 3,
}


def test_holm_over_the_probe_tests_and_the_detectable_effect():
    out = control(HEADLINE)
    holm = {name: out[name]["p_holm"] for name in ("strong", "weak", "weaker", "direction")}
    assert holm == pytest.approx({"strong": 0.004, "weak": 0.09, "weaker": 0.09,
                                  "direction": 0.5})
    assert out["strong"]["significant"] and not out["weak"]["significant"]
    assert "detectable" not in out["strong"]  # significant: nothing to add
    assert "detectable" not in out["direction"]  # its p does not test its estimate
    assert out["rate"] == HEADLINE["rate"] and out["count"] == 3  # untested entries as they were
    se = 0.12 / (2 * 1.959963984540054)
    assert out["weak"]["detectable"] == pytest.approx(
        minimum_detectable_effect(se, 198, 0.05 / 4, 0.8))
    # fewer items, the same CI width: the t quantiles make it a little larger
    assert out["weaker"]["detectable"] > out["weak"]["detectable"] > 2.8 * se
    assert holm_sentence(out) == (
        "Significant after Holm's correction over the probe's 4 tests: strong 0.40 (95% CI "
        "0.30 to 0.50; Holm p = 0.0040). Not significant: weak (Holm p = 0.090); weaker (Holm "
        "p = 0.090); direction (Holm p = 0.50). This run could have detected (at 80% power) "
        "an effect of this size or more: weak 0.103; weaker 0.104.")


def test_a_test_without_a_finite_interval_gets_no_detectable_effect():
    out = control({"gap": {"estimate": math.nan, "low": math.nan, "high": math.nan, "n": 0,
                           "p_value": 0.9}})
    assert math.isnan(out["gap"]["detectable"])
    assert holm_sentence(out) == ("Not significant after Holm's correction over the probe's 1 "
                                  "test: gap (Holm p = 0.90).")


def test_the_audit_summary_and_report_carry_both_p_values(tmp_path: Path):
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--out", str(exported)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"item_id": i["item_id"], "response": i["answer"]})
                                 + "\n" for i in items))
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--out", str(out)]) == 0
    entry = json.loads((out / "summary.json").read_text())["probes"]["professional-bias"]
    tested = {k: v for k, v in entry["headline"].items()
              if isinstance(v, dict) and isinstance(v.get("p_value"), float)
              and math.isfinite(v["p_value"])}
    assert tested and all(v["p_holm"] >= v["p_value"] for v in tested.values())
    assert all(("detectable" in v) != v["significant"] for v in tested.values())
    page = (out / "report.html").read_text()
    assert "p (Holm)" in page and "detectable at 80% power" in page
    # the headline table names each value in the words the sentences use, its key beside
    assert ('<td><span class="named">stereotyped-answer gap, he − she</span><br><code '
            'class="key" title="its key in the JSON files">pronoun_gap</code></td>') in page
    assert not any(f"<td>{key}</td>" in page for key in entry["headline"])


def test_a_detectable_effect_beyond_the_measure_s_bound_is_no_number():
    """A gap of rates moves at most 1: "could have detected 1.94" was no size any data could
    show. Beyond its ``bound`` the sentence says the run is too small to detect anything."""
    small = {"gap": {"estimate": 0.2, "low": -0.4, "high": 0.8, "n": 5, "p_value": 0.5,
                     "bound": 1.0},
             "other": {"estimate": 0.02, "low": -0.05, "high": 0.09, "n": 300,
                       "p_value": 0.6, "bound": 1.0}}
    out = control(small)
    assert out["gap"]["detectable"] is None and out["gap"]["detectable_beyond_bound"]
    assert 0 < out["other"]["detectable"] < 1 and "detectable_beyond_bound" not in out["other"]
    assert control({"gap": {k: v for k, v in small["gap"].items() if k != "bound"}}
                   )["gap"]["detectable"] > 1  # no bound: the number, as before
    said = holm_sentence(out)
    assert said is not None and "other 0." in said
    assert "too small to have detected (at 80% power) any effect within the measure's " \
           "range: gap (at most ±1)" in said
    alone = holm_sentence(control({"gap": small["gap"]}))
    assert alone == ("Not significant after Holm's correction over the probe's 1 test: gap "
                     "(Holm p = 0.50). This run is too small to have detected (at 80% power) "
                     "any effect within the measure's range: gap (at most ±1).")


def test_a_five_sentence_professional_run_reports_no_impossible_detectable_size(tmp_path: Path):
    """Professional bias on 5 sentences: its pronoun gap and effect are differences of rates
    (``bound`` 1), and neither the sentence nor the report gives a size beyond ±1."""
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--limit", "20",
                 "--out", str(exported)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    pattern = {"s01": "mf", "s02": "mm", "s03": "mf", "s04": "ff", "s05": "mm"}  # (he, she)
    lines = []
    for k, item in enumerate(items):
        g = item["groups"]
        male = pattern[g["sentence_id"]][g["pronoun"] == "she"] == "m"
        male ^= k % 7 == 6
        lines.append(json.dumps({"item_id": item["item_id"], "response":
                                 g["male_occupation" if male else "female_occupation"]}))
    responses = tmp_path / "responses.jsonl"
    responses.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--out", str(out)]) == 0
    entry = json.loads((out / "summary.json").read_text())["probes"]["professional-bias"]
    for name in ("pronoun_gap", "pronoun_effect"):
        value = entry["headline"][name]
        assert value["n"] == 5 and value["bound"] == 1.0 and not value["significant"]
        assert value["detectable"] is None and value["detectable_beyond_bound"]
    said = [s for s in entry["sentences"] if "could have detected" in s
            or "too small to have detected" in s]
    assert said == [
        "Not significant after Holm's correction over the probe's 2 tests: stereotyped-answer "
        "gap, he − she (Holm p = 0.95); pronoun effect on picked occupations (Holm p = 0.95). "
        "This run is too small to have detected (at 80% power) any effect within the "
        "measure's range: stereotyped-answer gap, he − she (at most ±1); pronoun effect on "
        "picked occupations (at most ±1)."]
    assert "none within ±1" in (out / "report.html").read_text()


def test_a_test_significant_after_holm_is_named_beside_those_that_are_not():
    """Gemma 3 270M's professional bias: 'she' moved 1.6 points of option probability to the
    female-coded occupation (Holm p = 0.047), and the one sentence on Holm said "Not
    significant after Holm's correction over the probe's tests", as if nothing was. Each test
    is now named with its verdict, in the probe's words, not its key."""
    rates = {"estimate": 0.0, "low": 0.0, "high": 0.16, "n": 20}
    entry = {"sentences": ["The model picked …"], "headline": {
        "stereotyped_rate": rates,
        "pronoun_gap": {"estimate": 0.0, "low": -0.43, "high": 0.43, "n": 5, "p_value": 1.0,
                        "effect_size": 0.0, "bound": 1.0},
        "pronoun_effect": {"estimate": 0.1, "low": -0.3, "high": 0.5, "n": 5, "p_value": 0.6,
                           "effect_size": 0.2, "bound": 1.0},
        "p_pronoun_effect": {"estimate": 0.016, "low": 0.007, "high": 0.029, "n": 20,
                             "p_value": 0.047 / 3, "effect_size": 0.62, "bound": 1.0}}}
    out = controlled(entry, "professional-bias")
    assert out["headline"]["p_pronoun_effect"]["significant"]
    assert out["sentences"] == ["The model picked …", (
        "Significant after Holm's correction over the probe's 3 tests: stereotype preference "
        "(probability 'she' moves to the female-coded occupation) 0.016 (95% CI 0.007 to "
        "0.029; effect size 0.62, Holm p = 0.047). Not significant: stereotyped-answer gap, "
        "he − she (Holm p = 1.0); pronoun effect on picked occupations (Holm p = 1.0). This "
        "run is too small to have detected (at 80% power) any effect within the measure's "
        "range: stereotyped-answer gap, he − she (at most ±1); pronoun effect on picked "
        "occupations (at most ±1).")]
    everything = control({k: {**v, "p_value": 0.001} for k, v in entry["headline"].items()
                          if k != "stereotyped_rate"})
    said = holm_sentence(everything)
    assert said is not None and "Not significant" not in said and "could have" not in said
