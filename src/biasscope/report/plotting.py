"""Building blocks of the report's plotly figures: the x axis (`biasscope.report.axis`),
seed-mean lines with seed-std bands and bootstrap-CI error bars, vertical step markers, and a
tolerant view of the analysis.

Every string that came from data (model names, revisions, sources) is HTML-escaped before it
reaches plotly, which renders trace names, tick labels, annotations and hover text as a small
subset of HTML.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from biasscope.core.corrections import CORRECTIONS
from biasscope.core.numbers import ci_decimals, num, resampled_ci, spread, with_ci
from biasscope.core.numbers import finite as finite
from biasscope.probes.winobias import NAME as PROBE  # the probe the analysis covers
from biasscope.report.axis import Axis as Axis
from biasscope.report.axis import Json as Json
from biasscope.report.axis import checkpoint_label as checkpoint_label
from biasscope.report.axis import make_axis as make_axis
from biasscope.report.axis import revision_label as revision_label
from biasscope.report.plotfig import as_text, scatter

COLORS = {"male": "#1f77b4", "female": "#d62728", "not specified": "#7f7f7f",
          "all": "#2ca02c", "gap": "#9467bd", "stereotype": "#111111", "performance": "#444444",
          "emergence": "#2a9d8f", "stop": "#e76f51", "alpha": "#b00020", "rank": "#8c564b",
          "trend": "#6a4c93"}
FALLBACK_COLORS = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def fmt(value: Any) -> str:
    """The reports' one number format (`biasscope.core.numbers`), without an interval."""
    return num(value)


def effect(value: Any) -> str:
    """An effect size (rank-biserial r, -1 to 1): two decimals, as the sentences write it."""
    return num(value, 2)


def fairness_checkpoints(checkpoints: Sequence[Json]) -> list[Json]:
    """The checkpoints of the next-token fairness probes these figures show: not those of
    performance probes such as LAMBADA, nor of probes scored by options in a sweep (BBQ,
    Adult, professional bias), whose records these figures cannot read."""
    from biasscope.probes import PROBES, Absent

    skip = {n for n, i in PROBES.items()
            if i.requests[0] == "options" or not isinstance(i.performance, Absent)}
    return [c for c in checkpoints if c.get("probe") not in skip]


@dataclass(frozen=True)
class View:
    """Read access to ``summary["analysis"]`` that tolerates missing, None or empty parts."""

    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key) if isinstance(self.data, Mapping) else None
        return default if value is None else value

    def models(self) -> list[str]:
        models = self.get("models", {})
        return [str(m) for m in models] if isinstance(models, Mapping) else []

    def model(self, name: str) -> Mapping[str, Any]:
        models = self.get("models", {})
        entry = models.get(name) if isinstance(models, Mapping) else None
        return entry if isinstance(entry, Mapping) else {}

    @property
    def alpha(self) -> float:
        alpha = self.get("alpha", 0.01)
        return float(alpha) if finite(alpha) and 0 < alpha <= 1 else 0.01

    @property
    def confidence(self) -> float:
        confidence = self.get("confidence", 0.95)
        return float(confidence) if finite(confidence) else 0.95

    @property
    def correction(self) -> str:
        """The correction's display name (not escaped)."""
        name = str(self.get("correction", "holm"))
        return CORRECTIONS.get(name, name)

    def ci(self, ckpt: Json, key: str) -> tuple[float, float] | None:
        """The bootstrap CI of metric ``key`` at this checkpoint, if the analysis has one."""
        if ckpt.get("probe") != PROBE:
            return None
        if ckpt.get("step") is None:  # reported aside: its own CIs, as one step's
            aside = self.get("aside", [])
            entry = next((a.get("ci") for a in aside if isinstance(aside, Sequence)
                          and isinstance(a, Mapping) and a.get("model") == ckpt.get("model")
                          and a.get("revision") == ckpt.get("revision")), None)
        else:
            per_step = self.model(str(ckpt["model"])).get("ci") or {}
            entry = per_step.get(str(ckpt["step"])) if isinstance(per_step, Mapping) else None
        pair = entry.get(key) if isinstance(entry, Mapping) else None
        if isinstance(pair, Sequence) and len(pair) == 2 and all(finite(v) for v in pair):
            return float(pair[0]), float(pair[1])
        return None

    def tests(self, model: str, value: str) -> list[Mapping[str, Any]]:
        tests = self.model(model).get("tests") or {}
        rows = tests.get(value) if isinstance(tests, Mapping) else None
        return [r for r in rows or [] if isinstance(r, Mapping)]

    def step_of(self, model: str, part: str, key: str | None = None) -> int | None:
        """``emergence`` (with ``key``) or ``recommendation`` step of a model, if any."""
        entry = self.model(model).get(part)
        value = entry.get(key or "step") if isinstance(entry, Mapping) else None
        return int(value) if finite(value) else None

    def performance(self, model: str) -> tuple[str, dict[int, float]] | None:
        perf = self.model(model).get("performance")
        if not isinstance(perf, Mapping) or not isinstance(perf.get("values"), Mapping):
            return None
        values = {int(k): float(v) for k, v in perf["values"].items()
                  if str(k).lstrip("-").isdigit() and finite(v)}
        return (str(perf.get("source") or "performance"), values) if values else None


def by_model(checkpoints: Sequence[Json]) -> dict[str, list[Json]]:
    """Checkpoints per model (per model and probe when the run holds several probes)."""
    with_probe = len({c["probe"] for c in checkpoints}) > 1
    groups: dict[str, list[Json]] = {}
    for ckpt in checkpoints:
        key = f"{ckpt['model']} · {ckpt['probe']}" if with_probe else str(ckpt["model"])
        groups.setdefault(key, []).append(ckpt)
    return groups


def seeds_with(ckpt: Json, key: str) -> int:
    """How many seeds have a finite value of ``key`` at this checkpoint."""
    return sum(1 for m in ckpt.get("per_seed", {}).values() if finite(m.get(key)))


def has_metric(checkpoints: Sequence[Json], key: str) -> bool:
    return any(finite(c["mean"].get(key)) for c in checkpoints)


@dataclass(frozen=True)
class Line:
    """One metric of one model: trace name, colour, dash, marker, and which y axis it uses."""

    key: str
    name: str
    color: str
    dash: str = "solid"
    secondary: bool = False
    symbol: str = "circle"
    width: float = 2.0


def bounds(key: str) -> tuple[float, float]:
    """Where a metric can lie, so a mean ± std band does not leave that range."""
    if key.startswith("accuracy/") or key == "stereotype_accuracy":
        return 0.0, 1.0
    if key.startswith("average_rank/"):
        return 1.0, math.inf
    if key.startswith("jsdp") and key != "jsdp_gap":
        return 0.0, math.inf
    return -math.inf, math.inf


def where(ckpt: Json) -> str:
    step = ckpt.get("step")
    text = ("no training step" if ckpt.get("snapshot") else
            f"step {step}" if step is not None else "no training step")
    return text + (f" ({as_text(str(ckpt['revision']))})" if ckpt.get("revision") else "")


def hover(model: str, line: Line, ckpt: Json, mean: float, std: Any,
          ci: tuple[float, float] | None, confidence: float) -> str:
    n = seeds_with(ckpt, line.key)
    low, high = ci or (None, None)
    value = with_ci(mean, low, high, confidence)
    text = f"<b>{as_text(model)}</b><br>{line.name}<br>{where(ckpt)}<br>{value}"
    if ci is not None:
        text += "<br>(bootstrap CI over prompts)"
    if finite(std) and n > 1:
        text += f"<br>std over {n} seeds {spread(std, ci_decimals(low, high))}"
    return text


def _errors(cis: Sequence[tuple[float, float] | None], means: Sequence[float], color: str
            ) -> dict[str, Any] | None:
    """Asymmetric error bars of these CIs around these means (None: no CI at all)."""
    if not any(cis):
        return None
    return {"type": "data", "symmetric": False, "color": color, "thickness": 1.2, "width": 5,
            "array": [max(c[1] - m, 0.0) if c else None for c, m in zip(cis, means)],
            "arrayminus": [max(m - c[0], 0.0) if c else None for c, m in zip(cis, means)]}


def add_line(fig: Any, axis: Axis, model: str, points: Sequence[Json], line: Line,
             show_model: bool, row: int | None = None, view: View | None = None) -> None:
    """The seed-mean line with its hover text and CI error bars, and the mean ± std band;
    checkpoints on no curve (`Axis.joined`) as markers of their own, joined to nothing."""
    kept = [c for c in points if finite(c["mean"].get(line.key))]
    if not kept:
        return
    view = view or View()
    name = f"{as_text(model)} · {line.name}" if show_model else line.name
    group = f"{model}/{line.key}"
    at: dict[str, Any] = {"row": row, "col": 1} if row else {}
    if line.secondary:
        at["secondary_y"] = True
    joined = [c for c in kept if axis.joined(c)]
    for chosen, on in ((joined, True), ([c for c in kept if not axis.joined(c)], False)):
        if not chosen:
            continue
        xs = [axis.x(c) for c in chosen]
        means = [float(c["mean"][line.key]) for c in chosen]
        raw_stds = [c["std"].get(line.key) for c in chosen]
        stds = [float(s) if finite(s) else 0.0 for s in raw_stds]
        cis = [view.ci(c, line.key) for c in chosen]
        if on and any(s > 0 for s in stds):
            lo, hi = bounds(line.key)
            upper = [min(m + s, hi) for m, s in zip(means, stds, strict=True)]
            lower = [max(m - s, lo) for m, s in zip(means, stds, strict=True)]
            fig.add_trace(scatter(
                x=xs + xs[::-1], y=upper + lower[::-1], mode="lines", fill="toself",
                fillcolor=line.color, opacity=0.15, line={"width": 0}, hoverinfo="skip",
                showlegend=False, legendgroup=group, name=f"{name} ± std"), **at)
        # Set aside beside a line: one more entry of its legend group, not a legend entry.
        fig.add_trace(scatter(
            x=xs, y=means, mode="lines+markers" if on else "markers", name=name,
            legendgroup=group, showlegend=on or not joined,
            error_y=_errors(cis, means, line.color),
            line={"color": line.color, "dash": line.dash, "width": line.width},
            marker={"size": 6 if on else 8, "symbol": line.symbol, "color": line.color},
            hovertext=[hover(model, line, c, m, s, ci, view.confidence)
                       for c, m, s, ci in zip(chosen, means, raw_stds, cis, strict=True)],
            hoverinfo="text"), **at)


def add_lines(fig: Any, axis: Axis, groups: Mapping[str, Sequence[Json]],
              lines: Sequence[Line], row: int | None = None, view: View | None = None) -> None:
    """Every line for every model; the models differ by dash."""
    show_model = len(groups) > 1
    for i, (model, points) in enumerate(groups.items()):
        dash = DASHES[i % len(DASHES)]
        for line in lines:
            add_line(fig, axis, model, points, replace(line, dash=dash), show_model, row, view)


def add_step_markers(fig: Any, markers: Sequence[tuple[str, int, str]],
                     steps: Sequence[int] = ()) -> None:
    """Labelled vertical lines across the whole plot: (label (HTML-safe), step, colour).

    A label is written towards the middle of ``steps`` (the x values drawn), so that it
    neither leaves the plot nor widens the x range.
    """
    middle = (min(steps) + max(steps)) / 2 if steps else math.inf
    seen: dict[int, int] = {}
    for label, step, color in markers:
        k = seen[step] = seen.get(step, -1) + 1  # stack labels of markers at the same step
        right = step > middle
        fig.add_shape(type="line", xref="x", yref="paper", x0=step, x1=step, y0=0, y1=1,
                      line={"color": color, "width": 1.5, "dash": "dash"}, layer="below")
        fig.add_annotation(x=step, xref="x", y=1 - 0.07 * k, yref="paper", text=label,
                           showarrow=False, xanchor="right" if right else "left",
                           yanchor="top", xshift=-3 if right else 3,
                           font={"color": color, "size": 11},
                           bgcolor="rgba(255,255,255,0.8)")


#: What each colour of step marker marks, for the captions ({what}: the value tested).
MARKED = {COLORS["emergence"]: "where the {what} becomes significant for good",
          COLORS["trend"]: "where the gap changes trend",
          COLORS["stop"]: "the recommended stop"}


def _listed(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def drawn_notes(fig: Any, band: str, what: str = "gap",
                bars: str | None = "the bootstrap confidence interval over prompts") -> str:
    """How to read the step markers, seed bands and error bars ``fig`` draws, and only
    those: a caption must not describe a line or band that is not there. ``band``, ``bars``:
    what the shaded band and the error bars are (``bars`` None: the caption says it)."""
    colors = {(s.get("line") or {}).get("color") for s in fig.layout.get("shapes", [])
              if s.get("yref") == "paper" and (s.get("line") or {}).get("dash") == "dash"}
    marked = [words.format(what=what) for color, words in MARKED.items() if color in colors]
    out = []
    if marked:
        out.append(f"Dashed vertical lines mark {_listed(marked)}.")
    if any(t.get("fill") == "toself" for t in fig.data):
        out.append(f"The shaded band is {band}.")
    errors = [t["error_y"] for t in fig.data if isinstance(t.get("error_y"), Mapping)]
    if bars and any(any(v is not None for v in e.get("array", [])) for e in errors):
        out.append(f"Error bars are {bars}.")
    return " ".join(out)


def step_markers(view: View, models: Sequence[str], value: str, stop: bool
                 ) -> list[tuple[str, int, str]]:
    """Emergence markers of ``value``'s gap (and recommended stops) of these models."""
    out = []
    for model in models:
        suffix = f" ({as_text(model)})" if len(models) > 1 else ""
        step = view.step_of(model, "emergence", value)
        if step is not None:
            out.append((f"gap significant from step {step}{suffix}", step, COLORS["emergence"]))
        if value == "jsdp_correct" and (bend := trend_marker(view.model(model), suffix)):
            out.append(bend)
        step = view.step_of(model, "recommendation") if stop else None
        if step is not None:
            out.append((f"recommended stop: step {step}{suffix}", step, COLORS["stop"]))
    return out


def trend_marker(model: Mapping[str, Any], suffix: str) -> tuple[str, int, str] | None:
    """The change of trend of the gap, only where the analysis claimed one (its test held)."""
    trend = model.get("trend")
    if not isinstance(trend, Mapping) or not trend.get("claimed"):
        return None
    bend = (trend.get("changepoint") or {}).get(trend["claimed"]) or {}
    if not all(finite(bend.get(k)) for k in ("step", "low", "high")):
        return None
    ci = resampled_ci(bend["low"], bend["high"], ".0f", bend.get("confidence", 0.95),
                      "put it there")
    return (f"gap changes trend at step {bend['step']:.0f} ({ci}){suffix}", round(bend["step"]),
            COLORS["trend"])


def style(fig: Any, axis: Axis, height: int = 440, rows: int = 1) -> Any:
    """A light layout and the x axis (steps, or checkpoint labels in order)."""
    # The empty template plus a few settings: named templates cost ~0.2 s per figure.
    fig.update_layout(template="none", height=height, hovermode="closest",
                      paper_bgcolor="white", plot_bgcolor="white",
                      font={"family": "system-ui, sans-serif", "size": 12, "color": "#333"},
                      margin={"l": 70, "r": 70, "t": 30, "b": 60},
                      legend={"orientation": "h", "y": -0.2})
    # automargin: long tick labels (occupations, checkpoint names) push the plot aside
    # rather than being cut at the figure's edge.
    fig.update_xaxes(showline=True, linecolor="#999", gridcolor="#eee", zeroline=False,
                     ticks="outside", automargin=True)
    fig.update_yaxes(showline=True, linecolor="#999", gridcolor="#eee", zeroline=False,
                     ticks="outside", automargin=True)
    if axis.by_step:
        fig.update_xaxes(type="linear")
        axis.layout(fig)
    else:
        fig.update_xaxes(type="category", categoryorder="array",
                         categoryarray=list(axis.categories))
    fig.update_xaxes(title_text=axis.title, row=rows if rows > 1 else None,
                     col=1 if rows > 1 else None)
    return fig


def answer_lines(prefix: str, answers: Sequence[str], suffix: str = "") -> list[Line]:
    lines = []
    for i, answer in enumerate(answers):
        color = COLORS.get(answer, FALLBACK_COLORS[i % len(FALLBACK_COLORS)])
        lines.append(Line(f"{prefix}{answer}", f"{as_text(answer)}{suffix}", color))
    return lines
