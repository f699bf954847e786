"""Renders a comparison of two runs (``biasscope compare``): one row per measure with the
difference, its interval, the TOST verdict, the items left out of the pairs, the wordings
compared and the smallest difference the comparison could have detected, as an HTML page and
as plain text. It only renders `comparison.json`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from biasscope.core.numbers import ci_decimals, num
from biasscope.report.html import CSS
from biasscope.report.plotting import fmt
from biasscope.report.tables import named, table

HEADER = ("probe", "measure", "A", "B", "A − B", "TOST interval", "margin", "verdict", "n",
          "paired", "only A", "only B", "wordings", "detectable at 80%")


def rows(comparisons: Sequence[Mapping[str, Any]], html: bool = False) -> list[list[Any]]:
    """One row per compared measure, as the table shows it: the measure in its words with
    its key (the name ``--margin`` and ``comparison.json`` know it by) beside."""
    out = []
    for c in comparisons:
        places = ci_decimals(c["low"], c["high"])  # A − B and its interval at one precision
        key, words = str(c["measure"]), c.get("words")
        measure = named(key, words) if html else f"{words} ({key})" if words else key
        out.append([c["probe"], measure, fmt(c["estimate_a"]), fmt(c["estimate_b"]),
                    num(c["estimate"], places),
                    f"{num(c['low'], places)} to {num(c['high'], places)}",
                    f"±{c['margin']:g}", c["verdict"], c["n"], "yes" if c["paired"] else "no",
                    c.get("only_a", 0), c.get("only_b", 0), c.get("wordings", 1),
                    fmt(c["minimum_detectable_difference"])])
    return out


def text(summary: Mapping[str, Any]) -> str:
    """The comparison as an aligned plain-text table and its sentences."""
    body = [list(HEADER), *([str(v) for v in r] for r in rows(summary["comparisons"]))]
    widths = [max(len(r[i]) for r in body) for i in range(len(HEADER))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in body]
    return "\n".join([*lines, "", *summary.get("sentences", [])])


def html(summary: Mapping[str, Any]) -> str:
    """A self-contained page: the runs, the table, the sentences."""
    a, b = escape(str(summary["run_a"])), escape(str(summary["run_b"]))
    conf = 100 * (1 - 2 * float(summary["alpha"]))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>biasscope compare: {a} against {b}</title>",
        f"<style>{CSS}</style></head><body>", "<h1>Are these runs as fair as each other?</h1>",
        f'<p class="sub">A = {a} · B = {b} · α = {summary["alpha"]:g}: the TOST interval is '
        f"the {conf:.0f}% interval of A − B; equivalence means it lies inside ±margin</p>",
        table(list(HEADER), rows(summary["comparisons"], html=True), numbers=True),
        *(f"<p>{escape(str(s))}</p>" for s in summary.get("sentences", [])),
        "</body></html>", ""])
