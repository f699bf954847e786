"""The audit probes' checkpoints without a training step, as WinoBias reports them: a Trainer's
`checkpoint-30` is on the curve, its `best` and `final` are each read and reported aside by name
with their own values (never pooled), and a model with no step at all gets one set of values
per revision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("torch")

from bbq_fixture import write_bbq
from biasscope.cli.main import main
from biasscope.dynamics.summary.write import write_dynamics_report
from biasscope.probes import PROBES
from biasscope.report import group_panels
from biasscope.store.directory import RunStore
from test_report import figures

#: (model folder, checkpoint folder): distinct weights each (one model's twins are refused)
CHECKPOINTS = (("train2", "checkpoint-30"), ("train2", "best"), ("train2", "final"),
               ("train3", "best"), ("train3", "final"))


@pytest.fixture(scope="module")
def run(tiny_tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bbq sweep of train2 (`checkpoint-30`, `best`, `final`) and train3 (`best`, `final`)."""
    from biasscope.demo.tiny import save, tiny_gpt_neox

    root = tmp_path_factory.mktemp("trained")
    for seed, (model, name) in enumerate(CHECKPOINTS):
        save(tiny_gpt_neox(len(tiny_tokenizer), seed=seed, max_positions=1024), tiny_tokenizer,
             root / model / name)
    data = write_bbq(tmp_path_factory.mktemp("data"))
    out = root / "run"
    assert main(["dynamics", "--checkpoint-glob", str(root / "train2" / "*"),
                 "--checkpoint-glob", str(root / "train3" / "*"), "--probe", "bbq",
                 "--limit", "8", "--out", str(out), "--data-dir", str(data), "--device", "cpu",
                 "--quiet"]) == 0
    return out


def _bbq(run: Path) -> dict[str, Any]:
    section: dict[str, Any] = json.loads((run / "summary.json").read_text())[
        "analysis"]["probes"]["bbq"]
    return section


def _alone(records: pd.DataFrame, model: str, revision: str) -> dict[str, Any]:
    """The probe's statistics on one checkpoint's records alone."""
    rows = records[(records["model"] == model) & (records["revision"] == revision)]
    found: dict[str, Any] = PROBES["bbq"].step_statistics.values(rows.reset_index(drop=True))
    return found


def test_stepped_checkpoints_are_the_curve_and_the_others_each_aside(run: Path) -> None:
    section = _bbq(run)
    assert list(section["models"]) == ["train2"]
    assert section["models"]["train2"]["steps"] == [30]
    assert [(a["model"], a["revision"]) for a in section["aside"]] == [
        ("train2", "best"), ("train2", "final"), ("train3", "best"), ("train3", "final")]
    records = RunStore(run).records()
    for entry in section["aside"]:  # each its own records' values: none pooled
        expected = _alone(records, entry["model"], entry["revision"])
        for key in PROBES["bbq"].step_statistics.headline:
            assert entry["values"][key]["estimate"] == pytest.approx(
                expected[key]["estimate"]), (entry["revision"], key)
            assert entry["values"][key]["low"] == pytest.approx(expected[key]["low"])
            assert entry["values"][key]["n"] == expected[key]["n"]
    said = section["sentences"]
    assert not any("train2 has no training step" in s for s in said)
    aside = next(s for s in said if s.startswith("bbq: train2: revisions best, final have no "
                                                 "training step, so they are reported aside"))
    assert "at revision best, " in aside and "at revision final, " in aside
    assert aside in section["models"]["train2"]["sentences"]
    # each is tested as a checkpoint on the curve is, in the model's family of tests
    for entry in section["aside"]:
        for key in PROBES["bbq"].step_statistics.headline:
            assert "p_adjusted" in entry["values"][key] and "significant" in entry["values"][key]
    tested = [s for s in section["models"]["train2"]["sentences"]
              if s.startswith("train2 at revision ")]
    assert tested[0].startswith(
        "train2 at revision best (Holm-corrected, α = 0.01, over the model's checkpoints with a "
        "step and without): the BBQ bias score in disambiguated contexts (s_DIS) is not "
        "significant: 0.0 (95% CI -1.0 to 1.0; p = n/a, effect size 0.00); the BBQ bias score "
        "in ambiguous contexts (s_AMB) is ")
    # one sentence per checkpoint, every value's verdict, p and effect size in it
    assert len(tested) == 2 and all(s in said for s in tested)
    assert all(s.count("significant: ") == 2 and s.count("effect size") == 2 for s in tested)


def test_each_checkpoint_aside_gets_the_curve_s_test_in_its_family() -> None:
    """A checkpoint without a step is one more test of the value on its model: Holm over the
    model's checkpoints with a step and those aside together; emergence over the curve
    alone."""
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.summary.probes import adjust_over_checkpoints

    def value(p: float) -> dict[str, Any]:
        return {"s_dis": {"estimate": 0.4, "low": 0.2, "high": 0.6, "n": 40, "p_value": p,
                          "effect_size": 0.4}}

    curve = {10: value(0.02), 20: value(0.001)}
    best, final = value(0.004), value(0.3)
    emergence = adjust_over_checkpoints(curve, AnalysisConfig(alpha=0.05), [best, final])
    assert [curve[10]["s_dis"]["p_adjusted"], curve[20]["s_dis"]["p_adjusted"],
            best["s_dis"]["p_adjusted"], final["s_dis"]["p_adjusted"]] == pytest.approx(
        [0.04, 0.004, 0.012, 0.3])
    assert best["s_dis"]["significant"] and not final["s_dis"]["significant"]
    assert emergence == {"s_dis": 10}


def test_a_model_without_a_step_is_given_per_revision(run: Path) -> None:
    section = _bbq(run)
    assert section["stepless"] == ["train3"]
    assert "train3" not in section.get("stepless_values", {})  # never pooled into one
    said = next(s for s in section["sentences"] if s.startswith("bbq: train3 has no training "
                                                                "step"))
    assert "its revisions best, final cannot be ordered, so each is given on its own" in said
    assert "at revision best, " in said and "at revision final, " in said
    final = next(s for s in section["sentences"] if s.startswith("train3 at revision final ("))
    assert final.startswith("train3 at revision final (Holm-corrected, α = 0.01, over its 2 "
                            "revisions): the BBQ bias score in disambiguated contexts (s_DIS) "
                            "is ")
    assert "; the BBQ bias score in ambiguous contexts (s_AMB) is not significant: " in final


def test_the_report_draws_and_names_the_checkpoints_aside(run: Path) -> None:
    """Step 30 on a numeric axis; every checkpoint set aside a marker of its own past it,
    named on the axis, joined to nothing."""
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    assert "bbq: train2: revisions best, final have no training step" in page
    traces, layout = next((t, lay) for t, lay in figures(page)
                          if any("(revision best)" in str(x.get("name")) for x in t))
    line = next(t for t in traces if t.get("mode") == "lines+markers")
    assert line["x"] == [30]
    apart = [t for t in traces if "(revision" in str(t.get("name"))]
    assert {t["mode"] for t in apart} == {"markers"} and len(apart) % 4 == 0  # 2 models x 2
    named = dict(zip(layout["xaxis"]["ticktext"], layout["xaxis"]["tickvals"], strict=True))
    assert named["30"] == 30 and 30 < named["best"] < named["final"]
    assert {t["x"][0] for t in apart} == {named["best"], named["final"]}
    assert "train3 · " in str([t["name"] for t in apart])
    # The panels by group take each checkpoint set aside on its own, by name, too.
    # Its tests: rows of the model's table, by name, after the steps'.
    assert "<td>revision best</td>" in page and "<th>checkpoint</th>" in page
    drawn = [(m, w) for m, w, _ in group_panels.last_values(_bbq(run))]
    assert drawn == [("train2", "step 30"), ("train2", "revision best"),
                     ("train2", "revision final"), ("train3", "revision best"),
                     ("train3", "revision final")]
