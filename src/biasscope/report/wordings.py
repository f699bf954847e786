"""Forest plots of a measure across prompt wordings (``--wordings``): each wording's estimate
with its CI over items, and below them the estimate pooled over wordings with its two-level
CI (wordings, then items), the verdict beside. Renders what `biasscope.core.wordings`
computed; computes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from biasscope.core.numbers import ci_cell, ci_decimals, level_of, num, resampled_same, with_ci
from biasscope.report.figures import Panel
from biasscope.report.plotfig import Figure, scatter
from biasscope.report.plotting import View, fmt, revision_label
from biasscope.report.tables import named, table

Json = Mapping[str, Any]


def _finite(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def forest(title: str, result: Json) -> Any:
    """The forest plot of one measure's ``wording_uncertainty`` result (None: no estimate)."""
    rows = [(str(p["wording"]), p["estimate"], p["low"], p["high"])
            for p in result.get("per_wording", [])]
    pooled = result.get("pooled", {})
    rows.append(("pooled", pooled.get("estimate"), pooled.get("low"), pooled.get("high")))
    shown = [r for r in rows if _finite(r[1])]
    if len(shown) < 2:
        return None
    fig = Figure()
    confidence = result.get("confidence", 0.95)
    same = resampled_same(confidence)  # every interval is a bootstrap's
    for pooled_row in (False, True):
        part = [r for r in shown if (r[0] == "pooled") == pooled_row]
        lows = [r[1] - r[2] if _finite(r[2]) else 0.0 for r in part]
        highs = [r[3] - r[1] if _finite(r[3]) else 0.0 for r in part]
        fig.add_trace(scatter(
            x=[r[1] for r in part], y=[escape(r[0]) for r in part], mode="markers",
            name="pooled over wordings" if pooled_row else "one wording",
            marker={"size": 12 if pooled_row else 8,
                    "symbol": "diamond" if pooled_row else "square",
                    "color": "#b03a2e" if pooled_row else "#1f4e79"},
            error_x={"type": "data", "symmetric": False, "array": highs, "arrayminus": lows},
            customdata=[with_ci(r[1], r[2], r[3], confidence, same=same) for r in part],
            hovertemplate="%{y}: %{customdata}<extra></extra>"))
    fig.add_vline(x=float(result.get("null", 0.0)), line_dash="dot", line_color="#888")
    fig.update_layout(title=escape(title), showlegend=False, height=140 + 28 * len(shown),
                      margin={"l": 90, "r": 30, "t": 50, "b": 40},
                      font={"family": "system-ui, sans-serif", "size": 12, "color": "#333"},
                      yaxis={"autorange": "reversed", "automargin": True},
                      xaxis={"gridcolor": "#eee", "zeroline": False, "automargin": True})
    return fig


def caption(result: Json) -> str:
    """How to read the panel, with the verdict and the variance share."""
    share = result.get("variance_share", math.nan)
    said = (f" {fmt(100 * share)}% of the variance of the per-wording estimates is the "
            "wording's (the rest is item sampling)." if _finite(share) else "")
    return (f"{result.get('verdict', '')} Squares: each wording's estimate with its "
            f"{level_of(result.get('confidence', 0.95))} CI over items; diamond: pooled over "
            "wordings, CI from a two-level bootstrap (wordings, and items drawn once for all). "
            f"The dotted line is no bias ({result.get('null', 0):g}).{said}")


def rows(results: Json) -> list[list[Any]]:
    """One row per measure (its words, its key beside): pooled estimate and CI, items-only
    CI, share, agreement. Each interval is a bootstrap's: one of no width says so in words."""
    out = []
    for name, r in results.items():
        p = r["pooled"]
        places = ci_decimals(p["low"], p["high"])
        same = resampled_same(r.get("confidence", 0.95))
        out.append([named(str(name), r.get("label")), num(p["estimate"], places),
                    ci_cell(p["low"], p["high"], places, same),
                    ci_cell(p["items_only_low"], p["items_only_high"], places, same),
                    fmt(r["variance_share"]), f"{r['agree']} of {r['wordings']}",
                    r["reverse"], r.get("reverse_significant", ""), r["significant"]])
    return out


HEAD = ["measure", "pooled", "CI (wordings and items)", "CI (items only)",
        "variance share of wording", "agree in sign", "reverse", "reverse, significant",
        "significant"]


def panels(view: View) -> list[Panel]:
    """Per model, a forest plot per measure at its last checkpoint with wordings."""
    out = []
    for model in view.models():
        breakdown = view.model(model).get("breakdown") or {}
        steps = [s for s in breakdown if breakdown[s].get("wordings")]
        if not steps:
            continue
        last = max(steps, key=int)
        where = model if view.model(model).get("snapshot") else f"{model}, step {last}"
        for name, result in breakdown[last]["wordings"].items():
            title = f"Across wordings: {result.get('label', name)} ({where})"
            out.append(Panel(title, caption(result), forest(title, result)))
    return out


def section_html(results: Json, figure: Callable[[Any, int], str], index: int,
                 where: str = "") -> tuple[str, int]:
    """An audit probe's measures across wordings: a table, and a forest plot each."""
    if not results:
        return "", index
    heading = f"Across wordings ({escape(where)})" if where else "Across wordings"
    parts: list[str] = [f"<h3>{heading}</h3>", table(HEAD, rows(results), numbers=True)]
    for name, result in results.items():
        title = str(result.get("label", name))
        fig = forest(title, result)
        parts.append(f'<p class="caption">{escape(caption(result))}</p>')
        if fig is not None:
            parts.append(figure(fig, index))
            index += 1
    return "\n".join(parts), index


def sweep_html(section: Json, figure: Callable[[Any, int], str], index: int
               ) -> tuple[str, int]:
    """A probe's measures across wordings in a sweep (``analysis.probes``): per model, at its
    last step asked under several wordings, or without a step; then each checkpoint reported
    aside (no training step), by its revision."""
    found = [(m if r["wordings"].get("step") is None else f"{m}, step {r['wordings']['step']}",
              r["wordings"]) for m, r in sorted(section.get("models", {}).items())
             if r.get("wordings")]
    found += sorted((section.get("stepless_wordings") or {}).items())
    found += [(f"{a['model']}, {revision_label(a.get('revision'))}", a["wordings"])
              for a in section.get("aside") or [] if a.get("wordings")]
    parts = []
    for where, worded in found:
        html, index = section_html(worded["measures"], figure, index, where)
        parts.append(html)
    return "\n".join(parts), index


__all__: Sequence[str] = ["caption", "forest", "panels", "rows", "section_html", "sweep_html"]
