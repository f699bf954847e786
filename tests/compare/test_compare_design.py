"""``biasscope compare`` compares like with like (#37): runs under different wordings on the
wordings both asked, items counted once over their wordings, checkpoints and items only one
run has named in the table and the sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.compare.job import CompareConfig, run
from biasscope.compare.runs import compare_runs
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.units import Unit
from test_compare import winobias_records

T0, T1 = "{sentence} Who is the {occupation}? {o1}, {o2}, {o3}:", "Q: {sentence} ({o1}/{o2}/{o3})"


def worded(frame: pd.DataFrame, wording: str) -> pd.DataFrame:
    """``frame``'s records as asked under ``wording`` (id suffix and ``template`` column)."""
    ids = frame["item_id"].str.replace(":seed", f"@{wording}:seed", regex=False)
    return frame.assign(item_id=ids, template=wording)


def write(root: Path, records: pd.DataFrame, probes: dict[str, object]) -> str:
    root.mkdir(parents=True)
    write_json(root / "run.json", {"schema": "biasscope.run/1", "settings": {"probes": probes}})
    store = RunStore(root)
    for (step, probe), part in records.groupby(["step", "probe"]):
        store.write_unit(Unit(str(part["model"].iloc[0]), f"step{step}", str(probe), 0, int(step)),
                         part.reset_index(drop=True))
    return str(root)


def test_default_against_templated_is_compared_on_the_shared_wording(tmp_path: Path) -> None:
    """The default wording of run A is w0 of run B (same template); B's w1 moves the gap. Today
    A − B is compared on w0 alone, equivalent, and the table and sentence say so; before, the
    pooled wordings made it "different" without a word about wordings."""
    base = winobias_records(150, seed=1)
    other = worded(winobias_records(150, shift=3.0, seed=1), "w1")
    a = write(tmp_path / "a", base, {"winobias-gender": {"template": T0}})
    b = write(tmp_path / "b", pd.concat([worded(base, "w0"), other], ignore_index=True),
              {"winobias-gender": {"wordings": [{"id": "w0", "template": T0},
                                                {"id": "w1", "template": T1}]}})
    summary = run(CompareConfig(a, b, out=str(tmp_path / "cmp"))).summary
    gap = next(c for c in summary["comparisons"] if c["measure"] == "jsdp_gap")
    assert gap["verdict"] == "equivalent" and gap["wordings"] == 1 and gap["n"] == 300
    assert "compared on the 1 both asked (A: the default; B: w0)" in gap["sentence"]
    assert any("B 2 (w0, w1)" in s for s in summary["notes"])
    # B against a run asked only under w1: no wording in common, nothing to compare
    c = write(tmp_path / "c", other, {"winobias-gender": {"wordings": [
        {"id": "w1", "template": T1}]}})
    assert main(["compare", a, c, "--out", str(tmp_path / "none")]) == 2


def test_items_are_counted_once_over_their_wordings(tmp_path: Path) -> None:
    """Two wordings both runs asked: each prompt is averaged over them, n counts prompts (300,
    not 600), and Adult's pairs under several wordings compare instead of failing."""
    base = winobias_records(150, seed=2)
    both = pd.concat([worded(base, "w0"), worded(base, "w1")], ignore_index=True)
    found, notes = compare_runs(both, both.copy())
    gap = next(c for c in found if c.measure == "jsdp_gap")
    assert gap.result.n == 300 and gap.wordings == 2 and notes == []
    pytest.importorskip("fairlearn")
    from test_audit_adult import pair_items
    from test_audit_adult import records as adult_records

    pairs = pair_items([("Male", "yes"), ("Female", "no")] * 40)
    said = ["yes" if i.groups["sex"] == "Male" else "no" for i in pairs]
    frame = adult_records(pairs, said).assign(model="m", step=10)
    two = pd.concat([worded(frame.assign(item_id=frame["item_id"] + ":seed0"), w)
                     for w in ("a0", "a1")], ignore_index=True)
    flips = next(c for c in compare_runs(two, two.copy())[0] if c.measure == "flip_rate")
    assert flips.result.n == 80 and flips.estimate_a == 1.0 and flips.wordings == 2


def test_checkpoints_and_items_only_one_run_has_are_said(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    a_records = pd.concat([winobias_records(150, seed=3, step=100),
                           winobias_records(150, seed=3, step=200)], ignore_index=True)
    b_records = pd.concat([winobias_records(150, seed=3, step=100),
                           winobias_records(20, seed=4, step=100, first=900)],
                          ignore_index=True)
    a = write(tmp_path / "a", a_records, {})
    b = write(tmp_path / "b", b_records, {})
    assert main(["compare", a, b, "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "only A  only B  wordings" in printed
    assert "winobias-gender: checkpoints not compared (A only: m@200)." in printed
    summary = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    gap = next(c for c in summary["comparisons"] if c["measure"] == "jsdp_gap")
    assert (gap["only_a"], gap["only_b"]) == (0, 40)
    assert "left out of the pairs: 0 items only A has, 40 only B has" in gap["sentence"]


def test_bbq_items_under_four_wordings_count_once(tmp_path: Path) -> None:
    """A templated BBQ audit compared with itself: n is the items (not items x 4 wordings),
    and the packed counts give back the pooled bias score of all wordings' answers."""
    from bbq_fixture import write_bbq
    from biasscope.probes.base import Response, records
    from biasscope.probes.bbq.compare import values as bbq_values
    from biasscope.probes.bbq.metrics import answers, bias_score
    from biasscope.probes.specs import load_probes

    write_bbq(tmp_path)
    probe = load_probes("bbq", data_dir=tmp_path, wordings="builtin")[0]
    items = probe.items(0)
    frame = records(probe, items, [Response(i.options[(k * 7) % 3], "stored")
                                   for k, i in enumerate(items)]).assign(model="m", step=1)
    bases = {i.id.split("@")[0] for i in items}
    s_dis = {v.measure: v for v in bbq_values(frame)}["s_dis"]
    assert 0 < len(s_dis.groups["items"]) <= len(bases) < len(items)
    assert s_dis.estimate() == pytest.approx(bias_score(answers(frame), False)["estimate"])
    found = {c.measure: c for c in compare_runs(frame, frame.copy())[0]}
    assert found["s_dis"].result.n == len(s_dis.groups["items"])
    assert found["s_dis"].wordings == 4


def test_audit_runs_are_compared_on_their_wordings_text(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """An audit's run.json keeps its probes at the top (not under ``settings``): two BBQ
    audits under wordings files that both call their one wording ``w`` but word it
    differently are not one measurement, and are not compared; the same text is."""
    from bbq_fixture import write_bbq

    data = write_bbq(tmp_path / "data")
    texts = {"one": "{context}\n{question}\n(a) {ans0}\n(b) {ans1}\n(c) {ans2}\nAnswer:",
             "two": "Context: {context}\nQ: {question}\n(a) {ans0}, (b) {ans1} or (c) {ans2}?"}
    runs = {}
    for name, text in [*texts.items(), ("one-again", texts["one"])]:
        (tmp_path / f"{name}.txt").write_text(f"### w\n{text}\n")
        runs[name] = str(tmp_path / name)
        assert main(["audit", "--out", runs[name], "--probe", "bbq", "--model",
                     "canned:unknown", "--data-dir", str(data), "--no-cache", "--wordings",
                     str(tmp_path / f"{name}.txt")]) == 0
    capsys.readouterr()
    assert main(["compare", runs["one"], runs["two"], "--out", str(tmp_path / "cmp")]) == 2
    assert "under the same wording and seeds: bbq: not compared" in capsys.readouterr().err
    assert not (tmp_path / "cmp" / "comparison.json").exists()
    assert main(["compare", runs["one"], runs["one-again"], "--out", str(tmp_path / "same")]) == 0


def test_seeds_only_one_run_has_are_left_out_and_said(tmp_path: Path) -> None:
    """A seed reorders WinoBias' options, and a run stopped after its first seed has fewer:
    run A's prompts averaged over seeds 0 and 1 against B's seed 0 alone are not one
    measurement. They are compared on seed 0, and the note and sentence say so."""
    first = winobias_records(150, seed=5)
    second = winobias_records(150, shift=3.0, seed=6)
    second = second.assign(seed=1, item_id=second["item_id"].str.replace("seed0", "seed1"))
    a = pd.concat([first, second], ignore_index=True)
    found, notes = compare_runs(a, first.copy())
    gap = next(c for c in found if c.measure == "jsdp_gap")
    assert gap.result.estimate == 0 and gap.result.verdict == "equivalent"
    said = "A asked 2 seed(s) (0, 1), B 1 (0); compared on the 1 both asked"
    assert said in gap.sentence and any(said in n for n in notes)
    found, notes = compare_runs(second, first)
    assert found == [] and any("not compared" in n and "seed" in n for n in notes)
