"""The audit probes' checkpoints without a training step (BBQ, Adult counterfactuals,
professional bias), as the WinoBias analysis reports them (`biasscope.dynamics.summary.build`):
the checkpoints with a step are the curve, and each one without (a Trainer's ``best`` and
``final`` beside ``checkpoint-30``) is read and reported aside by name with its own values,
never pooled with another: two checkpoints' records pooled are no checkpoint's.

A model whose only checkpoint has no step is one model's values, as `biasscope audit` gives
them (``stepless_values``); every other checkpoint without a step is in ``aside``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biasscope.core import numbers
from biasscope.dynamics.summary.probe_steps import Stepless, Values, tested
from biasscope.dynamics.summary.unfinished import checkpoint_label, named
from biasscope.store.reading import UnitEntry

#: Per probe, model and its revisions without a training step (None: a folder's).
Revisions = dict[str, dict[str, set[str | None]]]
#: Per probe, (model, revision): its measures across wordings (`read_stepless`).
Worded = dict[str, dict[tuple[str, str | None], dict[str, Any]]]


def stepless_revisions(index: Sequence[UnitEntry], probes: Sequence[str]) -> Revisions:
    """The checkpoints without a training step of ``probes``, from the key columns alone (as
    the index is)."""
    out: Revisions = {}
    for entry in index:
        for probe, model, revision in entry.stepless:
            if probe in probes:
                out.setdefault(probe, {}).setdefault(model, set()).add(revision)
    return out


def _order(revisions: set[str | None]) -> list[str | None]:
    return sorted(revisions, key=lambda r: r or "")


def _label(revision: str | None) -> str:
    return checkpoint_label({"revision": revision})


def _values(spec: Any, values: Values) -> str:
    """The headline values with their intervals (at their level), or ``no values``."""
    said = []
    for k in spec.headline:
        if (v := values.get(k)) is not None:
            level = v.get("confidence", 0.95)
            said.append(f"{spec.names.get(k, k)} " + numbers.with_ci(
                v.get("estimate"), v.get("low"), v.get("high"), level,
                extra=f"n = {v.get('n')}", same=spec.same(k, level)))
    return "; ".join(said) if said else "no values"


def add_stepless(section: dict[str, Any], probe: str, spec: Any,
                 revisions: Mapping[str, set[str | None]], stepped: Sequence[str],
                 found: Stepless, worded: Worded, alpha: float, corrected: str = "") -> None:
    """Into ``section``: ``stepless`` (the models with no training step at all), their
    ``stepless_values`` and ``stepless_wordings`` where a model has one such checkpoint,
    ``aside`` (every other checkpoint without a step: ``model``, ``revision``, ``values``,
    ``wordings``), and the sentences saying each, with each one's tests as a checkpoint's
    over steps (adjusted in the model's family by `probes.adjust_over_checkpoints`;
    ``corrected`` names the correction). Those of a model with steps go into its
    ``models.<m>.sentences`` too (after its verdicts over steps)."""
    values, words = found.get(probe, {}), worded.get(probe, {})
    nostep = sorted(set(revisions) - set(stepped))
    if nostep:
        section["stepless"] = nostep
        section["stepless_values"] = {m: values.get((m, r), {}) for m in nostep
                                      if len(rs := revisions[m]) == 1 for r in rs}
        if across := {m: words[(m, r)] for m in nostep if len(rs := revisions[m]) == 1
                      for r in rs if (m, r) in words}:
            section["stepless_wordings"] = across
    aside = [(m, r) for m in sorted(revisions) for r in _order(revisions[m])
             if m in stepped or len(revisions[m]) > 1]
    if aside:
        section["aside"] = [{"model": m, "revision": r, "values": values.get((m, r), {}),
                             **({"wordings": words[(m, r)]} if (m, r) in words else {})}
                            for m, r in aside]
    for model in sorted(revisions):
        said = _sentences(probe, spec, model, _order(revisions[model]), model in stepped,
                          values, words, alpha)
        if model in stepped or len(revisions[model]) > 1:
            family = ("over the model's checkpoints with a step and without" if model in stepped
                      else f"over its {len(revisions[model])} revisions")
            said[1:1] = _tests(spec, model, _order(revisions[model]), values,
                               f"{corrected}, {family}")
        section["sentences"] += said
        if model in stepped:
            section["models"][model]["sentences"] += said


def _sentences(probe: str, spec: Any, model: str, revisions: list[str | None],
               stepped: bool, values: Mapping[tuple[str, str | None], Values],
               words: Mapping[tuple[str, str | None], Any], alpha: float) -> list[str]:
    """One model's checkpoints without a step: their headline values (no verdict: nothing
    over steps to test), its findings and measures across wordings, each revision named."""
    if not stepped and len(revisions) == 1:  # one model, as `biasscope audit` gives it
        only = values.get((model, revisions[0]), {})
        out = [f"{probe}: {model} has no training step, so it is not analysed over steps; as "
               f"one model: {_values(spec, only)}."]
        out += [f"{model}: {s}" for s in spec.findings(only, alpha)] if spec.findings else []
        worded = words.get((model, revisions[0]))
        return out + ([f"{model}: {r['verdict']}" for r in worded["measures"].values()]
                      if worded else [])
    labels = [_label(r) for r in revisions]
    each = "; ".join(f"at {label}, {_values(spec, values.get((model, r), {}))}"
                     for r, label in zip(revisions, labels, strict=True))
    one = len(labels) == 1
    out = [f"{probe}: {model} has no training step, so it is not analysed over steps; its "
           f"{named(labels)} cannot be ordered, so each is given on its own, never pooled: "
           f"{each}." if not stepped else
           f"{probe}: {model}: {named(labels)} {'has' if one else 'have'} no training step, so "
           f"{'it is' if one else 'they are'} reported aside with {'its' if one else 'their'} "
           f"own values, not on the curve (emergence, the recommended stop): {each}."]
    for r, label in zip(revisions, labels, strict=True):
        at = values.get((model, r), {})
        out += [f"{model} at {label}: {s}" for s in spec.findings(at, alpha)] if (
            spec.findings and at) else []
        if worded := words.get((model, r)):
            out += [f"{model} at {label}: {w['verdict']}" for w in worded["measures"].values()]
    return out


def _tests(spec: Any, model: str, revisions: list[str | None],
           values: Mapping[tuple[str, str | None], Values], corrected: str) -> list[str]:
    """Each checkpoint's test of each headline value, as a checkpoint on the curve gets it:
    significant or not after the correction ``corrected`` names (over all the model's
    checkpoints, these among them), with the estimate, its CI, p and effect size; one
    sentence per checkpoint, its values one after another (the correction said once)."""
    out = []
    for revision in revisions:
        at = values.get((model, revision), {})
        said = [f"the {spec.names.get(key, key)} is {'' if entry['significant'] else 'not '}"
                f"significant: {tested(entry, spec.same(key, entry.get('confidence', 0.95)))}"
                for key in spec.headline
                if (entry := at.get(key)) is not None and "significant" in entry]
        if said:
            out.append(f"{model} at {_label(revision)} ({corrected}): {'; '.join(said)}.")
    return out
