"""The report's section per probe over training steps (BBQ, Adult counterfactuals,
professional bias), from ``summary["analysis"]["probes"]`` (`biasscope.dynamics.summary.probes`)
and the probe's panels (``PROBES[name].panels``: its heading and figures, as data).

Per probe: its findings in plain sentences, then its curves over steps (one line per model,
the confidence interval as error bars, the range over seeds as a shaded band where a
checkpoint has several, dashed markers where the effect becomes significant for good and at
the recommended stop), then a table of the tested values. Every string from data is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from html import escape
from typing import Any

from biasscope.core.numbers import ci_cell, ci_decimals, level_of, num, p_is, pvalue, with_ci
from biasscope.probes import PROBES
from biasscope.probes.facets import Absent, Panel
from biasscope.report import group_panels, wordings
from biasscope.report.axis import slots
from biasscope.report.plotfig import Figure, as_text, scatter
from biasscope.report.plotting import (
    COLORS,
    DASHES,
    FALLBACK_COLORS,
    Axis,
    Json,
    add_step_markers,
    drawn_notes,
    effect,
    finite,
    revision_label,
    style,
)
from biasscope.report.tables import table


def panels(probe: str) -> tuple[str, tuple[Panel, ...], str | None]:
    """The probe's section over steps as it gives it (``PROBES[probe].panels``): its heading,
    its figures, and why it has none (None when it has)."""
    info = PROBES.get(probe)
    if info is None:
        return f"{probe} over training steps", (), f"{probe} is not a registered probe"
    if isinstance(info.panels, Absent):
        return f"{probe} over training steps", (), info.panels.reason
    return info.panels.title, info.panels.figures, None


def values_of(panel: Panel, model: Json) -> list[str]:
    """The values a panel draws for one model: its names, and for ``"<value>:*"`` every
    per-group value of that name a checkpoint has."""
    keys: list[str] = []
    for value in panel.values:
        keys += _categories(model, value[:-2]) if value.endswith(":*") else [value]
    return keys


def _categories(model: Json, prefix: str) -> list[str]:
    keys = {k for c in model["checkpoints"] for k in c["values"] if k.startswith(f"{prefix}:")}
    return sorted(keys)


def _label(key: str, names: Json) -> str:
    if ":" in key:
        return as_text(key.split(":", 1)[1])
    return as_text(str(names.get(key, key)))


def _color(i: int, key: str) -> str:
    named = {"s_dis": COLORS["male"], "s_amb": COLORS["female"], "flip_rate": COLORS["gap"],
             "preference": COLORS["gap"]}
    palette = (COLORS["male"], COLORS["female"], COLORS["all"], COLORS["gap"], *FALLBACK_COLORS)
    return named.get(key, palette[i % len(palette)])


def _no_same(key: str) -> None:
    """`with_ci`'s ``same`` of an unregistered probe's values: none, so "CI x to x"."""


def _hover(model: str, label: str, step: int | str, v: Json, same: str | None = None) -> str:
    """``step``: the step, or (text) where a checkpoint without one is from; ``same``:
    `with_ci`'s, as the sentences give the value (`ProbeInfo.same_of`)."""
    value = with_ci(v.get("estimate"), v.get("low"), v.get("high"), v.get("confidence", 0.95),
                    extra=f"n = {v.get('n')}", same=same)
    where = f"step {step}" if isinstance(step, int) else step
    text = f"<b>{as_text(model)}</b><br>{label}<br>{where}<br>{value}"
    if "p_value" in v:
        text += (f"<br>{p_is(v.get('p_value'))}, adjusted {pvalue(v.get('p_adjusted'))}, "
                 f"effect size {effect(v.get('effect_size'))}")
    if int(v.get("seeds", 1)) > 1:
        places = ci_decimals(v.get("low"), v.get("high"))
        text += (f"<br>{v['seeds']} seeds: {num(v.get('seed_low'), places)} to "
                 f"{num(v.get('seed_high'), places)}")
    return text


def add_value(fig: Figure, model: str, result: Json, key: str, label: str, color: str,
              dash: str, show_model: bool, same: str | None = None) -> bool:
    """One value's line over the model's steps; False when no checkpoint has it. ``same``:
    `_hover`'s."""
    points = [(int(c["step"]), c["values"][key]) for c in result["checkpoints"]
              if key in c["values"] and finite(c["values"][key].get("estimate"))]
    if not points:
        return False
    xs = [s for s, _ in points]
    ys = [float(v["estimate"]) for _, v in points]
    name = f"{as_text(model)} · {label}" if show_model else label
    group = f"{model}/{key}"
    if any(int(v.get("seeds", 1)) > 1 for _, v in points):
        lo = [float(v["seed_low"]) if finite(v.get("seed_low")) else y
              for (_, v), y in zip(points, ys, strict=True)]
        hi = [float(v["seed_high"]) if finite(v.get("seed_high")) else y
              for (_, v), y in zip(points, ys, strict=True)]
        fig.add_trace(scatter(x=xs + xs[::-1], y=hi + lo[::-1], mode="lines", fill="toself",
                              fillcolor=color, opacity=0.15, line={"width": 0},
                              hoverinfo="skip", showlegend=False, legendgroup=group,
                              name=f"{name} seed range"))
    errors = {"type": "data", "symmetric": False, "color": color, "thickness": 1.2, "width": 5,
              "array": [max(float(v["high"]) - y, 0.0) if finite(v.get("high")) else None
                        for (_, v), y in zip(points, ys, strict=True)],
              "arrayminus": [max(y - float(v["low"]), 0.0) if finite(v.get("low")) else None
                             for (_, v), y in zip(points, ys, strict=True)]}
    fig.add_trace(scatter(
        x=xs, y=ys, mode="lines+markers", name=name, legendgroup=group, error_y=errors,
        line={"color": color, "dash": dash, "width": 2}, marker={"size": 6},
        hovertext=[_hover(model, label, s, v, same) for s, v in points], hoverinfo="text"))
    return True


def add_aside(fig: Figure, entry: Json, key: str, label: str, color: str, x: float,
              show_model: bool, same: str | None = None) -> None:
    """One value of a checkpoint without a training step (``section["aside"]``): a marker
    with its CI in its slot past the steps, joined to no line. ``same``: `_hover`'s."""
    v = (entry.get("values") or {}).get(key)
    if not isinstance(v, Mapping) or not finite(v.get("estimate")):
        return
    y = float(v["estimate"])
    model, where = str(entry["model"]), revision_label(entry.get("revision"))
    fig.add_trace(scatter(
        x=[x], y=[y], mode="markers", legendgroup=f"{model}/{key}", showlegend=False,
        name=f"{as_text(model)} · {label} ({as_text(where)})" if show_model
        else f"{label} ({as_text(where)})",
        error_y={"type": "data", "symmetric": False, "color": color, "thickness": 1.2,
                 "width": 5, "array": [max(float(v["high"]) - y, 0.0)
                                       if finite(v.get("high")) else None],
                 "arrayminus": [max(y - float(v["low"]), 0.0) if finite(v.get("low"))
                                else None]},
        marker={"size": 8, "color": color, "symbol": "diamond"},
        hovertext=[_hover(model, label, as_text(where), v, same)], hoverinfo="text"))


def figure(section: Json, keys_of: Callable[[Json], list[str]],
           same_of: Callable[[str], str | None] = _no_same) -> Figure | None:
    """The figure of the values ``keys_of`` names, for every model, with emergence and stop
    markers of the values drawn; None when nothing can be drawn. ``same_of``: `with_ci`'s
    ``same`` per value (the probe's `ProbeInfo.same_of`)."""
    models: Mapping[str, Json] = section.get("models", {})
    names = section.get("names", {})
    fig, drawn, steps = Figure(), False, set[int]()
    markers: list[tuple[str, int, str]] = []
    several = len({*models, *(a.get("model") for a in section.get("aside") or [])}) > 1
    for m, (model, result) in enumerate(sorted(models.items())):
        suffix = f" ({as_text(model)})" if len(models) > 1 else ""
        for i, key in enumerate(keys_of(result)):
            label = _label(key, names)
            if add_value(fig, model, result, key, label, _color(i, key),
                         DASHES[m % len(DASHES)], several, same_of(key)):
                drawn = True
                steps.update(int(s) for s in result["steps"])
                step = (result.get("emergence") or {}).get(key)
                if step is not None and ":" not in key:
                    markers.append((f"{label} significant from step {step}{suffix}",
                                    int(step), COLORS["emergence"]))
        rec = result.get("recommendation")
        if rec and rec.get("value") in keys_of(result):
            markers.append((f"recommended stop: step {rec['step']}{suffix}", int(rec["step"]),
                            COLORS["stop"]))
    if not drawn:
        return None
    axis = _aside(fig, section, keys_of, steps, several, same_of)
    add_step_markers(fig, markers, sorted(steps))
    fig.add_hline(y=0, line={"color": "#bbb", "width": 1})
    style(fig, axis, height=400)
    return fig


def _aside(fig: Figure, section: Json, keys_of: Callable[[Json], list[str]], steps: set[int],
           show_model: bool, same_of: Callable[[str], str | None]) -> Axis:
    """The checkpoints without a training step, each in its slot past the steps (`slots`),
    and the axis that names them."""
    aside = [a for a in section.get("aside") or [] if isinstance(a, Mapping)]
    names = section.get("names", {})
    labels = list(dict.fromkeys(as_text(str(a.get("revision") or "main")) for a in aside))
    span = (float(min(steps)), float(max(steps)))
    axis = Axis(by_step=True, aside=slots(*span, labels), steps=span)
    for entry in aside:
        x = dict(axis.aside)[as_text(str(entry.get("revision") or "main"))]
        model = (section.get("models") or {}).get(entry["model"]) or {
            "checkpoints": [{"values": entry.get("values") or {}}]}
        for i, key in enumerate(keys_of(model)):
            add_aside(fig, entry, key, _label(key, names), _color(i, key), x, show_model,
                      same_of(key))
    return axis


def _tested(section: Json, same_of: Callable[[str], str | None] = _no_same
            ) -> list[tuple[str, str, list[list[Any]]]]:
    """(model, value's name, rows) per model and tested value: the value's name once, above
    its table, not in every row; the checkpoints with a step, then those aside by name (in
    the same family of tests: `adjust_over_checkpoints`). ``same_of``: `figure`'s, so a
    bootstrapped interval of no width is said in words, not "1 to 1"."""
    out = []
    names = section.get("names", {})
    models = section.get("models", {})
    aside: dict[str, list[Json]] = {}
    for a in section.get("aside") or []:
        if isinstance(a, Mapping):
            aside.setdefault(str(a.get("model")), []).append(
                {"step": revision_label(a.get("revision")), "values": a.get("values") or {}})
    for model in sorted({*models, *aside}):
        checkpoints = [*(models.get(model) or {}).get("checkpoints", []), *aside.get(model, [])]
        for key in section.get("headline", []):
            rows = []
            for c in checkpoints:
                v = c["values"].get(key)
                if v is None:
                    continue
                places = ci_decimals(v.get("low"), v.get("high"))
                rows.append([c["step"], num(v.get("estimate"), places),
                             ci_cell(v.get("low"), v.get("high"), places, same_of(key)),
                             pvalue(v.get("p_value")), pvalue(v.get("p_adjusted")),
                             effect(v.get("effect_size")),
                             "yes" if v.get("significant") else "no", v.get("seeds", 1)])
            if rows:
                out.append((str(model), str(names.get(key, key)), rows))
    return out


def tests_html(section: Json, correction: str, alpha: float,
               same_of: Callable[[str], str | None] = _no_same, confidence: float = 0.95
               ) -> list[str]:
    """The tests over steps: a table per model and value, the value named above it, its CIs
    at ``confidence``; ``same_of``: `_tested`'s."""
    tested = _tested(section, same_of)
    several = len({model for model, _, _ in tested}) > 1
    parts = [f"<h3>Tests over steps ({escape(correction)}-corrected over each model's "
             f"checkpoints, α = {alpha:g})</h3>"]
    for model, name, rows in tested:
        label = f"{escape(model)}: {escape(name)}" if several else escape(name)
        parts.append(f'<p class="caption">{label[:1].upper()}{label[1:]}</p>')
        first = "step" if all(isinstance(r[0], int) for r in rows) else "checkpoint"
        parts.append(table([first, "estimate", f"{level_of(confidence)} CI", "p", "p adjusted",
                            "effect size r", "significant", "seeds"], rows, numbers=True))
    return parts


def section_html(probes: Json, figure_html: Callable[[Any, int], str], first: int,
                 correction: str, alpha: float, confidence: float = 0.95) -> str:
    """Every audit probe's section, its intervals at the run's ``confidence`` (as its values
    were computed, `probe_steps`); figures numbered from ``first`` (plotly.js goes with
    figure 0, so pass the number of figures drawn before)."""
    parts, index = [], first
    for probe, section in probes.items():
        heading, figures, none = panels(probe)
        info = PROBES.get(probe)
        same_of = partial(info.same_of, confidence=confidence) if info is not None else _no_same
        parts.append(f"<h2>{escape(heading)}</h2>")
        sentences: Sequence[str] = section.get("sentences", [])
        parts.append('<section class="summary">' + "".join(
            f"<p>{escape(str(s))}</p>" for s in sentences) + "</section>")
        if none is not None and section.get("models"):
            parts.append(f'<p class="missing">No figures: {escape(none)}.</p>')
        for panel in figures:
            title, caption = panel.title, panel.caption_at(confidence)
            fig = (group_panels.figure(section, panel, same_of) if panel.by == "group"
                   else figure(section, partial(values_of, panel), same_of))
            parts.append(f"<h3>{escape(title)}</h3>")
            if fig is None:
                parts.append(f'<p class="caption">{escape(caption)}</p>')
                parts.append('<p class="missing">Not available: no checkpoint has these '
                             "values.</p>")
                continue
            notes = drawn_notes(fig, band="the range over seeds", what="effect", bars=None)
            parts.append(f'<p class="caption">{escape(f"{caption} {notes}".rstrip())}</p>')
            parts.append(figure_html(fig, index))
            index += 1
        across, index = wordings.sweep_html(section, figure_html, index)
        parts += [across] if across else []
        parts += tests_html(section, correction, alpha, same_of, confidence)
    return "\n".join(parts)
