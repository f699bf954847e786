"""HTML tables and sentences of the report's analysis: the method and findings for the summary
at the top, per-checkpoint test tables, model comparisons and the early-stopping table.

Everything returned is HTML-safe: every string from data, a model or the settings is escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from biasscope.core.corrections import SIGNED_RANK
from biasscope.core.numbers import ci_decimals, decimals, level_of, num, pvalue, setting_percent
from biasscope.probes.winobias import NAME as PROBE
from biasscope.report.plotting import Json, View, effect, finite, fmt, revision_label

TEST_VALUES = {"jsdp_correct": "JSD-P of the correct option, male vs female prompts",
               "target_rank": "Average Rank of the answer token, male vs female prompts"}


class Html(str):
    """A cell that is HTML already, every part from data escaped by whoever built it:
    `cell` writes it as it is."""


def named(key: str, words: str | None) -> Html:
    """A value's words with its key below in a small code span (the key ``summary.json``
    holds it under, to find it there); the key alone where it has no words."""
    code = f'<code class="key" title="its key in the JSON files">{escape(key)}</code>'
    if not words or words == key:
        return Html(code)
    return Html(f'<span class="named">{escape(words)}</span><br>{code}')


def name_cell(name: str) -> Html:
    """A name in a number table's first column, which breaks where it must (a long revision
    name would otherwise widen the table past the page)."""
    return Html(f'<span class="name">{escape(name)}</span>')


def cell(value: Any) -> str:
    if isinstance(value, Html):
        return str(value)
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return f"<pre>{escape(text)}</pre>" if "\n" in text else escape(text)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numbers: bool = False) -> str:
    """A table with escaped cells and headers (an `Html` header as it is: `named`'s words and
    key); ``numbers``: cells do not wrap."""
    head = "".join(f"<th>{h if isinstance(h, Html) else escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    kind = ' class="numbers"' if numbers else ""
    return (f'<div class="table-wrap"><table{kind}><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


_P_COLUMN = re.compile(r"(^|[_ ])p($|[_ ])")  # p, p_value, wilcoxon_p, sign p, p_holm, ...


def _row_cells(row: Mapping[str, Any], header: Sequence[str]) -> list[Any]:
    """One row in the reports' number format: p-value columns floored; ``low`` and ``high``,
    and the estimate in the column before ``low``, to the interval's digits; other floats to
    three significant digits; non-finite ones as n/a."""
    places = ci_decimals(row.get("low"), row.get("high"))
    interval = {"low", "high"}
    if places is not None and "low" in header and header.index("low") > 0:
        interval.add(header[header.index("low") - 1])
    cells = []
    for key in header:
        value = row.get(key)
        if not isinstance(value, float):
            cells.append(value)
        elif _P_COLUMN.search(key):
            cells.append(pvalue(value))
        elif places is not None and key in interval:
            cells.append(num(value, places))
        else:
            cells.append(fmt(value))
    return cells


def record_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                 head: Sequence[str] | None = None) -> str:
    """Rows of dicts as a number table (every key, in first-seen order, unless ``columns``),
    in the reports' number format (`_row_cells`); ``head``: the headers shown, one per column
    (`Html` to name a key in words), else the keys."""
    header = list(columns) if columns is not None else list(
        dict.fromkeys(k for r in rows for k in r))
    return table(head or header, [_row_cells(r, header) for r in rows], numbers=True)


def _p(value: Any) -> str:
    return pvalue(value)


def _yes(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "n/a"


def _significant(row: Mapping[str, Any], gap_of_interest: Any, gap: str = "gap") -> str:
    """"yes", or "yes, but |gap| < X" where the gap (``gap``: the one with a smallest gap of
    interest) is below the smallest gap of interest."""
    if row.get("below_gap_of_interest") is True and finite(gap_of_interest):
        return f"yes, but |{gap}| < {gap_of_interest:g}"
    return _yes(row.get("significant"))


def method_sentence(view: View) -> str:
    """How significance and intervals were computed, naming the correction and its default."""
    name = view.correction
    if str(view.get("correction", "holm")) == "holm":
        how = "the Holm method (Holm by default; Benjamini-Hochberg on request)"
    else:
        how = f"{escape(name)} instead of the default Holm"
    resamples = view.get("n_resamples")
    boot = f", {escape(str(resamples))} resamples" if resamples is not None else ""
    return (f"Significance: at each checkpoint, a {gap_test_words(view)} (per-prompt values "
            f"averaged over seeds), with p-values "
            f"corrected over each model's checkpoints by {how}; significant means corrected "
            f"p &lt; {view.alpha:g}.{_min_gap(view)} Error bars are {level_of(view.confidence)} "
            f"bootstrap confidence intervals over prompts{boot}. The intervals are not "
            "adjusted for the number of tests, so one can exclude 0 where the corrected p "
            "is not significant: the tables show the raw and the corrected p side by side.")


def gap_test_words(view: View) -> str:
    """The per-checkpoint gap test its rows name (``test``; a run analysed before pairs were
    tested has none: Mann-Whitney): over WinoBias pairs where the prompts paired."""
    named = {r.get("test") for m in view.models() for v in TEST_VALUES for r in view.tests(m, v)}
    named |= {t.get("test") for a in view.get("aside") or [] if isinstance(a, Mapping)
              for t in (a.get("tests") or {}).values() if isinstance(t, Mapping)}
    paired = ("two-sided Wilcoxon signed-rank test of the male − female differences of the "
              "WinoBias pairs (one pronoun apart)")
    apart = "two-sided Mann-Whitney U test of “male” against “female” prompts"
    if SIGNED_RANK not in named:
        return apart
    return paired if named == {SIGNED_RANK} else f"{paired} where all pair up, else a {apart}"


def _min_gap(view: View) -> str:
    gap = view.get("min_gap") or 0.0
    if not isinstance(gap, (int, float)) or gap <= 0:
        flag = next((view.model(m).get("gap_of_interest") for m in view.models()), None)
        if not finite(flag):
            return ""
        return (f" A significant JSD-P gap below {flag:g} (the default smallest gap of "
                "interest) is flagged as such: prompts that differ in one word give even an "
                "untrained model tiny systematic gaps. Emergence counts significance alone "
                "(--min-gap 0).")
    return (f" Emergence (of the Average Rank gap too) also asks for a JSD-P gap of at least "
            f"{gap:g} (the smallest gap of interest), so that tiny but systematic differences "
            "do not count.")


def performance_sentences(view: View) -> list[str]:
    """Where a model's performance series has no value (those steps cannot be recommended)."""
    out = []
    for model in view.models():
        perf = view.model(model).get("performance")
        if not isinstance(perf, Mapping):
            continue
        missing = perf.get("missing_steps")
        if missing:
            steps = ", ".join(escape(str(s)) for s in missing[:10])
            out.append(f"{escape(model)}: {escape(str(perf.get('source')))} has no value at "
                       f"step{'s' if len(missing) > 1 else ''} {steps}"
                       f"{' …' if len(missing) > 10 else ''}, so those steps take no part in "
                       "the stop recommendation.")
    return out


def column(values: Sequence[Any]) -> list[str]:
    """Numbers without intervals (means, gaps), each to three significant digits, whole
    ones too: "1.00" above "1.60", not "1"."""
    return [num(v, decimals(float(v))) if finite(v) else num(v) for v in values]


def _test_rows(rows: Sequence[Mapping[str, Any]], a: str, b: str, gap_of_interest: Any = None,
               gap: str = "gap") -> list[list[Any]]:
    means = {k: column([r.get(k) for r in rows]) for k in (f"mean_{a}", f"mean_{b}", "gap")}
    return [[r.get("step"), r.get("seeds"), r.get(f"n_{a}"), r.get(f"n_{b}"),
             means[f"mean_{a}"][i], means[f"mean_{b}"][i], means["gap"][i],
             _p(r.get("p_value")), _p(r.get("p_adjusted")), effect(r.get("effect_size")),
             _significant(r, gap_of_interest, gap)] for i, r in enumerate(rows)]


def _header(view: View, a: str, b: str) -> list[str]:
    return ["step", "seeds", f"n {a}", f"n {b}", f"mean {a}", f"mean {b}", f"gap ({a} − {b})",
            "p", f"p adjusted ({view.correction})", "effect size r",
            f"significant (α = {view.alpha:g})"]


def tests_section(view: View, checkpoints: Sequence[Json]) -> str:
    """Per model, the per-checkpoint tests; then the model comparisons.

    A row without a step is shown only when the model has a single checkpoint without one:
    otherwise it pools several checkpoints. Each checkpoint reported aside (``aside``, tested
    in the model's family) follows the steps, by name.
    """
    parts = []
    aside = [a for a in view.get("aside") or [] if isinstance(a, Mapping)]
    for model in dict.fromkeys([*view.models(), *(str(a.get("model")) for a in aside)]):
        unknown = sum(1 for c in checkpoints if c.get("model") == model
                      and c.get("probe") == PROBE and c.get("step") is None)
        for value, label in TEST_VALUES.items():
            rows = [r for r in view.tests(model, value)
                    if r.get("step") is not None or unknown == 1]
            rows += [{**a["tests"][value], "step": name_cell(revision_label(a.get("revision")))}
                     for a in aside if a.get("model") == model
                     and isinstance(a.get("tests"), Mapping) and value in a["tests"]]
            if rows:
                parts.append(f"<h3>{escape(model)}: {escape(label)}</h3>")
                interest = view.model(model).get("gap_of_interest") or next(
                    (a.get("gap_of_interest") for a in aside if a.get("model") == model), None)
                gap = "gap" if value == "jsdp_correct" else "JSD-P gap"  # ranks: its size
                header = _header(view, "male", "female")
                if any(isinstance(r.get("step"), str) for r in rows):  # some by name
                    header[0] = "checkpoint"
                parts.append(table(header, _test_rows(rows, "male", "female", interest, gap),
                                   numbers=True))
    for comp in view.get("comparisons", []):
        if not isinstance(comp, Mapping):
            continue
        rows = [r for r in comp.get("rows") or [] if isinstance(r, Mapping)]
        if not rows:
            continue
        a, b = str(comp.get("model_a")), str(comp.get("model_b"))
        option = str(comp.get("value", "")).removeprefix("jsdp:")
        parts.append(f"<h3>{escape(a)} (A) vs {escape(b)} (B): JSD-P of the “{escape(option)}” "
                     f"option where “{escape(str(comp.get('answer')))}” is correct</h3>")
        parts.append(table(_header(view, "A", "B"), _test_rows(rows, "a", "b"), numbers=True))
    if not parts:
        return ""
    return "\n".join(["<h2>Tests per checkpoint</h2>",
                      '<p class="caption">Rows behind the p-value panels. Gap: mean of the '
                      "first group minus the second; effect size: rank-biserial correlation "
                      "(+1: every value of the first group is larger; over WinoBias pairs, "
                      "tested by signed rank, the matched-pairs r: +1 where every pair's "
                      "difference is positive).</p>", *parts])


def _gaps(checkpoints: Sequence[Json], model: str) -> dict[int, float]:
    return {int(c["step"]): abs(float(c["mean"]["jsdp_gap"])) for c in checkpoints
            if c.get("model") == model and c.get("probe") == PROBE and c.get("step") is not None
            and finite(c["mean"].get("jsdp_gap"))}


def stop_section(view: View, checkpoints: Sequence[Json]) -> str:
    """Per model with a performance series: performance and |gap| per step, the Pareto front
    and the recommended stop."""
    parts = []
    budget = view.get("budget")
    for model in view.models():
        perf = view.performance(model)
        if perf is None:
            continue
        source, values = perf
        rec = view.model(model).get("recommendation")
        rec = rec if isinstance(rec, Mapping) else {}
        front = {int(s) for s in rec.get("pareto_steps") or [] if finite(s)}
        gaps = _gaps(checkpoints, model)
        rows = [[step, fmt(values.get(step)), fmt(gaps.get(step)),
                 _yes(step in front) if rec else "n/a", "yes" if rec.get("step") == step else ""]
                for step in sorted(set(values) | set(gaps))]
        parts.append(f"<h3>{escape(model)}</h3>")
        if rec.get("sentence"):
            parts.append(f"<p>Recommendation: {escape(str(rec['sentence']))}.</p>")
        elif refused := view.model(model).get("recommendation_refused"):
            text = escape(str(refused))
            parts.append(f'<p class="missing">{text[:1].upper()}{text[1:]}.</p>')
        parts.append(table(["step", source, "|JSD-P gap|", "Pareto front", "recommended"],
                           rows, numbers=True))
    if not parts:
        return ""
    allowed = setting_percent(budget) if finite(budget) else "the allowed"
    return "\n".join([
        "<h2>Where to stop training</h2>",
        f'<p class="caption">The recommended stop is the checkpoint with the smallest '
        f"|male − female JSD-P gap| whose performance is at most {escape(allowed)} below the "
        "final checkpoint's and whose |gap| is shown smaller than the final one's (a bootstrap "
        "max-t over every earlier checkpoint within the budget); else the final checkpoint. "
        "Pareto front: checkpoints no other checkpoint beats on both "
        "performance (higher) and |gap| (lower).</p>", *parts])
