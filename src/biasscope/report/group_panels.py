"""A probe's values per group side by side (``Panel(by="group")``): Winogender's 60
occupations as rows of one figure, each with its CI, at each model's last checkpoint (and for
a model without a training step, its one set of values), ordered by the key the panel names
(the occupation's share of women). Renders summary.json; computes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from biasscope.core.numbers import finite, num, pvalue, with_ci
from biasscope.probes.facets import Panel
from biasscope.report.plotfig import Figure, as_text, scatter
from biasscope.report.plotting import FALLBACK_COLORS, Json, effect, revision_label

PALETTE = ("#1f4e79", "#b03a2e", *FALLBACK_COLORS)
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x")


def last_values(section: Json) -> list[tuple[str, str, Json]]:
    """(model, where its values are from, the values): each model at its last step or, with
    none, its one set of values, then each checkpoint reported aside (no training step) by
    its revision, on its own."""
    out: list[tuple[str, str, Json]] = []
    for model, result in sorted(section.get("models", {}).items()):
        if result.get("checkpoints"):
            last = result["checkpoints"][-1]
            out.append((str(model), f"step {last['step']}", last["values"]))
    for model, values in sorted((section.get("stepless_values") or {}).items()):
        out.append((str(model), "", values))
    for entry in section.get("aside") or []:
        out.append((str(entry["model"]), revision_label(entry.get("revision")),
                    entry.get("values") or {}))
    return out


def rows(panel: Panel, values: Json) -> list[tuple[str, Json, str]]:
    """The groups the panel draws from one model's values, in the panel's order: each
    group's name, its value and the value's key."""
    prefixes = [v[:-2] for v in panel.values if v.endswith(":*")]
    found = [(k.split(":", 1)[1], v, k) for k, v in values.items()
             if k.split(":", 1)[0] in prefixes and isinstance(v, Mapping)]

    def key(row: tuple[str, Json, str]) -> tuple[float, str]:
        order = row[1].get(panel.order) if panel.order else None
        return (float(order) if finite(order) else float("inf"), row[0])

    return sorted(found, key=key)


def _label(name: str, value: Json, order: str | None) -> str:
    share = value.get(order) if order else None
    return as_text(f"{name} ({num(share, 0)}% women)" if order == "bls_pct_female"
                   and finite(share) else name)


def _hover(model: str, where: str, name: str, v: Json, same: str | None = None) -> str:
    """``same``: `with_ci`'s, as the sentences give the value (`ProbeInfo.same_of`)."""
    value = with_ci(v.get("estimate"), v.get("low"), v.get("high"), v.get("confidence", 0.95),
                    extra=f"n = {v.get('n')}", same=same)
    at = f" · {where}" if where else ""
    text = f"<b>{as_text(model)}</b>{at}<br>{as_text(name)}<br>{value}"
    if "p_occupations" in v:
        text += (f"<br>exact p {pvalue(v.get('p_exact'))}, Holm over occupations "
                 f"{pvalue(v.get('p_occupations'))}, effect size {effect(v.get('effect_size'))}")
    return text


def figure(section: Json, panel: Panel,
           same_of: Callable[[str], str | None] = lambda key: None) -> Figure | None:
    """The panel's groups as rows, one marker per model with its CI; None without any.
    ``same_of``: `with_ci`'s ``same`` per value's key (the probe's `ProbeInfo.same_of`)."""
    fig, labels, lows = Figure(), list[str](), list[float]()
    for i, (model, where, values) in enumerate(last_values(section)):
        found = [r for r in rows(panel, values) if finite(r[1].get("estimate"))]
        shown = [(n, v) for n, v, _ in found]
        if not shown:
            continue
        ys = [_label(n, v, panel.order) for n, v in shown]
        labels += [y for y in ys if y not in labels]
        lows += [float(v[k]) for _, v in shown for k in ("low", "high") if finite(v.get(k))]
        xs = [float(v["estimate"]) for _, v in shown]
        errors = {"type": "data", "symmetric": False,
                  "array": [max(float(v["high"]) - x, 0.0) if finite(v.get("high")) else None
                            for (_, v), x in zip(shown, xs, strict=True)],
                  "arrayminus": [max(x - float(v["low"]), 0.0) if finite(v.get("low"))
                                 else None for (_, v), x in zip(shown, xs, strict=True)]}
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(scatter(
            x=xs, y=ys, mode="markers", error_x={**errors, "color": color},
            name=as_text(f"{model} ({where})" if where else model),
            marker={"size": 7, "color": color, "symbol": SYMBOLS[i % len(SYMBOLS)]},
            hovertext=[_hover(model, where, n, v, same_of(k)) for n, v, k in found],
            hoverinfo="text"))
    if not fig.data:
        return None
    if lows and min(lows) < 0 < max(lows):  # a gap: where there is none
        fig.add_vline(x=0, line_dash="dot", line_color="#888")
    fig.update_layout(template="none", height=140 + 16 * len(labels), hovermode="closest",
                      paper_bgcolor="white", plot_bgcolor="white",
                      font={"family": "system-ui, sans-serif", "size": 11, "color": "#333"},
                      margin={"l": 70, "r": 30, "t": 20, "b": 50},
                      legend={"orientation": "h", "y": -40 / (140 + 16 * len(labels))},
                      yaxis={"autorange": "reversed", "automargin": True, "type": "category",
                             "categoryorder": "array", "categoryarray": labels},
                      xaxis={"gridcolor": "#eee", "zeroline": False, "automargin": True})
    return fig


__all__ = ["figure", "last_values", "rows"]
