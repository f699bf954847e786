"""The intervention lab without training: the sentence when no step is within the perplexity
budget, the per-occupation panels, and the recommended checkpoint's directory (replaced whole,
checked against the final recommendation)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from biasscope.intervene import analysis, ship
from biasscope.report.intervention import (
    did_figure,
    occupations_figure,
    write_intervention_report,
)
from biasscope.store.directory import RunStore

TEST = {"estimate": 0.1, "low": 0.05, "high": 0.15, "test": {"p_adjusted": 0.01,
                                                             "effect_size": 0.5}}


def _cost(estimate: float, low: float = math.nan, high: float = math.nan) -> dict[str, float]:
    return {"estimate": estimate, "low": low, "high": high}


def test_over_budget_says_the_gap() -> None:
    cost = {25: _cost(0.09, 0.07, 0.11), 50: _cost(0.05, 0.04, 0.06), 75: _cost(0.12)}
    out = analysis.recommend("cda", [25, 50, 75], {s: TEST for s in cost}, cost, 0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02))
    assert out["recommended"] is None
    assert ("the smallest increase seen was +5.0% (95% CI +4.0% to +6.0%) at step 50, 3.0 "
            "percentage points over the budget") in out["sentence"]
    # Gemma's, 2026-11-25
    wide = analysis.recommend("cda", [100], {100: TEST}, {100: _cost(0.0607, -0.0163, 0.1527)},
                              0.3, analysis.InterventionAnalysisConfig(budget=0.02))
    assert ("+6.1% (95% CI -1.6% to +15.3%) at step 100, 4.1 percentage points over"
            in wide["sentence"])
    tiny = analysis.recommend("cda", [50], {50: TEST}, {50: cost[50]}, 0.3,
                              analysis.InterventionAnalysisConfig(budget=0.0001))
    assert "within the 0.01% perplexity budget" in tiny["sentence"]  # not "0%"
    assert "within the 2% perplexity budget:" in out["sentence"]
    three = analysis.recommend("cda", [25, 50, 75], {s: TEST for s in cost}, cost, 0.3,
                               analysis.InterventionAnalysisConfig(budget=0.02), runs=3)
    assert "within the 2% perplexity budget over 3 training runs per arm:" in three["sentence"]
    none = analysis.recommend("cda", [25], {25: TEST}, {}, 0.3,
                              analysis.InterventionAnalysisConfig())
    assert none["recommended"] is None and "No perplexity" in none["sentence"]


def test_a_gain_of_no_width_is_said_in_the_words_of_its_interval() -> None:
    """A gain whose interval has no width read "0 (95% CI 0 to 0; ...)": over one run it is
    a bootstrap's (at least 95% of resamples gave it), over several a t interval over runs
    that agree on every prompt."""
    flat = {"estimate": 0.0, "low": 0.0, "high": 0.0, "n": 40, "test": {"p_adjusted": 1.0,
                                                                        "effect_size": 0.0}}
    config = analysis.InterventionAnalysisConfig(budget=0.02)
    one = analysis.recommend("cda", [50], {50: flat}, {50: _cost(0.01, 0.0, 0.02)}, 0.3, config)
    assert "was 0 (at least 95% of resamples gave 0; mean test p = 1.0" in one["sentence"]
    three = analysis.recommend("cda", [50], {50: flat}, {50: _cost(0.01, 0.0, 0.02)}, 0.3,
                               config, runs=3)
    assert ("was 0 (the 3 runs gave each prompt the same difference; no interval; p = 1.0"
            in three["sentence"])
    assert "CI 0 to 0" not in one["sentence"] + three["sentence"]


def test_within_budget_is_recommended() -> None:
    cost = {25: _cost(0.09), 50: _cost(0.01, 0.0, 0.02)}
    out = analysis.recommend("cda", [25, 50], {s: TEST for s in cost}, cost, 0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02))
    assert out["recommended"] == 50 and out["beat_control"] is False  # gain −0.1: worse
    assert "did worse" in out["sentence"]
    assert out["sentence"].startswith("This run of cda did worse than the control's")
    assert out["sentence"].endswith(analysis.ONE_RUN)  # one run per arm, said
    assert ("fairness gain over the control (how much further its male lean moved towards zero)"
            " was -0.100 (95% CI -0.150 to -0.050; mean test p = 0.010 after Holm over 2 "
            "steps, d_z = +0.50), at a perplexity cost of +1.0% (95% CI 0.0% to +2.0%), shown "
            "within the 2% budget" in out["sentence"])
    wide = {50: _cost(0.01, -0.01, 0.04)}  # within the budget by its estimate alone
    out = analysis.recommend("cda", [50], {50: TEST}, wide, 0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02))
    assert "within the 2% budget by its estimate but not by its interval" in out["sentence"]


def test_a_start_leaning_female_keeps_the_gain_s_interval_in_order() -> None:
    """With the male lean below 0 at step 0, the gain is the DiD itself: its interval is the
    DiD's, low below high (it was swapped, so the sentence dropped it)."""
    out = analysis.recommend("cda", [50], {50: TEST}, {50: _cost(0.01, 0.0, 0.02)}, -0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02))
    assert out["gain"]["50"] == {"estimate": 0.1, "low": 0.05, "high": 0.15}
    assert out["beat_control"] is True
    assert "was +0.100 (95% CI +0.050 to +0.150; mean test p = 0.010" in out["sentence"]


def test_documents_too_short_to_train_on_name_the_text() -> None:
    from biasscope.core.errors import BiasscopeError
    from biasscope.intervene.train import _dataset

    def tokenizer(texts: list[str], **_: Any) -> dict[str, list[list[int]]]:
        return {"input_ids": [[1] for _ in texts]}

    with pytest.raises(BiasscopeError, match="no training document of --text is two tokens "
                                             "long: give longer documents"):
        _dataset(tokenizer, ["a", "b"], 8)


def test_several_runs_speak_for_the_intervention() -> None:
    """With runs per arm, the verdict names the intervention, says what its test was over and
    which run's weights are shipped."""
    cost = {50: _cost(0.01, 0.0, 0.02)}
    better = {50: {**TEST, "estimate": -0.1, "low": -0.15, "high": -0.05, "n": 200}}
    out = analysis.recommend("cda", [50], better, cost, 0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02), runs=3)
    assert out["beat_control"] is True
    assert out["sentence"].startswith("Over 3 training runs per arm, cda beat the control: ")
    assert ("+0.100 (95% CI +0.050 to +0.150; p = 0.010 after Holm over 1 step (t over 3 runs "
            "per arm and 200 prompts), +0.50 run-to-run SDs)" in out["sentence"])
    assert "Recommended checkpoint: step 50 (the first run's weights)." in out["sentence"]
    assert out["sentence"].endswith(analysis.RUNS)
    unsure = {50: {**better[50], "test": {"p_adjusted": 0.2, "effect_size": 0.5}}}
    out = analysis.recommend("cda", [50], unsure, cost, 0.3,
                             analysis.InterventionAnalysisConfig(budget=0.02), runs=3)
    assert out["sentence"].startswith("The data cannot tell whether cda beat the control over "
                                      "3 training runs per arm: ")


def _summary(recommended: int | None = 20) -> dict[str, Any]:
    occ = {"nurse": {"estimate": -0.2, "low": -0.3, "high": -0.1, "n": 3},
           "<b>ceo</b>": {"estimate": 0.4, "low": None, "high": None, "n": 1}}
    point = {"male_lean": {"estimate": 0.1, "low": 0.0, "high": 0.2}, "occupations": occ}
    return {"arm": "cda", "control": "control", "steps": [0, 20], "recommended": recommended,
            "arms": {a: {"0": point, "20": point} for a in ("cda", "control")},
            "did": {"male_lean": {"20": TEST}, "pro_anti": {"20": TEST}},
            "cost": {"20": _cost(0.01, 0.0, 0.02)}, "options": {"budget": 0.02},
            "sentence": "said"}


def test_occupation_panels(tmp_path: Path) -> None:
    fig = occupations_figure(_summary())
    assert fig is not None and len(fig.data) == 4  # two arms, step 0 and step 20 each
    assert list(fig.data[0]["y"]) == ["nurse", "&lt;b&gt;ceo&lt;/b&gt;"]  # by the control's lean
    err = list(fig.data[0]["error_x"]["array"])
    assert err[0] == pytest.approx(0.1) and err[1] is None  # no CI from one prompt
    page = write_intervention_report(RunStore(tmp_path), _summary(None), tmp_path / "x.html")
    text = page.read_text()
    assert "Per occupation, each arm" in text and "step 20, the last step" in text
    assert "<b>ceo</b>" not in text


def test_captions_write_the_level_as_chosen(tmp_path: Path) -> None:
    """Before: a run at 99.9% was captioned "100% bootstrap CIs" (`.0%`), a level no
    interval has."""
    summary = {**_summary(), "options": {"budget": 0.02, "confidence": 0.999}}
    text = write_intervention_report(RunStore(tmp_path), summary, tmp_path / "x.html"
                                     ).read_text()
    assert "99.9% bootstrap CIs" in text and "with 99.9% Student's t CIs" in text
    assert "100% bootstrap" not in text and "100% Student" not in text


class Model:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def save_pretrained(self, where: str) -> None:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / "weights.txt").write_text(self.tag)


def test_saved_directory_is_replaced_whole(tmp_path: Path) -> None:
    ship.save(Model("step 25"), None, tmp_path, {"step": 25})
    ship.save(Model("step 50"), None, tmp_path, {"step": 50})
    assert (tmp_path / "recommended" / "weights.txt").read_text() == "step 50"
    assert ship.saved(tmp_path)["step"] == 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recommended"]
    summary = _summary(25)
    assert "step 25 is recommended but its weights were not saved" in str(
        ship.finalise(tmp_path, summary, lora=False))
    summary = _summary(20)
    summary["beat_control"], summary["gain"] = False, {"20": TEST}
    ship.save(Model("step 20"), None, tmp_path, {"step": 20})
    assert ship.finalise(tmp_path, summary, lora=True) is None
    info = json.loads((tmp_path / "recommended" / "recommended.json").read_text())
    assert info["final"] is True and info["weights"] == "LoRA adapters"
    assert ship.finalise(tmp_path, _summary(None), lora=True) == (
        f"no step is recommended now: step 20's weights moved from {tmp_path / 'recommended'} "
        f"to {tmp_path / 'recommended-step20'}")
    assert not (tmp_path / "recommended").exists()


def test_recommended_json_names_the_base_its_weights_are_a_delta_of(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """recommended.json (and PEFT's adapter_config.json) named the base by path alone: weights
    shipped from RUN/recommended/ could not say which base they were trained from. It holds the
    base's identity as run.json records it, kept when the final analysis rewrites it."""
    base = {"backend": "hf", "source": "/models/m", "revision": "", "fingerprint": "f" * 64,
            "files_fingerprint": "e" * 64}
    (tmp_path / "run.json").write_text(json.dumps({"settings": {"intervention": {
        "model": "/models/m", "base": base}}}))
    monkeypatch.setattr(analysis, "analyse", lambda *args: _summary(20))
    assert ship.consider(Model("step 20"), None, RunStore(tmp_path), "cda", "control", 20,
                         analysis.InterventionAnalysisConfig(), lora=True)
    assert ship.saved(tmp_path)["base"] == base
    assert ship.finalise(tmp_path, _summary(20), lora=True) is None
    info = ship.saved(tmp_path)
    assert info["final"] is True and info["base"] == base


def _killed_save(root: Path, done: int, whole: bool = True) -> None:
    """What a kill between `ship.save`'s two renames leaves: ``recommended.old/`` (step
    ``done``'s weights) and ``recommended.partial/`` (step ``done + 25``'s, ``whole`` when
    its recommended.json was written), and no ``recommended/``."""
    ship.save(Model(f"step {done}"), None, root, {"step": done})
    os.replace(root / "recommended", root / "recommended.old")
    Model(f"step {done + 25}").save_pretrained(str(root / "recommended.partial"))
    if whole:
        (root / "recommended.partial" / "recommended.json").write_text(
            json.dumps({"step": done + 25}))


def test_a_rerun_finishes_a_save_a_kill_interrupted(tmp_path: Path) -> None:
    """A SIGKILL between the renames left recommended.old/ and recommended.partial/ for good
    under --no-save-recommended reruns (which save nothing): every rerun finishes the swap,
    the new weights where they were written whole, else the old ones back."""
    _killed_save(tmp_path, 25)
    ship.recover(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recommended"]
    assert ship.saved(tmp_path)["step"] == 50
    assert (tmp_path / "recommended" / "weights.txt").read_text() == "step 50"
    half = tmp_path / "half"
    _killed_save(half, 25, whole=False)
    ship.recover(half)
    assert sorted(p.name for p in half.iterdir()) == ["recommended"]
    assert ship.saved(half)["step"] == 25
    ship.save(Model("step 75"), None, half, {"step": 75})  # killed removing the old one
    (half / "recommended.old").mkdir()
    ship.recover(half)
    assert sorted(p.name for p in half.iterdir()) == ["recommended"]
    assert ship.saved(half)["step"] == 75


def test_a_rerun_that_moves_the_recommendation_leaves_no_stale_one(tmp_path: Path) -> None:
    """A rerun with a smaller --budget recommends step 20 ("did worse") instead of the saved
    step 25 ("beat the control"): step 25 no longer sits in recommended/ as the final
    recommendation; it is renamed after its step with its recommended.json rewritten with the
    new conclusion, and comes back when a rerun recommends it again."""
    won = {**_summary(25), "beat_control": True, "sentence": "cda beat the control"}
    won["arms"]["cda"]["25"] = won["arms"]["cda"]["20"]
    ship.save(Model("step 25"), None, tmp_path, {"step": 25})
    assert ship.finalise(tmp_path, won, lora=False) is None
    worse = {**_summary(20), "sentence": "cda did worse than the control"}
    said = ship.finalise(tmp_path, worse, lora=False)
    assert said == (f"step 20 is recommended but its weights were not saved: step 25's "
                    f"weights moved from {tmp_path / 'recommended'} to "
                    f"{tmp_path / 'recommended-step25'}")
    assert ship.saved(tmp_path) == {}
    aside = tmp_path / "recommended-step25"
    info = json.loads((aside / "recommended.json").read_text())
    assert (info["step"], info["recommended"], info["final"]) == (25, 20, False)
    assert info["sentence"] == "cda did worse than the control"
    assert info["beat_control"] is False
    assert (aside / "weights.txt").read_text() == "step 25"
    assert ship.finalise(tmp_path, won, lora=False) == (
        f"step 25 is recommended again: its weights are back in {tmp_path / 'recommended'}")
    info = ship.saved(tmp_path)
    assert (info["step"], info["final"], info["sentence"]) == (25, True, "cda beat the control")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recommended"]


def test_the_table_shows_the_cost_in_percent_to_its_ci_digits() -> None:
    from biasscope.report.intervention import did_rows

    did = {"estimate": 0.01234, "low": 0.0034, "high": 0.0211,
           "test": {"p_adjusted": 3e-9, "effect_size": 0.5}}
    summary = {"steps": [0, 100], "did": {"male_lean": {"100": did}, "pro_anti": {}},
               "cost": {"100": _cost(0.0607, -0.0163, 0.1527)}}
    assert did_rows(summary) == [["100", "0.0123 [0.0034, 0.0211]", "< 0.0001", "0.500", "—",
                                  "n/a", "n/a", "+6.1% [-1.6%, +15.3%]"]]


def test_each_runs_did_is_drawn_beside_the_mean() -> None:
    one = _summary()
    assert [t for t in did_figure(one).data if "each run" in str(t.get("name"))] == []
    runs = _summary()
    runs["did"]["male_lean"]["20"] = {**TEST, "by_run": [0.05, 0.1, 0.15]}
    drawn = [t for t in did_figure(runs).data if "each run" in str(t.get("name"))]
    assert len(drawn) == 1 and list(drawn[0]["y"]) == [0.05, 0.1, 0.15]
    assert list(drawn[0]["x"]) == [20, 20, 20]


def test_runs_are_found_by_their_exact_names() -> None:
    models = {"cda", "control", "cda-run2", "control-run2", "cda-run03", "control-run3",
              "cda-run4", "other-run5", "control-run5"}
    assert analysis.runs_in(models, "cda", "control") == [1, 2]
    assert analysis.runs_in(models - {"cda"}, "cda", "control") == [2]


@pytest.mark.parametrize(("flag", "value"), [("--alpha", "0.05"), ("--confidence", "0.9")])
def test_report_of_a_finished_intervention_refuses_analysis_flags(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    """A finished intervention is reported with its stored analysis settings: a flag given to
    `biasscope report` was ignored without a word; it is refused, and nothing is written. A
    level names `biasscope intervene`, which takes it."""
    from biasscope.cli.main import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"kind": "intervention"}))
    (run / "intervention.json").write_text("{}")
    before = {p: p.read_bytes() for p in run.rglob("*")}
    assert main(["report", str(run), flag, value]) == 2
    err = capsys.readouterr().err
    assert err == (f"biasscope: error: {flag}: an intervention run's report takes no such "
                   "setting; leave it out\n" if flag == "--alpha" else
                   f"biasscope: error: {flag}: `biasscope report` shows an intervention run's "
                   f"intervention.json as it was written; give {flag} to `biasscope intervene "
                   f"--out {run}` with the run's other flags, which analyses its stored "
                   "evaluations again without training\n")
    assert {p: p.read_bytes() for p in run.rglob("*")} == before
