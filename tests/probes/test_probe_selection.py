"""Which items `biasscope audit` and `biasscope items` ask: BBQ categories (bbq:Age,Religion),
the --limit sample, and the Adult file (--base-rate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from bbq_fixture import TEMPLATES, write_bbq
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.probes.specs import parse_probe_specs
from biasscope.store.directory import RunStore


@pytest.mark.parametrize(("text", "specs"), [
    ("bbq", [("bbq", [])]),
    ("bbq:Age,Religion", [("bbq", ["Age", "Religion"])]),
    ("adult-counterfactual, bbq:Age, religion,professional-bias",
     [("adult-counterfactual", []), ("bbq", ["Age", "religion"]), ("professional-bias", [])]),
    ("bbq:SES,adult-counterfactual", [("bbq", ["SES"]), ("adult-counterfactual", [])]),
    ("crows-pairs:revised,bbq", [("crows-pairs", ["revised"]), ("bbq", [])])])
def test_probe_specs(text: str, specs: list[tuple[str, list[str]]]):
    assert parse_probe_specs(text) == specs


@pytest.mark.parametrize(("text", "message"), [
    (" , ", "name at least one probe"), ("bbq:", "name what to select after ':'"),
    ("professional-bias:x", "only bbq and crows-pairs take a selection"),
    ("bbq:Age,bbq", "names bbq more than once: name each probe once"),
    ("bbq:Age,,Religion", "bbq:Age,,Religion: an empty entry between commas; remove the extra"),
    ("adult-counterfactual,", "an empty entry between commas"),
    ("bbq:Age,Age", r"bbq:Age,Age selects Age more than once: name each once"),
    ("bbq:Age,Religion,age,religion", "selects Age, Religion more than once")])
def test_bad_probe_specs(text: str, message: str):
    with pytest.raises(BiasscopeError, match=message):
        parse_probe_specs(text)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("selection-data")
    by = {t.category: t for t in TEMPLATES}
    write_bbq(root, [by["Age"]] * 6 + [by["Religion"]] * 3 + [by["SES"]] * 3)
    for rate in ("0.0", "0.5"):
        write_adult(root, ROWS, rate)
    return root


def _answer_all(items_file: Path, responses: Path, only: str | None = None) -> int:
    rows = [json.loads(line) for line in items_file.read_text().splitlines()]
    responses.write_text("".join(
        json.dumps({"item_id": r["item_id"], "response": r["answer"]}) + "\n" for r in rows
        if only is None or r["item_id"].endswith(only)))
    return len(rows)


def test_bbq_categories_and_limit_through_items_and_probe(data_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    items_file, responses = tmp_path / "items.jsonl", tmp_path / "responses.jsonl"
    args = ["--data-dir", str(data_dir), "--limit", "16"]
    assert main(["items", "--probe", "bbq:Age,Religion", "--out", str(items_file), *args]) == 0
    assert _answer_all(items_file, responses) == 16  # 4 examples: 3 Age, 1 Religion
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", "bbq:Age,Religion",
                 "--out", str(out), *args]) == 0
    assert "match no item" not in capsys.readouterr().err  # the same sample both times
    recs = RunStore(out).records()
    assert recs["category"].value_counts().to_dict() == {"Age": 12, "Religion": 4}
    assert (recs["label"] == recs["answer_label"]).all()
    run = json.loads((out / "run.json").read_text())
    assert run["probes"]["bbq"]["categories"] == ["Age", "Religion"] and run["limit"] == 16


def test_missing_bbq_file_is_one_line_naming_what_is_there(data_dir: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]):
    code = main(["audit", "--responses", str(tmp_path / "r.jsonl"), "--probe",
                 "bbq:Age,Nationality", "--out", str(tmp_path / "run"), "--data-dir",
                 str(data_dir)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "no file for Nationality" in err and "present: Age, Religion, SES;" in err
    code = main(["items", "--probe", "bbq", "--out", str(tmp_path / "i.jsonl"), "--data-dir",
                 str(data_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "8 of 11 category files missing" in err
    assert "(name the probe bbq:Age,Religion,SES)" in err


def test_missing_bbq_files_under_the_variable_say_to_unset_it(
        data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch):
    """offline.md's ``BIASSCOPE_DATA_DIR=/data biasscope audit ... --probe bbq`` with a copy of
    some categories was told to "drop --data-dir", a flag the command line did not hold."""
    monkeypatch.setenv("BIASSCOPE_DATA_DIR", str(data_dir))
    code = main(["items", "--probe", "bbq", "--out", str(tmp_path / "i.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "8 of 11 category files missing" in err
    assert err.strip().endswith("and unset BIASSCOPE_DATA_DIR") and "--data-dir" not in err


def test_adult_base_rate_and_originals_only_responses(data_dir: Path, tmp_path: Path):
    items_file, responses = tmp_path / "items.jsonl", tmp_path / "responses.jsonl"
    common = ["--data-dir", str(data_dir), "--base-rate", "0.0"]
    assert main(["items", "--probe", "adult-counterfactual", "--out", str(items_file),
                 *common]) == 0
    ids = [json.loads(line)["item_id"] for line in items_file.read_text().splitlines()]
    assert ids[0] == "adult-counterfactual:0.0:1:original" and len(ids) == 6
    _answer_all(items_file, responses, only=":original")  # as DecodingTrust's generations
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", "adult-counterfactual",
                 "--out", str(out), *common]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["probes"]["adult-counterfactual"]["base_rate"] == "0.0"
    assert run["probes"]["adult-counterfactual"]["file"].endswith("_rate_0.0.jsonl")
    result = json.loads((out / "summary.json").read_text())["probes"]["adult-counterfactual"]
    assert result["coverage"] == "originals only"
    assert result["headline"]["unparsed_rate"]["estimate"] == 0.0
    assert any("flip rate needs the twins' answers" in s for s in result["sentences"])
    with pytest.raises(SystemExit):  # argparse: one of 0.0, 0.5, 1.0
        main(["items", "--probe", "adult-counterfactual", "--out", str(items_file),
              "--base-rate", "0.3"])
