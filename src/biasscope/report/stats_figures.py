"""p-value panels (the paper's Figs. 4b, 5b, 6b): corrected and raw p per checkpoint on a log
axis, with the significance threshold, emergence markers and effect sizes in the hover text.
p is drawn as computed, however small: the axis reaches it. Only a p of 0 (below the
smallest double, where the test's normal tail underflows) is drawn at `ZERO_AT`, and the
caption then says so.

Input is ``summary["analysis"]`` (`biasscope.dynamics.summary.build`), through `plotting.View`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from biasscope.core.numbers import p_is
from biasscope.report.plotfig import Figure, as_text, scatter
from biasscope.report.plotting import (
    COLORS,
    DASHES,
    FALLBACK_COLORS,
    Axis,
    View,
    add_step_markers,
    drawn_notes,
    effect,
    finite,
    fmt,
    step_markers,
    style,
)
from biasscope.report.tables import gap_test_words

ZERO_AT = 1e-308  # where a p of 0 is drawn: a log axis cannot show 0
Row = Mapping[str, Any]
Groups = tuple[tuple[str, str], tuple[str, str]]
GENDER_GROUPS: Groups = (("male", "male"), ("female", "female"))


def _p(value: Any) -> float:
    return max(float(value), ZERO_AT)


def has_zero_p(rows: Sequence[Row]) -> bool:
    """Whether a drawn p (raw or adjusted) is 0, so drawn at `ZERO_AT`."""
    return any(finite(r.get(k)) and float(r[k]) <= 0 for r in rows
               for k in ("p_value", "p_adjusted"))


def _drawable(rows: Sequence[Row]) -> list[Row]:
    """Rows with a step and a p-value, in step order."""
    kept = [r for r in rows if finite(r.get("step")) and finite(r.get("p_value"))]
    return sorted(kept, key=lambda r: float(r["step"]))


def stepless(view: View) -> bool:
    """Every model is a checkpoint without a training step (its position 0 is no step)."""
    models = view.models()
    return bool(models) and all(view.model(m).get("snapshot") for m in models)


def row_hover(title: str, row: Row, groups: Groups, view: View) -> str:
    """``groups``: (column suffix, label) of group 1 and group 2."""
    (a, label_a), (b, label_b) = groups
    verdict = "significant" if row.get("significant") else "not significant"
    where = "no training step" if stepless(view) else f"step {int(row['step'])}"
    return (f"{title}<br>{where}<br>"
            f"mean {as_text(label_a)} {fmt(row.get(f'mean_{a}'))} (n = {fmt(row.get(f'n_{a}'))}),"
            f" {as_text(label_b)} {fmt(row.get(f'mean_{b}'))} (n = {fmt(row.get(f'n_{b}'))})<br>"
            f"gap {fmt(row.get('gap'))}<br>{_test(row)}{p_is(row.get('p_value'))}, "
            f"{p_is(row.get('p_adjusted'), as_text(view.correction) + '-adjusted p')}<br>"
            f"effect size r = {effect(row.get('effect_size'))}<br>"
            f"{verdict} at α = {view.alpha:g}")


def _test(row: Row) -> str:
    """The test a row names (``test``, from 2026-11-29: Mann-Whitney or signed rank over
    pairs), before its p; nothing for an older row."""
    return f"{as_text(str(row['test']))}: " if row.get("test") else ""


def add_pvalues(fig: Any, rows: Sequence[Row], name: str, title: str, color: str, dash: str,
                groups: Groups, view: View, category: str) -> None:
    """Adjusted p (markers filled where significant) and raw p (dotted) over steps; where no
    model has training steps, at ``category`` on a categorical axis instead."""
    by_model = stepless(view)

    def x(row: Row) -> int | str:
        return category if by_model else int(row["step"])

    xs = [x(r) for r in rows]
    texts = [row_hover(title, r, groups, view) for r in rows]
    adjusted = [r for r in rows if finite(r.get("p_adjusted"))]
    fig.add_trace(scatter(
        x=[x(r) for r in adjusted], y=[_p(r["p_adjusted"]) for r in adjusted],
        mode="lines+markers", name=f"{name}{as_text(view.correction)}-adjusted p", legendgroup=name,
        line={"color": color, "dash": dash, "width": 2},
        marker={"size": 8, "symbol": ["circle" if r.get("significant") else "circle-open"
                                      for r in adjusted]},
        hovertext=[row_hover(title, r, groups, view) for r in adjusted], hoverinfo="text"))
    fig.add_trace(scatter(
        x=xs, y=[_p(r["p_value"]) for r in rows], mode="lines+markers", name=f"{name}raw p",
        legendgroup=name, line={"color": color, "dash": "dot", "width": 1},
        marker={"size": 4}, opacity=0.7, hovertext=texts, hoverinfo="text"))


def finish(fig: Any, view: View, categories: Sequence[str]) -> Any:
    fig.add_hline(y=view.alpha, line={"color": COLORS["alpha"], "width": 1.2, "dash": "dash"})
    # Annotations on a log axis take log10 of the value (add_hline's own label does not).
    fig.add_annotation(x=0, xref="x domain", y=math.log10(view.alpha), yref="y", xanchor="left",
                       yanchor="top", text=f"α = {view.alpha:g}", showarrow=False,
                       font={"color": COLORS["alpha"], "size": 11})
    lowest = min((y for t in fig.data for y in t.get("y", []) if finite(y)), default=0.1)
    # From p = 1 to a decade below the smallest p (or α): a lone p near α still sits between
    # labelled ticks, and the tiniest is on the axis, not under a floor.
    bottom = math.floor(math.log10(min(lowest, view.alpha))) - 1
    fig.update_yaxes(type="log", exponentformat="power", dtick=max(1, math.ceil(-bottom / 5)),
                     range=[bottom, 0.3], title_text="p-value (log scale; filled: significant)")
    axis = Axis(False, tuple(categories)) if stepless(view) else Axis(by_step=True)
    return style(fig, axis, height=420)


def gap_pvalues(view: View, value: str) -> Any:
    """Per model: male vs female test of ``value`` at each checkpoint (None: no tests)."""
    fig, drawn, steps = Figure(), [], []
    models = view.models()
    for i, model in enumerate(models):
        rows = _drawable(view.tests(model, value))
        if not rows:
            continue
        color = COLORS["gap"] if i == 0 else FALLBACK_COLORS[(i - 1) % len(FALLBACK_COLORS)]
        name = f"{as_text(model)} · " if len(models) > 1 else ""
        add_pvalues(fig, rows, name, f"<b>{as_text(model)}</b>: male vs female", color,
                    DASHES[i % len(DASHES)], GENDER_GROUPS, view, as_text(model))
        drawn.append(model)
        steps += [int(r["step"]) for r in rows]
    if not drawn:
        return None
    if not stepless(view):
        add_step_markers(fig, step_markers(view, drawn, value, stop=False), steps)
    return finish(fig, view, [as_text(m) for m in drawn])


def comparison_pvalues(view: View) -> Any:
    """Per pair of models and gendered option: model A vs model B at each shared step."""
    comparisons = [c for c in view.get("comparisons", []) if isinstance(c, Mapping)]
    fig, drawn = Figure(), []
    pairs = list(dict.fromkeys((str(c.get("model_a")), str(c.get("model_b")))
                               for c in comparisons))
    for comp in comparisons:
        rows = _drawable([r for r in comp.get("rows") or [] if isinstance(r, Mapping)])
        if not rows:
            continue
        a, b = str(comp.get("model_a")), str(comp.get("model_b"))
        option = str(comp.get("value", "")).removeprefix("jsdp:")
        pair = f"{as_text(a)} vs {as_text(b)}"
        title = (f"<b>{pair}</b><br>JSD-P of the “{as_text(option)}” option where "
                 f"“{as_text(str(comp.get('answer', 'not specified')))}” is correct")
        add_pvalues(fig, rows, f"{pair} · {as_text(option)} option · ", title,
                    COLORS.get(option, FALLBACK_COLORS[0]),
                    DASHES[pairs.index((a, b)) % len(DASHES)], (("a", a), ("b", b)), view, pair)
        drawn.append(pair)
    return finish(fig, view, list(dict.fromkeys(drawn))) if drawn else None


def _rows_of(view: View, value: str | None) -> list[Row]:
    """The rows a panel draws: the gap tests of ``value``, or (None) the comparisons'."""
    if value is not None:
        return [r for m in view.models() for r in _drawable(view.tests(m, value))]
    return [r for c in view.get("comparisons", []) if isinstance(c, Mapping)
            for r in _drawable([r for r in c.get("rows") or [] if isinstance(r, Mapping)])]


def _caption(base: str, fig: Any, rows: Sequence[Row]) -> str:
    """``base``, then what the figure draws beyond it: step markers, p-values of 0."""
    if fig is None:
        return base
    notes = drawn_notes(fig, band="", bars=None)
    if has_zero_p(rows):
        notes += (f" A p of 0 (smaller than a double holds) is drawn at {ZERO_AT:g}, the "
                  "bottom of the axis.")
    return f"{base} {notes}".rstrip()


def specs(view: View) -> list[tuple[str, str, Any, str]]:
    """(title, caption, figure or None, why it is missing) of each p-value panel."""
    method = (f"{{test}} on per-prompt values (averaged over seeds); p-values "
              f"{view.correction}-corrected over the checkpoints of each "
              f"{{family}}. Solid: corrected p (filled markers: below α = {view.alpha:g}, the "
              "dashed horizontal line); dotted: raw p; each as computed, on a log axis that "
              "reaches the smallest. Hover for means, gap and effect size (rank-biserial r).")
    gaps = method.replace("{family}", "model").replace("{test}", gap_test_words(view))
    no_tests = ("the analysis has no tests to draw (it needs WinoBias records with training "
                "steps).")
    out = []
    for title, base, value, missing in (
        ("Significance of the JSD-P gap per checkpoint",
         "Is the model surer of “male” than of “female”? At each checkpoint, the JSD-P of the "
         "correct option on “male” prompts against “female” prompts: "
         + gaps, "jsdp_correct", no_tests),
        ("Significance of the Average Rank gap per checkpoint",
         "At each checkpoint, the Average Rank of the answer token on “male” prompts against "
         "“female” prompts: " + gaps, "target_rank", no_tests),
        ("Significance of model differences where “not specified” is correct",
         "Per pair of models and gendered option, at each step both models have: the JSD-P of "
         "that option on prompts whose answer is “not specified” (higher: more probability on "
         "a gender the sentence does not give), model A against model B: "
         + method.replace("{family}", "comparison").replace("{test}", "two-sided Mann-Whitney U"),
         None,
         "the run has fewer than two models with WinoBias records at a shared step."),
    ):
        fig = gap_pvalues(view, value) if value is not None else comparison_pvalues(view)
        out.append((title, _caption(base, fig, _rows_of(view, value)), fig, missing))
    return out
