"""report/plotfig.py writes the figure plotly.py would for the calls the reports make (same
traces, axes, shapes and annotations; plotly.py's template cut to its 2-D parts), and no
module of biasscope builds figures with plotly.py again: its validation cost over a second
per report."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from biasscope.report import plotfig

SRC = Path(__file__).resolve().parents[2] / "src" / "biasscope"
PLOTLY_PY = re.compile(r"^\s*(?:from|import)\s+plotly\b|import_module\(\s*[\"']plotly",
                       re.MULTILINE)


def test_no_module_builds_figures_with_plotly_py() -> None:
    for line in ("    from plotly.subplots import make_subplots", "import plotly.graph_objects "
                 "as go", "mod = importlib.import_module('plotly.graph_objects')"):
        assert PLOTLY_PY.search(line), line  # the check finds what it forbids
    found = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
             if PLOTLY_PY.search(p.read_text(encoding="utf-8"))]
    assert not found, f"build these figures with biasscope.report.plotfig: {found}"


def _same(ours: Any, theirs: Any, at: str = "") -> None:
    if isinstance(theirs, float) or isinstance(ours, float):
        assert ours == pytest.approx(theirs), at
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (at, ours, theirs)
        for key in theirs:
            _same(ours[key], theirs[key], f"{at}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (at, ours, theirs)
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{at}[{i}]")
    else:
        assert ours == theirs, (at, ours, theirs)


def occupations(make: Callable[..., Any]) -> Any:
    """Two panels side by side sharing the y axis (the intervention report's occupations)."""
    fig = make(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
               subplot_titles=["cda", "control"])
    for col in (1, 2):
        fig.add_scatter(x=[0.1, -0.2], y=["nurse", "ceo"], mode="markers", row=1, col=col,
                        name=f"arm {col}", marker={"color": "#999999", "symbol": "circle-open"},
                        error_x={"type": "data", "array": [0.1, None], "visible": True})
        fig.add_vline(x=0, line={"color": "#bbb", "width": 1}, row=1, col=col)
    fig.update_xaxes(title_text="male lean")
    fig.update_yaxes(type="category")
    return fig.update_layout(height=420, template="plotly_white", margin={"t": 40})


def did(make: Callable[..., Any]) -> Any:
    """Two rows sharing the x axis, a labelled line in the second (difference in
    differences and the perplexity budget)."""
    fig = make(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
               subplot_titles=["difference", "cost"])
    for row in (1, 2):
        fig.add_scatter(x=[25, 50], y=[0.1, 0.2], row=row, col=1, name=f"row {row}",
                        error_y={"type": "data", "array": [0.01, None], "visible": True})
    fig.add_hline(y=0, line={"color": "#999", "width": 1}, row=1, col=1)
    fig.add_hline(y=0.02, line={"color": "#a33", "dash": "dash"}, row=2, col=1,
                  annotation_text="budget 2%")
    fig.update_xaxes(title_text="training step", row=2, col=1)
    return fig.update_layout(height=620, template="plotly_white", margin={"t": 40})


def rewards(figure: Any, histogram: Any, scatter: Any) -> Any:
    """Overlaid histograms with a rug on a hidden second axis (the sensitivity report)."""
    fig = figure()
    for name, values in (("original", [0.1, 0.5, 0.7]), ("perturbed", [0.2, 0.9])):
        fig.add_trace(histogram(x=values, name=name, opacity=0.55, nbinsx=40))
    fig.add_trace(scatter(x=[0.2, 0.9], y=[0, 0], mode="markers", yaxis="y2",
                          marker={"symbol": "line-ns-open", "size": 10}, name="revisions"))
    fig.add_vline(x=0, line_dash="dot", line_color="#888")
    return fig.update_layout(barmode="overlay", title="rm: rewards", xaxis_title="reward",
                             yaxis_title="count", template="plotly_white", height=380,
                             yaxis2={"overlaying": "y", "visible": False, "range": [0, 10]})


def secondary(make: Callable[..., Any]) -> Any:
    """One cell with a right axis, filled without row and col (the stereotype figure):
    secondary_y alone puts a trace on the right axis."""
    fig = make(specs=[[{"secondary_y": True}]])
    fig.add_scatter(x=[0, 100], y=[0.1, 0.2], name="JSD-P")
    fig.add_scatter(x=[0, 100], y=[0.5, 1.0], name="stereotype accuracy", secondary_y=True)
    fig.add_hline(y=0.5, line={"color": "#999", "dash": "dot"}, secondary_y=True)
    fig.update_yaxes(range=[-0.02, 1.02], secondary_y=True)
    fig.update_xaxes(domain=[0, 0.94])  # plotly.py's room for the right axis (ours: automargin)
    return fig.update_layout(height=440, template="plotly_white")


def _json(fig: Any) -> dict[str, Any]:
    text = fig.to_json() if hasattr(fig, "to_json") else plotfig.to_json(fig.to_plotly_json())
    out: dict[str, Any] = json.loads(text)
    return out


@pytest.mark.parametrize("kind", ["occupations", "did", "rewards", "secondary"])
def test_same_figure_as_plotly_py(kind: str) -> None:
    go = pytest.importorskip("plotly.graph_objects")
    from plotly.subplots import make_subplots

    if kind == "rewards":
        ours = rewards(plotfig.Figure, plotfig.histogram, plotfig.scatter)
        theirs = rewards(go.Figure, lambda **p: go.Histogram(**p), lambda **p: go.Scatter(**p))
    else:
        build = {"occupations": occupations, "did": did, "secondary": secondary}[kind]
        ours, theirs = build(plotfig.make_subplots), build(make_subplots)
    mine, want = _json(ours), _json(theirs)
    template, full = mine["layout"].pop("template"), want["layout"].pop("template")
    _same(mine, want)
    # plotly.py's own template, less its maps, polar, ternary and 3-D parts
    assert template["layout"] and template["data"]["bar"]
    for part in ("layout", "data"):
        for key, value in template[part].items():
            _same(value, full[part][key], f"template.{part}.{key}")
    assert template["layout"]["colorway"][0] == "#636efa"


def test_series_and_arrays_become_lists() -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    text = plotfig.to_json({"x": pd.Series([1.5, np.nan]), "y": np.array([1, 2]),
                            "z": np.float32(0.5), "w": (np.int64(3), "</script>")})
    assert json.loads(text) == {"x": [1.5, None], "y": [1, 2], "z": 0.5, "w": [3, "</script>"]}
    assert "</" not in text


def test_figure_text_is_escaped_but_keeps_quotes() -> None:
    # plotly.js turns &lt; &gt; &amp; back into characters but shows &quot; as written
    assert plotfig.as_text('a "quoted" <b>name</b> & co') == (
        'a "quoted" &lt;b&gt;name&lt;/b&gt; &amp; co')
