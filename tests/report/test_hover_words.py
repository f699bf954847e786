"""The figures' hover text says a collapsed bootstrap interval as the sentences do ("1 (at
least 95% of resamples gave 1; n = 8)"), not "CI 1 to 1"; a Wilson interval of no width, which
no resample gave, is printed as any interval."""

from __future__ import annotations

from typing import Any

from biasscope.probes import PROBES
from biasscope.probes.facets import Panel
from biasscope.report import group_panels, probe_panels, wordings

SAME = "1 (at least 95% of resamples gave 1; n = 8)"
ALIKE = {"estimate": 1.0, "low": 1.0, "high": 1.0, "n": 8}  # every pair's difference alike


def _hovers(fig: Any) -> list[str]:
    return [text for trace in fig.data for text in trace["hovertext"] or []]


def test_a_probe_s_curve_and_its_checkpoint_aside() -> None:
    values = {"mean_difference": ALIKE, "pct_stereotype": ALIKE}  # a bootstrap's; a Wilson's
    section = {"headline": ["pct_stereotype"], "names": {},
               "models": {"m": {"steps": [10], "checkpoints": [{"step": 10, "values": values}]}},
               "aside": [{"model": "m", "revision": "best", "values": values}]}
    figures: list[Any] = []
    probe_panels.section_html({"crows-pairs": section},
                              lambda fig, i: figures.append(fig) or "", 0, "holm", 0.05)
    hovers = [h for fig in figures for h in _hovers(fig)]
    bootstrapped = [h for h in hovers if "mean_difference" in h]
    assert len(bootstrapped) == 2 and all(SAME in h for h in bootstrapped)  # step 10, best
    wilson = [h for h in hovers if "pct_stereotype" in h]
    assert wilson and all("1 (95% CI 1 to 1; n = 8)" in h for h in wilson)
    assert not any("CI 1 to 1" in h for h in bootstrapped)


def test_a_group_panel() -> None:
    panel = Panel("likelihood_diff per bias type", "…", ("likelihood_diff:*",), by="group")
    section = {"models": {"m": {"checkpoints": [
        {"step": 10, "values": {"likelihood_diff:gender": ALIKE}}]}}}
    fig = group_panels.figure(section, panel, PROBES["crows-pairs"].same_of)
    assert fig is not None and SAME in _hovers(fig)[0]
    unsaid = group_panels.figure(section, panel)  # no probe to tell: as any interval
    assert unsaid is not None and "1 (95% CI 1 to 1; n = 8)" in _hovers(unsaid)[0]


def test_a_forest_plot_across_wordings() -> None:
    result = {"confidence": 0.95, "null": 0.0,
              "per_wording": [{"wording": w, "estimate": 1.0, "low": 1.0, "high": 1.0}
                              for w in ("a", "b")],
              "pooled": {"estimate": 1.0, "low": 1.0, "high": 1.0}}
    fig = wordings.forest("mean difference", result)
    shown = [text for trace in fig.data for text in trace["customdata"]]
    assert shown == ["1 (at least 95% of resamples gave 1)"] * 3
