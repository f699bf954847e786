"""The dynamics HTML report: one self-contained file, built from a run's stored records alone.

It renders a summary that the dynamics job's analysis computed from ``records/``
(`biasscope.dynamics.reporting`), so the report always matches the records. plotly.js is
embedded once, inline: the file opens offline. Every string that came from data, a model or
the run's settings is HTML-escaped.

Layout: a summary in sentences (with the analysis' findings and method), the figures
(`figures`, `stats_figures`), the test and early-stopping tables (`tables`), a section per
audit probe over steps (`audit_panels`; alone when the run has no WinoBias records), and the
run's configuration at the bottom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.report.plotting import Json, View, by_model, fairness_checkpoints
from biasscope.report.tables import analysis_sentences, stop_section, table, tests_section
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 1.5rem 2rem 4rem; color: #222; line-height: 1.5; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2.5rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
.sub { color: #666; margin-top: 0; }
.summary { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px;
           padding: 0.6rem 1.2rem; }
.caption { color: #444; max-width: 70rem; }
.missing { color: #a33; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; }
table.numbers td { white-space: nowrap; }
pre { margin: 0; white-space: pre-wrap; font-size: 0.85rem; }
"""


def render_dynamics_report(store: RunStore, summary: Json, target: Path) -> Path:
    """Render a ``biasscope dynamics`` run and its analysed ``summary`` to ``target`` (one
    self-contained HTML file, written atomically); return its path. Computes nothing: the
    summary comes from `biasscope.dynamics.reporting`."""
    run = store.read_json("run.json")
    no_records = f"{store.root} has no records: run `biasscope dynamics` first"
    checkpoints: list[dict[str, Any]] = summary["checkpoints"]
    if not checkpoints:
        raise BiasscopeError(no_records)
    from biasscope.report import audit_panels, breakdown_panels, figures, wordings

    view = View(summary.get("analysis") or {})
    probes = view.get("probes", {})
    fairness = fairness_checkpoints(checkpoints)
    if fairness or not probes:
        shown: Sequence[Json] = fairness or checkpoints
        panels = figures.panels(checkpoints, answer_labels(run, shown), view.data)
        panels = breakdown_panels.panels(shown, view, panels) + wordings.panels(view)
        sentences = summary_sentences(run, shown, by_model(shown)) + analysis_sentences(view)
        analysis = "\n".join(filter(None, [tests_section(view, checkpoints),
                                            stop_section(view, checkpoints)]))
    else:  # audit probes only: their sections, no empty WinoBias figures
        panels, analysis = [], ""
        sentences = [*summary_sentences(run, checkpoints, by_model(checkpoints)),
                     "This run holds no WinoBias records, so the report shows only the audit "
                     f"probes' sections ({escape(', '.join(probes))})."]
    if probes:  # each audit probe's section over steps, after the WinoBias figures and tests
        drawn = sum(1 for p in panels if p.figure is not None)
        analysis += "\n" + audit_panels.section_html(probes, figure_html, drawn,
                                                      view.correction, view.alpha)
    if summary.get("missing_units"):
        said = escape(missing_sentence(summary["missing_units"], store.root))
        sentences.insert(0, f'<span class="missing">{said}</span>')
    page = render_page(store.root, run, checkpoints, sentences, panels, analysis)
    write_bytes(target, page.encode("utf-8"))
    return target


def missing_sentence(missing: Sequence[str], root: Path) -> str:
    """Which units' records files are gone from ``root`` and how to score them again."""
    names = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                       else "")
    return (f"{_plural(len(missing), 'unit')} of this run {'has' if len(missing) == 1 else 'have'}"
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


# --- summary sentences -----------------------------------------------------------------------


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _num(value: Any) -> str:
    return f"{value:.4g}" if _finite(value) else "n/a"


def _where(ckpt: Json) -> str:
    if ckpt.get("snapshot"):
        return "no training step"
    if ckpt.get("step") is not None:
        return f"step {ckpt['step']}"
    return f"revision {escape(str(ckpt.get('revision') or 'main'))}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _span(values: Sequence[Any], word: str) -> str:
    """``10`` or ``10 to 30`` (or ``a to c``)."""
    first, last = escape(str(values[0])), escape(str(values[-1]))
    return f"{word} {first}" if len(values) == 1 else f"{word}s {first} to {last}"


def model_sentence(name: str, points: Sequence[Json]) -> str:
    seeds = sorted({int(s) for c in points for s in c["seeds"]})
    short = sum(1 for c in points if len(c["seeds"]) < len(seeds))
    sizes = sorted({int(c["items_per_seed"]) for c in points})
    steps = [c["step"] for c in points if c.get("step") is not None and not c.get("snapshot")]
    where = (_span(steps, "step") if len(steps) == len(points) else _where(points[0])
             if len(points) == 1 else _span([c.get("revision") or "main" for c in points],
                                            "revision"))
    items = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    probes = ", ".join(sorted({escape(str(c["probe"])) for c in points}))
    text = (f"<b>{escape(name)}</b> on probe <b>{probes}</b>: "
            f"{_plural(len(points), 'checkpoint')} ({where}), "
            f"{_plural(len(seeds), 'seed')} ({', '.join(map(str, seeds))}), "
            f"{items} items per seed.")
    if short:
        text += f" {_plural(short, 'checkpoint')} so far with fewer seeds than the others."
    return text


def _gap(ckpt: Json) -> str:
    std = ckpt["std"].get("jsdp_gap")
    n = len(ckpt["seeds"])
    spread = f" ± {_num(std)}" if n > 1 else " (one seed, no spread)"
    return f"{_num(ckpt['mean']['jsdp_gap'])}{spread}"


def gap_sentence(points: Sequence[Json]) -> str | None:
    """The JSD-P gap at the first and last checkpoint, and where it was largest."""
    with_gap = [c for c in points if _finite(c["mean"].get("jsdp_gap"))]
    if not with_gap:
        return None
    first, last = with_gap[0], with_gap[-1]
    text = (f"The JSD-P gap (male − female) was {_gap(first)} at the first checkpoint "
            f"({_where(first)})")
    if len(with_gap) == 1:
        return text + "."
    text += f" and {_gap(last)} at the last ({_where(last)})"
    widest = max(with_gap, key=lambda c: abs(float(c["mean"]["jsdp_gap"])))
    return text + f"; it was largest in size at {_where(widest)}: {_gap(widest)}."


def summary_sentences(run: Json, checkpoints: Sequence[Json],
                      groups: Mapping[str, Sequence[Json]]) -> list[str]:
    """Plain sentences (already HTML-safe) for the top of the report; ``groups``: per model."""
    out = []
    if len(groups) > 1:
        names = ", ".join(f"<b>{escape(m)}</b>" for m in groups)
        out.append(f"This run compares {len(groups)} models: {names}.")
    for name, points in groups.items():
        out.append(model_sentence(name, points))
        gap = gap_sentence(points)
        if gap:
            out.append(gap)
    if any("jsdp_gap" in c["mean"] for c in checkpoints):
        out.append("A positive gap means the model is further from the correct answer when it "
                   "is “male” than when it is “female” (biased towards “female”); a negative "
                   "gap, the reverse.")
    out.append("Values are means over seeds; ± is the sample standard deviation over seeds, "
               "drawn as the shaded band around each line.")
    listed = len(run.get("checkpoints", []))
    have = len({(c["model"], c.get("revision"), c.get("step")) for c in checkpoints})
    if listed > have:
        out.append(f"Only {have} of the {listed} checkpoints listed in run.json "
                   "have records so far.")
    return out


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
    about = [("directory", str(root)), ("schema", run.get("schema")),
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


def panels_html(panels: Sequence[Any]) -> str:
    parts, drawn = [], 0
    for panel in panels:
        parts.append(f"<h2>{escape(panel.title)}</h2>")
        parts.append(f'<p class="caption">{escape(panel.caption)}</p>')
        if panel.figure is None:
            parts.append(f'<p class="missing">Not available: {escape(panel.missing)}</p>')
            continue
        parts.append(figure_html(panel.figure, drawn))
        drawn += 1
    return "\n".join(parts)


def render_page(root: Path, run: Json, checkpoints: Sequence[Json], sentences: Sequence[str],
                panels: Sequence[Any], analysis: str = "") -> str:
    """The whole document. ``sentences`` and ``analysis`` (tables) are HTML-safe already;
    everything else is escaped."""
    models = ", ".join(dict.fromkeys(str(c["model"]) for c in checkpoints))
    summary = "".join(f"<p>{s}</p>" for s in sentences)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>biasscope fairness dynamics: {escape(models)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Fairness dynamics during training</h1>",
        f'<p class="sub">{escape(models)} · generated by biasscope from the records in '
        f"{escape(str(root))}</p>",
        f'<section class="summary">{summary}</section>',
        panels_html(panels),
        analysis,
        config_section(root, run, checkpoints),
        "</body></html>",
        "",
    ])
