"""The sensitivity report: the source's figures, interactive, plus tables.

Per direction: original vs perturbed rewards (histograms, and a rug whose hover shows the
conversation's response and its revision), each normalised index per principle per model, the
groups' stacked sensitivities with the principle on hover, then the tables (indices beside the
validity checks, model and group tests, rank agreement). Every interval is said at the level
summary.json was computed at (``analysis``). Everything from data is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import computed_levels, said_thin
from biasscope.core.numbers import level_of
from biasscope.report.html import CSS, figure_html, flatten
from biasscope.report.plotfig import Figure, as_text, bar, histogram, scatter
from biasscope.report.tables import named, record_table, table
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes

#: Each index in words (the source's "sensitivity metrics", docs/how-to/sensitivity.md): an
#: effect is a prompt's reward after the revision minus before it.
INDEX_WORDS = {
    "mean_effect": "mean reward effect (revised − original)",
    "median_effect": "median reward effect (revised − original)",
    "std_effect": "standard deviation of the reward effect",
    "mean_percentile_effect": "mean percentile effect (the reward's percentile, revised − "
                              "original)",
    "median_percentile_effect": "median percentile effect (the reward's percentile, revised "
                                "− original)",
    "wilcoxon_statistic": "Wilcoxon signed-rank statistic, revised against original",
}


def index_words(key: str) -> str | None:
    """An index's words (`INDEX_WORDS`), ``<index>_normalised`` as its index's divided over
    the model's principles; None for a key that is no index."""
    raw = key.removesuffix("_normalised")
    if (words := INDEX_WORDS.get(raw)) is None:
        return None
    return words if raw == key else f"{words}, normalised over the model's principles"


METRICS = ("mean_effect_normalised", "median_effect_normalised",
           "mean_percentile_effect_normalised", "median_percentile_effect_normalised",
           "wilcoxon_statistic_normalised")
SHOWN = ("model", "principle", "n", "mean_effect", "mean_effect_low", "mean_effect_high",
         "median_effect", "median_effect_low", "median_effect_high", "std_effect",
         "std_effect_low", "std_effect_high", "mean_percentile_effect",
         "mean_percentile_effect_low", "mean_percentile_effect_high", "wilcoxon_statistic",
         "p_greater_holm", "p_two_sided_holm", "rank_biserial", "mean_effect_normalised",
         "mean_effect_normalised_low", "mean_effect_normalised_high", "failed", "preambles",
         "echoes", "empty", "empty_critiques", "truncated", "mean_length_change")


def _short(text: Any, n: int = 160) -> str:
    value = str(text or "")
    return value if len(value) <= n else value[:n] + "…"


def rewards_figure(part: pd.DataFrame, model: str) -> Figure:
    """Original and revised rewards as shares over the same bins: a prompt has one original
    and one revision per principle, so counts would not compare."""
    rows = part[part["model"] == model]
    fig = Figure()
    originals = rows.drop_duplicates("prompt_id")
    for name, values in (("original", originals["original"]), ("perturbed", rows["perturbed"])):
        fig.add_trace(histogram(x=values.dropna().tolist(), name=name, opacity=0.55,
                                nbinsx=40, histnorm="percent", bingroup="rewards"))
    hover = [f"{as_text(str(r.prompt_id))} · {as_text(str(r.principle))}<br>response: "
             f"{as_text(_short(r.response))}<br>revision: {as_text(_short(r.revision))}"
             for r in rows.itertuples()]
    fig.add_trace(scatter(x=rows["perturbed"].tolist(), y=[0] * len(rows), mode="markers",
                          marker={"symbol": "line-ns-open", "size": 10}, name="revisions",
                          hovertext=hover, hoverinfo="text", yaxis="y2"))
    # Plotly renders a little HTML in titles, names and tick labels: escape what came from data.
    fig.update_layout(barmode="overlay",
                      title=f"{as_text(model)}: rewards before and after revision",
                      xaxis_title="reward", yaxis_title="% of rewards", template="plotly_white",
                      yaxis2={"overlaying": "y", "visible": False, "range": [0, 10]},
                      height=380)
    return fig


def metric_figure(indices: pd.DataFrame, metric: str, texts: Mapping[str, str],
                  confidence: float = 0.95) -> Figure:
    """One bar per principle and model, its bootstrap interval (at ``confidence``) as error
    bars."""
    fig = Figure()
    for model, chunk in indices.groupby("model", sort=False):
        bars = None  # the bootstrap interval, where the summary has one
        if f"{metric}_low" in chunk and f"{metric}_high" in chunk:
            bars = {"type": "data", "symmetric": False,
                    "array": (chunk[f"{metric}_high"] - chunk[metric]).tolist(),
                    "arrayminus": (chunk[metric] - chunk[f"{metric}_low"]).tolist()}
        fig.add_trace(bar(x=[as_text(str(p)) for p in chunk["principle"]],
                          y=chunk[metric].tolist(), name=as_text(str(model)), error_y=bars,
                          hovertext=[as_text(texts.get(p, "")) for p in chunk["principle"]]))
    fig.update_layout(barmode="group", title=as_text(_titled(metric)), template="plotly_white",
                      height=360,
                      yaxis_title=f"normalised index (bars: {level_of(confidence)} CI)")
    return fig


def groups_figure(groups: Mapping[str, Any], texts: Mapping[str, str]) -> Figure:
    rows = groups.get("principles") or []
    models = [k for k in (rows[0] if rows else {}) if k not in ("principle", "group")]
    fig = Figure()
    for row in rows:
        fig.add_trace(bar(
            x=[as_text(f"{m} · {row['group']}") for m in models], y=[row[m] for m in models],
            name=as_text(str(row["principle"])), showlegend=False,
            text=as_text(str(row["principle"])), textposition="inside",  # which segment is which
            hovertext=as_text(f"{row['principle']}: {texts.get(row['principle'], '')}"),
            hoverinfo="text+y"))
    metric = _titled(str(groups.get("metric")))
    fig.update_layout(barmode="stack", template="plotly_white", height=380,
                      title=f"{as_text(metric)}: stacked by group")
    return fig


def _titled(key: str) -> str:
    """An index's words with its key, for a figure's title (plain text)."""
    words = index_words(key)
    return f"{words} ({key})" if words else key.replace("_", " ")


def _metrics_named(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose metric cells (``metric``, ``metric_a``, ``metric_b``) name an index in
    words, its key below (`tables.named`), as the audit's tables name theirs."""
    keys = ("metric", "metric_a", "metric_b")
    return [{k: named(str(v), index_words(str(v))) if k in keys and isinstance(v, str) else v
             for k, v in r.items()} for r in rows]


def words_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                confidence: float = 0.95, head: Mapping[str, str] | None = None) -> str:
    """`record_table` with the keys' underscores as spaces, so that a narrow header wraps
    between words rather than inside them; an index's column is named in words, and an
    interval's bounds (at ``confidence``) by their level, each with its key below
    (`_header`). ``head``: words for other keys (the key still shown below)."""
    keys = list(columns) if columns is not None else list(
        dict.fromkeys(k for r in rows for k in r))
    return record_table([{k.replace("_", " "): r.get(k) for k in keys} for r in rows],
                        [k.replace("_", " ") for k in keys],
                        [named(k, (head or {})[k]) if k in (head or {})
                         else _header(k, confidence, _bound(k, keys)) for k in keys])


def _bound(key: str, keys: Sequence[str]) -> str | None:
    """``"low"`` or ``"high"`` where ``key`` is that bound of an interval among ``keys``:
    ``low`` beside ``high`` (the sanity accuracy's, a correlation's), or ``<x>_low`` beside
    ``<x>`` and ``<x>_high`` (an index's, a confound's); else None. By its partners, not its
    name alone: a group's columns end in the group's name (``n_low`` for a group "low")."""
    for bound, other in (("low", "high"), ("high", "low")):
        if key == bound and other in keys:
            return bound
        stem = key.removesuffix(f"_{bound}")
        if stem != key and stem in keys and f"{stem}_{other}" in keys:
            return bound
    return None


def _header(key: str, confidence: float = 0.95, bound: str | None = None) -> str:
    """A column's header: an index in words with its key (`tables.named`), an interval's
    ``bound`` as "90% CI low" or "90% CI high" with its key (the level in the header, as the
    audit's "90% CI" column has it, for a table read without its caption); any other key
    with spaces."""
    words = index_words(key)
    if words is None and bound is not None:
        words = f"{level_of(confidence)} CI {bound}"
    return named(key, words) if words else key.replace("_", " ")


def confounds_tables(found: Mapping[str, Any], confidence: float = 0.95) -> list[str]:
    """Length-adjusted effects, unchanged revisions and the correlations of effects, their
    intervals at ``confidence``."""
    if not found:
        return []
    level = level_of(confidence)
    unchanged = [{**{k: v for k, v in r.items() if k != "unchanged_share"},
                  "share": r["unchanged_share"]["estimate"],
                  "share_low": r["unchanged_share"]["low"],
                  "share_high": r["unchanged_share"]["high"]} for r in found["unchanged"]]
    return [
        "<h3>Effect adjusted for length change</h3><p>OLS of the reward effect on the length "
        "change (characters): the intercept is the effect at unchanged length, the slope the "
        f"reward per 100 characters; {level} prompt-bootstrap intervals.</p>"
        + words_table(found.get("length", []), confidence=confidence),
        f"<h3>Revisions that changed next to nothing</h3><p>Normalised edit distance below "
        f"{escape(str(found.get('unchanged_below')))}, their share with its Wilson {level} "
        "interval; "
        + ("left out of the indices.</p>" if found.get("exclude_unchanged")
           else "kept in the indices.</p>") + words_table(unchanged, confidence=confidence),
        "<h3>Correlation of per-prompt effects between principles</h3><p>Pearson r with "
        f"Fisher-z {level} intervals. Both effects subtract the same original reward, which "
        "correlates them by itself; r beyond original is the part it does not explain, and "
        "p tests it (one-sided, Holm over each model's pairs).</p>"
        + words_table(found.get("correlations", []), confidence=confidence)]


def sanity_section(sanity: Mapping[str, Any], confidence: float = 0.95) -> str:
    """Each reward model's accuracy on held-out chosen/rejected pairs, warnings first; its
    exact interval at ``confidence``, its verdict at its own α (summary.json's ``alpha``),
    each header saying which: a 90% interval above one half beside "at chance" is no
    contradiction once both levels are in sight."""
    if not sanity:
        return ""
    rows = [{"model": m, **{k: a[k] for k in ("correct", "n", "estimate", "low", "high",
                                               "ties", "p_value", "effect_size", "verdict")}}
            for m, a in sanity.get("models", {}).items()]
    alpha = sanity.get("alpha", 0.05)  # stored since the header says it; 0.05 before
    notes = "".join(f'<p class="{"missing" if "WARNING" in s else "caption"}">'
                    f"{escape(str(s))}</p>" for s in sanity.get("sentences", []))
    return (f"<h2>Reward-model sanity: accuracy on {escape(str(sanity.get('source')))} "
            f"chosen/rejected pairs</h2>{notes}" + words_table(rows, confidence=confidence, head={
                "verdict": f"verdict, exact test at α = {alpha:g}"}))


def direction_section(direction: str, result: Mapping[str, Any], recs: pd.DataFrame,
                      index: int, confidence: float = 0.95) -> tuple[str, int]:
    parts = [f"<h2>Revised {escape(direction)} the principles</h2>"]
    parts += [f"<p>{escape(str(s))}</p>" for s in result.get("sentences", [])]
    indices = pd.DataFrame(result.get("indices", []))
    texts = result.get("principles", {})
    figures = [rewards_figure(recs, str(m)) for m in recs["model"].unique()]
    if len(indices):
        figures += [metric_figure(indices, m, texts, confidence) for m in METRICS
                    if m in indices]
    if result.get("groups"):
        figures.append(groups_figure(result["groups"], texts))
    for fig in figures:
        parts.append(figure_html(fig, index))
        index += 1
    columns = [c for c in SHOWN if c in indices]
    parts.append("<h3>Indices and validity</h3>"
                 + words_table(result.get("indices", []), columns, confidence))
    for name in ("model_test", "rank_agreement"):
        value = result.get(name)
        if value:
            rows = value if isinstance(value, list) else [value]
            parts.append(f"<h3>{escape(name.replace('_', ' '))}</h3>"
                         + words_table(_metrics_named(rows), confidence=confidence))
    if result.get("groups"):
        parts.append("<h3>Groups</h3>" + words_table(result["groups"].get("models", []),
                                                     confidence=confidence))
    parts += confounds_tables(result.get("confounds") or {}, confidence)
    parts.append("<h3>Principles</h3>" + table(["principle", "text"], texts.items()))
    return "\n".join(parts), index


def missing_text(missing: Sequence[Mapping[str, str]]) -> str:
    """What a run lacks that its run.json lists, and how to finish it (report and CLI)."""
    units = ", ".join(f"{m['model']} ({m['direction']})" for m in missing)
    return (f"No records of {units}, which run.json lists (an earlier run's requests "
            "failed); rerun with those reward models and directions to finish the run")


def write_sensitivity_report(run_dir: str | Path | RunStore,
                             output: str | Path | None = None) -> Path:
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    if not store.summary_json.is_file():
        raise BiasscopeError(f"{store.root} has no summary.json: run `biasscope sensitivity`")
    run, summary, recs = store.read_json("run.json"), store.read_json("summary.json"), \
        store.records()
    sections, index = [], 0
    confidence = computed_levels(summary).confidence
    notes = [said_thin(summary) or "",  # the level too fine for the resamples, first
             f"Conventions: {summary.get('conventions_meaning') or 'biasscope (default)'}.",
             str(summary.get("intervals") or "")]
    notes.append(str((summary.get("prompts") or {}).get("sentence") or ""))
    failed = summary.get("incomplete")
    if failed and failed.get("failed_requests"):
        notes.append(f"Incomplete: {failed.get('failed_requests')} of {failed.get('requests')} "
                     "perturbation requests failed; the indices leave them out and the reward "
                     "histograms show only stored units. Rerun the same command to retry them.")
    if failed and failed.get("missing"):
        notes.append(f"Incomplete: {missing_text(failed['missing'])}.")
    if "direction" not in recs:  # every unit still pending
        recs = pd.DataFrame(columns=["direction", "model"])
    for direction, result in summary.get("directions", {}).items():
        html, index = direction_section(direction, result,
                                        recs[recs["direction"] == direction], index, confidence)
        sections.append(html)
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>biasscope sensitivity: {escape(str(run.get('model')))}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Constitutional sensitivity of reward models</h1>",
        f'<p class="sub">{escape(str(run.get("model")))} · perturbed by '
        f"{escape(str(run.get('perturber', {}).get('model')))}</p>",
        *(f"<p>{escape(n)}</p>" for n in notes if n),
        sanity_section(summary.get("sanity") or {}, confidence), *sections,
        "<h2>Run configuration</h2>", table(["setting", "value"], flatten(run)),
        "</body></html>", ""])
    target = Path(output) if output is not None else store.root / "report.html"
    write_bytes(target, page.encode("utf-8"))
    return target
