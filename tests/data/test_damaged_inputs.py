"""Inputs that would make a run describe less than it says: a pinned data file emptied or cut
short in --data-dir, an empty file of the user's own data, and a --limit that reads one part of
WinoBias only (issue #23, items 4, 5 and 7)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from bbq_fixture import write_bbq
from biasscope.cli.main import main
from biasscope.core.digest import file_sha256
from biasscope.core.errors import DataError
from biasscope.data import sources
from biasscope.data.sources import SOURCES, DataFile, data_path
from biasscope.probes import load_probe
from winobias_fixture import SENTENCES, write_winobias

WINO = "pro_stereotyped_type2.txt.dev"


def pin(monkeypatch: pytest.MonkeyPatch, root: Path, source: str) -> None:
    """Pin every file of ``root/source`` to its bytes, as if they were the upstream files."""
    monkeypatch.delenv("BIASSCOPE_OWN_DATA", raising=False)
    for path in sorted((root / source).iterdir()):
        known = SOURCES.get((source, path.name))
        url = known.url if known else f"https://example.invalid/{path.name}"
        monkeypatch.setitem(SOURCES, (source, path.name), DataFile(
            source, path.name, url, file_sha256(path), path.stat().st_size))


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# ---------------------------------------------------------------- item 4: pinned files

@pytest.mark.parametrize("damage", ["empty", "short"])
def test_a_damaged_pinned_file_in_the_data_dir_fails_its_checksum(tmp_path, monkeypatch,
                                                                  damage):
    data = write_winobias(tmp_path / "data")
    pin(monkeypatch, data, "winobias")
    assert len(load_probe("winobias-gender", data_dir=data).sentences) == 4 * len(SENTENCES)
    target = data / "winobias" / WINO
    target.write_bytes(b"" if damage == "empty" else target.read_bytes()[:40])
    with pytest.raises(DataError, match=rf"{WINO} is not the pinned winobias/{WINO} .*fresh "
                       r"copy .*BIASSCOPE_OWN_DATA=1"):
        load_probe("winobias-gender", data_dir=data)


def test_the_real_pins_are_checked_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("BIASSCOPE_OWN_DATA", raising=False)
    data = write_winobias(tmp_path / "data")
    (data / "winobias" / WINO).write_text("")
    with pytest.raises(DataError, match=r"is not the pinned .*\(0 bytes, expected 30884"):
        data_path("winobias", WINO, data)
    monkeypatch.setenv("BIASSCOPE_OWN_DATA", "1")  # the user's own files: used as they are
    assert data_path("winobias", WINO, data).stat().st_size == 0
    monkeypatch.delenv("BIASSCOPE_OWN_DATA")
    unpinned = tmp_path / "data" / "bbq" / "SES.jsonl"  # not pinned upstream: as it is
    unpinned.parent.mkdir()
    unpinned.write_text("{}\n")
    assert data_path("bbq", "SES.jsonl", data) == unpinned.resolve()
    assert sources.own_data() is False


def test_an_emptied_pinned_file_stops_dynamics_in_one_line(checkpoint_dirs, tmp_path,
                                                           monkeypatch, capsys):
    data = write_winobias(tmp_path / "data")
    pin(monkeypatch, data, "winobias")
    (data / "winobias" / WINO).write_text("")
    out = tmp_path / "run"
    code = main(["dynamics", "--model", str(checkpoint_dirs[0]), "--data-dir", str(data),
                 "--out", str(out), "--seeds", "0", "--quiet", "--device", "cpu"])
    line = one_line(capsys)
    assert code == 2 and f"{WINO} is not the pinned" in line
    assert not (out / "run.json").exists()


# ---------------------------------------------------------------- items 4, 5: own files

def _empty(data: Path, relative: str) -> Path:
    path = data / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


@pytest.mark.parametrize(("probe", "relative", "options"), [
    ("winobias-gender", f"winobias/{WINO}", {}),
    ("bbq", "bbq/Religion.jsonl", {"categories": ["Age", "Religion"]}),
    ("adult-counterfactual", "decodingtrust/adult_0_200_test_base_rate_0.5.jsonl", {}),
    ("lambada", "lambada/lambada_test.jsonl", {}),
])
def test_an_empty_own_file_is_refused_naming_it(tmp_path, probe, relative, options):
    data = write_bbq(write_winobias(tmp_path / "data"))
    write_adult(data, ROWS)
    path = _empty(data, relative)
    with pytest.raises(DataError, match=r"no \w+") as caught:
        load_probe(probe, data_dir=data, **options)
    assert str(caught.value).startswith(f"{path}:")


def test_an_empty_ccai_file_is_refused_naming_it(tmp_path):
    from biasscope.sensitivity.principles import load_ccai

    path = _empty(tmp_path, "ccai/clean_comments.csv")
    with pytest.raises(DataError, match=r"clean_comments\.csv: empty file") as caught:
        load_ccai(tmp_path)
    assert str(caught.value).startswith(f"{path.resolve()}:")


def test_dynamics_refuses_an_empty_winobias_split(checkpoint_dirs, tmp_path, capsys):
    data = write_winobias(tmp_path / "data")
    path = _empty(data, f"winobias/{WINO}")
    out = tmp_path / "run"
    code = main(["dynamics", "--model", str(checkpoint_dirs[0]), "--data-dir", str(data),
                 "--out", str(out), "--seeds", "0", "--quiet", "--device", "cpu"])
    assert code == 2 and f"error: {path}: no sentences found" in one_line(capsys)
    assert not (out / "run.json").exists()


def test_an_empty_bbq_category_is_never_run(tmp_path, capsys):
    data = write_bbq(tmp_path / "data")
    path = _empty(data, "bbq/Religion.jsonl")
    out = tmp_path / "items"
    code = main(["items", "--probe", "bbq:Age,Religion", "--data-dir", str(data),
                 "--out", str(out)])
    assert code == 2 and f"error: {path}: no questions found" in one_line(capsys)


# ---------------------------------------------------------------- item 7: --limit

def wino_sentences(n: int) -> list[tuple[str, str, str]]:
    """``n`` lines per file, cycling the fixture's sentences (their referenced occupations are
    male and female stereotyped)."""
    return [SENTENCES[i % len(SENTENCES)] for i in range(n)]


def test_limit_draws_whole_pairs_stratified_over_split_subset_and_answer(tmp_path):
    data = write_winobias(tmp_path / "data", wino_sentences(40))
    probe = load_probe("winobias-gender", data_dir=data)
    items = probe.items(0)
    picked = probe.limited(items, 40)  # 10 pairs of 4 prompts, 5 per subset
    assert len(picked) == 40
    groups = [i.groups for i in picked]
    assert Counter(g["split"] for g in groups) == {"pro": 20, "anti": 20}
    assert Counter(g["subset"] for g in groups) == {"dev": 20, "test": 20}
    asked = Counter((i.groups["subset"], items[0].options[i.answer]) for i in picked
                    if i.groups["split"] == "pro" and i.groups["kind"] == "referenced")
    # per subset 26 of 40 pairs ask about a male-stereotyped occupation: 3.25 of 5, so 3 male
    # and 2 female (largest remainders)
    assert asked == {("dev", "male"): 3, ("dev", "female"): 2, ("test", "male"): 3,
                     ("test", "female"): 2}
    pairs = Counter(str(g["sentence_id"]).split("-", 1)[1] for g in groups)
    assert set(pairs.values()) == {4}  # pro and anti, both prompts of each: whole pairs
    assert picked != items[:40]
    # seeded, and the same sentences for every seed
    assert [i.id for i in probe.limited(items, 40)] == [i.id for i in picked]
    again = {i.groups["sentence_id"] for i in probe.limited(probe.items(3), 40)}
    assert again == {g["sentence_id"] for g in groups}
    assert len(probe.limited(items, 2)) == 4  # at least one pair
    assert probe.limited(items, 10_000) == items


def test_a_limited_dynamics_run_has_pairs_and_records_the_sampling(checkpoint_dirs, tmp_path):
    data = write_winobias(tmp_path / "data", wino_sentences(12))
    out = tmp_path / "run"
    assert main(["dynamics", "--model", str(checkpoint_dirs[0]), "--data-dir", str(data),
                 "--out", str(out), "--seeds", "0", "--quiet", "--device", "cpu",
                 "--limit", "16"]) == 0
    from biasscope.store.directory import RunStore

    records = RunStore(out).records()
    assert sorted(records["split"].unique()) == ["anti", "pro"]
    assert sorted(records["subset"].unique()) == ["dev", "test"]
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["limit"] == 16
    assert "pairs, stratified by subset and answer" in (
        settings["probes"]["winobias-gender"]["limit_sample"])
    from biasscope.dynamics.analysis.breakdown import pro_anti, prompt_means, record_values

    paired = pro_anti(prompt_means(record_values(records)), 0.95, 50)
    assert paired["n_pairs"] == 4 and "accuracy/difference" in paired


def test_the_limit_help_says_how_items_are_drawn(capsys):
    with pytest.raises(SystemExit):
        main(["dynamics", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "pro/anti pairs stratified by subset and answer" in help_text
    assert "--limit 1 gives a whole pair or example" in help_text  # not "at most 1"
