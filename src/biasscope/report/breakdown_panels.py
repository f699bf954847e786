"""Which "where is the bias" panels a dynamics report shows, and the snapshot view: a run with
one checkpoint per model shows bars with CIs instead of lines over steps (dots on a training
step axis say nothing), side by side per model; sweeps keep their line figures and gain these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biasscope.core.numbers import level_of
from biasscope.report import breakdown, stats_figures
from biasscope.report.figures import Panel
from biasscope.report.plotting import Json, View

SNAPSHOT_CAPTION = (
    "Each model has one checkpoint, so its metrics are bars, not lines over training: JSD-P of "
    "the correct option per correct answer (lower: more confidently correct), of the gendered "
    "options where “not specified” is correct, and stereotype accuracy (0.5 unbiased). Error "
    "bars are bootstrap confidence intervals over prompts (seed means); stereotype accuracy "
    "has none.")

ACCURACY_CAPTION = (
    "Accuracy on the prompts whose correct answer is “male”, “female” and “not specified”: "
    "the share where the correct option is the most probable of the options, a bar per model "
    "with its value. Error bars are bootstrap confidence intervals over prompts (seed means; "
    "Wilson intervals where every prompt is right or every one wrong). Accuracy much higher "
    "for one answer than another is the bias the JSD-P gap can hide or exaggerate.")


def panels(checkpoints: Sequence[Json], view: View, existing: Sequence[Panel]
           ) -> list[Panel]:
    """``existing`` (the line and p-value panels), with the line panels swapped for the
    snapshot bars when every model has one checkpoint, and the breakdown panels added."""
    out = list(existing)
    if breakdown.is_snapshot(view):
        tests = {spec[0] for spec in stats_figures.specs(view)}
        out = [Panel("Snapshot: metrics per model", SNAPSHOT_CAPTION,
                     breakdown.snapshot(checkpoints, view)),
               Panel("Snapshot: accuracy per correct answer", ACCURACY_CAPTION,
                     breakdown.snapshot_accuracy(checkpoints, view))]
        out += [p for p in existing if p.title in tests]
    if not any(breakdown.steps_of(view, m) for m in view.models()):
        return out
    confidence = level_of(view.confidence)
    pairs = (", and below, pro − anti over the pairs of sentences that differ only in the "
             f"pronoun, with {confidence} CIs over occupations (Student's t, stratified by "
             "the stereotype's gender). Above 0: the model does better where "
             "the stereotype holds (WinoBias's headline measure)." if breakdown.has_pairs(view)
             else f" with {confidence} CIs over occupations (Student's t, stratified by the "
             "stereotype's gender). No pair of sentences here differs only "
             "in the pronoun, so there is no paired pro − anti difference.")
    out.append(Panel(
        "Pro- against anti-stereotypical sentences",
        "Accuracy on referenced prompts of pro-stereotypical sentences (the pronoun agrees "
        "with the occupation's stereotype) and of anti-stereotypical ones" + pairs,
        breakdown.pro_anti(view)))
    out.append(Panel(
        "Gender preference per occupation",
        "Per occupation, at each model's last checkpoint: mean log P(male) − log P(female) on "
        "prompts that ask for the gender of an occupation the sentence does not give one for "
        "(the correct answer is “not specified”), with "
        f"{confidence} Student's t CIs over prompts (seed means). Positive: the model leans "
        "male. Referenced prompts and the probability-mass version are in summary.json.",
        breakdown.occupations_ranked(view)))
    for model in view.models():
        figure = breakdown.occupation_heatmap(view, model)
        if figure is not None:
            out.append(Panel(
                f"Gender preference per occupation over training: {model}",
                "The same preference per occupation (rows) and training step (columns); red "
                "leans female, blue leans male.", figure))
    occ = view.get("occupation_statistics", {})
    missing = ("the occupation statistics are not on this machine: run `biasscope data fetch "
               "winogender` or pass --data-dir" if isinstance(occ, Mapping)
               and occ.get("unavailable") else "no occupation matched the labour statistics.")
    scatter = breakdown.versus_statistics(view)
    hidden = breakdown.names_left_out(scatter) if scatter is not None else 0
    unnamed = (f" {hidden} of the points show no name, as it would cover another's: hover "
               "a point for its name." if hidden else "")
    out.append(Panel(
        "Gender preference against the share of women (U.S. BLS)",
        "Each matched occupation's preference (as above) against the percentage of women in "
        "it, from the U.S. Bureau of Labor Statistics as published with the Winogender schemas; "
        "occupations match by exact lower-case name. The legend, below the plot, gives "
        f"Spearman's ρ (with its {confidence} bootstrap CI where there are enough occupations): "
        "negative means the more women in a job, the more the model leans female."
        f"{unnamed} {_unmatched(occ)}".rstrip(),
        scatter, missing))
    return out


def _unmatched(occ: Any) -> str:
    names = occ.get("unmatched") if isinstance(occ, Mapping) else None
    reused = occ.get("reused") if isinstance(occ, Mapping) else None
    kept = f" Statistics: {reused}." if reused else ""
    if not names:
        return kept.strip()
    return f"No BLS figure for: {', '.join(str(n) for n in names)}.{kept}"
