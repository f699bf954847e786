"""The dynamics report's words: a headline of two or three sentences per model (what was run,
the JSD-P gap with its confidence interval, and the verdict on it), then the findings list
and the method behind a fold.

The verdict and the findings are the analysis' own sentences (``summary.json``), moved, not
rewritten: the report says what the analysis found, in the order a reader asks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from biasscope.core.numbers import ci_decimals, finite, spread, with_ci
from biasscope.core.numbers import plural as plural  # where the report's modules look for it
from biasscope.report.plotting import Json, View, by_model


@dataclass
class Words:
    """HTML-safe paragraphs: the headline, the findings (a list) and the method (folded)."""

    headline: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    method: list[str] = field(default_factory=list)


def where(ckpt: Json) -> str:
    if ckpt.get("snapshot"):
        return "its one checkpoint"
    if ckpt.get("step") is not None:
        return f"step {ckpt['step']}"
    return f"revision {escape(str(ckpt.get('revision') or 'main'))}"


def _span(values: Sequence[Any], word: str) -> str:
    """``step 10`` or ``steps 10 to 30``."""
    first, last = escape(str(values[0])), escape(str(values[-1]))
    return f"{word} {first}" if len(values) == 1 else f"{word}s {first} to {last}"


def on_curve(ckpt: Json) -> bool:
    """Whether the analysis over training holds this checkpoint: it has a training step, or
    is a snapshot. Any other is reported aside, by name (``analysis.aside``)."""
    return ckpt.get("step") is not None or bool(ckpt.get("snapshot"))


def _revisions(points: Sequence[Json]) -> str:
    """``best``, ``best and final``: the names of checkpoints without a training step."""
    names = [escape(str(c.get("revision") or "main")) for c in points]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def model_sentence(name: str, points: Sequence[Json]) -> str:
    seeds = sorted({int(s) for c in points for s in c["seeds"]})
    short = sum(1 for c in points if len(c["seeds"]) < len(seeds))
    sizes = sorted({int(c["items_per_seed"]) for c in points})
    curve = [c for c in points if on_curve(c)]
    aside = [c for c in points if not on_curve(c)]
    steps = [c["step"] for c in curve if not c.get("snapshot")]
    at = _span(steps, "step") if steps else "no training step"
    counted = (f"{plural(len(points), 'checkpoint')} ({at})" if not aside
               else f"{plural(len(aside), 'checkpoint')} without a training step "
                    f"({_revisions(aside)})" if not curve
               else f"{plural(len(curve), 'checkpoint')} with a training step ({at}) and "
                    f"{len(aside)} without ({_revisions(aside)})")
    items = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    probes = ", ".join(sorted({escape(str(c["probe"])) for c in points}))
    text = (f"<b>{escape(name)}</b> on probe <b>{probes}</b>: {counted}, "
            f"{plural(len(seeds), 'seed')} ({', '.join(map(str, seeds))}), "
            f"{items} items per seed.")
    if short:
        text += f" {plural(short, 'checkpoint')} so far with fewer seeds than the others."
    return text


def gap(ckpt: Json, view: View) -> str:
    """The gap with its bootstrap CI over prompts, and the spread over seeds if several."""
    n = len(ckpt["seeds"])
    std = ckpt["std"].get("jsdp_gap")
    low, high = view.ci(ckpt, "jsdp_gap") or (None, None)
    places = ci_decimals(low, high)
    seeds = (f"std over {n} seeds {spread(std, places)}"
             if n > 1 and finite(std) and std > 0 else "")
    return with_ci(ckpt["mean"]["jsdp_gap"], low, high, view.confidence, signed=True,
                   extra=seeds)


def gap_sentence(points: Sequence[Json], view: View) -> str | None:
    """The JSD-P gap at the first and last checkpoint on the curve (and where it was largest
    in size), then at each checkpoint reported aside, by name."""
    with_gap = [c for c in points if finite(c["mean"].get("jsdp_gap"))]
    aside = [c for c in with_gap if not on_curve(c)]
    on = _over_steps([c for c in with_gap if on_curve(c)], view)
    if not aside:
        return on
    values = "; ".join(f"{gap(c, view)} at {where(c)}" for c in aside)
    return (f"{on} " if on else "") + ("Without a training step, so off the curve, "
                                       f"the JSD-P gap (male − female) is {values}.")


def _over_steps(with_gap: Sequence[Json], view: View) -> str | None:
    if not with_gap:
        return None
    first, last = with_gap[0], with_gap[-1]
    if len(with_gap) == 1:
        return f"The JSD-P gap (male − female) at {where(first)} is {gap(first, view)}."
    text = (f"The JSD-P gap (male − female) went from {gap(first, view)} at {where(first)} "
            f"to {gap(last, view)} at {where(last)}")
    widest = max(with_gap, key=lambda c: abs(float(c["mean"]["jsdp_gap"])))
    if widest is not last and widest is not first:
        text += f"; it was largest in size at {where(widest)}: {gap(widest, view)}"
    return text + "."


SIGN = ("Below 0: the model is surer of the correct answer when it is “male” than when it "
        "is “female”; above 0, the reverse.")


def verdict(model: str, sentences: list[str]) -> str | None:
    """The analysis' sentence on whether the model's gap is significant (taken out of
    ``sentences``), if it has one."""
    for i, text in enumerate(sentences):
        if text.startswith(f"{model}: ") and "male-female JSD-P gap" in text:
            said = sentences.pop(i).removeprefix(f"{model}: ")
            return said[:1].upper() + said[1:]
    return None


def words(run: Json, checkpoints: Sequence[Json], view: View, notes: Sequence[str] = ()
          ) -> Words:
    """Headline per model, then the findings (the analysis' sentences and ``notes``), then
    the method."""
    from biasscope.report.tables import method_sentence, performance_sentences

    out = Words()
    groups = by_model(checkpoints)
    rest = [s for s in (str(s) for s in view.get("sentences", []))
            if not s.startswith("The occupation statistics")]  # said once, with the panels
    if len(groups) > 1:
        out.headline.append(f"This run compares {len(groups)} models: "
                            + ", ".join(f"<b>{escape(m)}</b>" for m in groups) + ".")
    for name, points in groups.items():
        found = verdict(str(points[0]["model"]), rest)
        said = [model_sentence(name, points), gap_sentence(points, view),
                escape(found) if found else None]
        out.headline.append(" ".join(s for s in said if s))
    if any("jsdp_gap" in c["mean"] for c in checkpoints) and out.headline:
        out.headline[-1] += " " + SIGN
    out.findings = [escape(s) for s in rest] + performance_sentences(view) + list(notes)
    if view.models():
        out.method.append(method_sentence(view))
    out.method.append("Lines are means over seeds; the shaded band is ± one standard deviation "
                      "over seeds, the error bars the bootstrap confidence interval over "
                      "prompts.")
    return out

