"""The dynamics HTML report: one self-contained file, built from a run's stored records alone.

It renders a summary that the dynamics job's analysis computed from ``records/``
(`biasscope.dynamics.summary.write`), so the report always matches the records. plotly.js is
embedded once, inline: the file opens offline. Every string that came from data, a model or
the run's settings is HTML-escaped.

Layout: a summary in sentences (with the analysis' findings and method), the figures
(`figures`, `stats_figures`), the test and early-stopping tables (`tables`), a section per
audit probe over steps (`probe_panels`; alone when the run has no WinoBias records), and the
run's configuration at the bottom.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.report.headline import Words, plural, words
from biasscope.report.plotting import Json, View, fairness_checkpoints
from biasscope.report.tables import stop_section, table, tests_section
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 1.5rem 2rem 4rem; color: #222; line-height: 1.5; }
h1 { font-size: 1.6rem; margin: 0.5rem 0 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2.5rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
.sub { color: #666; margin-top: 0; }
.summary { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px;
           padding: 0.2rem 1.2rem; }
.summary + h2 { margin-top: 1.2rem; }
.caption { color: #444; max-width: 70rem; }
.missing { color: #a33; }
.findings li { margin-bottom: 0.4rem; }
details summary { cursor: pointer; color: #0b5394; margin: 0.5rem 0; }
.table-wrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left;
         vertical-align: top; overflow-wrap: anywhere; }
th { background: #f6f8fa; overflow-wrap: normal; }  /* headers break between words only */
table.numbers td { white-space: nowrap; overflow-wrap: normal; }
.named { white-space: normal; }  /* a value's words wrap in a number table */
.name { white-space: normal; overflow-wrap: anywhere; }  /* a checkpoint's name, too */
code.key { color: #666; font-size: 0.8rem; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85rem; }
.plotly-graph-div { max-width: 100%; }
"""


def render_dynamics_report(store: RunStore, summary: Json, target: Path) -> Path:
    """Render a ``biasscope dynamics`` run and its analysed ``summary`` to ``target`` (one
    self-contained HTML file, written atomically); return its path. Computes nothing: the
    summary comes from `biasscope.dynamics.summary.write`."""
    run = store.read_json("run.json")
    no_records = f"{store.root} has no records: run `biasscope dynamics` first"
    checkpoints: list[dict[str, Any]] = summary["checkpoints"]
    if not checkpoints:
        raise BiasscopeError(no_records)
    from biasscope.report import breakdown_panels, figures, probe_panels, wordings

    view = View(summary.get("analysis") or {})
    probes = view.get("probes", {})
    fairness = fairness_checkpoints(checkpoints)
    if fairness or not probes:
        shown: Sequence[Json] = fairness or checkpoints
        panels = figures.panels(checkpoints, answer_labels(run, shown), view.data)
        panels = breakdown_panels.panels(shown, view, panels) + wordings.panels(view)
        said = words(run, shown, view, [absent_sentence(panels)])
        analysis = "\n".join(filter(None, [tests_section(view, checkpoints),
                                            stop_section(view, checkpoints)]))
    else:  # audit probes only: their sections, no empty WinoBias figures
        panels, analysis = [], ""
        said = words(run, checkpoints, View())
        said.headline.append("This run holds no WinoBias records, so the report shows only "
                             f"the audit probes' sections ({escape(', '.join(probes))}).")
    if probes:  # each audit probe's section over steps, after the WinoBias figures and tests
        drawn = sum(1 for p in panels if p.figure is not None)
        analysis += "\n" + probe_panels.section_html(probes, figure_html, drawn,
                                                      view.correction, view.alpha,
                                                      view.confidence)
    if summary.get("missing_units"):
        text = escape(missing_sentence(summary["missing_units"], Path(store.root.name)))
        said.headline.insert(0, f'<span class="missing">{text}</span>')
    if isinstance(unfinished := summary.get("unfinished"), Mapping) and unfinished.get(
            "sentence"):  # first: every sentence below rests on the scored units only
        said.headline.insert(0, f'<span class="missing">{escape(unfinished["sentence"])}</span>')
    page = render_page(store.root, run, checkpoints, said, panels, analysis)
    write_bytes(target, page.encode("utf-8"))
    return target


def absent_sentence(panels: Sequence[Any]) -> str:
    """One sentence naming the figures this run cannot draw and why ("" if none)."""
    absent = [f"{escape(p.title)} ({escape(p.missing.rstrip('.'))})" for p in panels
              if p.figure is None]
    return f"Not drawn, for want of data: {'; '.join(absent)}." if absent else ""


def missing_sentence(missing: Sequence[str], root: Path) -> str:
    """Which units' records files are gone from ``root`` and how to score them again."""
    names = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                       else "")
    return (f"{plural(len(missing), 'unit')} of this run {'has' if len(missing) == 1 else 'have'}"
            f" no records file in {root / 'records'} (deleted or set aside as damaged), so the "
            f"report leaves {'it' if len(missing) == 1 else 'them'} out: {names}. Run the same "
            f"`biasscope dynamics` command again with --out {root} to score "
            f"{'it' if len(missing) == 1 else 'them'} again.")


def answer_labels(run: Json, checkpoints: Sequence[Json]) -> list[str]:
    """Correct-answer labels with metrics, in the probe's option order when run.json has it."""
    present = dict.fromkeys(k.split("/", 1)[1] for c in checkpoints for k in c["mean"]
                            if k.startswith("average_rank/"))
    probes = run.get("settings", {}).get("probes", {})
    options = [o for p in probes.values() if isinstance(p, Mapping)
               for o in p.get("options", [])] if isinstance(probes, Mapping) else []
    ordered = [str(o) for o in options if o in present]
    return ordered + [a for a in present if a not in ordered]


# --- configuration tables --------------------------------------------------------------------


def flatten(mapping: Json, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def checkpoint_rows(run: Json, checkpoints: Sequence[Json]) -> list[list[Any]]:
    done: dict[tuple[Any, ...], list[Json]] = {}
    for c in checkpoints:
        done.setdefault((c["model"], c["revision"], c["step"]), []).append(c)
    several = len({c["probe"] for c in checkpoints}) > 1
    rows = []
    for entry in run.get("checkpoints", []):
        found = done.get((entry.get("model"), entry.get("revision"), entry.get("step")), [])
        seeds = "; ".join((f"{c['probe']}: " if several else "") + ", ".join(map(str, c["seeds"]))
                          for c in found) or "no records yet"
        sizes = "; ".join(str(c["items_per_seed"]) for c in found) or None
        rows.append([entry.get("model"), entry.get("revision"), entry.get("step"),
                     entry.get("source"), seeds, sizes])
    return rows


def config_section(root: Path, run: Json, checkpoints: Sequence[Json]) -> str:
    about = [("run folder", root.name), ("schema", run.get("schema")),
             ("created", run.get("created")), ("updated", run.get("updated")),
             ("seeds", run.get("seeds")), ("limit", run.get("limit"))]
    settings = run.get("settings", {})
    versions = run.get("versions", {})
    return "\n".join([
        "<h2>Run configuration</h2>",
        table(["run", "value"], about),
        "<h3>Settings</h3>",
        table(["setting", "value"], flatten(settings) if isinstance(settings, Mapping) else []),
        "<h3>Checkpoints</h3>",
        table(["model", "revision", "step", "source", "seeds with records", "items per seed"],
              checkpoint_rows(run, checkpoints)),
        "<h3>Versions</h3>",
        table(["package", "version"], versions.items() if isinstance(versions, Mapping) else []),
    ])


# --- page ------------------------------------------------------------------------------------


def figure_html(figure: Any, index: int) -> str:
    """The figure's div and script; plotly.js itself inline with the first figure only."""
    return str(figure.to_html(
        full_html=False, include_plotlyjs=index == 0, include_mathjax=False,
        div_id=f"biasscope-figure-{index + 1}", default_width="100%",
        config={"displaylogo": False, "responsive": True}))


def panel_html(panel: Any, index: int) -> str:
    """A figure's heading, the figure, then how to read it."""
    return "\n".join([f"<h2>{escape(panel.title)}</h2>", figure_html(panel.figure, index),
                      f'<p class="caption">{escape(panel.caption)}</p>'])


def paragraphs(texts: Sequence[str]) -> str:
    return "".join(f"<p>{t}</p>" for t in texts if t)


def render_page(root: Path, run: Json, checkpoints: Sequence[Json], said: Words,
                panels: Sequence[Any], analysis: str = "") -> str:
    """The whole document: the headline and the main figure first, then the findings, the
    other figures, the tables and the configuration. ``said`` and ``analysis`` are HTML-safe
    already; everything else is escaped."""
    models = ", ".join(dict.fromkeys(str(c["model"]) for c in checkpoints))
    drawn = [p for p in panels if p.figure is not None]
    findings = "".join(f"<li>{t}</li>" for t in said.findings if t)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>biasscope fairness dynamics: {escape(models)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Fairness dynamics during training</h1>",
        f'<p class="sub">{escape(models)} · generated by biasscope from the records of the '
        f"run folder “{escape(root.name)}”</p>",
        f'<section class="summary">{paragraphs(said.headline)}</section>',
        *(panel_html(p, i) for i, p in enumerate(drawn[:1])),
        '<h2>Findings</h2><section class="findings">',
        f"<ul>{findings}</ul>" if findings else "",
        "<details><summary>How these numbers were computed</summary>"
        f"{paragraphs(said.method)}</details></section>",
        *(panel_html(p, i) for i, p in enumerate(drawn[1:], start=1)),
        analysis,
        config_section(root, run, checkpoints),
        "</body></html>",
        "",
    ])
