"""The intervention report: both arms over training steps side by side, the difference in
differences, the perplexity cost, and the recommended checkpoint, from ``intervention.json``
(`biasscope.intervene.analysis` computes it; this module only renders). One self-contained
HTML file; everything from data is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from biasscope.core.numbers import ci_decimals, finite, level_of, num, pvalue, setting_percent
from biasscope.report.html import CSS, figure_html
from biasscope.report.plotfig import Figure, as_text, make_subplots
from biasscope.report.plotting import fmt
from biasscope.report.tables import table
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes

Json = Mapping[str, Any]
LABELS = {"male_lean": "male lean P(male) − P(female)",
          "pro_anti": "pro − anti accuracy (per WinoBias pair)",
          "perplexity": "held-out perplexity"}
ARM_COLORS = ("#d62728", "#1f77b4")


def _band(fig: Figure, name: str, steps: Sequence[int], cis: Sequence[Json | None], color: str,
          row: int, legend: bool, dash: str = "solid") -> None:
    """A line with its CI as error bars (None where missing; none on a dotted line, a later
    run's, which would hide the first run's)."""
    mid = [c.get("estimate") if c else None for c in cis]
    up = [(c["high"] - c["estimate"]) if c and c.get("high") is not None
          and c.get("estimate") is not None else None for c in cis]
    down = [(c["estimate"] - c["low"]) if c and c.get("low") is not None
            and c.get("estimate") is not None else None for c in cis]
    fig.add_scatter(x=list(steps), y=mid, name=name, mode="lines+markers", showlegend=legend,
                    line={"color": color, "dash": dash}, legendgroup=name, row=row, col=1,
                    error_y={"type": "data", "array": up, "arrayminus": down,
                             "visible": dash == "solid"})


def run_arms(summary: Json) -> list[tuple[str, str]]:
    """Each run's (intervention, control) model names, the first run's first; a summary
    written before runs existed has one."""
    return [(str(a), str(c)) for a, c in summary.get("run_arms")
            or [(summary["arm"], summary["control"])]]


def arms_figure(summary: Json) -> Figure:
    """Each arm's measures over steps with their CIs, one row per measure; the first run's
    arms solid, later runs' dotted in the same colours."""
    keys = ("male_lean", "pro_anti", "perplexity")
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[LABELS[k] for k in keys])
    steps = summary["steps"]
    for run, names in enumerate(run_arms(summary)):
        for color, name in zip(ARM_COLORS, names):
            points = summary["arms"][name]
            for row, key in enumerate(keys, start=1):
                _band(fig, as_text(name), steps, [points[str(s)].get(key) for s in steps],
                      color, row, row == 1, "dot" if run else "solid")
    fig.update_layout(height=820, template="plotly_white", margin={"t": 40})
    fig.update_xaxes(title_text="training step", row=3, col=1)
    return fig


def _each_run(fig: Figure, name: str, steps: Sequence[int], cis: Sequence[Json | None],
              color: str) -> None:
    """With several runs per arm, each run's own difference in differences (``by_run``) as
    faint points beside their mean, to see whether the runs agree."""
    points = [(s, v) for s, c in zip(steps, cis) for v in (c or {}).get("by_run") or []]
    if points:
        fig.add_scatter(x=[s for s, _ in points], y=[v for _, v in points], name=name,
                        mode="markers", marker={"color": color, "size": 6, "opacity": 0.45},
                        row=1, col=1)


def did_figure(summary: Json) -> Figure:
    """The difference in differences per step (with CI) and the perplexity cost."""
    arm = as_text(str(summary["arm"]))  # plotly renders a little HTML in titles and names
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=[
        f"difference in differences ({arm} − control, change since step 0)",
        f"perplexity cost ppl({arm}) / ppl(control) − 1"])
    steps = [s for s in summary["steps"] if s > 0]
    for color, measure in zip(("#9467bd", "#2ca02c"), ("male_lean", "pro_anti")):
        cis = [summary["did"][measure].get(str(s)) for s in steps]
        _band(fig, LABELS[measure], steps, cis, color, 1, True)
        _each_run(fig, f"{LABELS[measure]}, each run", steps, cis, color)
    _band(fig, "perplexity cost", steps, [summary["cost"].get(str(s)) for s in steps],
          "#444444", 2, True)
    budget = summary["options"]["budget"]
    fig.add_hline(y=0, line={"color": "#999", "width": 1}, row=1, col=1)
    fig.add_hline(y=budget, line={"color": "#a33", "dash": "dash"}, row=2, col=1,
                  annotation_text=f"budget {setting_percent(budget)}")
    fig.update_layout(height=620, template="plotly_white", margin={"t": 40})
    fig.update_xaxes(title_text="training step", row=2, col=1)
    return fig


def compared_step(summary: Json) -> int:
    """The step the occupation panels set against step 0: the recommended one, else the last."""
    best = summary.get("recommended")
    return int(best) if best is not None else int(summary["steps"][-1])


def _named(arm: Any, most: int = 24) -> str:
    """An arm's name as figure text, cut to ``most`` characters: panel titles and legends
    share the width with the occupations' names."""
    name = str(arm)
    return as_text(name if len(name) <= most else name[:most - 1] + "…")


def occupations_figure(summary: Json) -> Figure | None:
    """One panel per arm (of the first run analysed): each occupation's male lean at step 0
    and at `compared_step`, with CIs; occupations in the order of the control's step-0
    lean."""
    arms, step = run_arms(summary)[0], compared_step(summary)
    start = summary["arms"][arms[1]]["0"].get("occupations") or {}
    if not start or step == 0:
        return None
    names = sorted(start, key=lambda n: start[n].get("estimate") or 0.0)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[_named(a) for a in arms])
    for col, arm in enumerate(arms, start=1):
        for at, color, symbol in ((0, "#999999", "circle-open"), (step, ARM_COLORS[col - 1],
                                                                   "circle")):
            rows = summary["arms"][arm][str(at)].get("occupations") or {}
            cis = [rows.get(n) for n in names]
            mid = [c.get("estimate") if c else None for c in cis]
            err = [[(c[k] - c["estimate"]) * sign if c and c.get(k) is not None
                    and c.get("estimate") is not None else None for c in cis]
                   for k, sign in (("high", 1), ("low", -1))]
            fig.add_scatter(x=mid, y=[as_text(n) for n in names], mode="markers", row=1,
                            col=col, name=f"{_named(arm)}, step {at}",
                            marker={"color": color, "symbol": symbol, "size": 8},
                            error_x={"type": "data", "array": err[0], "arrayminus": err[1],
                                     "visible": True, "thickness": 1})
        fig.add_vline(x=0, line={"color": "#bbb", "width": 1}, row=1, col=col)
    fig.update_xaxes(title_text="male lean")  # one per panel: the caption says what it is
    fig.update_yaxes(type="category")
    fig.update_layout(height=max(420, 18 * len(names) + 140), template="plotly_white",
                      margin={"t": 40})
    return fig


def _ci(c: Json | None, pct: bool = False) -> str:
    """``estimate [low, high]`` to the interval's precision (the cost in percent)."""
    if not c or not finite(c.get("estimate")):
        return "—"
    scale = 100 if pct else 1
    low, high = (v * scale if finite(v) else v for v in (c.get("low"), c.get("high")))
    places = ci_decimals(low, high)

    def show(v: Any) -> str:
        if not finite(v):
            return "—"
        return f"{num(scale * v, places, True)}%" if pct else num(v, places)

    return f"{show(c['estimate'])} [{show(c.get('low'))}, {show(c.get('high'))}]"


def did_rows(summary: Json) -> list[list[str]]:
    rows = []
    for s in (s for s in summary["steps"] if s > 0):
        row = [str(s)]
        for measure in ("male_lean", "pro_anti"):
            d = summary["did"][measure].get(str(s)) or {}
            test = d.get("test") or {}
            row += [_ci(d), pvalue(test.get("p_adjusted")), fmt(test.get("effect_size"))]
        row.append(_ci(summary["cost"].get(str(s)), pct=True))
        rows.append(row)
    return rows


def _runs_caption(runs: int) -> str:
    return ("" if runs == 1 else f"; {runs} training runs per arm, run k seeded seed + k − 1 "
            "(the first run solid with its CIs, later runs dotted)")


def _did_caption(runs: int) -> str:
    if runs == 1:
        return ("paired bootstrap CI over prompts, p of a test of the mean corrected over "
                "steps, Cohen's d_z.")
    return (f"its mean over the {runs} runs and the prompts, with Student's t CI and p "
            "(variance over runs plus over prompts, runs − 1 degrees of freedom; "
            "p corrected over steps), and the effect in run-to-run SDs; faint points: each "
            "run's own mean.")


def _cost_caption(runs: int) -> str:
    return ("paired bootstrap over documents." if runs == 1 else
            f"the mean log ratio over the {runs} runs and the documents, t interval as above.")


def write_intervention_report(store: RunStore, summary: Json, target: Path | None = None
                              ) -> Path:
    """Render ``summary`` (``intervention.json``) to ``target``, by default
    ``RUN/intervention.html``."""
    target = target or store.root / "intervention.html"
    conf = summary.get("options", {}).get("confidence", 0.95)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>biasscope intervention: {escape(str(summary.get('arm')))}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>Intervention lab: {escape(str(summary.get('arm')))} against control</h1>",
             f'<section class="summary"><p>{escape(str(summary["sentence"]))}</p></section>']
    if thin := summary.get("thin_tails"):  # the level too fine for the resamples
        parts.append(f'<p class="missing">{escape(str(thin))}</p>')
    if summary.get("steps"):
        runs = len(run_arms(summary))
        effect = "d_z" if runs == 1 else "d (run SDs)"
        parts += [
            "<h2>Each arm over training</h2>",
            f'<p class="caption">Means over prompts (documents for perplexity) with '
            f"{level_of(conf)} bootstrap CIs; both arms start from the same weights and seed"
            f"{_runs_caption(runs)}.</p>",
            figure_html(arms_figure(summary), 0),
            "<h2>Difference in differences and cost</h2>",
            '<p class="caption">Per prompt (per pair for pro − anti): the intervention arm\'s '
            f"change since step 0 minus the control's; {_did_caption(runs)} Cost: "
            "held-out perplexity of the intervention relative to the control at the same "
            f"step, {_cost_caption(runs)}</p>",
            figure_html(did_figure(summary), 1),
            table(["step", "DiD male lean [CI]", "p adj.", effect, "DiD pro − anti [CI]",
                   "p adj.", effect, "perplexity cost [CI]"], did_rows(summary), numbers=True)]
        occupations = occupations_figure(summary)
        if occupations is not None:
            step = compared_step(summary)
            which = ("the recommended step" if summary.get("recommended") is not None
                     else "the last step")
            parts += [
                "<h2>Per occupation, each arm</h2>",
                f'<p class="caption">Male lean over each occupation\'s WinoBias prompts at '
                f"step 0 (open) and at step {step}, {which} (filled), with {level_of(conf)} "
                "Student's t CIs over the prompts (none where an occupation has one prompt); "
                "ordered by the control's lean at step 0.</p>",
                figure_html(occupations, 2)]
    parts += ["</body></html>", ""]
    write_bytes(target, "\n".join(parts).encode("utf-8"))
    return target
