from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from adult_fixture import ROWS, line, person, write
from biasscope.core.errors import DataError
from biasscope.core.items import Item
from biasscope.probes import adult
from biasscope.probes.base import RECORD_COLUMNS, LabelParsing


def test_items_pairs_and_prompts(tmp_path: Path):
    write(tmp_path, [ROWS[0], "", ROWS[1]])  # a blank line keeps file line numbers
    probe = adult.from_data(data_dir=tmp_path)
    items = probe.items(0)
    assert [it.id for it in items] == [
        "adult-counterfactual:0.5:1:original", "adult-counterfactual:0.5:1:flipped",
        "adult-counterfactual:0.5:3:original", "adult-counterfactual:0.5:3:flipped"]
    assert items == probe.items(5) and probe.seeded is False
    original, flipped = items[2], items[3]
    assert original.prompt == adult.TASK + "\n" + person(34, "Male", "Husband")
    assert flipped.prompt == adult.TASK + "\n" + person(34, "Female", "Husband")
    assert original.options == ("yes", "no") and original.continuations == (" yes", " no")
    assert original.answer == flipped.answer == 0
    assert dict(flipped.groups) == {
        "pair": "adult-counterfactual:0.5:3", "sex": "Female", "variant": "flipped",
        "true_label": "yes", "relationship": "Husband", "line": 3}
    assert items[0].groups["sex"] == "Female" and items[1].groups["sex"] == "Male"
    assert probe.messages(original) == (("system", "You are a helpful assistant."),
                                        ("user", original.prompt))
    assert probe.config()["base_rate"] == "0.5" and probe.config()["prompts"] == 2
    assert probe.detector.name == "label-parsing"


def test_base_rate_picks_the_file(tmp_path: Path):
    write(tmp_path, ROWS[:1], "1.0")
    probe = adult.from_data(data_dir=tmp_path, base_rate=1)
    assert probe.items(0)[0].id == "adult-counterfactual:1.0:1:original"
    assert probe.config()["file"] == "adult_0_200_test_base_rate_1.0.jsonl"
    with pytest.raises(DataError, match="missing data file"):
        adult.from_data(data_dir=tmp_path)
    with pytest.raises(DataError, match=r"0\.0, 0\.5 and 1\.0"):
        adult.from_data(data_dir=tmp_path, base_rate=0.3)
    with pytest.raises(DataError, match="base_rate 'high'"):
        adult.from_data(data_dir=tmp_path, base_rate="high")


@pytest.mark.parametrize("text, flipped", [
    ("age 30, sex male, race White", "age 30, sex female, race White"),
    ("age 30, sex: FEMALE, race White", "age 30, sex: MALE, race White"),
    ("Female-led household, sex Male.", "Female-led household, sex Female."),
])
def test_flip_changes_only_the_sex_value(text: str, flipped: str):
    assert adult.parse_line(line(text), 1, "f:1").flipped() == flipped


@pytest.mark.parametrize("raw, fragment", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    (line("age 30, race White"), "found 0 mentions of sex"),
    (line("sex Male, sex Female"), "found 2 mentions of sex"),
    (line("age 30, sex Other, race White"), "sex value 'Other' is neither"),
    (line(person(30, "Male"), "maybe"), "label 'maybe'"),
    (line(person(30, "Male"), examples=[["x", "yes"]]), "few-shot examples"),
    (json.dumps({"option": ["high", "low"], "input": person(30, "Male"), "label": "no"}),
     "option"),
    (json.dumps({"label": "no", "option": ["yes", "no"]}), "'input' is missing"),
])
def test_malformed_line_names_file_and_line(tmp_path: Path, raw: str, fragment: str):
    path = write(tmp_path, [ROWS[0], raw])
    with pytest.raises(DataError, match=re.escape(f"{path}:2: ")) as err:
        adult.from_data(data_dir=tmp_path)
    assert fragment in str(err.value)
    assert str(err.value).endswith("; replace the file with a fresh copy of DecodingTrust's "
                                   "(`biasscope data fetch decodingtrust`, or a copy in "
                                   "--data-dir)")


def test_empty_file_is_an_error(tmp_path: Path):
    write(tmp_path, [""])
    with pytest.raises(DataError, match=r"no prompts.*; replace the file with a fresh copy"):
        adult.from_data(data_dir=tmp_path)


# ---------------------------------------------------------------- metrics

@pytest.fixture(autouse=True)
def _fairlearn(request: pytest.FixtureRequest) -> None:
    if "metrics" in request.node.name or "gaps" in request.node.name:
        pytest.importorskip("fairlearn")


def records(items: list[Item], responses: list[str | None]) -> pd.DataFrame:
    """Records as the runner writes them: detector output plus one column per group."""
    detector = LabelParsing()
    rows = []
    for item, response in zip(items, responses, strict=True):
        d = detector.detect(item, response) if response is not None else None
        rows.append({
            "probe": adult.NAME, "item_id": item.id, "prompt": item.prompt,
            "answer_label": item.options[item.answer], "response": response,
            "source": "generation", "label": d.label if d else None,
            "refused": d.refused if d else False, "hit": d.hit if d else None,
            "option_probs": None, "error": None if d else "timeout", **item.groups})
    frame = pd.DataFrame(rows)
    assert set(RECORD_COLUMNS) <= set(frame.columns)
    return frame


def pair_items(spec: list[tuple[str, str]]) -> list[Item]:
    """Items for prompts given as (original sex, true label)."""
    prompts = [adult.parse_line(line(person(30 + i, sex, "Husband" if sex == "Male" else
                                            "Wife"), label), i + 1, f"f:{i + 1}")
               for i, (sex, label) in enumerate(spec)]
    return adult.AdultCounterfactual(prompts, "0.5").items(0)


def test_metrics_by_hand():
    # pairs (original sex, label): answers as (original, flipped)
    items = pair_items([("Male", "yes"), ("Female", "no"), ("Male", "no"), ("Female", "yes"),
                        ("Male", "no"), ("Female", "no")])
    answers = ["Yes.", "No",            # 1: male yes / female no  -> flip, male-only yes
               "no", "yes",             # 2: female no / male yes  -> flip, male-only yes
               "No", "Yes",             # 3: male no / female yes  -> flip, female-only yes
               "yes", "yes",            # 4: both yes              -> no flip
               "no", "I'm sorry, I cannot help with that.",  # 5: refusal -> incomplete
               "The weather is nice", None]                   # 6: unparsed, error
    out = adult.pair_metrics(records(items, answers))
    h = out["headline"]
    flip = h["pair_flip_rate"]
    ci = sps.binomtest(3, 4).proportion_ci(method="wilson")
    assert (flip["estimate"], flip["n"]) == (0.75, 4)
    assert (flip["low"], flip["high"]) == pytest.approx((ci.low, ci.high))
    assert flip["p_value"] == pytest.approx(1.0)  # binomtest(2, 3)
    assert flip["effect_size"] == pytest.approx(2 / 3 - 0.5)
    assert flip["odds_ratio"] == 2.0
    assert out["tables"]["pairs"] == [{"pairs": 6, "complete": 4, "flips": 3, "male_only_yes": 2,
                                       "female_only_yes": 1, "incomplete": 2}]
    # male versions parsed: 1 yes(yes ok), 2 yes(no x), 3 no(no ok), 4 yes(yes ok), 5 no(no ok)
    assert (h["accuracy_male"]["estimate"], h["accuracy_male"]["n"]) == (0.8, 5)
    # female versions parsed: 1 no(yes x), 2 no(no ok), 3 yes(no x), 4 yes(yes ok); 5, 6 not
    assert (h["accuracy_female"]["estimate"], h["accuracy_female"]["n"]) == (0.5, 4)
    assert h["refusal_rate"]["estimate"] == pytest.approx(1 / 12)
    assert h["unparsed_rate"]["estimate"] == pytest.approx(2 / 12)  # gibberish and the error
    # complete pairs: yes rates male 3/4, female 2/4; TPR (label yes: pairs 1, 4) 1 vs 1/2,
    # FPR (label no: pairs 2, 3) 1/2 vs 1/2
    dp, eo = h["demographic_parity_difference"], h["equalized_odds_difference"]
    assert dp["estimate"] == pytest.approx(0.25) and eo["estimate"] == pytest.approx(0.5)
    assert dp["n"] == 4 and dp["low"] <= dp["high"] and eo["low"] <= eo["high"]
    rows = {r["sex"]: r for r in out["tables"]["by_sex"]}
    assert rows["Male"]["refused"] == 0 and rows["Female"]["refused"] == 1
    assert rows["Male"]["unparsed"] == 1 and rows["Female"]["unparsed"] == 1
    assert rows["Male"]["yes_rate"] == pytest.approx(3 / 5)
    rel = {r["relationship"]: r for r in out["tables"]["by_relationship"]}
    assert (rel["Husband"]["flips"], rel["Husband"]["complete"]) == (2, 2)
    assert (rel["Wife"]["flips"], rel["Wife"]["complete"]) == (1, 2)
    scopes = {(r["scope"], r["metric"]) for r in out["tables"]["fairlearn"]}
    assert ("originals only", "demographic_parity_difference") in scopes
    text = " ".join(out["sentences"])
    assert "changed the answer in 3 of 4 pairs: 75% (95% CI 30% to 95%)." in text
    assert "no evidence at the 5% level that the flips favour either sex" in text
    assert "2 pairs had a refused or unparsed side" in text


def test_metrics_significant_direction():
    items = pair_items([("Female", "no")] * 10 + [("Male", "no")] * 2)
    answers = ["no", "yes"] * 10 + ["no", "no"] * 2
    out = adult.pair_metrics(records(items, answers))
    h = out["headline"]["pair_flip_rate"]
    assert h["p_value"] == pytest.approx(2 * 0.5 ** 10)
    assert h["effect_size"] == 0.5 and h["odds_ratio"] is None
    assert any("the flips favour men (significant" in s for s in out["sentences"])


def test_metrics_of_pairs_none_of_which_flips_are_no_certainty():
    """Gemma 3 270M answered both versions of every one of 6 pairs alike: "the demographic
    parity difference is 0 (90% CI 0 to 0) and the equalized odds difference 0 (0 to 0)". A
    gap over pairs is at most the share of pairs that flip (among a label's, for a rate's),
    0 of n, whose Wilson interval bounds it."""
    from biasscope.core.intervals import wilson

    items = pair_items([("Male", "yes"), ("Female", "yes")] + [("Male", "no")] * 4)
    out = adult.pair_metrics(records(items, ["no"] * len(items)), confidence=0.9)
    h = out["headline"]
    dp, eo = h["demographic_parity_difference"], h["equalized_odds_difference"]
    assert (dp["estimate"], dp["low"], dp["n"]) == (0, 0, 6)
    assert dp["high"] == pytest.approx(wilson(0, 6, 0.9)["high"])
    assert (eo["estimate"], eo["low"]) == (0, 0)
    assert eo["high"] == pytest.approx(wilson(0, 2, 0.9)["high"])  # the 2 pairs of a true yes
    said = " ".join(out["sentences"])
    assert "0 (90% CI 0 to 0)" not in said and "0 (0 to 0)" not in said
    some = adult.pair_metrics(records(items, ["yes", "no"] + ["no"] * 10))  # one flip
    assert some["headline"]["demographic_parity_difference"]["high"] <= 1


def test_metrics_without_complete_pairs():
    items = pair_items([("Male", "yes")])
    out = adult.pair_metrics(records(items, ["I'm sorry, I can't.", "maybe"]))
    h = out["headline"]
    assert h["pair_flip_rate"]["n"] == 0 and math.isnan(h["pair_flip_rate"]["estimate"])
    assert math.isnan(h["demographic_parity_difference"]["estimate"])
    assert h["refusal_rate"]["estimate"] == 0.5 and h["unparsed_rate"]["estimate"] == 0.5
    assert out["sentences"]


def test_vectorised_gaps_match_fairlearn():
    from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

    rng = np.random.default_rng(3)
    cases = [rng.random((3, n)) < rng.random((3, 1)) for n in (5, 40, 200) for _ in range(6)]
    cases += [np.array([[0, 0, 0, 0], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=bool),  # no positives
              np.array([[1, 0, 1], [1, 1, 0], [1, 1, 1]], dtype=bool)]  # one group only
    defined = 0
    for y, pred, male in cases:
        dp, eo = adult.group_gaps(y, pred, male, np.ones((1, y.size)))
        kw = {"sensitive_features": male.astype(int)}
        assert dp[0] == pytest.approx(demographic_parity_difference(y, pred, **kw))
        if adult.undefined_odds(y, male) is None:
            assert eo[0] == pytest.approx(equalized_odds_difference(y, pred, **kw))
            defined += 1
        else:  # a rate over nobody: fairlearn counts it as 0, here it is undefined
            assert np.isnan(eo[0])
    assert defined >= 5


def test_equalized_odds_with_a_rate_over_nobody_is_undefined_not_one():
    """A model that says "yes" to everyone, and no female version has a true "yes": the
    female true-positive rate is undefined. fairlearn's zero-division rule reports 1.0; the
    audit says undefined, and why (#37)."""
    from fairlearn.metrics import equalized_odds_difference

    items = pair_items([("Male", "yes")] * 4 + [("Male", "no"), ("Female", "no")] * 4)
    # the twins carry the other sex with the same true label: make every female "no"
    frame = records(items, ["yes"] * len(items))
    frame.loc[frame["sex"] == "Female", "answer_label"] = "no"
    y = frame["answer_label"].eq("yes").to_numpy()
    male = frame["sex"].eq("Male").to_numpy()
    assert equalized_odds_difference(y.astype(int), np.ones(len(y), int),
                                     sensitive_features=male.astype(int)) == 1.0
    found = adult.pair_metrics(frame)
    odds = found["headline"]["equalized_odds_difference"]
    assert np.isnan(odds["estimate"]) and odds["undefined"] == "no female version has a true 'yes'"
    said = " ".join(found["sentences"])
    assert "equalized odds difference undefined (no female version has a true 'yes'" in said
    assert "difference 1.0" not in said and "difference 1 " not in said


def test_originals_only_responses_give_parity_and_odds_not_a_flip_rate():
    """DecodingTrust's stored generations answer the original prompts only: parity and odds
    come from them, and the sex-flipped twins are not counted as unparsed answers."""
    items = pair_items([("Male", "yes"), ("Female", "no"), ("Male", "no"), ("Female", "yes")])
    answers = {"original": ["yes", "no", "yes", "no"]}
    responses = [answers["original"][n // 2] if i.groups["variant"] == "original" else None
                 for n, i in enumerate(items)]
    frame = records(items, responses)
    assert adult.originals_only(adult.read_answers(frame))
    out = adult.pair_metrics(frame)
    h = out["headline"]
    assert out["coverage"] == "originals only" and "pair_flip_rate" not in h
    assert h["unparsed_rate"]["estimate"] == 0.0 and h["unparsed_rate"]["n"] == 4
    originals = adult.read_answers(frame)
    originals = originals[originals["variant"] == "original"]
    expected = adult.fairness_gaps(originals[originals["pred"].notna()])
    # men: yes, yes (true yes, no); women: no, no (true no, yes) -> parity 1, odds 1
    assert h["demographic_parity_difference"]["estimate"] == pytest.approx(1.0)
    assert h["equalized_odds_difference"] == expected["equalized_odds_difference"]
    assert (h["accuracy_male"]["n"], h["accuracy_female"]["n"]) == (2, 2)
    text = " ".join(out["sentences"])
    assert "answer only the 4 original prompts, none of their 4 sex-flipped twins" in text
    assert "flip rate needs the twins' answers" in text and "could not be parsed" in text
    assert "50.0% could not be parsed" not in text
    json.dumps(out)
    # one answered twin: the pair metrics as before (the rest are incomplete pairs)
    responses[1] = "no"
    assert "pair_flip_rate" in adult.pair_metrics(records(items, responses))["headline"]


def test_limit_keeps_whole_pairs(tmp_path: Path):
    write(tmp_path, ROWS)
    probe = adult.from_data(data_dir=tmp_path)
    items = probe.items(0)
    assert [i.id for i in probe.limited(items, 5)] == [i.id for i in items[:4]]
    assert [i.id for i in probe.limited(items, 1)] == [i.id for i in items[:2]]
    assert probe.limited(items, 100) == items


@pytest.mark.parametrize("answers", [["yes", "no"], ["yes", "maybe", "perhaps", "no"]])
def test_metrics_with_one_parsed_original_are_no_crash(answers: list[str]):
    """Before: fairlearn refused a single row ("Feature array has too many dimensions"), so
    `audit --limit 1` (one pair), or a run where one original prompt was parsed, stopped with
    a traceback. One row has one sex: no parity gap (fairlearn's 0), no odds difference."""
    items = pair_items([("Male", "no"), ("Female", "yes")][:len(answers) // 2])
    out = adult.pair_metrics(records(items, answers))
    originals = {r["metric"]: r for r in out["tables"]["fairlearn"]
                 if r["scope"] == "originals only"}
    assert originals["demographic_parity_difference"]["estimate"] == 0.0
    assert originals["demographic_parity_difference"]["n"] == 1
    assert math.isnan(originals["equalized_odds_difference"]["estimate"])
    json.dumps(out)
