"""The demo end to end: checkpoints, records written live during training, the report, a
rerun that reuses all of it — and the calibration of the whole pipeline: a strongly biased
corpus gives a significant, emerging gap, a neutral one no significant gap after correction.

Training is seeded and runs on a fixed number of CPU threads, so these runs are deterministic.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("torch")

from biasscope.demo import DEMO_MIN_GAP, MODEL_NAME, run_demo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def biased(tmp_path_factory: pytest.TempPathFactory):
    return run_demo(tmp_path_factory.mktemp("demo95"), bias=0.95, quiet=True)


@pytest.fixture(scope="module")
def neutral(tmp_path_factory: pytest.TempPathFactory):
    return run_demo(tmp_path_factory.mktemp("demo50"), bias=0.5, quiet=True)


def _wino(summary: dict) -> list[dict]:
    """The WinoBias checkpoints of a demo summary (it also sweeps professional bias)."""
    return [c for c in summary["checkpoints"] if c["probe"] == "winobias-gender"]


def _gaps(result) -> list[float]:
    summary = json.loads((result.run_dir / "summary.json").read_text())
    return [c["mean"]["jsdp_gap"] for c in _wino(summary)]


def _tests(result) -> tuple[dict, list[dict]]:
    analysis = json.loads((result.run_dir / "summary.json").read_text())["analysis"]
    model = analysis["models"]["demo-tiny-neox"]
    return model, model["tests"]["jsdp_correct"]


def test_the_gap_grows_under_bias_and_stays_flat_without(biased, neutral):
    strong, flat = _gaps(biased), _gaps(neutral)
    assert strong[0] == flat[0] == 0.0
    # Favouring "male" (a lower JSD-P for male answers), in the second half of training and at
    # the end, and several times anything the neutral corpus produces.
    late = strong[len(strong) // 2:]
    assert max(late) < -0.04 and strong[-1] < -0.04
    assert max(abs(g) for g in flat) < 0.01
    assert min(abs(g) for g in late) > 4 * max(abs(g) for g in flat)


def test_calibration_strong_bias_emerges_and_neutral_is_not_significant(biased, neutral):
    model, tests = _tests(biased)
    emerged = model["emergence"]["jsdp_correct"]
    assert emerged is not None and 0 < emerged < tests[-1]["step"]
    later = [t for t in tests if t["step"] >= emerged]
    assert all(t["significant"] and abs(t["gap"]) >= DEMO_MIN_GAP and t["gap"] < 0
               for t in later)
    model, tests = _tests(neutral)
    assert model["emergence"]["jsdp_correct"] is None
    assert not any(t["significant"] and abs(t["gap"]) >= DEMO_MIN_GAP for t in tests)


#: "significant" said of a bias: not "not significant", nor a gap the analysis itself says is
#: below the smallest gap of interest (and so no evidence of bias).
CLAIM = re.compile(r"(?<!not )\bsignificant\b(?! but below the smallest gap of interest)"
                   r"(?! where the JSD-P gap is below the smallest gap of interest)")


def _sentences(node: Any) -> list[str]:
    """Every sentence of an analysis: the strings under its ``sentences`` and ``sentence``."""
    if isinstance(node, dict):
        return [s for k, v in node.items()
                for s in ([v] if k == "sentence" and isinstance(v, str) else
                          [x for x in v if isinstance(x, str)] if k == "sentences" and
                          isinstance(v, list) else _sentences(v))]
    if isinstance(node, list):
        return [s for v in node for s in _sentences(v)]
    return []


def test_neutral_control_claims_no_significant_bias_anywhere(neutral):
    """The control: a model trained with no injected bias. Nothing in its summary or report
    may call a bias significant: no emergence, no significant test of either probe at any
    checkpoint (beyond what the analysis flags as below the smallest gap of interest), no
    sentence, no "yes" in a table, no emergence marker on a figure. It once showed a
    stereotype preference of +0.50, significant from step 355, and an Average Rank gap that
    'emerged' at step 600."""
    analysis = json.loads((neutral.run_dir / "summary.json").read_text())["analysis"]
    model = analysis["models"][MODEL_NAME]
    assert set(model["emergence"].values()) == {None}
    for value, rows in model["tests"].items():
        assert all(r.get("below_gap_of_interest") for r in rows if r["significant"]), value
    assert set(analysis["probes"]) == {"professional-bias"}
    for probe, section in analysis["probes"].items():
        for tested in section["models"].values():
            assert set(tested["emergence"].values()) == {None}, probe
            assert not [(c["step"], key) for c in tested["checkpoints"]
                        for key, value in c["values"].items() if value.get("significant")]
    said = _sentences(analysis)
    assert any("stereotype preference" in s for s in said)
    assert [s for s in said if CLAIM.search(s)] == []
    page = neutral.report.read_text()
    assert "<td>yes</td>" not in page and "gap significant from step" not in page


def test_demo_writes_checkpoints_live_records_and_report(biased):
    assert len(biased.checkpoints) >= 8
    assert biased.report.is_file() and "<html" in biased.report.read_text()[:500].lower()
    summary = json.loads((biased.run_dir / "summary.json").read_text())
    steps = [c["step"] for c in _wino(summary)]
    assert steps == sorted(steps) and steps[0] == 0 and len(steps) == len(biased.checkpoints)
    first = _wino(summary)[0]
    assert first["seeds"] == [0, 1, 2, 3, 4]
    assert abs(first["mean"]["jsdp_gap"]) < 1e-6  # a zero output layer: uniform at step 0
    assert "analysis" in summary


def test_demo_sweeps_professional_bias_too(biased):
    """A second probe's dynamics: professional bias at every checkpoint, in the summary's
    analysis and in its own section of the report."""
    summary = json.loads((biased.run_dir / "summary.json").read_text())
    steps = sorted({c["step"] for c in summary["checkpoints"]})
    swept = [c for c in summary["checkpoints"] if c["probe"] == "professional-bias"]
    assert sorted(c["step"] for c in swept) == steps and all(c["seeds"] == [0] for c in swept)
    model = summary["analysis"]["probes"]["professional-bias"]["models"]["demo-tiny-neox"]
    assert model["steps"] == steps and "preference" in model["emergence"]
    last = model["checkpoints"][-1]["values"]["preference"]
    assert last["low"] <= last["estimate"] <= last["high"] and last["p_adjusted"] is not None
    # The corpus asks the probe's question too, so the biased writer's pronoun habit shows as
    # a stereotype preference that emerges (it was -0.12 when the model made its answers up).
    assert model["emergence"]["preference"] is not None
    assert last["significant"] and last["low"] > 0.2
    html = biased.report.read_text()
    assert "<h2>Professional bias over training steps</h2>" in html
    assert html.index("<h2>JSD-P per correct answer") < html.index("<h2>Professional bias")


def test_rerun_reuses_training_and_records(biased):
    before = sorted(p.stat().st_mtime_ns for p in (biased.run_dir / "records").iterdir())
    again = run_demo(biased.run_dir.parent, bias=0.95, quiet=True)
    assert again.checkpoints == biased.checkpoints
    after = sorted(p.stat().st_mtime_ns for p in (biased.run_dir / "records").iterdir())
    assert after == before
