"""Checkpoints without a training step beside ones with a step (a Trainer's `checkpoint-30`
with `best` and `final`): the curve covers the stepped ones, the others are reported aside by
name with their own values and intervals, and every sentence of the report says the same."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from biasscope.backends.base import NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.core.items import Item
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.summary.build import full_summary
from biasscope.dynamics.summary.interest import flag_aside
from biasscope.dynamics.summary.write import write_dynamics_report
from biasscope.probes import Probe, load_probe
from biasscope.store.directory import RunStore
from test_report import figures, make_run

OPTIONS = AnalysisConfig(n_resamples=200)
STEPPED = Checkpoint("train2", "/ckpt/checkpoint-30", "checkpoint-30", 30)
ASIDE = [Checkpoint("train2", f"/ckpt/{r}", r, None) for r in ("best", "final")]


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, winobias: Probe) -> Path:
    return make_run(tmp_path_factory.mktemp("mixed"), winobias, [STEPPED, *ASIDE])


def _analysis(run: Path) -> dict[str, Any]:
    analysis: dict[str, Any] = full_summary(RunStore(run), OPTIONS)["analysis"]
    return analysis


def test_the_curve_holds_the_stepped_checkpoints_and_its_numbers_are_unchanged(
        mixed: Path, winobias: Probe, tmp_path: Path) -> None:
    analysis = _analysis(mixed)
    alone = _analysis(make_run(tmp_path / "alone", winobias, [STEPPED]))
    ours, theirs = analysis["models"]["train2"], alone["models"]["train2"]
    assert ours["steps"] == [30] and not ours["snapshot"]
    for key in ("ci", "breakdown", "trend", "sharpest_change"):
        assert ours[key] == theirs[key], key
    # its tests are the same; their correction is over its family, the 2 aside with them
    corrected = ("p_adjusted", "significant")
    for value, rows in ours["tests"].items():
        (row,), (alone_row,) = rows, theirs["tests"][value]
        assert {k: v for k, v in row.items() if k not in corrected} == {
            k: v for k, v in alone_row.items() if k not in corrected}
        tested = [row["p_value"], *(a["tests"][value]["p_value"] for a in analysis["aside"])]
        assert row["p_adjusted"] == pytest.approx(min(1.0, 3 * row["p_value"])) if (
            row["p_value"] == min(tested)) else row["p_adjusted"] >= row["p_value"]
    said = analysis["sentences"]
    assert not any("No training steps" in s for s in said)
    assert any(s.startswith("train2: revisions best, final have no training step") and
               "reported aside with their own values, not on the curve" in s for s in said)
    assert any("at its one checkpoint with a training step (step 30)" in s for s in said)


def test_each_checkpoint_aside_has_the_intervals_a_snapshot_of_it_has(
        mixed: Path, winobias: Probe, tmp_path: Path) -> None:
    aside = _analysis(mixed)["aside"]
    assert [(a["model"], a["revision"]) for a in aside] == [("train2", "best"),
                                                            ("train2", "final")]
    snapshot = _analysis(make_run(tmp_path / "best", winobias, [ASIDE[0]]))
    assert snapshot["models"]["train2"]["snapshot"]
    assert aside[0]["ci"] == snapshot["models"]["train2"]["ci"]["0"]
    assert aside[0]["ci"]["jsdp_gap"][0] <= aside[0]["ci"]["jsdp_gap"][1]


def test_each_checkpoint_aside_has_the_curve_s_gap_test_in_the_model_s_family(
        mixed: Path, winobias: Probe, tmp_path: Path) -> None:
    """The gap test a snapshot of it gets, Holm-corrected over the model's three
    checkpoints (step 30, best, final), and a sentence saying it."""
    analysis = _analysis(mixed)
    snapshot = _analysis(make_run(tmp_path / "best", winobias, [ASIDE[0]]))
    corrected = ("p_adjusted", "significant", "step", "below_gap_of_interest")
    for value in ("jsdp_correct", "target_rank"):
        (alone,) = snapshot["models"]["train2"]["tests"][value]
        best = analysis["aside"][0]["tests"][value]
        assert {k: v for k, v in best.items() if k not in corrected} == {
            k: v for k, v in alone.items() if k not in corrected}
        family = [analysis["models"]["train2"]["tests"][value][0],
                  *(a["tests"][value] for a in analysis["aside"])]
        p = sorted(r["p_value"] for r in family)
        holm = [min(1.0, (3 - i) * q) for i, q in enumerate(p)]
        holm = [max(holm[: i + 1]) for i in range(3)]
        assert sorted(r["p_adjusted"] for r in family) == pytest.approx(holm)
    row = analysis["aside"][1]["tests"]["jsdp_correct"]
    said = [s for s in analysis["sentences"] if s.startswith("train2 at revision ")]
    assert len(said) == 2 and said[1].startswith(
        f"train2 at revision final: the male-female JSD-P gap is "
        f"{'' if row['significant'] else 'not '}significant (Holm-corrected, α = 0.01, over "
        "the model's checkpoints with a step and without): male − female ")
    assert f", {row['test']} p " in said[1]  # the test that ran (over pairs: signed rank)
    page = write_dynamics_report(mixed, options=OPTIONS).read_text(encoding="utf-8")
    assert '<td><span class="name">revision final</span></td>' in page


def test_the_report_says_which_checkpoints_are_on_the_curve(mixed: Path) -> None:
    page = write_dynamics_report(mixed, options=OPTIONS).read_text(encoding="utf-8")
    assert ("1 checkpoint with a training step (step 30) and 2 without (best and final)"
            in page)
    assert "The JSD-P gap (male − female) at step 30 is" in page
    aside = page.split("Without a training step, so off the curve, the JSD-P gap "
                       "(male − female) is ", 1)[1]
    best, final = aside.split(" at revision best; ", 1)
    assert "(95% CI" in best and "(95% CI" in final.split(" at revision final.", 1)[0]
    assert "At its one checkpoint with a training step (step 30)" in page
    assert "checkpoints (revisions" not in page and "No training steps" not in page
    assert "Snapshot: metrics per model" not in page and "Each model has one" not in page
    assert "no training step (final)" in page  # hover: named, never "step unknown"


def test_a_model_without_steps_beside_a_sweep_is_reported_aside(winobias: Probe,
                                                                tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", winobias,
                   [Checkpoint("a/model", "a/model", f"step{s}", s) for s in (1, 2)]
                   + [Checkpoint("final", "/ckpt/final")])
    analysis = _analysis(run)
    assert list(analysis["models"]) == ["a/model"]
    assert [(a["model"], a["revision"]) for a in analysis["aside"]] == [("final", None)]
    assert analysis["aside"][0]["ci"]["jsdp_gap"]
    said = next(s for s in analysis["sentences"] if s.startswith("No training steps for final"))
    assert "reported aside with their own values" in said
    page = write_dynamics_report(run, options=OPTIONS).read_text(encoding="utf-8")
    assert "1 checkpoint without a training step (main)" in page
    assert "off the curve, the JSD-P gap (male − female) is" in page


def test_line_figures_keep_the_steps_and_draw_the_checkpoints_aside_apart(
        winobias: Probe, tmp_path: Path) -> None:
    """checkpoint-10 and -30 stay 20 steps apart on a numeric axis; `best` and `final` are
    markers with their CIs past the last step, each named on the axis, joined to nothing."""
    run = make_run(tmp_path / "run", winobias,
                   [Checkpoint("train2", "/ckpt/checkpoint-10", "checkpoint-10", 10),
                    STEPPED, *ASIDE])
    page = write_dynamics_report(run, options=OPTIONS).read_text(encoding="utf-8")
    traces, layout = figures(page)[0]
    male = [t for t in traces if t.get("name") == "male correct"]
    line = next(t for t in male if t.get("mode") == "lines+markers")
    assert line["x"] == [10, 30]
    apart = next(t for t in male if t.get("mode") == "markers")
    assert apart["showlegend"] is False and apart["legendgroup"] == line["legendgroup"]
    assert len(apart["x"]) == 2 and 30 < apart["x"][0] < apart["x"][1]
    assert all(v is not None for v in apart["error_y"]["array"])
    assert "no training step (best)" in apart["hovertext"][0]
    assert "95% CI" in apart["hovertext"][0]
    axis = layout["xaxis"]
    assert axis["type"] == "linear"
    named = dict(zip(axis["ticktext"], axis["tickvals"], strict=True))
    assert named["best"] == apart["x"][0] and named["final"] == apart["x"][1]
    assert named["10"] == 10 and named["30"] == 30


def male_leaning(items: Sequence[Item], step: int, seed: int) -> list[NextTokenScore]:
    """Option log-probs that favour "male" strongly at every checkpoint, aside ones too."""
    rng = np.random.default_rng(1000 * step + seed)
    scores = []
    for item in items:
        logits = rng.normal(0.0, 0.3, size=len(item.options)) - 6.0
        logits[item.options.index("male")] += 1.0
        scores.append(NextTokenScore(tuple(float(x) for x in logits), 10))
    return scores


def test_a_significant_gap_aside_below_the_gap_of_interest_is_flagged_as_on_the_curve(
        winobias: Probe, tmp_path: Path) -> None:
    """`best` and `final` get the flag and the caveat a step gets for a significant gap
    smaller than the smallest gap of interest (--min-gap 0.3, above these gaps)."""
    run = make_run(tmp_path / "run", winobias, [STEPPED, *ASIDE], scores=male_leaning)
    options = AnalysisConfig(n_resamples=200, min_gap=0.3)
    analysis: dict[str, Any] = full_summary(RunStore(run), options)["analysis"]
    (step,) = analysis["models"]["train2"]["tests"]["jsdp_correct"]
    assert step["significant"] and step["below_gap_of_interest"]
    for entry in analysis["aside"]:
        assert entry["gap_of_interest"] == 0.3
        row = entry["tests"]["jsdp_correct"]
        assert row["significant"] and row["below_gap_of_interest"] is True
        assert entry["tests"]["target_rank"]["below_gap_of_interest"] is False  # not significant
    said = analysis["sentences"]
    # its one step's sentence agrees with the flag: significant, not at the --min-gap asked
    assert ("train2: at its one checkpoint with a training step (step 30) the male-female "
            "JSD-P gap is significant (Holm-corrected, α = 0.01) but not at |gap| >= 0.3.") in said
    assert not any("|gap| >= 0.3)" in s for s in said)
    for name in ("best", "final"):
        assert any(s.startswith(f"train2: at revision {name} the JSD-P gap is significant but "
                                "below the smallest gap of interest 0.3 (--min-gap)") for s in said)
    page = write_dynamics_report(run, options=options).read_text(encoding="utf-8")
    rows = page.split('<span class="name">revision final</span>')
    assert len(rows) == 3 and "yes, but |gap| &lt; 0.3" in rows[1].split("</tr>", 1)[0]


def test_a_rank_gap_aside_counts_only_where_its_jsdp_gap_is_of_interest() -> None:
    """As on the curve: a checkpoint aside's significant Average Rank gap is flagged where its
    own JSD-P gap is below the smallest gap of interest, and said so."""
    found = {"jsdp_correct": {"gap": 0.01, "significant": False, "effect_size": 0.2},
             "target_rank": {"gap": -1.0, "significant": True, "effect_size": -1.0}}
    said = flag_aside(found, AnalysisConfig(), "at revision best")
    assert found["target_rank"]["below_gap_of_interest"] is True
    assert found["jsdp_correct"]["below_gap_of_interest"] is False
    assert said == [s for s in said if s.startswith("at revision best the Average Rank gap is "
                                                    "significant where the JSD-P gap is below "
                                                    "the smallest gap of interest 0.1")] != []
