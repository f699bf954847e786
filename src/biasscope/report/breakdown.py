"""The report's "where is the bias" figures, from ``analysis.models.<m>.breakdown`` and
``analysis.occupation_statistics``: pro against anti over steps (or as bars for one checkpoint),
the occupations ranked by gender preference, an occupation × step heatmap for sweeps, the
preference against the share of women in each occupation, and the snapshot view's per-answer
bars. Every string from data is escaped before it reaches plotly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biasscope.core.numbers import ci_decimals, num, resampled_ci
from biasscope.report.plotfig import RDBU, Figure, as_text, bar, make_subplots, scatter, trace
from biasscope.report.plotting import (
    COLORS,
    FALLBACK_COLORS,
    Axis,
    Json,
    View,
    by_model,
    effect,
    finite,
    fmt,
    style,
)

SPLIT_COLORS = {"pro": "#2a9d8f", "anti": "#e76f51"}
PREFERENCE = "not-referenced/lp_diff"


def steps_of(view: View, model: str) -> list[int]:
    breakdown = view.model(model).get("breakdown") or {}
    return sorted(int(s) for s in breakdown) if isinstance(breakdown, Mapping) else []


def at(view: View, model: str, step: int) -> Mapping[str, Any]:
    entry = (view.model(model).get("breakdown") or {}).get(str(step))
    return entry if isinstance(entry, Mapping) else {}


def is_snapshot(view: View) -> bool:
    """Every analysed model has exactly one checkpoint: bars, not lines over steps. A
    checkpoint reported aside (no training step, beside others: ``analysis.aside``) is one
    more, so a model with one step and a ``final`` keeps the lines, each point named."""
    models = [m for m in view.models() if steps_of(view, m)]
    return (bool(models) and all(len(steps_of(view, m)) == 1 for m in models)
            and not view.get("aside"))


def _err(entry: Any) -> tuple[float | None, float | None, float | None]:
    """Estimate and the distances to its CI bounds (None where unknown)."""
    if not isinstance(entry, Mapping) or not finite(entry.get("estimate")):
        return None, None, None
    est = float(entry["estimate"])
    low, high = entry.get("low"), entry.get("high")
    if finite(low) and finite(high):
        return est, float(high) - est, est - float(low)
    return est, None, None


def _bars(fig: Any, x: list[str], entries: list[Any], name: str, color: str, row: int = 1,
          horizontal: bool = False, col: int = 1, legend: bool = True,
          labels: list[str] | None = None) -> None:
    values, plus, minus = zip(*(_err(e) for e in entries), strict=True) if entries else ((), (),
                                                                                        ())
    error = {"type": "data", "array": list(plus), "arrayminus": list(minus), "visible": True}
    kw: dict[str, Any] = ({"y": x, "x": list(values), "orientation": "h", "error_x": error}
                          if horizontal else {"x": x, "y": list(values), "error_y": error})
    fig.add_trace(bar(name=name, marker_color=color, showlegend=legend, legendgroup=name,
                      text=labels, **kw), row=row, col=col)


def pro_anti(view: View) -> Any | None:
    """Accuracy on pro and anti referenced prompts with CIs, and pro − anti below it; per
    model a line over steps, or grouped bars when each model has one checkpoint."""
    models = [m for m in view.models() if steps_of(view, m)]
    if not models:
        return None
    paired = has_pairs(view)
    fig = (make_subplots(rows=2, cols=1, row_heights=[0.6, 0.4], vertical_spacing=0.12,
                         subplot_titles=["accuracy on referenced prompts",
                                         "pro − anti (paired)"]) if paired
           else make_subplots(rows=1, cols=1))
    if is_snapshot(view):
        names = [as_text(m) for m in models]
        for split in ("pro", "anti"):
            _bars(fig, names, [at(view, m, steps_of(view, m)[0]).get("pro_anti", {})
                               .get(f"accuracy/{split}") for m in models],
                  f"{split}-stereotypical", SPLIT_COLORS[split])
        if paired:
            _bars(fig, names, [at(view, m, steps_of(view, m)[0]).get("pro_anti", {})
                               .get("accuracy/difference") for m in models],
                  "pro − anti", COLORS["gap"], row=2)
        fig.update_layout(barmode="group")
        fig.update_xaxes(type="category")
        axis = Axis(by_step=False, categories=tuple(names))
    else:
        axis = Axis(by_step=True)
        for i, model in enumerate(models):
            steps = steps_of(view, model)
            prefix = f"{as_text(model)} · " if len(models) > 1 else ""
            dash = ("solid", "dash", "dot")[i % 3]
            for key, name, color, row in (
                    ("accuracy/pro", "pro-stereotypical", SPLIT_COLORS["pro"], 1),
                    ("accuracy/anti", "anti-stereotypical", SPLIT_COLORS["anti"], 1),
                    ("accuracy/difference", "pro − anti", COLORS["gap"], 2))[:3 if paired else 2]:
                entries = [at(view, model, s).get("pro_anti", {}).get(key) for s in steps]
                values, plus, minus = zip(*(_err(e) for e in entries), strict=True)
                fig.add_trace(scatter(
                    x=steps, y=list(values), mode="lines+markers", name=prefix + name,
                    line={"color": color, "dash": dash},
                    error_y={"type": "data", "array": list(plus), "arrayminus": list(minus)}),
                    row=row, col=1)
    fig.update_yaxes(title_text="accuracy", row=1, col=1)
    if not paired:
        return style(fig, axis, height=400)
    fig.add_hline(y=0, line={"color": "#999", "width": 1}, row=2, col=1)
    fig.update_yaxes(title_text="pro − anti", row=2, col=1)
    return style(fig, axis, height=600, rows=2)


def has_pairs(view: View) -> bool:
    """Whether any checkpoint has a paired pro − anti difference (sentences without pro/anti
    pairs, as the demo's were before they paired, have none)."""
    return any(_err(at(view, m, s).get("pro_anti", {}).get("accuracy/difference"))[0]
               is not None for m in view.models() for s in steps_of(view, m))


def last_occupations(view: View, model: str) -> tuple[int, list[Mapping[str, Any]]] | None:
    steps = steps_of(view, model)
    if not steps:
        return None
    rows = at(view, model, steps[-1]).get("occupations") or []
    return steps[-1], [r for r in rows if isinstance(r, Mapping)]


def occupations_ranked(view: View) -> Any | None:
    """Per occupation, the preference on not-referenced prompts at each model's last
    checkpoint with its CI, occupations ordered by the first model's value."""
    models = [m for m in view.models() if last_occupations(view, m)]
    if not models:
        return None
    first = last_occupations(view, models[0])
    assert first is not None
    order = sorted((r for r in first[1] if _err(r.get(PREFERENCE))[0] is not None),
                   key=lambda r: _err(r.get(PREFERENCE))[0] or 0.0)
    names = [str(r["occupation"]) for r in order]
    fig = make_subplots(rows=1, cols=1)
    for i, model in enumerate(models):
        found = last_occupations(view, model)
        assert found is not None
        step, rows = found
        by_name = {str(r["occupation"]): r for r in rows}
        label = as_text(model) + ("" if view.model(model).get("snapshot") else f" (step {step})")
        _bars(fig, [as_text(n) for n in names], [by_name.get(n, {}).get(PREFERENCE)
                                                for n in names],
              label, FALLBACK_COLORS[i % len(FALLBACK_COLORS)] if i else COLORS["male"],
              horizontal=True)
    fig.add_vline(x=0, line={"color": "#999", "width": 1})
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="log P(male) − log P(female), not-referenced prompts "
                                "(positive: leans male)")
    style(fig, Axis(by_step=True), height=max(440, 22 * len(names) * len(models) + 120))
    fig.update_xaxes(title_text="log P(male) − log P(female) where the sentence gives no gender")
    fig.update_yaxes(type="category")
    return fig


def occupation_heatmap(view: View, model: str) -> Any | None:
    """Occupation × step heatmap of the not-referenced preference (sweeps only)."""
    steps = steps_of(view, model)
    if len(steps) < 2:
        return None
    table: dict[str, dict[int, float | None]] = {}
    for step in steps:
        for row in at(view, model, step).get("occupations") or []:
            table.setdefault(str(row["occupation"]), {})[step] = _err(row.get(PREFERENCE))[0]
    names = sorted(table, key=lambda n: table[n].get(steps[-1]) or 0.0)
    z = [[table[n].get(s) for s in steps] for n in names]
    top = max((abs(v) for r in z for v in r if v is not None), default=1.0) or 1.0
    fig = Figure(trace("heatmap", z=z, x=[str(s) for s in steps], y=[as_text(n) for n in names],
                       colorscale=[[k / 10, c] for k, c in enumerate(RDBU)], zmid=0,
                       zmin=-top, zmax=top, colorbar={"title": {"text": "male − female"}}))
    style(fig, Axis(by_step=False, categories=tuple(str(s) for s in steps)),
          height=max(440, 18 * len(names) + 120))
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(type="category")
    return fig


#: Where a point's name may go (plotly's textposition) and its box there, in pixels from the
#: marker (x right, y down), for a name ``w`` wide and ``h`` high: tried in this order.
PLACES = (("top center", lambda w, h: (-w / 2, -h - 5, w / 2, -5)),
          ("bottom center", lambda w, h: (-w / 2, 5, w / 2, h + 5)),
          ("middle right", lambda w, h: (7, -h / 2, w + 7, h / 2)),
          ("middle left", lambda w, h: (-w - 7, -h / 2, -7, h / 2)),
          ("top right", lambda w, h: (2, -h - 3, w + 2, -3)),
          ("top left", lambda w, h: (-w - 2, -h - 3, -2, -3)),
          ("bottom right", lambda w, h: (2, 3, w + 2, h + 3)),
          ("bottom left", lambda w, h: (-w - 2, 3, -2, h + 3)))
#: The plot area the names are placed for: smaller than at 1280 px, so that they stay apart
#: in any window at least that wide; a name's box at 12 px type.
PLOT_W, PLOT_H, CHAR_W, LINE_H = 860.0, 330.0, 7.2, 15.0

Box = tuple[float, float, float, float]


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_names(points: Sequence[tuple[float, float, str]], x_range: Sequence[float],
                y_range: Sequence[float]) -> list[str | None]:
    """Per point, where its name goes (a textposition) so that no two names, nor a name and
    a marker, overlap, nor a name leaves the plot; None where no place is free (the name is
    then in the hover text alone)."""
    def pixel(x: float, y: float) -> tuple[float, float]:
        return ((x - x_range[0]) / (x_range[1] - x_range[0]) * PLOT_W,
                (y_range[1] - y) / (y_range[1] - y_range[0]) * PLOT_H)

    at = [pixel(x, y) for x, y, _ in points]
    taken: list[Box] = [(px - 5, py - 5, px + 5, py + 5) for px, py in at]  # the markers
    out: list[str | None] = [None] * len(points)
    # Crowded points first: the fewer places they have, the sooner they should pick.
    order = sorted(range(len(points)), key=lambda i: -sum(
        1 for qx, qy in at if abs(qx - at[i][0]) < 80 and abs(qy - at[i][1]) < 30))
    for i in order:
        (px, py), width = at[i], CHAR_W * len(points[i][2])
        for name, offset in PLACES:
            dx0, dy0, dx1, dy1 = offset(width, LINE_H)
            box = (px + dx0, py + dy0, px + dx1, py + dy1)
            inside = box[0] >= 0 and box[2] <= PLOT_W and box[1] >= 0 and box[3] <= PLOT_H
            own = taken[i]
            if inside and not any(_overlaps(box, t) for t in taken if t is not own):
                out[i] = name
                taken.append(box)
                break
    return out


def _padded(values: Sequence[float], share: float = 0.08) -> list[float]:
    low, high = min(values), max(values)
    pad = (high - low) * share or 1.0
    return [low - pad, high + pad]


def _rho(rho: Mapping[str, Any], confidence: float) -> str:
    """Spearman's ρ to two decimals (as correlations are written), with its CI if any."""
    estimate = effect(rho.get("estimate"))
    if finite(rho.get("low")) and finite(rho.get("high")):
        return f"{estimate} ({resampled_ci(rho['low'], rho['high'], effect, confidence)})"
    return estimate


def versus_statistics(view: View) -> Any | None:
    """Preference at each model's last checkpoint against the share of women (BLS): a name
    beside each point where it fits without covering another, Spearman's ρ in the legend."""
    occ = view.get("occupation_statistics", {})
    shares = occ.get("bls_pct_female") if isinstance(occ, Mapping) else None
    if not isinstance(shares, Mapping) or not shares:
        return None
    drawn: list[tuple[str, int, list[tuple[float, float, str]]]] = []
    for model in view.models():
        found = last_occupations(view, model)
        if not found:
            continue
        step, rows = found
        found_points = [(float(shares[str(r["occupation"]).lower()]),
                         _err(r.get(PREFERENCE))[0], str(r["occupation"])) for r in rows
                        if str(r["occupation"]).lower() in shares]
        drawn.append((model, step, [(x, float(y), name) for x, y, name in found_points
                                    if y is not None]))
    every = [p for _, _, points in drawn for p in points]
    if not every:
        return None
    x_range = _padded([p[0] for p in every])
    y_range = _padded([p[1] for p in every] + [0.0])
    places = iter(place_names(every, x_range, y_range))
    fig = Figure()
    for i, (model, step, points) in enumerate(drawn):
        rho = (view.model(model).get("occupation_statistics") or {}).get("spearman") or {}
        where = [next(places) for _ in points]
        fig.add_trace(scatter(
            x=[p[0] for p in points], y=[p[1] for p in points], mode="markers+text",
            text=[as_text(p[2]) if w else "" for p, w in zip(points, where, strict=True)],
            textposition=[w or "top center" for w in where],
            hovertext=[f"<b>{as_text(p[2])}</b><br>{as_text(model)}<br>women {fmt(p[0])}%"
                       f"<br>preference {fmt(p[1])}" for p in points], hoverinfo="text",
            name=f"{as_text(model)} ("
                 + ("" if view.model(model).get("snapshot") else f"step {step}; ")
                 + f"Spearman ρ = {_rho(rho, view.confidence)})",
            marker={"color": FALLBACK_COLORS[i % len(FALLBACK_COLORS)] if i
                    else COLORS["male"], "size": 7}))
    fig.add_hline(y=0, line={"color": "#999", "width": 1})
    style(fig, Axis(by_step=True), height=520)
    fig.update_layout(showlegend=True)  # plotly hides a legend of one trace: ρ is in it
    fig.update_xaxes(title_text="women in the occupation, % (U.S. BLS, as published with "
                                "Winogender)", range=x_range)
    fig.update_yaxes(title_text="log P(male) − log P(female), not-referenced", range=y_range)
    return fig


def names_left_out(fig: Any) -> int:
    """How many points of the BLS figure show no name (no free place beside them)."""
    return sum(1 for t in fig.data for n in t.get("text", []) if not n)


# Two-line labels (<br>): on one line the longer ones were cut off under the axis.
SNAPSHOT = (("jsdp_correct/male", "JSD-P,<br>correct “male”"),
            ("jsdp_correct/female", "JSD-P,<br>correct “female”"),
            ("jsdp_not_specified/male", "JSD-P of “male”<br>where “not specified”"),
            ("jsdp_not_specified/female", "JSD-P of “female”<br>where “not specified”"))
STEREOTYPE = ("stereotype_accuracy", "stereotype accuracy (0.5 unbiased)")


def snapshot(checkpoints: Sequence[Json], view: View) -> Any | None:
    """One checkpoint per model: each per-answer JSD-P as a bar per model with its bootstrap
    CI over prompts; stereotype accuracy (another scale, no CI) in a panel of its own."""
    groups = by_model(checkpoints)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.8, 0.2], horizontal_spacing=0.08)
    drawn = False
    for i, (model, points) in enumerate(groups.items()):
        ckpt = points[-1]
        color = FALLBACK_COLORS[i % len(FALLBACK_COLORS)] if i else COLORS["male"]
        for col, metrics in ((1, SNAPSHOT), (2, (STEREOTYPE,))):
            names, entries = [], []
            for key, name in metrics:
                value = ckpt["mean"].get(key)
                if not finite(value):
                    continue
                ci = view.ci(ckpt, key)
                names.append(name)
                entries.append({"estimate": value, "low": ci[0] if ci else None,
                                "high": ci[1] if ci else None})
            if names:
                drawn = True
                _bars(fig, names, entries, as_text(model), color, col=col, legend=col == 1)
    if not drawn:
        return None
    fig.update_layout(barmode="group")
    style(fig, Axis(by_step=False, categories=tuple(n for _, n in SNAPSHOT)), height=480)
    fig.update_layout(margin={"b": 90}, legend={"y": -0.25})
    fig.update_xaxes(title_text="", tickangle=0, automargin=True)
    fig.update_yaxes(title_text="JSD-P (lower: more confidently correct)", row=1, col=1)
    fig.update_yaxes(range=[0, 1], row=1, col=2)
    fig.add_hline(y=0.5, line={"color": "#999", "dash": "dot"}, row=1, col=2)
    return fig


def _answers(checkpoints: Sequence[Json]) -> list[str]:
    """The correct answers with an accuracy, "male" and "female" first."""
    present = dict.fromkeys(k.split("/", 1)[1] for c in checkpoints for k in c["mean"]
                            if k.startswith("accuracy/") and k != "accuracy/all")
    return [a for a in ("male", "female") if a in present] + [
        a for a in present if a not in ("male", "female")]


def snapshot_accuracy(checkpoints: Sequence[Json], view: View) -> Any | None:
    """One checkpoint per model: the accuracy per correct answer as a bar per model, with
    its CI over prompts and its value on the bar (a gap here is what a JSD-P gap means)."""
    answers = _answers(checkpoints)
    names = {a: f"correct “{as_text(a)}”" for a in answers}
    fig = make_subplots(rows=1, cols=1)
    for i, (model, points) in enumerate(by_model(checkpoints).items()):
        ckpt = points[-1]
        shown = [a for a in answers if finite(ckpt["mean"].get(f"accuracy/{a}"))]
        entries = []
        for answer in shown:
            ci = view.ci(ckpt, f"accuracy/{answer}")
            entries.append({"estimate": ckpt["mean"][f"accuracy/{answer}"],
                            "low": ci[0] if ci else None, "high": ci[1] if ci else None})
        labels = [num(e["estimate"], ci_decimals(e["low"], e["high"])) for e in entries]
        _bars(fig, [names[a] for a in shown], entries, as_text(model),
              FALLBACK_COLORS[i % len(FALLBACK_COLORS)] if i else COLORS["male"],
              labels=labels)
    if not fig.data:
        return None
    fig.update_traces(texttemplate="%{text}", textposition="auto", insidetextanchor="start",
                      cliponaxis=False)
    fig.update_layout(barmode="group")
    style(fig, Axis(by_step=False, categories=tuple(names[a] for a in answers)), height=420)
    fig.update_xaxes(title_text="prompts whose correct answer is")
    fig.update_yaxes(title_text="accuracy", range=[0, 1.05])
    return fig
