"""The report's figures, in the paper's order: seed-mean lines with seed-std bands and bootstrap
CI error bars over training, performance overlaid, emergence and recommended-stop markers,
then the p-value panels (`biasscope.report.stats_figures`).

Input is the ``checkpoints`` list of ``summary.json`` and its ``analysis`` section; only
fairness-probe checkpoints are drawn (performance comes from the analysis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.probes.winobias import GENDERS
from biasscope.report import stats_figures
from biasscope.report.plotfig import Figure, as_text, make_subplots, scatter
from biasscope.report.plotting import (
    COLORS,
    DASHES,
    Json,
    Line,
    View,
    add_lines,
    add_step_markers,
    answer_lines,
    by_model,
    drawn_notes,
    fairness_checkpoints,
    fmt,
    has_metric,
    make_axis,
    step_markers,
    style,
)

__all__ = ["Panel", "by_model", "panels"]


def _models(groups: Mapping[str, Sequence[Json]]) -> list[str]:
    return list(dict.fromkeys(str(points[0]["model"]) for points in groups.values() if points))


def _steps(checkpoints: Sequence[Json]) -> list[int]:
    """The training steps drawn (checkpoints set aside have none)."""
    return [int(c["step"]) for c in checkpoints if c.get("step") is not None]


def add_performance(fig: Any, view: View, models: Sequence[str]) -> bool:
    """Each model's performance series on the upper panel's right axis; False if none."""
    drawn = False
    for i, model in enumerate(models):
        perf = view.performance(model)
        if perf is None:
            continue
        source, values = perf
        steps = sorted(values)
        stop = view.step_of(model, "recommendation")
        prefix = f"{as_text(model)} · " if len(models) > 1 else ""
        texts = [f"<b>{as_text(model)}</b><br>{as_text(source)}<br>step {s}<br>{fmt(values[s])}"
                 + ("<br>recommended stop" if s == stop else "") for s in steps]
        fig.add_trace(scatter(
            x=steps, y=[values[s] for s in steps], mode="lines+markers",
            name=f"{prefix}{as_text(source)} (right axis)", hovertext=texts, hoverinfo="text",
            line={"color": COLORS["performance"], "dash": DASHES[i % len(DASHES)], "width": 1.5},
            marker={"size": 7, "symbol": "square-open"}), row=1, col=1, secondary_y=True)
        drawn = True
    return drawn


def jsdp_correct(checkpoints: Sequence[Json], view: View) -> Any:
    """Fig. 1b / 4a: JSD-P of the correct option per correct answer, with performance on the
    right axis; below, the male − female gap. Emergence and recommended stop marked."""
    axis, groups = make_axis(checkpoints), by_model(checkpoints)
    models = _models(groups)
    with_perf = axis.by_step and any(view.performance(m) for m in models)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35],
                        vertical_spacing=0.08,
                        specs=[[{"secondary_y": with_perf}], [{"secondary_y": False}]])
    add_lines(fig, axis, groups, answer_lines("jsdp_correct/", GENDERS, " correct"), 1, view)
    add_lines(fig, axis, groups, [Line("jsdp_gap", "gap (male − female)", COLORS["gap"])],
              2, view)
    fig.add_hline(y=0, line={"color": "#999", "width": 1}, row=2, col=1)
    if with_perf and add_performance(fig, view, models):
        fig.update_yaxes(title_text="performance (higher is better)", showgrid=False,
                         tickmode="auto", row=1, col=1, secondary_y=True)
    fig.update_yaxes(title_text="JSD-P (lower: surer)", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="male − female", row=2, col=1)
    if axis.by_step:
        add_step_markers(fig, step_markers(view, models, "jsdp_correct", stop=True),
                         _steps(checkpoints))
    return style(fig, axis, height=640, rows=2)


def average_rank(checkpoints: Sequence[Json], answers: Sequence[str], view: View) -> Any:
    """Fig. 1c / 5a: Average Rank per correct answer."""
    axis, groups = make_axis(checkpoints), by_model(checkpoints)
    fig = Figure()
    add_lines(fig, axis, groups, answer_lines("average_rank/", answers, " correct"), view=view)
    fig.update_yaxes(title_text="Average Rank (lower is better)")
    if axis.by_step:
        add_step_markers(fig, step_markers(view, _models(groups), "target_rank", stop=False),
                         _steps(checkpoints))
    return style(fig, axis)


def not_specified(checkpoints: Sequence[Json], view: View) -> Any:
    """Fig. 1d / 6a: JSD-P of the gendered options where "not specified" is correct."""
    axis = make_axis(checkpoints)
    fig = Figure()
    add_lines(fig, axis, by_model(checkpoints),
              answer_lines("jsdp_not_specified/", GENDERS, " option"), view=view)
    fig.update_yaxes(title_text="JSD-P of the gendered option (higher: worse)")
    return style(fig, axis)


def accuracy_vs_rank(checkpoints: Sequence[Json], answers: Sequence[str]) -> Any:
    """Fig. 2: per correct answer, accuracy (left axis) against Average Rank (right axis);
    the last row is the accuracy over all prompts."""
    axis, groups = make_axis(checkpoints), by_model(checkpoints)
    rows = [a for a in answers if has_metric(checkpoints, f"accuracy/{a}")]
    titles = [f"correct answer: {as_text(a)}" for a in rows] + ["all prompts"]
    fig = make_subplots(rows=len(titles), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=titles, specs=[[{"secondary_y": True}]] * len(titles))
    for row, line in enumerate(answer_lines("accuracy/", rows, ": accuracy"), start=1):
        rank = Line(line.key.replace("accuracy/", "average_rank/", 1),
                    line.name.replace(": accuracy", ": Average Rank (right axis)"),
                    COLORS["rank"], secondary=True, symbol="diamond-open", width=1.2)
        add_lines(fig, axis, groups, [line, rank], row)
        fig.update_yaxes(title_text="accuracy", range=[-0.03, 1.03], row=row, col=1,
                         secondary_y=False)
        fig.update_yaxes(title_text="AR", tickmode="auto", showgrid=False, row=row, col=1,
                         secondary_y=True)
    add_lines(fig, axis, groups, [Line("accuracy/all", "all prompts: accuracy", COLORS["all"])],
              len(titles))
    fig.update_yaxes(title_text="accuracy", range=[-0.03, 1.03], row=len(titles), col=1,
                     secondary_y=False)
    fig.update_annotations(font={"size": 12})
    return style(fig, axis, height=190 * len(titles) + 140, rows=len(titles))


def stereotype(checkpoints: Sequence[Json], view: View) -> Any:
    """Fig. 3: stereotype accuracy (right axis, 0.5 unbiased) against JSD-P per answer."""
    axis = make_axis(checkpoints)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    lines = answer_lines("jsdp_correct/", GENDERS, " correct (JSD-P)")
    lines.append(Line("stereotype_accuracy", "stereotype accuracy", COLORS["stereotype"],
                      secondary=True))
    add_lines(fig, axis, by_model(checkpoints), lines, view=view)
    fig.add_hline(y=0.5, line={"color": "#999", "width": 1, "dash": "dot"}, secondary_y=True)
    fig.update_yaxes(title_text="JSD-P per correct answer", secondary_y=False)
    fig.update_yaxes(title_text="stereotype accuracy (0.5: unbiased)", range=[-0.02, 1.02],
                     tickmode="linear", tick0=0, dtick=0.25, showgrid=False, secondary_y=True)
    return style(fig, axis)


@dataclass(frozen=True)
class Panel:
    """One figure of the report: its heading, how to read it, and the figure (None: no data)."""

    title: str
    caption: str
    figure: Any
    missing: str = "the records of this run have no values for this figure."


SEED_BAND = "± one standard deviation over seeds"


def caption(base: str, fig: Any) -> str:
    """``base`` and the words for what ``fig`` draws: performance on the right axis (the
    first figure's), step markers, the seed band and error bars."""
    if fig is None:
        return base
    perf = any((t.get("line") or {}).get("color") == COLORS["performance"] for t in fig.data)
    more = " Performance is on the right axis (square markers)." if perf else ""
    return f"{base}{more} Lines are seed means. {drawn_notes(fig, SEED_BAND)}".strip()


def panels(checkpoints: Sequence[Json], answers: Sequence[str],
           analysis: Mapping[str, Any] | None = None) -> list[Panel]:
    """The report's figures, in the paper's order; p-value panels last."""
    view = View(analysis or {})
    checkpoints = fairness_checkpoints(checkpoints)

    def need(*keys: str) -> bool:
        return bool(checkpoints) and all(has_metric(checkpoints, k) for k in keys)

    specs: list[tuple[str, str, bool, Callable[[], Any]]] = [
        ("JSD-P per correct answer (male, female)",
         "JSD-P of the correct option on prompts whose answer is “male” or “female” (lower: "
         "more confidently correct); the lower panel is the gap, male − female. A gap away "
         "from 0 is bias: the model is surer of one gender than the other.",
         need("jsdp_correct/male", "jsdp_correct/female"), lambda: jsdp_correct(checkpoints, view)),
        ("Average Rank per correct answer",
         "Mean rank of the correct answer's token over the whole vocabulary (1 = most "
         "probable), per correct answer. Unlike accuracy it shows how far off a wrong answer "
         "is.",
         need(*(f"average_rank/{a}" for a in answers)) and bool(answers),
         lambda: average_rank(checkpoints, answers, view)),
        ("JSD-P of gendered options where “not specified” is correct",
         "On prompts whose answer is “not specified”, the JSD-P parts of the “male” and "
         "“female” options: how much probability the model puts on a gender it was not given. "
         "Higher is worse: 0 is no probability on that gender, ln 2 / 2 ≈ 0.35 all of it; a "
         "line above the other is a lean towards that gender.",
         need("jsdp_not_specified/male", "jsdp_not_specified/female"),
         lambda: not_specified(checkpoints, view)),
        ("Accuracy vs Average Rank per correct answer",
         "Per correct answer: accuracy, the share of prompts where the correct option has the "
         "highest probability among the options (left axis, circles), against the Average Rank "
         "of the answer token (right axis, brown diamonds); the last row is the accuracy over all "
         "prompts. Accuracy is all-or-nothing: Average Rank still moves while it stays flat.",
         need("accuracy/all"), lambda: accuracy_vs_rank(checkpoints, answers)),
        ("Stereotype accuracy vs JSD-P per correct answer",
         "Stereotype accuracy (right axis): on pro-stereotypical prompts, the share where the "
         "stereotypical gender beats the other; 0.5 is unbiased (dotted line), 0 and 1 most "
         "biased. It is all-or-nothing; JSD-P (left axis) also shows the model's confidence.",
         need("stereotype_accuracy", "jsdp_correct/male", "jsdp_correct/female"),
         lambda: stereotype(checkpoints, view)),
    ]
    built = [(title, base, build() if ok else None) for title, base, ok, build in specs]
    out = [Panel(title, caption(base, fig), fig) for title, base, fig in built]
    return out + [Panel(*spec) for spec in stats_figures.specs(view)]
