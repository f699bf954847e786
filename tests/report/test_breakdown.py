"""Where the bias is: pro against anti pairs, per-occupation preference, the occupation
statistics (BLS share of women) and the snapshot view, from synthetic runs (no model)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.backends.base import NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.cli.main import main
from biasscope.core.items import Item
from biasscope.data.sources import SOURCES
from biasscope.dynamics.analysis import breakdown, occupations
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import SweepConfig, records_frame
from biasscope.dynamics.summary.build import full_summary
from biasscope.dynamics.summary.write import write_dynamics_report
from biasscope.probes import Probe, load_probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit
from test_report import figures, section

ANALYSIS = AnalysisConfig(n_resamples=200)
BLS_TITLE = "Gender preference against the share of women (U.S. BLS)"
# Shares of women (%) for the fixture's occupations; CEO and construction worker are left
# out (no match), "worker" is there to show that no alias joins it to "construction worker".
BLS = {"designer": 54.0, "developer": 20.0, "mechanic": 1.8, "clerk": 69.5, "nurse": 89.6,
       "hairdresser": 94.2, "teacher": 71.0, "physician": 37.9, "worker": 37.9}


def write_statistics(root: Path) -> Path:
    folder = root / "winogender"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["occupation\tbergsma_pct_female\tbls_pct_female\tbls_year"]
    lines += [f"{name}\t10.0\t{share}\t2015" for name, share in BLS.items()]
    (folder / "occupations-stats.tsv").write_text("\n".join(lines) + "\n")
    return root


def stereotyped(items: Sequence[Item], seed: int) -> list[NextTokenScore]:
    """A model that knows the answer a little and the stereotype more: pro prompts right,
    anti prompts wrong, and a lean to the stereotypical gender where no gender is given."""
    rng = np.random.default_rng(seed)
    scores = []
    for item in items:
        logits = rng.normal(0.0, 0.05, size=len(item.options)) - 6.0
        logits[item.answer] += 1.0
        logits[item.options.index(str(item.groups["stereotype"]))] += 1.5
        scores.append(NextTokenScore(tuple(float(x) for x in logits), 3))
    return scores


def make_run(root: Path, probe: Probe, checkpoints: Sequence[Checkpoint]) -> Path:
    store = RunStore(root)
    init_run(store, [probe], SweepConfig(list(checkpoints), root, [0, 1],
                                       comparable={"dtype": "auto", "first_token": False}))
    for ckpt in checkpoints:
        for seed in (0, 1):
            unit = Unit(ckpt.model, ckpt.revision, probe.name, seed, ckpt.step)
            items = probe.items(seed)
            store.write_unit(unit, records_frame(unit, items, stereotyped(items, seed)))
    return root


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture(scope="module")
def bls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_statistics(tmp_path_factory.mktemp("bls"))


@pytest.fixture(scope="module")
def snapshot_run(tmp_path_factory: pytest.TempPathFactory, winobias: Probe) -> Path:
    return make_run(tmp_path_factory.mktemp("snap"), winobias,
                    [Checkpoint("a/model", "a/model", "step7", 7)])


def test_pro_anti_is_paired_and_tested(snapshot_run: Path, bls_dir: Path) -> None:
    summary = full_summary(RunStore(snapshot_run), ANALYSIS, str(bls_dir))
    result = summary["analysis"]["models"]["a/model"]
    pa = result["breakdown"]["7"]["pro_anti"]
    assert pa["n_pairs"] == 12  # 6 sentences x (dev, test), pro and anti paired by line
    assert pa["accuracy/pro"]["estimate"] == 1.0 and pa["accuracy/anti"]["estimate"] == 0.0
    assert pa["accuracy/difference"]["estimate"] == 1.0
    test = pa["accuracy/test"]
    assert test["effect_size"] == 1.0 and test["n_nonzero"] == 12
    # The pairs share 6 occupations (2 female-, 4 male-stereotyped), every difference +1:
    # no spread for t, so the sign test over the 6 occupations, p = 2/64, which α = 0.01
    # does not reject.
    assert test["occupations"] == 6 and test["df"] == 4
    assert test["p_value"] == pytest.approx(2 / 64) and not test["significant"]
    assert pa["accuracy/difference"]["occupations"] == 6
    assert pa["jsdp_correct/difference"]["estimate"] > 0  # worse on anti
    assert pa["jsdp_correct/difference"]["low"] > 0
    # All right on pro, all wrong on anti: no bootstrap spread, so each gets its Wilson interval.
    assert pa["accuracy/pro"]["low"] == pytest.approx(0.7575, abs=1e-4)
    assert pa["accuracy/anti"]["high"] == pytest.approx(1 - 0.7575, abs=1e-4)
    # and +1 on every pair: the paired score interval, [1 - sqrt(2) * 0.2425, 1]
    assert pa["accuracy/difference"]["low"] == pytest.approx(0.6571, abs=1e-4)
    assert pa["accuracy/difference"]["high"] == 1.0
    assert any("1.00 (95% CI 0.76 to 1.00) on pro-stereotypical and 0.00 (95% CI 0.00 to 0.24) "
               "on anti-stereotypical sentences; pro − anti = +1.00 (95% CI +0.66 to +1.00)"
               in s for s in result["sentences"])
    assert any("at its one checkpoint (step 7)" in s for s in result["sentences"])


def test_a_snapshot_rank_gap_is_said_at_its_checkpoint_not_at_a_step(
        tmp_path: Path, winobias: Probe, bls_dir: Path) -> None:
    """Gemma 3 270M's GGUF file, alone in a run: "at 1 of 1 checkpoints (step 0) the Average
    Rank gap is significant ..."; it has no step (its gap sentence says "at its checkpoint")."""
    store = RunStore(tmp_path / "run")
    ckpt = Checkpoint("gemma", str(tmp_path), None, None)
    init_run(store, [winobias], SweepConfig([ckpt], store.root, [0, 1],
                                            comparable={"dtype": "auto", "first_token": False}))
    for seed in (0, 1):  # "male" a hair ahead of "female" on every prompt
        items = winobias.items(seed)
        scores = [NextTokenScore(tuple(-6.0 + 0.01 * (o == "male") for o in item.options),
                                 1 if item.options[item.answer] == "male" else 2)
                  for item in items]
        unit = Unit(ckpt.model, None, winobias.name, seed, None)
        store.write_unit(unit, records_frame(unit, items, scores))
    said = full_summary(store, ANALYSIS, str(bls_dir))["analysis"]["sentences"]
    ranks = [s for s in said if "the Average Rank gap is significant where" in s]
    assert ranks and all("gemma: at its checkpoint the Average Rank" in s for s in ranks)
    assert not any("(step 0)" in s for s in said)


def test_pairs_join_the_same_line_of_pro_and_anti() -> None:
    """Pairs are matched by subset and line, not by position: (a: 1 vs 0, b: 0 vs 1)."""
    pm = pd.DataFrame({
        "prompt": ["p1", "p2", "p3", "p4"], "pair": ["dev-001", "dev-002", "dev-002", "dev-001"],
        "split": ["pro", "pro", "anti", "anti"], "kind": ["referenced"] * 4,
        "occupation": ["nurse"] * 4, "stereotype": ["female"] * 4,
        "correct": [1.0, 0.0, 1.0, 0.0], "jsdp_correct": [0.1, 0.3, 0.1, 0.3],
        "lp_diff": [0.0] * 4, "p_diff": [0.0] * 4})
    out = breakdown.pro_anti(pm, 0.95, 100)
    assert out["n_pairs"] == 2 and out["accuracy/difference"]["estimate"] == 0.0
    assert out["accuracy/test"]["effect_size"] == 0.0  # +1 and −1: balanced


@pytest.mark.parametrize("seed", range(6))
def test_pairs_are_the_pivots(seed: int) -> None:
    """The paired values are ``pivot_table(index="pair", columns="split")`` then ``dropna``:
    pairs in name order, a pair short of a side or of a value left out, a split without a
    value at all gives no pairs; a pair with two prompts of one side gets their mean."""
    rng = np.random.default_rng(seed)
    n = 60
    pm = pd.DataFrame({"pair": rng.choice([f"test-{i:03d}" for i in range(25)], n),
                       "split": rng.choice(["pro", "anti", "other"], n),
                       "correct": rng.random(n)})
    pm.loc[rng.random(n) < 0.1, "correct"] = np.nan
    pm.loc[rng.random(n) < 0.03, "correct"] = np.inf
    pm.loc[rng.random(n) < 0.05, "pair"] = None
    if seed == 4:
        pm.loc[pm["split"] == "anti", "correct"] = np.nan
    if seed < 3:  # one prompt per pair and side, as WinoBias has
        pm = pm.drop_duplicates(["pair", "split"])
    table = pm.pivot_table(index="pair", columns="split", values="correct", observed=True)
    got = breakdown._paired(pm, "correct")
    if not {"pro", "anti"} <= set(table.columns):
        assert got is None
        return
    both = table.dropna(subset=["pro", "anti"])
    assert got is not None
    assert np.array_equal(got[0], both["pro"].to_numpy()) and np.array_equal(
        got[1], both["anti"].to_numpy())


def test_pair_id_is_the_sentence_line_without_its_split(winobias: Probe) -> None:
    items = winobias.items(0)[:2]
    unit = Unit("m", "m", "winobias-gender", 0, 1)
    values = breakdown.record_values(records_frame(unit, items, stereotyped(items, 0)))
    assert list(values["pair"]) == ["dev-001", "dev-001"]
    assert values["lp_diff"].notna().all() and (values["p_diff"].abs() <= 1).all()


def test_per_occupation_preference_follows_the_stereotype(snapshot_run: Path,
                                                          bls_dir: Path) -> None:
    summary = full_summary(RunStore(snapshot_run), ANALYSIS, str(bls_dir))
    result = summary["analysis"]["models"]["a/model"]
    rows = {r["occupation"]: r for r in result["breakdown"]["7"]["occupations"]}
    for row in rows.values():
        sign = 1 if row["stereotype"] == "male" else -1
        for kind in ("referenced", "not-referenced"):
            if row[f"{kind}/n"]:
                assert sign * row[f"{kind}/lp_diff"]["estimate"] > 1.0
                assert sign * row[f"{kind}/p_diff"]["estimate"] > 0
    nurse = rows["nurse"]
    assert nurse["not-referenced/lp_diff"]["low"] <= nurse["not-referenced/lp_diff"]["estimate"]
    referenced = [r for r in rows.values() if r["referenced/n"]]
    assert all(r["accuracy/pro"] == 1.0 and r["accuracy/anti"] == 0.0 for r in referenced)
    ten = next(s for s in result["sentences"] if "it genders most" in s)
    assert "nurse" in ten.split("leaning female: ")[1] and "as the stereotype" in ten
    assert "n/a" not in ten and ten.count("lean significantly") == 1  # summarised, not listed
    assert "CI" not in ten  # value by value


def test_occupation_statistics_match_exactly_and_correlate(snapshot_run: Path,
                                                          bls_dir: Path) -> None:
    summary = full_summary(RunStore(snapshot_run), ANALYSIS, str(bls_dir))
    occ = summary["analysis"]["occupation_statistics"]
    assert occ["unavailable"] is None
    assert "CEO" in occ["unmatched"] and "construction worker" in occ["unmatched"]
    assert "nurse" in occ["matched"] and "worker" not in occ["bls_pct_female"]
    rho = summary["analysis"]["models"]["a/model"]["occupation_statistics"]["spearman"]
    # clerk and physician are only ever referenced in the fixture: no not-referenced value
    assert len(occ["matched"]) == 8 and rho["n"] == 6 and rho["estimate"] < -0.5
    assert rho["low"] is not None and rho["low"] <= rho["estimate"] <= rho["high"]
    assert any("No BLS figure for: CEO, construction worker" in s
               for s in summary["analysis"]["sentences"])


def test_spearman_with_bootstrap_interval() -> None:
    x = np.arange(10, dtype=np.float64)
    rho = occupations.spearman(x, -x, 0.95, 200)
    assert rho["estimate"] == pytest.approx(-1.0) and rho["high"] == pytest.approx(-1.0)
    assert occupations.spearman(x[:2], x[:2], 0.95, 200)["estimate"] is None


def test_missing_statistics_are_said_not_an_error(snapshot_run: Path, tmp_path: Path) -> None:
    stats = occupations.load(tmp_path)
    assert stats.unavailable and "biasscope data fetch winogender" in stats.unavailable
    report = write_dynamics_report(snapshot_run, tmp_path / "r.html", ANALYSIS, str(tmp_path))
    page = report.read_text(encoding="utf-8")
    # Said once, among the figures the run cannot draw; no local path or URL on the page.
    assert f"<h2>{BLS_TITLE}</h2>" not in page
    assert f"{BLS_TITLE} (the occupation statistics are not on this machine: run `biasscope " \
           "data fetch winogender` or pass --data-dir)" in page
    assert str(tmp_path) not in page and "https://" not in page.split("<script")[0]
    (tmp_path / "winogender").mkdir()
    (tmp_path / "winogender" / "occupations-stats.tsv").write_text("a\tb\n1\t2\n")
    assert "has no columns occupation" in str(occupations.load(tmp_path).unavailable)


def test_statistics_file_is_pinned() -> None:
    pinned = SOURCES[("winogender", "occupations-stats.tsv")]
    assert pinned.size == 1578 and pinned.sha256 is not None
    assert pinned.sha256.startswith("3f7f37c1") and "1c7f8b481ad8" in pinned.url


def _bar_names(page: str, index: int) -> list[Any]:
    return [t.get("name") for t in figures(page)[index][0]]


def test_snapshot_of_two_models_side_by_side(tmp_path: Path, winobias: Probe,
                                             bls_dir: Path) -> None:
    run = make_run(tmp_path / "run", winobias, [Checkpoint("a/model", "a/model", "step7", 7),
                                                Checkpoint("b/model", "b/model", "step7", 7)])
    assert main(["report", str(run), "--data-dir", str(bls_dir)]) == 0
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<h2>Snapshot: metrics per model</h2>" in page
    # per model: the JSD-P bars, then stereotype accuracy on its own scale (second panel)
    assert _bar_names(page, 0) == ["a/model", "a/model", "b/model", "b/model"]
    assert [t.get("xaxis") for t in figures(page)[0][0]] == ["x", "x2", "x", "x2"]
    assert "Significance of model differences" in page
    pro_anti = section(page, "Pro- against anti-stereotypical sentences")
    assert "Plotly.newPlot" in pro_anti
    assert "Plotly.newPlot" in section(page, BLS_TITLE)
    assert "over training:" not in page.split("<h2>Gender preference per occupation</h2>")[1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["analysis"]["occupation_statistics"]["path"].endswith(
        "winogender/occupations-stats.tsv")


def test_sweep_gains_the_heatmap(tmp_path: Path, winobias: Probe, bls_dir: Path) -> None:
    run = make_run(tmp_path / "run", winobias,
                   [Checkpoint("a/model", "a/model", f"step{s}", s) for s in (1, 2)])
    page = write_dynamics_report(run, options=ANALYSIS, data_dir=str(bls_dir)).read_text(
        encoding="utf-8")
    heat = section(page, "Gender preference per occupation over training: a/model")
    assert '"type":"heatmap"' in heat.replace(" ", "")
    assert "<h2>Accuracy vs Average Rank per correct answer</h2>" in page  # lines kept


def test_a_damaged_cached_file_is_said_not_raised(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path))
    write_statistics(tmp_path / "data")  # not the pinned bytes
    said = str(occupations.load().unavailable)
    assert "checksum mismatch" in said and "biasscope data fetch winogender" in said


def test_models_without_training_steps_are_snapshots(tmp_path: Path, winobias: Probe,
                                                      bls_dir: Path) -> None:
    """`--model ./final` (no stepN in the name): one checkpoint per model is analysed as a
    snapshot, never labelled with a step it does not have."""
    run = make_run(tmp_path / "run", winobias, [Checkpoint("final", "/ckpt/final"),
                                                Checkpoint("other", "/ckpt/other")])
    assert main(["report", str(run), "--data-dir", str(bls_dir)]) == 0
    analysis = json.loads((run / "summary.json").read_text())["analysis"]
    assert sorted(analysis["models"]) == ["final", "other"]
    assert all(m["snapshot"] for m in analysis["models"].values())
    stepped = [s for s in analysis["sentences"] if "No training steps" in s or "step" in s]
    assert not stepped, stepped
    assert analysis["models"]["final"]["breakdown"]  # pro/anti and occupations computed
    assert any(c["rows"] for c in analysis["comparisons"])  # model against model
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<h2>Snapshot: metrics per model</h2>" in page
    assert "1 checkpoint (no training step)" in page
    # p-value panels: one point per model on a categorical axis, no "step 0" in the hover.
    panels = [(traces, layout) for traces, layout in figures(page)
              if "p-value" in str(layout.get("yaxis", {}).get("title", ""))]
    assert panels
    for traces, layout in panels:
        assert layout["xaxis"]["type"] == "category"
        assert {x for t in traces for x in t["x"]} <= {"final", "other", "final vs other"}
        hovers = [h for t in traces for h in t["hovertext"]]
        assert all("no training step" in h and "step 0" not in h for h in hovers)


def test_stepless_models_beside_a_sweep_are_left_out_and_said(tmp_path: Path,
                                                              winobias: Probe) -> None:
    run = make_run(tmp_path / "run", winobias, [Checkpoint("a/model", "a/model", "step1", 1),
                                                Checkpoint("a/model", "a/model", "step2", 2),
                                                Checkpoint("final", "/ckpt/final")])
    analysis = full_summary(RunStore(run), ANALYSIS)["analysis"]
    assert list(analysis["models"]) == ["a/model"]
    assert not analysis["models"]["a/model"]["snapshot"]
    assert any(s.startswith("No training steps for final") for s in analysis["sentences"])


def test_a_stepless_model_with_several_revisions_is_left_out(tmp_path: Path,
                                                             winobias: Probe) -> None:
    run = make_run(tmp_path / "run", winobias, [Checkpoint("org/m", "org/m", "main"),
                                                Checkpoint("org/m", "org/m", "v2")])
    analysis = full_summary(RunStore(run), ANALYSIS)["analysis"]
    assert analysis["models"] == {}
    assert any(s.startswith("No training steps for org/m") for s in analysis["sentences"])
