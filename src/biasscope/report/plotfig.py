"""Figures as plotly.js JSON, built directly: the few plotly calls the reports use, without
plotly.py's figure objects.

Building plotly.py figures (every property validated on every update) took over a second of a
one-checkpoint report; the same JSON written as dicts takes milliseconds. `Figure` keeps
plotly's method names (``add_trace(row=, col=, secondary_y=)``, ``update_yaxes``,
``add_hline``, ...) so that the report modules read as before, and its HTML is what
``plotly.io.to_html`` writes: a div and a ``Plotly.newPlot`` call, plotly.js inline once.
Keyword names use plotly's "magic underscore" for the few prefixes the reports use
(``title_text``, ``line_dash``, ``marker_color``). A named template (``plotly_white``) is
plotly.py's own, read from its package and handed to plotly.js, which applies it as plotly.py
would have.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

Dict = dict[str, Any]

_NESTED = frozenset({"title", "line", "marker", "font", "xaxis", "yaxis", "legend", "margin",
                     "colorbar"})
#: plotly.py's "RdBu" (ColorBrewer; red low, blue high), which plotly.js names differently.
RDBU = ("rgb(103,0,31)", "rgb(178,24,43)", "rgb(214,96,77)", "rgb(244,165,130)",
        "rgb(253,219,199)", "rgb(247,247,247)", "rgb(209,229,240)", "rgb(146,197,222)",
        "rgb(67,147,195)", "rgb(33,102,172)", "rgb(5,48,97)")


def _merge(target: Dict, update: Mapping[str, Any]) -> Dict:
    """Deep-merge ``update`` (keys with magic underscores split) into ``target``."""
    for key, value in update.items():
        head, _, rest = key.partition("_")
        if rest and head in _NESTED:
            key, value = head, {rest: value}
        if key == "title" and not isinstance(value, Mapping):
            value = {"text": value}
        if isinstance(value, Mapping):
            target[key] = _merge(dict(target.get(key) or {}), value)
        else:
            target[key] = value
    return target


def as_text(value: Any) -> str:
    """``value`` safe as figure text (names, titles, ticks, hover), which plotly.js renders as
    a little HTML: ``&``, ``<`` and ``>`` escaped, quotes left as they are (plotly.js would
    show ``&quot;`` as written)."""
    return escape(str(value), quote=False)


def trace(kind: str, **props: Any) -> Dict:
    """One trace of type ``kind`` (``scatter``, ``bar``, ``heatmap``, ...)."""
    return _merge({"type": kind}, {k: v for k, v in props.items() if v is not None})


def scatter(**props: Any) -> Dict:
    return trace("scatter", **props)


def bar(**props: Any) -> Dict:
    return trace("bar", **props)


def histogram(**props: Any) -> Dict:
    return trace("histogram", **props)


#: The parts of a plotly.py template that a 2-D figure of these reports uses (not its maps,
#: polar, ternary or 3-D scenes): kept small, as every figure carries its template.
_LAYOUT_PARTS = frozenset({"autotypenumbers", "colorway", "font", "hovermode", "hoverlabel",
                           "paper_bgcolor", "plot_bgcolor", "xaxis", "yaxis", "shapedefaults",
                           "annotationdefaults", "title"})
_TRACE_PARTS = frozenset({"scatter", "bar", "histogram"})


@cache
def template(name: str) -> Dict:
    """plotly.py's template ``name`` as its package ships it, cut to the 2-D parts; plotly.js
    applies it (``layout.template``) under what the figure sets itself."""
    path = package_data() / "templates" / f"{name}.json"
    full = json.loads(path.read_text("utf-8"))
    return {"layout": {k: v for k, v in full["layout"].items() if k in _LAYOUT_PARTS},
            "data": {k: v for k, v in full["data"].items() if k in _TRACE_PARTS}}


class Figure:
    """A plotly.js figure (``data`` and ``layout``) with a grid of subplots, one column wide
    or several, each with an optional secondary y axis."""

    def __init__(self, data: Dict | None = None) -> None:
        self.data: list[Dict] = [data] if data else []
        self.layout: Dict = {}
        self._cells: dict[tuple[int, int], tuple[str, str, str | None]] = {}

    # -- axes ---------------------------------------------------------------------------------
    def _refs(self, row: int | None, col: int | None) -> list[tuple[str, str, str | None]]:
        if not self._cells:
            return [("x", "y", None)]
        return [ref for (r, c), ref in self._cells.items()
                if (row is None or r == row) and (col is None or c == col)]

    @staticmethod
    def _key(ref: str) -> str:
        return ("xaxis" if ref[0] == "x" else "yaxis") + ref[1:]

    def _axes(self, which: str, row: int | None, col: int | None,
              secondary_y: bool | None) -> Iterator[Dict]:
        names: list[str] = []
        for x, y, y2 in self._refs(row, col):
            if which == "x":
                names.append(x)
            else:
                names += ([y] if secondary_y is not True else []) + (
                    [y2] if y2 and secondary_y is not False else [])
        for name in names:
            yield self.layout.setdefault(self._key(name), {})

    def update_xaxes(self, row: int | None = None, col: int | None = None,
                     **props: Any) -> Figure:
        for axis in self._axes("x", row, col, None):
            _merge(axis, props)
        return self

    def update_yaxes(self, row: int | None = None, col: int | None = None,
                     secondary_y: bool | None = None, **props: Any) -> Figure:
        for axis in self._axes("y", row, col, secondary_y):
            _merge(axis, props)
        return self

    # -- content ------------------------------------------------------------------------------
    def add_trace(self, data: Mapping[str, Any], row: int | None = None,
                  col: int | None = None, secondary_y: bool | None = None) -> Figure:
        item = dict(data)
        # secondary_y alone picks the first cell's right axis, as in plotly.py: a grid of one
        # cell is often filled without row and col, and a trace left on the primary axis
        # leaves the secondary one empty (plotly.js then draws its line at NaN).
        if self._cells and (row is not None or col is not None or secondary_y):
            x, y, y2 = self._refs(row or 1, col or 1)[0]
            item["xaxis"], item["yaxis"] = x, (y2 if secondary_y and y2 else y)
        self.data.append(item)
        return self

    def update_traces(self, **props: Any) -> Figure:
        for item in self.data:
            _merge(item, props)
        return self

    def add_scatter(self, row: int | None = None, col: int | None = None,
                    secondary_y: bool | None = None, **props: Any) -> Figure:
        return self.add_trace(scatter(**props), row, col, secondary_y)

    def update_layout(self, **props: Any) -> Figure:
        name = props.pop("template", None)
        if name and name != "none":  # "none": plotly.js's own defaults, as plotly.py's is
            self.layout["template"] = template(str(name))
        _merge(self.layout, props)
        return self

    def add_shape(self, **props: Any) -> Figure:
        self.layout.setdefault("shapes", []).append(_merge({}, props))
        return self

    def add_annotation(self, **props: Any) -> Figure:
        self.layout.setdefault("annotations", []).append(_merge({}, props))
        return self

    def update_annotations(self, **props: Any) -> Figure:
        for note in self.layout.get("annotations", []):
            _merge(note, props)
        return self

    def _span(self, axis: str, value: float, row: int | None, col: int | None,
              secondary_y: bool | None, props: Mapping[str, Any]) -> Figure:
        """A line across each chosen subplot at ``axis`` = ``value`` (add_hline/add_vline),
        with ``annotation_text`` written at its top right end as plotly.py places it."""
        note = {k.removeprefix("annotation_"): v for k, v in props.items()
                if k.startswith("annotation_")}
        props = {k: v for k, v in props.items() if not k.startswith("annotation_")}
        for x, y, y2 in self._refs(row, col):
            y = y2 if secondary_y and y2 else y
            across, along = (x, y) if axis == "y" else (y, x)
            other = "x" if axis == "y" else "y"
            edge = f"{across} domain"
            shape = {"type": "line", f"{other}ref": edge, f"{other}0": 0, f"{other}1": 1,
                     f"{axis}ref": along, f"{axis}0": value, f"{axis}1": value}
            self.add_shape(**shape, **props)
            if note:
                anchors = ({"xanchor": "right", "yanchor": "bottom"} if axis == "y"
                           else {"xanchor": "left", "yanchor": "top"})
                self.add_annotation(**{f"{other}ref": edge, other: 1, f"{axis}ref": along,
                                       axis: value, "showarrow": False, **anchors, **note})
        return self

    def add_hline(self, y: float, row: int | None = None, col: int | None = None,
                  secondary_y: bool | None = None, **props: Any) -> Figure:
        return self._span("y", y, row, col, secondary_y, props)

    def add_vline(self, x: float, row: int | None = None, col: int | None = None,
                  **props: Any) -> Figure:
        return self._span("x", x, row, col, None, props)

    # -- output -------------------------------------------------------------------------------
    def to_plotly_json(self) -> Dict:
        return {"data": self.data, "layout": self.layout}

    def to_html(self, full_html: bool = False, include_plotlyjs: bool = True,
                include_mathjax: bool = False, div_id: str = "plot",
                default_width: str = "100%", config: Mapping[str, Any] | None = None) -> str:
        """The figure's div and its ``Plotly.newPlot`` call (plotly.js first, if asked)."""
        del full_html, include_mathjax  # always a fragment, never MathJax
        height = self.layout.get("height")
        size = f"height:{height}px; " if isinstance(height, int) else "height:450px; "
        script = ('<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: '
                  f"'local'}};</script><script type=\"text/javascript\">{plotly_js()}</script>"
                  if include_plotlyjs else "")
        return (f"<div>{script}"
                f'<div id="{div_id}" class="plotly-graph-div" '
                f'style="{size}width:{default_width};"></div>'
                f'<script type="text/javascript">if (document.getElementById("{div_id}")) '
                f'{{Plotly.newPlot("{div_id}", {to_json(self.data)}, {to_json(self.layout)}, '
                f"{to_json(dict(config or {}))})}};</script></div>")


def make_subplots(rows: int = 1, cols: int = 1, shared_xaxes: bool = False,
                  shared_yaxes: bool = False, row_heights: Sequence[float] | None = None,
                  column_widths: Sequence[float] | None = None,
                  vertical_spacing: float | None = None, horizontal_spacing: float | None = None,
                  specs: Sequence[Sequence[Mapping[str, Any]]] | None = None,
                  subplot_titles: Sequence[str] | None = None) -> Figure:
    """A grid of subplots numbered as plotly numbers them (row by row from the top; a cell's
    secondary y axis takes the number after its primary one). Shared x axes follow the
    bottom row's and show no tick labels above it; shared y axes follow the first column's
    and show none right of it."""
    fig = Figure()
    ys = _domains(rows, row_heights, 0.3 / rows if vertical_spacing is None
                  else vertical_spacing)[::-1]
    xs = _domains(cols, column_widths, 0.2 / cols if horizontal_spacing is None
                  else horizontal_spacing)
    nx = ny = 0
    for r in range(1, rows + 1):
        for c in range(1, cols + 1):
            nx, ny = nx + 1, ny + 1
            x, y = f"x{nx if nx > 1 else ''}", f"y{ny if ny > 1 else ''}"
            y2 = None
            if specs and specs[r - 1][c - 1].get("secondary_y"):
                ny += 1
                y2 = f"y{ny}"
                fig.layout[f"yaxis{ny}"] = {"anchor": x, "overlaying": y, "side": "right"}
            fig._cells[(r, c)] = (x, y, y2)
            fig.layout[Figure._key(x)] = {"anchor": y, "domain": list(xs[c - 1])}
            fig.layout[Figure._key(y)] = {"anchor": x, "domain": list(ys[r - 1])}
    if shared_xaxes and rows > 1:
        for (r, c), (x, _, _) in fig._cells.items():
            if r < rows:
                _merge(fig.layout[Figure._key(x)], {"matches": fig._cells[(rows, c)][0],
                                                    "showticklabels": False})
    if shared_yaxes and cols > 1:
        for (r, c), (_, y, _) in fig._cells.items():
            if c > 1:
                _merge(fig.layout[Figure._key(y)], {"matches": fig._cells[(r, 1)][1],
                                                    "showticklabels": False})
    for i, text in enumerate(subplot_titles or []):
        r, c = divmod(i, cols)
        fig.add_annotation(text=text, x=sum(xs[c]) / 2, y=ys[r][1], xref="paper", yref="paper",
                           xanchor="center", yanchor="bottom", showarrow=False,
                           font={"size": 16})
    return fig


def _domains(n: int, sizes: Sequence[float] | None, spacing: float
             ) -> list[tuple[float, float]]:
    """[start, end] of ``n`` cells along [0, 1], ``spacing`` apart, sized as ``sizes``."""
    weights = list(sizes or [1.0] * n)
    room = 1.0 - spacing * (n - 1)
    out, start = [], 0.0
    for w in weights:
        end = start + room * w / sum(weights)
        out.append((start, end))
        start = end + spacing
    return out


def _plain(value: Any) -> Any:
    """JSON-ready: NaN and infinities as null (as plotly writes them), NumPy scalars and
    arrays and pandas series as Python numbers and lists, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def to_json(value: Any) -> str:
    """Compact JSON safe inside a ``<script>``: ``<``, ``>`` and ``/`` as escapes."""
    text = json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")


@cache
def plotly_js() -> str:
    """plotly.js as the installed plotly package ships it (read once)."""
    return (package_data() / "plotly.min.js").read_text("utf-8")


@cache
def package_data() -> Path:
    """The installed plotly package's ``package_data`` folder, found without importing plotly
    (its ``__init__`` reads its version from `importlib.metadata`: tens of milliseconds of
    every report)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'plotly'", name="plotly")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"
