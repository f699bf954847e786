"""The counterfactual check report: per scorer the paired difference (female minus male
version) with its CI and tests, the verdict flips with McNemar, and the sentences. Built from
``summary.json`` and ``run.json``; every interval said at the level summary.json was computed
at (``analysis``); everything from data is escaped."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import computed_levels
from biasscope.core.numbers import entry_with_ci, finite, level_of
from biasscope.report.html import CSS, flatten
from biasscope.report.tables import record_table, table
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes

DIFFERENCE = ("n", "mean", "low", "high", "standardised", "wilcoxon_p", "wilcoxon_p_holm",
              "rank_biserial", "sign_p", "zero")


def _share(entry: dict[str, Any] | None, confidence: float) -> str | None:
    """A share with its Wilson interval, as every headline number is shown; None (a dash)
    where there is no share (every pair tied, no answer)."""
    return entry_with_ci(entry, confidence) if entry and finite(entry.get("estimate")) \
        else None


def _rows(scorers: list[dict[str, Any]], confidence: float
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    diffs, flips = [], []
    for row in scorers:
        d = row["difference"]
        diffs.append({"scorer": row["scorer"], "kind": row["kind"], "score": row["what"],
                      **{k: d.get(k) for k in DIFFERENCE},
                      "female_higher": _share(d.get("female_higher"), confidence),
                      "ungendered": row["ungendered"]})
        if fl := row.get("flips"):
            rate = fl["flip_rate"]
            flips.append({"scorer": row["scorer"], "verdict": row.get("verdict"), "n": fl["n"],
                          "flip_rate": rate["estimate"], "low": rate["low"],
                          "high": rate["high"], "yes_to_no": fl["yes_to_no"],
                          "no_to_yes": fl["no_to_yes"], "mcnemar_p": fl["mcnemar_p"],
                          "mcnemar_p_holm": fl.get("mcnemar_p_holm"),
                          "change": fl["effect_size"]})
    return diffs, flips


#: The key of each of several judges' answered share in a scorer's ``answers``.
ANSWERED = "answered_rate:"


def _answers(scorers: list[dict[str, Any]], confidence: float) -> list[dict[str, Any]]:
    """Per judge: questions with and without a verdict, and its answers outside the keys; of
    several judges, each one's answered share, which the panel's pooled figures hide."""
    out = []
    for row in scorers:
        if found := row.get("answers"):
            share = found["unparseable"]
            each = [f"{k[len(ANSWERED):]}: {_share(v, confidence) or '—'}"
                    for k, v in found.items()
                    if k.startswith(ANSWERED)]
            out.append({"scorer": row["scorer"], "questions": found["questions"],
                        "verdicts": found["verdicts"],
                        "no_verdict": ", ".join(f"{n} {r}" for r, n in
                                                found["no_verdict"].items()) or "none",
                        "answers": found["calls"], "unparseable": share["estimate"],
                        "low": share["low"], "high": share["high"],
                        "failed": found["failed_calls"],
                        "examples": " | ".join(found["examples"]),
                        "commonest_position": found.get("position"),
                        "its_share": _share(found.get("same_position"), confidence),
                        **({"each_judge_answered": "; ".join(each)} if each else {})})
    return out


def write_counterfactual_report(run_dir: str | Path | RunStore,
                                output: str | Path | None = None) -> Path:
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    if not store.summary_json.is_file():
        raise BiasscopeError(f"{store.root} has no summary.json: run `biasscope "
                             "counterfactual`")
    run, summary = store.read_json("run.json"), store.read_json("summary.json")
    level = level_of(confidence := computed_levels(summary).confidence)
    diffs, flips = _rows(summary.get("scorers", []), confidence)
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>biasscope counterfactual: {escape(str(run.get('model')))}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>Counterfactual check of scorers</h1>",
        f'<p class="sub">{summary.get("pairs")} pairs from '
        f"{escape(str(summary.get('source')))}: gendered words and first names swapped</p>",
        *(f"<p>{escape(str(s))}</p>" for s in summary.get("sentences", [])),
        "<h2>Paired difference: female minus male version</h2><p class=\"caption\">One "
        "pair per conversation (a reward model's chosen and rejected responses averaged). "
        f"Mean with a t {level} CI widened towards a skew (low, high), in SDs of all "
        "scores; two-sided Wilcoxon "
        "(Holm across scorers) with rank-biserial r, which the verdict follows; exact sign "
        "test; share of non-tied pairs where the female version scored higher (Wilson "
        f"{level} CI).</p>"
        + record_table(diffs),
        f"<h2>Verdict flips</h2><p class=\"caption\">Wilson {level} CI (low, high); exact "
        "McNemar test on the discordant pairs (Holm across judges); change: share of yes "
        "verdicts after minus before.</p>"
        + record_table(flips),
        *(["<h2>Judge answers</h2><p class=\"caption\">Questions put to each judge (both "
            "versions of every pair), how many got a verdict, why the others did not; the "
            f"share of answers outside the answer keys (unparseable, Wilson {level} CI: low, "
            "high) with examples; the position most often chosen and its share of the answers "
            f"(Wilson {level} CI); of several judges, the share of the questions each gave a "
            f"verdict of its own on ({level} CI, a pair's two versions one cluster). Every "
            "answer is in scores.jsonl.</p>" + record_table(answers)]
          if (answers := _answers(summary.get("scorers", []), confidence)) else []),
        "<h2>Run configuration</h2>", table(["setting", "value"], flatten(run)),
        "</body></html>", ""])
    target = Path(output) if output is not None else store.root / "report.html"
    write_bytes(target, page.encode("utf-8"))
    return target
