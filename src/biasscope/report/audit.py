"""The audit HTML report: per probe, the headline numbers with their CIs (a table and a
figure), the per-group tables, the findings in sentences, and examples of hits.

Built from ``summary.json`` and ``run.json`` alone, with the dynamics report's page style and
figure embedding (plotly.js inline once: the file opens offline). Every string that came from
data, a model or the run's settings is HTML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from html import escape
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import computed_levels, said_thin
from biasscope.core.numbers import ci_cell, ci_decimals, finite, level_of, num, pvalue, with_ci
from biasscope.probes import PROBES
from biasscope.report import wordings
from biasscope.report.html import CSS, figure_html, flatten
from biasscope.report.plotfig import Figure, as_text, scatter
from biasscope.report.plotting import Json, fmt
from biasscope.report.tables import named, record_table, table
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes


def _cell(value: Json, key: str, show: Callable[[Any], str]) -> str | None:
    return show(value.get(key)) if key in value else None


def _detectable(value: Json) -> str | None:
    """The detectable effect, or "none within ±bound" where the run could have found no
    effect the measure can take."""
    if value.get("detectable_beyond_bound"):
        return f"none within ±{fmt(value.get('bound'))}"
    return _cell(value, "detectable", fmt)


def words_of(probe: str) -> Callable[[str], str | None]:
    """A headline key's words in ``probe``'s registry entry (`ProbeInfo.name_of`), the same
    words the audit's sentences name it by; None for a key it has none for (a judge's
    results are no registered probe's)."""
    info = PROBES.get(probe)
    return info.name_of if info is not None else lambda key: None


def same_of(probe: str, confidence: float = 0.95) -> Callable[[str], str | None]:
    """`with_ci`'s ``same`` per headline key in ``probe``'s registry entry
    (`ProbeInfo.same_of`) at ``confidence``: a bootstrapped interval of no width in words,
    not "1 to 1"."""
    info = PROBES.get(probe)
    return (lambda key: info.same_of(key, confidence)) if info is not None else (
        lambda key: None)


def headline_rows(headline: Json, names: Callable[[str], str | None] = lambda key: None,
                  same: Callable[[str], str | None] = lambda key: None) -> list[list[Any]]:
    """One row per headline number, named in words (``names``) with its key beside:
    estimate and CI to the digits the CI supports (``same``: `same_of`'s), p-values to two
    significant digits (floored), as every report writes them."""
    rows = []
    for name, value in headline.items():
        if not isinstance(value, Mapping):
            continue
        low, high = value.get("low"), value.get("high")
        places = ci_decimals(low, high)
        ci = (ci_cell(low, high, places, same(str(name))) if finite(low) and finite(high)
              else None)
        rows.append([named(name, names(name)), num(value.get("estimate"), places), ci,
                     value.get("n"), _cell(value, "p_value", pvalue),
                     _cell(value, "p_holm", pvalue), _cell(value, "effect_size", fmt),
                     _detectable(value)])
    return rows


def headline_columns(confidence: float = 0.95) -> list[str]:
    """The headline table's columns, its CI's at the summary's level."""
    return ["metric", "estimate", f"{level_of(confidence)} CI", "n", "p", "p (Holm)",
            "effect size", "detectable at 80% power"]


HEADLINE_NOTE = ("<p class=\"sub\">p is each test on its own; p (Holm) controls the "
                 "family-wise error over the probe's tests, and a result is called significant "
                 "only by it. The CIs are each estimate's own {level} intervals, so one may "
                 "exclude 0 while its Holm-adjusted p is above 0.05. \"Detectable\" is the "
                 "smallest effect this run could have found with 80% power, given beside each "
                 "result that is not significant (\"none\" where not even the largest effect "
                 "the measure can take was within its reach).</p>")


def headline_figure(probe: str, headline: Json,
                    words: Callable[[str], str | None] = lambda key: None,
                    same: Callable[[str], str | None] = lambda key: None,
                    confidence: float = 0.95) -> Figure | None:
    """Point estimates with CI bars (at ``confidence``), each named in ``words`` (its key
    where it has none); one figure per probe. ``same``: `headline_rows`'."""
    names, mids, lows, highs, said = [], [], [], [], []
    for name, value in headline.items():
        if not isinstance(value, Mapping):
            continue
        raw = [value.get(k) for k in ("estimate", "low", "high")]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in raw):
            continue
        est, low, high = (float(v or 0.0) for v in raw)
        # plotly renders a little HTML in labels
        names.append(as_text(words(str(name)) or str(name)))
        mids.append(est)
        lows.append(est - low)
        highs.append(high - est)
        said.append(with_ci(est, low, high, confidence, same=same(str(name))))
    if not names:
        return None
    fig = Figure(scatter(
        x=mids, y=names, mode="markers", marker={"size": 9},
        error_x={"type": "data", "symmetric": False, "array": highs, "arrayminus": lows},
        customdata=said, hovertemplate="%{y}: %{customdata}<extra></extra>"))
    fig.update_layout(title=f"{as_text(probe)}: estimates with {level_of(confidence)} CIs",
                      height=120 + 32 * len(names), template="plotly_white",
                      margin={"l": 260, "r": 30, "t": 50, "b": 40},
                      yaxis={"automargin": True})
    fig.add_vline(x=0, line_dash="dot", line_color="#888")
    return fig


def about(result: Json) -> str:
    """Items, detector, missing responses and sources: those the result has (a judge audit
    has none of them)."""
    sources = result.get("sources") or {}
    said = [f"{result['items']} items" if result.get("items") is not None else "",
            f"detector {result['detector']}" if result.get("detector") is not None else "",
            f"without a response: {result['no_response']}"
            if result.get("no_response") is not None else "",
            "answered by " + ", ".join(f"{k} ({v})" for k, v in sources.items())
            if sources else ""]
    text = " · ".join(s for s in said if s)
    return f"<p>{escape(text)}</p>" if text else ""


def probe_section(name: str, result: Json, figure_index: int, confidence: float = 0.95
                  ) -> tuple[str, int]:
    """One probe's section, its intervals said at ``confidence`` (the summary's level)."""
    parts = [f"<h2>{escape(name)}</h2>", about(result)]
    parts += [f"<p>{escape(str(s))}</p>" for s in result.get("sentences", [])]
    headline = result.get("headline", {})
    words, same = words_of(name), same_of(name, confidence)
    parts.append(table(headline_columns(confidence), headline_rows(headline, words, same),
                       numbers=True))
    if any(isinstance(v, Mapping) and "p_holm" in v for v in headline.values()):
        parts.append(HEADLINE_NOTE.format(level=level_of(confidence)))
    fig = headline_figure(name, headline, words, same, confidence)
    if fig is not None:
        parts.append(figure_html(fig, figure_index))
        figure_index += 1
    across, figure_index = wordings.section_html(result.get("wordings", {}), figure_html,
                                                 figure_index)
    parts.append(across)
    for table_name, rows in result.get("tables", {}).items():
        if rows:  # a row per headline value ("headline by wording") names it as above
            rows = [{**r, "metric": named(str(r["metric"]), words(str(r["metric"])))}
                    if isinstance(r, Mapping) and "metric" in r else r for r in rows]
            parts.append(f"<h3>{escape(table_name)}</h3>" + record_table(rows))
    hits = result.get("examples", [])
    if hits:
        parts.append("<h3>Examples of hits</h3>")
        parts.append(table(["item", "prompt", "response", "label"],
                           [[h.get("item_id"), h.get("prompt"), h.get("response"),
                             h.get("label")] for h in hits]))
    return "\n".join(parts), figure_index


def write_audit_report(run_dir: str | Path | RunStore, output: str | Path | None = None) -> Path:
    """Render an audit run (``biasscope audit``) to one HTML file; return its path."""
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    if not store.summary_json.is_file():
        raise BiasscopeError(f"{store.root} has no summary.json: run `biasscope audit` first")
    page = audit_page(store, store.read_json("run.json"), store.read_json("summary.json"))
    target = Path(output) if output is not None else store.root / REPORT
    write_bytes(target, page)
    return target


def summary_level(summary: Json) -> float:
    """The confidence level ``summary`` was computed at (``analysis.confidence``, stored by
    ``--confidence``; 95% where it records none, as every summary before it was)."""
    return computed_levels(summary).confidence


#: The report's name in its run directory.
REPORT = "report.html"


def audit_page(store: RunStore, run: Json, summary: Json) -> bytes:
    """The report of the run in ``store`` whose run.json is ``run`` and summary ``summary``:
    a job that writes summary.json renders it from what it writes, under the same lock."""
    model = str(run.get("model", "?"))
    sections, index = [], 0
    confidence = summary_level(summary)
    for name, result in summary.get("probes", {}).items():
        html, index = probe_section(str(name), result, index, confidence)
        sections.append(html)
    unknown = summary.get("unknown_response_ids") or []
    note = (f"<p class=\"missing\">{len(unknown)} response ids match no item: "
            f"{escape(', '.join(map(str, unknown[:20])))}</p>" if unknown else "")
    if thin := said_thin(summary):  # the level too fine for the resamples
        note += f"<p class=\"missing\">{escape(thin)}</p>"
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>biasscope audit: {escape(model)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Fairness audit</h1>",
        f'<p class="sub">{escape(model)} · generated by biasscope from the records in the run '
        f"folder “{escape(store.root.name)}”</p>", note, *sections,
        "<h2>Run configuration</h2>",
        table(["setting", "value"], flatten(run)), "</body></html>", ""])
    return page.encode("utf-8")
