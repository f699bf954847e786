"""The tests of one probe's headline as a family: Holm-adjusted p-values, and beside each
result that is not significant, the smallest effect the run could have detected.

A probe reports several tests at once (the pronoun gap, the pronoun effect, the flip
direction…), so a raw p < 0.05 in one of them is not a finding. And a non-significant result
is not evidence of no effect: the minimum detectable effect at 80% power says how large an
effect this many items could have found, read back from the estimate's CI and taken at
α/m (Bonferroni, no weaker than Holm's first step), so that it is honest for every rank.
An entry whose measure cannot move past a ``bound`` (a difference of two rates: 1) and whose
detectable effect lies beyond it gets no number: 1.9 on a gap of rates is no size any data
could show, only that the run is too small to detect any effect the measure can take.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from biasscope.core.numbers import finite, num, p_is, with_ci
from biasscope.core.power import detectable_from_interval
from biasscope.core.stats import adjust_pvalues

ALPHA = 0.05
POWER = 0.8


def _tested(value: object) -> bool:
    return (isinstance(value, Mapping) and isinstance(value.get("p_value"), (int, float))
            and math.isfinite(value["p_value"]))


def control(headline: Mapping[str, Any], alpha: float = ALPHA,
            power: float = POWER, confidence: float = 0.95) -> dict[str, Any]:
    """``headline`` with ``p_holm`` and ``significant`` on every tested entry, and
    ``detectable`` (the minimum detectable effect, in the estimate's units) on each tested
    entry that is not significant, unless its p-value tests something other than its
    estimate (``p_value_of`` names what, e.g. the direction of a flip rate's flips). Where
    that effect exceeds the entry's ``bound`` (the largest effect its measure can take),
    ``detectable`` is None and ``detectable_beyond_bound`` true. ``confidence``: the level
    of the entries' intervals, which the standard error is read back from."""
    tested = [name for name, value in headline.items() if _tested(value)]
    adjusted = adjust_pvalues([headline[name]["p_value"] for name in tested], "holm")
    out = dict(headline)
    for name, p_holm in zip(tested, adjusted, strict=True):
        entry = dict(headline[name])
        entry.update(p_holm=float(p_holm), significant=bool(p_holm < alpha))
        if not entry["significant"] and "p_value_of" not in entry:
            df = float(entry.get("n") or 0) - 2
            entry.update(_within_bound(detectable_from_interval(
                entry.get("low", math.nan), entry.get("high", math.nan), df,
                alpha / len(tested), power, confidence), entry.get("bound")))
        out[name] = entry
    return out


def _within_bound(detectable: float, bound: object) -> dict[str, Any]:
    """``detectable``, or None and ``detectable_beyond_bound`` where it exceeds ``bound``."""
    if isinstance(bound, (int, float)) and detectable > bound:
        return {"detectable": None, "detectable_beyond_bound": True}
    return {"detectable": detectable}


def holm_sentence(headline: Mapping[str, Any],
                  names: Callable[[str], str | None] | None = None,
                  power: float = POWER, same: Callable[[str], str | None] | None = None,
                  confidence: float = 0.95) -> str | None:
    """Sentences over the probe's tests after Holm: those significant, each with its
    estimate, effect size and Holm p (the probe's own sentences give raw p-values, and "not
    significant" alone beside a significant one read as if none was), then those not, with
    the size of what the run could have found, or the fact that it could have found nothing
    the measure can show. ``names`` gives a headline key's words (`ProbeInfo.name_of`;
    the key, spaced, where it gives none); ``same``, a value's words for an interval of no
    width (`ProbeInfo.same_of`); ``confidence``, the level the intervals are said at."""

    def name(key: str) -> str:
        return (names(key) if names else None) or key.replace("_", " ")

    tested = [(key, value) for key, value in headline.items()
              if isinstance(value, Mapping) and "significant" in value]
    if not tested:
        return None
    over = f"over the probe's {len(tested)} test{'s' if len(tested) > 1 else ''}"
    hits = [f"{name(key)} {_found(value, same(key) if same else None, confidence)}"
            for key, value in tested
            if value["significant"]]
    said = [f"Significant after Holm's correction {over}: {'; '.join(hits)}"] if hits else []
    missed = [f"{name(key)} ({p_is(value['p_holm'], 'Holm p')})" for key, value in tested
              if not value["significant"]]
    if missed:
        lead = "Not significant" if hits else f"Not significant after Holm's correction {over}"
        said.append(f"{lead}: {'; '.join(missed)}")
    if detectable := _detectable(tested, name, power):
        said.append(detectable)
    return f"{'. '.join(said)}."


def _found(value: Mapping[str, Any], same: str | None = None, confidence: float = 0.95
           ) -> str:
    """A significant test's estimate with its CI, effect size and Holm p (and what its p
    tests where that is not its estimate)."""
    size, of = value.get("effect_size"), value.get("p_value_of")
    extra = ", ".join([*([f"effect size {num(size, 2)}"] if finite(size) else []),
                       p_is(value["p_holm"], "Holm p") + (f" testing {of}" if of else "")])
    return with_ci(value.get("estimate"), value.get("low"), value.get("high"), confidence,
                   extra=extra, same=same)


def _detectable(tested: list[tuple[str, Any]], name: Callable[[str], str], power: float
                ) -> str:
    """What the run could have detected of each test that is not significant, or ""."""
    found, beyond = [], []
    for key, value in tested:
        if value.get("detectable_beyond_bound"):
            beyond.append(f"{name(key)} (at most ±{num(value['bound'])})")
        elif isinstance(mde := value.get("detectable"), float) and math.isfinite(mde):
            found.append(f"{name(key)} {num(mde)}")
    said = []
    if found:
        said.append(f"This run could have detected (at {power:.0%} power) an effect of this "
                    f"size or more: {'; '.join(found)}")
    if beyond:
        said.append(f"{'and it' if found else 'This run'} is too small to have detected (at "
                    f"{power:.0%} power) any effect within the measure's range: "
                    f"{'; '.join(beyond)}")
    return "; ".join(said)
