"""Across wordings and in the tests over steps, a bootstrap interval of no width is said in
words ("at least 95% of resamples gave 1"), not "1 to 1", which reads as a misprint; a Wilson
interval of no width is printed as any, and an interval at the run's level is named so."""

from __future__ import annotations

import math
from typing import Any

from biasscope.core.wordings import verdict
from biasscope.report import probe_panels, wordings

ALIKE = {"estimate": 1.0, "low": 1.0, "high": 1.0}


def _across(confidence: float = 0.95, **pooled: float) -> dict[str, Any]:
    """A measure's result across two wordings, every interval of no width."""
    return {"measure": "gap", "label": "accuracy gap", "null": 0.0, "confidence": confidence,
            "wordings": 2, "agree": 2, "reverse": 0, "reverse_significant": 0,
            "significant": 2, "correction": "holm", "variance_share": math.nan,
            "per_wording": [{"wording": w, **ALIKE} for w in ("a", "b")],
            "pooled": {**ALIKE, "items_only_low": 1.0, "items_only_high": 1.0, **pooled}}


def test_the_verdict_across_wordings() -> None:
    said = verdict(_across())
    assert "(pooled 1 (at least 95% of resamples gave 1; over wordings and items); " in said
    assert "1 to 1" not in said


def test_the_table_across_wordings() -> None:
    (row,) = wordings.rows({"gap": _across(0.9)})
    assert row[2:4] == ["at least 90% of resamples gave 1"] * 2
    (wide,) = wordings.rows({"gap": _across(low=0.5, high=1.5)})  # the pooled has width
    assert wide[2:4] == ["0.50 to 1.50", "at least 95% of resamples gave 1.00"]


def test_the_forest_plot_names_the_run_s_level() -> None:
    result = _across(0.9, low=0.5, high=1.5)
    fig = wordings.forest("accuracy gap", result)
    shown = [text for trace in fig.data for text in trace["customdata"]]
    assert shown[-1] == "1.00 (90% CI 0.50 to 1.50)"
    assert shown[0] == "1 (at least 90% of resamples gave 1)"


def test_the_tests_over_steps() -> None:
    tested = {**ALIKE, "n": 8, "p_value": 0.01, "p_adjusted": 0.01, "effect_size": 1.0,
              "significant": True}
    values = {"mean_difference": tested, "pct_stereotype": tested}  # a bootstrap's; a Wilson's
    section = {"headline": ["mean_difference", "pct_stereotype"], "names": {},
               "models": {"m": {"steps": [10], "checkpoints": [{"step": 10, "values": values}]}}}
    html = probe_panels.section_html({"crows-pairs": section}, lambda fig, i: "", 0, "holm",
                                     0.05)
    assert "<td>at least 95% of resamples gave 1</td>" in html.replace(' class="num"', "")
    cells = {name: rows[0][2] for _, name, rows in probe_panels._tested(
        section, lambda key: "at least 95% of resamples gave {value}"
        if key == "mean_difference" else None)}
    assert cells == {"mean_difference": "at least 95% of resamples gave 1",
                     "pct_stereotype": "1 to 1"}
    unsaid = probe_panels._tested(section)  # no probe to tell: as any interval
    assert [rows[0][2] for _, _, rows in unsaid] == ["1 to 1", "1 to 1"]


def test_the_audit_s_headline_table_and_figure() -> None:
    from biasscope.report.audit import headline_figure, probe_section

    headline = {"mean_difference": {**ALIKE, "n": 8}, "pct_stereotype": {**ALIKE, "n": 8}}
    html, _ = probe_section("crows-pairs", {"headline": headline}, 1)
    assert ">at least 95% of resamples gave 1</td>" in html  # the bootstrap's
    assert ">1 to 1</td>" in html  # the Wilson's, printed as any interval
    assert "1 (at least 95% of resamples gave 1)" in html  # the figure's hover text
    fig = headline_figure("crows-pairs", headline, same=lambda key: (
        "at least 95% of resamples gave {value}" if key == "mean_difference" else None))
    assert fig is not None and list(fig.data[0]["customdata"]) == [
        "1 (at least 95% of resamples gave 1)", "1 (95% CI 1 to 1)"]
