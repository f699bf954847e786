"""``biasscope compare``: equivalent, different and inconclusive verdicts on WinoBias records
built in the test (the upstream record columns), paired by prompt and unpaired; the margin
checks; and the TOST itself against its definition."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.compare.runs import compare_records, compare_runs
from biasscope.core.equivalence import contrast_equivalence, jackknife_equivalence, sentence
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.units import Unit

OPTIONS = ["male", "female", "not specified"]


def winobias_records(n_pairs: int, shift: float = 0.0, noise: float = 1.0, seed: int = 0,
                     model: str = "m", step: int | None = 100, first: int = 0) -> pd.DataFrame:
    """Referenced prompts of ``n_pairs`` pro/anti pairs, each pair once with a male and once
    with a female answer (as WinoBias' two pronoun versions); ``shift`` is added to the
    correct option's log-prob on male prompts only (a planted gap)."""
    rng = np.random.default_rng(seed)
    rows = []
    for line in range(first, first + n_pairs):
        for split in ("pro", "anti"):
            answer = (line + (split == "anti")) % 2  # pro and anti prompts differ in gender
            lp = rng.normal(-3.0, noise, size=3)
            lp[answer] += 1.0 + (shift if answer == 0 else 0.0)
            sid = f"{split}-dev-{line:03d}"
            rows.append({"model": model, "step": step, "probe": "winobias-gender", "seed": 0,
                         "item_id": f"winobias-gender:{sid}:referenced:seed0",
                         "sentence_id": sid, "split": split, "subset": "dev",
                         "kind": "referenced", "occupation": f"job{line}",
                         "stereotype": "male", "answer": answer,
                         "answer_label": OPTIONS[answer], "options": OPTIONS,
                         "option_logprobs": list(lp)})
    return pd.DataFrame(rows)


def write_run(root: Path, records: pd.DataFrame) -> Path:
    store = RunStore(root)
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / "run.json", {"schema": "biasscope.run/1"})
    model, step = str(records["model"].iloc[0]), records["step"].iloc[0]
    step = None if pd.isna(step) else int(step)
    store.write_unit(Unit(model, None, "winobias-gender", 0, step), records)
    return root


def by_measure(results: list) -> dict[str, object]:
    return {c.measure: c for c in results}


def test_identical_runs_are_equivalent() -> None:
    a = winobias_records(120)
    found = by_measure(compare_records(a, a.copy()))
    assert set(found) == {"jsdp_gap", "accuracy_gap", "pro_anti"}
    for c in found.values():
        assert c.result.verdict == "equivalent" and c.result.paired
        assert c.result.estimate == 0 and c.only_a == c.only_b == 0
        assert c.result.low < 0 < c.result.high  # agreement is evidence, not certainty


def test_identical_pilots_are_too_few_items_never_equivalent() -> None:
    """Every paired difference 0 (a standard error of 0) is not equivalence: 2 pro/anti pairs,
    20 accuracy prompts and 0 of 20 flips against 0 of 20 are "too few items" (#37)."""
    found = by_measure(compare_records(*(winobias_records(2, seed=1),) * 2))
    assert {c.result.verdict for c in found.values()} == {"too few items"}
    pro_anti = found["pro_anti"]
    assert pro_anti.result.n == 2 and pro_anti.result.min_items == 119
    assert "too few items" in pro_anti.sentence and "at least 119" in pro_anti.sentence
    accuracy = by_measure(compare_records(*(winobias_records(10, seed=1),) * 2))["accuracy_gap"]
    assert accuracy.result.verdict == "too few items" and accuracy.result.n == 20
    assert accuracy.result.high - accuracy.result.low > 0.2
    from biasscope.compare.measures import Values
    from biasscope.compare.runs import compare_values

    none = Values("flip_rate", {"pairs": pd.Series(np.zeros(20), index=[f"p{i}" for i in
                                                                        range(20)])},
                  {"pairs": 1.0})
    flips, _, _ = compare_values(none, none, 0.05)
    assert flips.method == "tango" and flips.verdict == "too few items"
    assert flips.high == pytest.approx(1.6449**2 / (20 + 1.6449**2), abs=1e-4)  # 0 of 20
    # 59 pairs that agree can show it: 0.95 ** 59 < 0.05
    many = Values("flip_rate", {"pairs": pd.Series(np.zeros(59), index=range(59))},
                  {"pairs": 1.0})
    assert compare_values(many, many, 0.05)[0].verdict == "equivalent"


def test_a_planted_gap_is_different_and_a_small_change_equivalent() -> None:
    a = winobias_records(150, seed=1)
    planted = winobias_records(150, shift=3.0, seed=1)
    gap = by_measure(compare_records(planted, a))["jsdp_gap"].result
    assert gap.verdict == "different" and gap.paired and gap.high < -0.02  # male: surer
    tiny = winobias_records(150, shift=0.02, seed=1)
    near = by_measure(compare_records(tiny, a))["jsdp_gap"].result
    assert near.verdict == "equivalent" and abs(near.estimate) < 0.02


def test_too_few_items_are_inconclusive_and_unpaired_is_said() -> None:
    a, b = winobias_records(3, seed=1, noise=2.0), winobias_records(3, seed=2, noise=2.0,
                                                                    first=50)
    found = by_measure(compare_records(a, b))
    gap = found["jsdp_gap"].result
    assert not gap.paired and gap.verdict == "too few items"
    assert "unpaired" in found["jsdp_gap"].sentence and "too few items" in found[
        "jsdp_gap"].sentence
    assert math.isfinite(found["jsdp_gap"].mde) and found["jsdp_gap"].mde > 0.02


def test_items_only_one_run_has_are_left_out_of_the_pairs() -> None:
    a = winobias_records(60, seed=3)
    b = pd.concat([a, winobias_records(5, seed=4, first=900)], ignore_index=True)
    gap = by_measure(compare_records(a, b))["jsdp_gap"]
    assert gap.result.paired and gap.only_b == 10 and gap.only_a == 0
    assert gap.result.verdict == "equivalent"
    # A and B are given over the pairs, as A − B is: B's own items gave another B
    assert gap.estimate_b != by_measure(compare_records(b, b))["jsdp_gap"].estimate_a
    assert gap.estimate_a == pytest.approx(gap.estimate_b)  # the pairs' records are alike
    assert gap.estimate_a - gap.estimate_b == pytest.approx(gap.result.estimate, abs=1e-12)


def unpaired(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` with each anti sentence numbered apart from its pro one (``pro-dev-000``
    against ``anti-dev-500``): no pro/anti pairs, as the demo's items once had."""
    out = records.copy()
    anti = out["split"] == "anti"
    out.loc[anti, "sentence_id"] = out.loc[anti, "sentence_id"].str.replace(
        r"-(\d+)$", lambda m: f"-{int(m.group(1)) + 500}", regex=True)
    out.loc[anti, "item_id"] = [f"winobias-gender:{s}:referenced:seed0"
                                for s in out.loc[anti, "sentence_id"]]
    return out


def test_a_measure_without_items_is_a_note_not_a_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No pro/anti pairs in either run: pro − anti was an "inconclusive … n = 0" row of compare
    and "0 items" of power; it is a note of each, and the other measures are compared."""
    a, b = unpaired(winobias_records(60, seed=1)), unpaired(winobias_records(60, seed=2))
    found, notes = compare_runs(a, b)
    assert set(by_measure(found)) == {"jsdp_gap", "accuracy_gap"}
    assert notes == ["winobias-gender accuracy pro − anti (paired sentences), m@100 − m@100: "
                     "not compared: no pro/anti pairs in either run."]
    found, notes = compare_runs(a, winobias_records(60, seed=2))
    assert "pro_anti" not in by_measure(found)
    assert notes[0].endswith("not compared: run A has no pro/anti pairs.")
    run = write_run(tmp_path / "pilot", a)
    assert main(["power", "--pilot", str(run), "--effect", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "with 0 items" not in out and "JSD-P gap" in out
    assert "winobias-gender accuracy pro − anti (paired sentences) at m@100: not planned: the " \
           "run has no pro/anti pairs." in out


def test_cli_writes_json_and_page_and_refuses_a_margin_beyond_the_jsdp_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path / "a", winobias_records(150, model="full"))
    b = write_run(tmp_path / "b", winobias_records(150, model="bf16", seed=0))
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out), "--margin",
                 "jsdp_gap=0.01"]) == 0
    printed = capsys.readouterr().out
    assert "equivalent" in printed and "full@100 − bf16@100" in printed
    summary = json.loads((out / "comparison.json").read_text())
    assert summary["margins"]["jsdp_gap"] == 0.01 and summary["margins"]["pro_anti"] == 0.05
    page = (out / "comparison.html").read_text()
    assert "<table" in page
    # each measure in its words, its key beside to find it in comparison.json and --margin
    assert "JSD-P gap (male − female) (jsdp_gap)" in printed
    assert ('<span class="named">JSD-P gap (male − female)</span><br><code class="key" '
            'title="its key in the JSON files">jsdp_gap</code>') in page
    assert "<td>jsdp_gap</td>" not in page
    assert main(["compare", str(a), str(b), "--out", str(out), "--margin", "0.4"]) == 2
    assert "at most 0.347" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--margin", "gap=1"]) == 2
    assert "MEASURE=NUMBER" in capsys.readouterr().err
    # a margin for a measure these runs lack is still checked, not silently dropped
    assert main(["compare", str(a), str(b), "--out", str(out), "--margin", "s_dis=-5"]) == 2
    assert "margin -5 for s_dis" in capsys.readouterr().err


def test_a_comparison_of_other_runs_is_not_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``compare C D`` after ``compare A B``, both without --out, replaced A and B's
    comparison in ./comparison without a word."""
    runs = {name: write_run(tmp_path / name, winobias_records(150, model=name, seed=seed))
            for seed, name in enumerate("abcd")}
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "a", "b"]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "comparison").iterdir()}
    capsys.readouterr()
    for pair in (["c", "d"], ["b", "a"], ["a", "d"]):
        assert main(["compare", *pair]) == 2
        assert capsys.readouterr().err == ("biasscope: error: ./comparison holds a comparison "
                                           "of a and b; use --out DIR or delete it\n")
    assert {p.name: p.read_bytes() for p in (tmp_path / "comparison").iterdir()} == first
    # the same runs, however named, rewrite it (here with another margin)
    assert main(["compare", str(runs["a"]), "a/", "--margin", "0.1"]) == 2  # one run twice
    assert main(["compare", str(runs["a"]), "b/", "--margin", "0.1"]) == 0
    assert json.loads((tmp_path / "comparison" / "comparison.json").read_text())["margins"][
        "jsdp_gap"] == 0.1
    assert main(["compare", "c", "d", "--out", "cd"]) == 0  # another folder: written there
    assert json.loads((tmp_path / "cd" / "comparison.json").read_text())["run_a"] == "c"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "comparison.json").write_text('{"mine": true}\n')
    assert main(["compare", "a", "b", "--out", "mine"]) == 2
    assert "mine holds a comparison.json that is no comparison of biasscope compare" in (
        capsys.readouterr().err)
    assert (tmp_path / "mine" / "comparison.json").read_text() == '{"mine": true}\n'


def test_a_run_directory_is_refused_as_the_comparison_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``--out`` naming a run directory (one of the two compared, or another) wrote
    comparison.json and comparison.html among its files without a word."""
    for seed, name in enumerate("abc"):
        write_run(tmp_path / name, winobias_records(150, model=name, seed=seed))
    monkeypatch.chdir(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for out in ("a", "c"):
        assert main(["compare", "a", "b", "--out", out]) == 2
        assert capsys.readouterr().err == (
            f"biasscope: error: {out} is a run directory (it holds run.json), which a comparison "
            "would be written into: use --out DIR with a folder of its own\n")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_same_run_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative and absolute names of one run (or a link to it) are one run: compared with
    itself every measure is "equivalent", which says nothing. A copy is another run."""
    a = write_run(tmp_path / "a run", winobias_records(150, model="full"))
    (tmp_path / "link").symlink_to(a)
    monkeypatch.chdir(tmp_path)
    for other in (f"{a}/", "link"):
        assert main(["compare", "a run", other, "--out", "cmp"]) == 2
        assert f"a run and {other} are the same run: give two runs" in capsys.readouterr().err
    assert not (tmp_path / "cmp").exists()
    shutil.copytree(a, tmp_path / "copy")
    assert main(["compare", "a run", "copy", "--out", "cmp"]) == 0


def test_an_audit_of_next_token_and_asked_probes_is_named_by_its_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An audit of Winogender (next-token units, which record their model) beside BBQ and
    professional bias (asked units, which do not): compare named run A "nan" in every
    sentence ("bbq BBQ bias score, ambiguous, nan − gemma-3-270m-q4_k_m: ...")."""
    runs = []
    for name, mixed in (("a", True), ("b", False)):
        root = tmp_path / name
        root.mkdir()
        write_json(root / "run.json", {"schema": "biasscope.run/1", "kind": "audit",
                                       "model": "gemma"})
        asked = winobias_records(150, model="gemma", step=None).drop(columns=["model"])
        RunStore(root).write_unit(Unit("gemma", "main", "winobias-gender", 0), asked)
        if mixed:  # a unit of another probe whose rows name the model
            other = winobias_records(2, model="gemma", step=None).assign(probe="winogender")
            RunStore(root).write_unit(Unit("gemma", "main", "winogender", 0), other)
        runs.append(str(root))
    assert main(["compare", *runs, "--out", str(tmp_path / "cmp")]) == 0
    said = capsys.readouterr()
    assert "gemma − gemma" in said.out + said.err and "nan" not in said.out + said.err


def test_a_run_without_records_is_said_with_its_flag(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    write_json(empty / "run.json", {"schema": "biasscope.run/1"})
    assert main(["power", "--pilot", str(empty), "--effect", "0.1"]) == 2
    assert f"--pilot {empty} has no records yet: give a run that has scored" in (
        capsys.readouterr().err)


def test_a_run_of_no_probes_is_named_by_its_kind(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A judge's finished run holds verdicts, not probe records: it was said to have "no
    records yet", which sent the user to rerun a run that had finished."""
    a = write_run(tmp_path / "a", winobias_records(150, model="full"))
    judged = tmp_path / "judged"
    judged.mkdir()
    write_json(judged / "run.json", {"schema": "biasscope.run/1", "kind": "judge"})
    (judged / "verdicts.jsonl").write_text('{"id": "1"}\n')
    assert main(["compare", str(a), str(judged), "--out", str(tmp_path / "cmp")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"biasscope: error: {judged} is a judge run; biasscope compare takes a run of probes "
        "(`biasscope dynamics`, `audit` or `intervene`)")
    assert main(["power", "--pilot", str(judged), "--effect", "0.1"]) == 2
    assert f"--pilot {judged} is a judge run; a pilot takes a run of probes" in (
        capsys.readouterr().err)


def test_a_damaged_run_json_is_said_as_a_run_compare_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare only reads run.json: what to do is to remake the run, not to run compare
    "again" with "another --out"."""
    a = write_run(tmp_path / "a", winobias_records(150, model="full"))
    b = write_run(tmp_path / "b", winobias_records(150, model="bf16"))
    (b / "run.json").write_text('{"kind": "audit", ')
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"restore it from a copy, or move {b} away and run the command that made it again (or "
        "give that command another --out)")


def test_tost_matches_its_definition() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0.01, 0.05, 80)
    res = contrast_equivalence([x], [1.0], margin=0.03, alpha=0.05, paired=True)
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert res.se == pytest.approx(se) and res.df == pytest.approx(79)
    # TOST at α holds exactly when the (1 − 2α) interval lies inside the margins
    assert (res.p_equivalence < 0.05) == (res.low > -0.03 and res.high < 0.03)
    from scipy import stats as sps

    lower = sps.ttest_1samp(x, -0.03, alternative="greater").pvalue
    upper = sps.ttest_1samp(x, 0.03, alternative="less").pvalue
    assert res.p_equivalence == pytest.approx(max(lower, upper))


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(x.mean(axis=axis) - y.mean(axis=axis))


def test_jackknife_tost_of_a_mean_is_welchs() -> None:
    """On a difference of means with each item its own cluster the jackknife's error is the
    paired t's (the leave-one-out means' spread is the items'), so the verdicts and intervals
    are Welch's exactly."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 400), rng.normal(0.02, 1, 400)
    jack = jackknife_equivalence([a, b], _mean_difference, [np.arange(400)], margin=0.3,
                                 paired=True)
    welch = contrast_equivalence([a - b], [1.0], margin=0.3, paired=True)
    assert jack.verdict == welch.verdict == "equivalent" and jack.method == "jackknife"
    assert (jack.se, jack.df) == (pytest.approx(welch.se), pytest.approx(welch.df))
    assert (jack.low, jack.high) == (pytest.approx(welch.low), pytest.approx(welch.high))
    assert jack.p_equivalence == pytest.approx(welch.p_equivalence)


def test_jackknife_leaves_out_whole_clusters() -> None:
    """Items of 8 clusters of 50 that share their cluster's effect: the error is the cluster
    means' (their standard deviation over √8, 7 degrees of freedom), far wider than the items'
    own; unpaired, each run's clusters add their variance (Satterthwaite)."""
    rng = np.random.default_rng(2)
    cluster = np.repeat(np.arange(8), 50)
    a = rng.normal(0, 1, 8)[cluster] + rng.normal(0, 0.2, 400)
    b = np.zeros(400)
    jack = jackknife_equivalence([a, b], _mean_difference, [cluster], margin=0.3, paired=True)
    means = pd.Series(a).groupby(cluster).mean()
    assert jack.se == pytest.approx(means.std(ddof=1) / math.sqrt(8))
    assert (jack.df, jack.clusters, jack.n) == (7, 8, 400)
    assert jack.se > 5 * a.std(ddof=1) / math.sqrt(400)
    assert "8 clusters" in sentence("m", jack)
    c = rng.normal(0, 1, 8)[cluster] + rng.normal(0, 0.2, 400)
    two = jackknife_equivalence([a, c], _mean_difference, [cluster, cluster], margin=0.3)
    other = pd.Series(c).groupby(cluster).mean()
    var_a, var_c = means.var(ddof=1) / 8, other.var(ddof=1) / 8
    assert two.se == pytest.approx(math.sqrt(var_a + var_c))
    assert two.df == pytest.approx((var_a + var_c) ** 2 / (var_a ** 2 / 7 + var_c ** 2 / 7))
    assert two.clusters == 16 and not two.paired


def test_jackknife_is_never_narrower_than_the_items() -> None:
    """Clusters whose items balance each other (every cluster mean equal) leave the items'
    own error, not 0; a single cluster leaves nothing to estimate the error from."""
    a = np.tile([0.0, 1.0], 200)
    cluster = np.repeat(np.arange(4), 100)
    jack = jackknife_equivalence([a, np.full(400, 0.5)], _mean_difference, [cluster],
                                 margin=0.3, paired=True)
    assert jack.se == pytest.approx(a.std(ddof=1) / math.sqrt(400)) and jack.df == 3
    lone = jackknife_equivalence([a, a], _mean_difference, [np.zeros(400)], margin=0.3,
                                 paired=True)
    assert lone.verdict == "inconclusive" and math.isnan(lone.low)


def test_power_from_a_pilot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "pilot", winobias_records(40, model="m"))
    assert main(["power", "--pilot", str(run), "--effect", "0.05"]) == 0
    out = capsys.readouterr().out
    gap = next(line for line in out.splitlines() if "JSD-P gap" in line)
    assert "with 40 items per group this run could have detected" in gap
    assert "detecting 0.05 needs" in gap
    # one number format: the detectable difference and sd to three significant digits
    assert re.search(r"detected a difference of (0\.0*[1-9][0-9]{0,2}|[1-9][0-9.]*) or more", gap)
    assert re.search(r", sd (0\.0*[1-9][0-9]{0,2}|[1-9][0-9.]*)\)", gap) and "e-" not in gap
    assert "pro − anti" in out
    # each measure of a pilot has its own design: an asked one is refused, not ignored
    assert main(["power", "--pilot", str(run), "--effect", "0.05", "--design", "paired"]) == 2
    assert "--design paired is for a plan from --sd" in capsys.readouterr().err


def test_a_pilot_whose_values_do_not_vary_says_so(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every prompt answered alike: the accuracy gap's items have no spread, so nothing can be
    planned from them; the sentence says why instead of "a difference of n/a or more" (and the
    asked effect no longer goes unanswered)."""
    records = winobias_records(30)
    records["option_logprobs"] = [[-1.0, -2.0, -3.0]] * len(records)
    run = write_run(tmp_path / "flat", records)
    assert main(["power", "--pilot", str(run), "--effect", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "n/a" not in out
    gap = next(line for line in out.splitlines() if "accuracy gap" in line)
    assert "with 30 items per group nothing can be planned from this run: its values do not " \
           "vary" in gap and "--sd" in gap


def test_an_equivalence_plan_is_never_below_what_compare_accepts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pilot with little spread plans a JSD-P gap within ±0.02 from 11 items per group, but
    compare calls fewer than 51 "too few items" whatever their values: the plan says 51, and
    that compare's minimum, not power, sets it."""
    from biasscope.compare.power import PowerConfig, pilot_rows

    records = winobias_records(40, noise=0.3)
    run = write_run(tmp_path / "pilot", records)
    assert main(["power", "--pilot", str(run), "--margin", "0.02"]) == 0
    gap = next(line for line in capsys.readouterr().out.splitlines() if "JSD-P gap" in line)
    assert "showing equivalence within ±0.02 needs 51 items per group" in gap
    assert "compare's minimum" in gap and "11 by power alone" in gap
    same = by_measure(compare_records(records, records.copy(), 0.02))
    for row in pilot_rows(PowerConfig(pilot=str(run), margin=0.02)):
        floor = same[row["measure"]].result.min_items  # compare's own, measure by measure
        assert row["compare_minimum"] == floor
        assert row["items_needed"] is None or row["items_needed"] >= floor


def test_an_equivalence_plan_from_sd_is_never_below_what_compare_accepts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A small --sd plans equivalence within ±0.05 from 18 items per group (11 pairs' flips),
    but compare calls fewer than 59 flips (a rate's floor at 0.05) "too few items" whatever
    their values: with --measure flip_rate (one series: planned as paired) the plan says 59,
    and that compare's minimum sets it; without a measure it is raised to the least floor of
    any measure (a JSD-P gap's, 20), and says so."""
    from biasscope.compare.measures import Values
    from biasscope.compare.runs import compare_values

    assert main(["power", "--sd", "0.05", "--margin", "0.05"]) == 0
    said = capsys.readouterr().out
    assert "needs 20 items per group: compare's minimum for any measure" in said
    assert "--measure gives the measure's own minimum" in said
    for n, verdict in ((58, "too few items"), (59, "equivalent")):  # compare's own floor
        none = Values("flip_rate", {"pairs": pd.Series(np.zeros(n), index=range(n))},
                      {"pairs": 1.0})
        assert compare_values(none, none, 0.05)[0].verdict == verdict
    assert main(["power", "--sd", "0.05", "--margin", "0.05", "--measure", "flip_rate"]) == 0
    said = capsys.readouterr().out
    assert "needs 59 items: compare's minimum for flip_rate, not power" in said
    assert "11 by power alone" in said
    # a plan power sets above the floor is left alone
    assert main(["power", "--sd", "0.5", "--margin", "0.05", "--measure", "flip_rate"]) == 0
    said = capsys.readouterr().out
    assert "compare's minimum" not in said and "(80% power, α = 0.05)" in said


def test_a_measure_s_design_is_power_s_and_a_contradicting_design_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: --measure flip_rate was planned as two groups (the default --design), and
    --design paired with --measure jsdp_gap went unsaid. A measure's declared design is the
    one a --pilot plans it with."""
    from biasscope.compare.measures import MEASURES
    from biasscope.compare.power import PowerConfig, pilot_rows

    run = write_run(tmp_path / "pilot", winobias_records(40, model="m"))
    rows = pilot_rows(PowerConfig(pilot=str(run), effect=0.05))
    assert {r["measure"]: r["design"] for r in rows} == {
        m: MEASURES[m].design for m in ("jsdp_gap", "accuracy_gap", "pro_anti")}
    assert {r["design"] for r in rows} == {"two-groups", "paired"}
    for argv, said in (
            (["--measure", "jsdp_gap", "--design", "paired"], "--design paired with --measure "
             "jsdp_gap: jsdp_gap is a gap between two groups' items, planned as two-groups; "
             "drop --design, or give --design two-groups"),
            (["--measure", "flip_rate", "--design", "two-groups"], "--design two-groups with "
             "--measure flip_rate: flip_rate is one series of per-item values, planned as "
             "paired; drop --design, or give --design paired")):
        assert main(["power", "--sd", "0.3", "--margin", "0.05", *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    assert main(["power", "--sd", "0.3", "--margin", "0.05", "--measure", "jsdp_gap",
                 "--design", "two-groups"]) == 0
    assert "items per group" in capsys.readouterr().out
    # with --pilot each measure has its own design: any --design is refused, two-groups too
    assert main(["power", "--pilot", str(run), "--effect", "0.05", "--design",
                 "two-groups"]) == 2
    assert "--design two-groups is for a plan from --sd" in capsys.readouterr().err


def test_power_refuses_a_margin_beyond_a_measure_s_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSD-P gap cannot differ by more than ½ ln 2, nor a rate by more than 1: compare
    refuses such a margin, so power refuses to plan for it, naming the flag."""
    run = write_run(tmp_path / "pilot", winobias_records(40, model="m"))
    assert main(["power", "--pilot", str(run), "--margin", "0.5"]) == 2
    err = capsys.readouterr().err
    assert "--margin 0.5 for jsdp_gap: give a number above 0 and at most 0.347" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["power", "--sd", "0.5", "--margin", "1.5", "--measure", "flip_rate"]) == 2
    assert "--margin 1.5 for flip_rate: give a number above 0 and at most 1 " in \
        capsys.readouterr().err
    assert main(["power", "--sd", "0.5", "--margin", "3"]) == 2
    assert "--margin 3: give a number at most 2 (the largest range of any measure" in \
        capsys.readouterr().err
    assert main(["power", "--sd", "0.5", "--margin", "0.5"]) == 0  # a rate's is allowed


def test_a_pilot_whose_spread_is_rounding_noise_plans_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Log-probs shifted by a constant give every prompt the same JSD-P up to rounding
    (0.30000000000000004 beside 0.3): that is no spread, not a plan of "0.0000000000 or more"
    and 2 items."""
    records = winobias_records(30)
    records["option_logprobs"] = [[-1.0 + 0.1 * i, -2.0 + 0.1 * i, -3.0 + 0.1 * i]
                                  for i in range(len(records))]
    run = write_run(tmp_path / "flat", records)
    assert main(["power", "--pilot", str(run), "--effect", "0.05"]) == 0
    gap = next(line for line in capsys.readouterr().out.splitlines() if "JSD-P gap" in line)
    assert "0.0000" not in gap and "needs 2 items" not in gap
    assert "nothing can be planned from this run: its values do not vary" in gap


def test_a_ratio_score_is_planned_from_its_jackknife_sd() -> None:
    """A statistic without per-item values is planned from its jackknife standard error
    times √items: for a plain mean that is the items' own standard deviation, and the plan
    equals the one from it; with clusters, the clusters' spread sets it."""
    from biasscope.compare.measures import Values
    from biasscope.compare.power import PowerConfig, _ratio_sd, _row

    x = np.random.default_rng(3).integers(0, 2, 400)
    mean = Values("m", {"items": pd.Series(x)}, {"items": 1.0},
                  lambda codes, axis=-1: codes.mean(axis=axis))
    sd, df, n = _ratio_sd(mean)
    assert (n, df) == (400, 399) and sd == pytest.approx(x.std(ddof=1))
    row = _row(PowerConfig(pilot="run", effect=0.1), mean)
    plain = _row(PowerConfig(pilot="run", effect=0.1),
                 Values("m", {"items": pd.Series(x.astype(float))}, {"items": 1.0}))
    assert row["sd_from"] == "jackknife" and row["design"] == plain["design"] == "paired"
    assert row["items_needed"] == plain["items_needed"]
    assert row["detectable_now"] == pytest.approx(plain["detectable_now"])
    lean = np.repeat(np.arange(10), 40)
    clustered = Values("m", {"items": pd.Series((lean < 5).astype(np.int64))}, {"items": 1.0},
                       mean.statistic, pd.Series(lean))
    assert _ratio_sd(clustered)[:2] == (pytest.approx(math.sqrt(400 * 0.25 / 9)), 9)


def test_audit_measures_match_the_probes_own_headlines(tmp_path: Path) -> None:
    """The per-item values compare reads give back each probe's own headline estimate (BBQ's
    bias scores, Adult's flip rate), and a run compared with itself is equivalent."""
    pytest.importorskip("fairlearn")
    from bbq_fixture import write_bbq
    from biasscope.probes import PROBES, adult, bbq
    from test_audit_adult import pair_items
    from test_audit_adult import records as adult_records
    from test_audit_bbq import records as bbq_records

    probe = bbq.from_data(data_dir=write_bbq(tmp_path))
    items = probe.items(0)
    rng = np.random.default_rng(0)
    answers = [str(item.options[int(rng.integers(0, 3))]) for item in items]
    frame = bbq_records(probe, items, answers)
    head = probe.metrics(frame)["headline"]
    found = {v.measure: v for v in PROBES["bbq"].compare.values(frame)}
    assert found["s_dis"].estimate() == pytest.approx(head["bias_disambiguated"]["estimate"])
    assert found["s_amb"].estimate() == pytest.approx(head["bias_ambiguous"]["estimate"])
    same = by_measure(compare_records(frame.assign(model="a"), frame.assign(model="a")))
    assert same["s_dis"].result.paired and same["s_dis"].result.method == "jackknife"
    templates = frame["category"] + ":" + frame["question_index"].astype(str)
    assert same["s_dis"].result.clusters == templates[frame["context_condition"]
                                                      == "disambig"].nunique() > 1
    assert f"{same['s_dis'].result.clusters} templates" in same["s_dis"].sentence
    # the fixture's few BBQ items agree perfectly, which is too few to call equivalent
    assert {c.result.verdict for c in same.values()} == {"too few items"}
    assert all(c.result.n < c.result.min_items == 119 for c in same.values())

    spec = [("Male", "yes"), ("Female", "no")] * 20
    pairs = pair_items(spec)
    said = [str(rng.choice(["yes", "no"])) for _ in pairs]
    records = adult_records(pairs, said)
    measured = PROBES["adult-counterfactual"].compare.values(records)
    flips = {v.measure: v for v in measured}["flip_rate"]
    expected = adult.pair_metrics(records)["headline"]["pair_flip_rate"]["estimate"]
    assert flips.estimate() == pytest.approx(expected)


@pytest.mark.parametrize("b, c, n", [(7, 2, 40), (0, 3, 25), (12, 12, 60), (1, 0, 9)])
def test_tango_score_matches_mcnemar_and_its_own_likelihood(b: int, c: int, n: int) -> None:
    """Tango's statistic at 0 is McNemar's (statsmodels, uncorrected asymptotic); its
    restricted p01 maximises the likelihood under the null; the interval's ends are where the
    statistic is ±z; the TOST p-value is the larger one-sided score p."""
    from scipy import optimize
    from scipy import stats as sps

    from biasscope.core import tango
    from biasscope.core.equivalence import paired_binary_equivalence

    smt = pytest.importorskip("statsmodels.stats.contingency_tables")
    table = [[n - b - c, b], [c, 0]]
    mcnemar = smt.mcnemar(table, exact=False, correction=False).pvalue
    assert tango.p_values(b, c, n, 0.05)[1] == pytest.approx(mcnemar)
    for delta in (-0.3, -0.05, 0.1, 0.4):
        def minus_loglik(q: float, delta: float = delta) -> float:
            cells = np.array([q + delta, q, 1 - 2 * q - delta])
            return -float(np.array([b, c, n - b - c]) @ np.log(np.clip(cells, 1e-300, None)))
        lo, hi = max(0.0, -delta), (1 - delta) / 2
        best = optimize.minimize_scalar(minus_loglik, bounds=(lo, hi), method="bounded",
                                        options={"xatol": 1e-12}).x
        assert tango.restricted_p01(b, c, n, delta) == pytest.approx(best, abs=1e-6)
    z = float(sps.norm.ppf(0.95))
    low, high = tango.interval(b, c, n, 0.90)
    assert low < (b - c) / n < high
    assert tango.score(b, c, n, low) == pytest.approx(z, abs=1e-6)
    assert tango.score(b, c, n, high) == pytest.approx(-z, abs=1e-6)
    x = np.r_[np.ones(b), np.zeros(c), np.ones(1), np.zeros(n - b - c - 1)]
    y = np.r_[np.zeros(b), np.ones(c), np.ones(1), np.zeros(n - b - c - 1)]
    res = paired_binary_equivalence(x, y, 0.1)
    assert (res.low, res.high) == pytest.approx((low, high))
    assert res.p_equivalence == pytest.approx(max(sps.norm.cdf(tango.score(b, c, n, 0.1)),
                                                  sps.norm.sf(tango.score(b, c, n, -0.1))))
    assert (res.p_equivalence < 0.05) == (low > -0.1 and high < 0.1)
