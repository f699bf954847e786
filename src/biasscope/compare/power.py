"""``biasscope power``: items needed for a gap of a given size, from an assumed per-item
standard deviation or from a pilot run's items; and, for a finished run, the smallest gap each
measure could have detected (its minimum detectable effect at the target power).

Seeds are replicates of a prompt (see `biasscope.core.stats`), so more seeds do not add items;
the plan is in items (per group, for a gap between groups). A ratio score (BBQ's) has no
per-item values to take a standard deviation of: its jackknife standard error over its clusters
(BBQ's templates), times √items, stands in for one (the standard error of a smooth statistic
of n items shrinks as 1/√n at a fixed number of items per cluster), and it is planned as one
sample.

An equivalence plan (``margin``) is for ``biasscope compare``: it is never below the measure's
"too few items" floor (`biasscope.compare.runs.fewest_items`), which compare applies whatever
the items' values, and a margin beyond the measure's largest (a rate's difference is at most 1)
is refused, as compare refuses it. A plan from ``sd`` has no run: ``measure`` names the
measure, and without it the floor is the least any measure has at that margin (compare calls
fewer "too few items" whichever it is). A spread that is zero up to rounding plans nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from biasscope.compare.job import records
from biasscope.compare.measures import MEASURES, Values, comparable, why_not
from biasscope.compare.runs import check_margin, checkpoints, fewest_items, label, measure_floor
from biasscope.compare.settings import PowerConfig as PowerConfig
from biasscope.core import power as P
from biasscope.core.equivalence import jackknife_se, welch
from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num

#: A spread at most this share of the values' magnitude is rounding noise, not spread.
NOISE = 1e-9


def _no_spread(sd: float, values: Values) -> bool:
    """Whether ``sd`` is zero up to rounding (0.1 + 0.2 beside 0.3), relative to the largest
    value (or estimate): planned from, such noise promises any gap from 2 items."""
    numbers = [np.abs(s.to_numpy(dtype=np.float64)) for s in values.groups.values() if s.size]
    scale = max([abs(values.estimate()), *(float(x.max()) for x in numbers)])
    return not sd > NOISE * scale


def _sd(values: Values) -> tuple[float, int]:
    """Pooled per-item standard deviation over the groups, and the items per group (smallest)."""
    xs = [s.to_numpy(dtype=np.float64) for s in values.groups.values()]
    if any(x.size < 2 for x in xs):
        return math.nan, min(x.size for x in xs)
    pooled = sum((x.size - 1) * x.var(ddof=1) for x in xs) / sum(x.size - 1 for x in xs)
    return math.sqrt(pooled), min(x.size for x in xs)


def _ratio_sd(values: Values) -> tuple[float, float, int]:
    """A ratio score's per-item standard deviation as its jackknife standard error over its
    clusters (`biasscope.core.equivalence.jackknife_se`) times √items, its degrees of freedom
    and the items: planned from it, more items are more items in the same number per
    cluster."""
    statistic = values.statistic
    assert statistic is not None
    series = next(iter(values.groups.values()))
    if series.size < 2:
        return math.nan, math.nan, int(series.size)
    se, df, _ = jackknife_se([series.to_numpy()], statistic,
                             [values.clusters_of(series.index)])
    return se * math.sqrt(series.size), df, int(series.size)


def _row(config: PowerConfig, values: Values) -> dict[str, Any]:
    """One measure's plan: a linear one from its groups' items, a ratio score from its
    clusters' jackknife (`_ratio_sd`) as one sample. A spread of rounding noise plans
    nothing; an equivalence plan is never below compare's own minimum (`_floor`)."""
    if values.statistic is not None:
        sd, df, n = _ratio_sd(values)
        se = sd / math.sqrt(n) if n else math.nan
        row: dict[str, Any] = {"design": "paired", "sd_from": "jackknife"}
    else:
        design: P.Design = "two-groups" if len(values.groups) == 2 else "paired"
        sd, n = _sd(values)
        _, se, df, _ = welch([s.to_numpy() for s in values.groups.values()],
                             list(values.weights.values()))
        row = {"design": design}
    if n >= 2 and _no_spread(sd, values):
        sd = se = 0.0
    row.update(items_per_group=n, sd=sd,
               detectable_now=P.minimum_detectable_effect(se, df, config.alpha, config.power),
               items_needed=_need(config, sd, row["design"]))
    if config.margin is None:
        return row
    check_margin(values.measure, config.margin)
    return _floor(row, fewest_items(values, config.margin, config.alpha))


def _floor(row: dict[str, Any], floor: int) -> dict[str, Any]:
    """An equivalence plan raised to compare's minimum (`fewest_items`): `biasscope compare`
    calls fewer items "too few" whatever their values, so a plan below it (a pilot with little
    spread, a small ``--sd``) could never be met. ``items_by_power``: the plan before it was
    raised."""
    row["compare_minimum"] = floor
    if row["items_needed"] is not None and row["items_needed"] < floor:
        row.update(items_needed=floor, items_by_power=row["items_needed"])
    return row


def _need(config: PowerConfig, sd: float, design: P.Design) -> int | None:
    if not sd > 0:
        return None
    if config.margin is not None:
        return P.items_for_equivalence(config.margin, sd, config.alpha, config.power, design,
                                       config.effect or 0.0)
    if config.effect is None:
        return None
    return P.items_needed(config.effect, sd, config.alpha, config.power, design)


def pilot_rows(config: PowerConfig, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """Per probe, checkpoint and measure of the pilot run: items now, standard deviation, the
    smallest detectable gap now and the items the asked effect (or margin) needs. Probes of
    the run without measures to compare are named in ``notes``, with why."""
    assert config.pilot is not None
    frame, rows = records(config.pilot, "--pilot"), []
    for probe in sorted(set(frame["probe"]) if "probe" in frame else ()):
        if notes is not None and (why := why_not(str(probe))) is not None:
            notes.append(f"{probe}: not planned: {why}.")
    for probe, facet in comparable().items():
        if "probe" not in frame or probe not in set(frame["probe"]):
            continue
        for key, part in checkpoints(frame[frame["probe"] == probe]).items():
            found = {v.measure: v for v in facet.values(part) if v.has_items()}
            if notes is not None:
                notes += [f"{probe} {m.words} at {label(key)}: not planned: the run has no "
                          f"{m.items}." for m in facet.measures if m.name not in found]
            for values in found.values():
                rows.append({"probe": probe, "checkpoint": label(key),
                             "measure": values.measure, "words": MEASURES[values.measure].words,
                             "estimate": values.estimate(), **_row(config, values)})
    return rows


def plan(config: PowerConfig) -> dict[str, Any]:
    """The plan as JSON-ready data with its sentences."""
    if config.pilot is None and (config.sd is None or (config.effect is None
                                                        and config.margin is None)):
        raise BiasscopeError("give --sd with --effect (or --margin), or --pilot RUN")
    if config.pilot is not None and config.sd is not None:
        raise BiasscopeError("--sd is for a plan without a run: --pilot measures each "
                             "measure's standard deviation in the run; drop one of them")
    if config.measure is not None and config.pilot is not None:
        raise BiasscopeError(f"--measure {config.measure} is for a plan from --sd: a --pilot "
                             "plans each of its measures; drop --measure")
    if config.measure is not None and config.margin is None:
        raise BiasscopeError(f"--measure {config.measure} is for an equivalence plan: give "
                             "--margin, or drop --measure")
    if config.measure is not None and config.measure not in MEASURES:
        raise BiasscopeError(f"--measure {config.measure!r}: give one of "
                             f"{', '.join(MEASURES)}")
    implied = MEASURES[config.measure].design if config.measure is not None else None
    if implied is not None and config.design not in (None, implied):  # as --pilot plans it
        what = ("a gap between two groups' items" if implied == "two-groups"
                else "one series of per-item values")
        raise BiasscopeError(f"--design {config.design} with --measure {config.measure}: "
                             f"{config.measure} is {what}, planned as {implied}; drop "
                             f"--design, or give --design {implied}")
    if config.pilot is not None and config.design is not None:
        raise BiasscopeError(f"--design {config.design} is for a plan from --sd: with --pilot "
                             "each measure has its own (a gap between groups: two-groups; "
                             "pro − anti, flips: paired); drop --design")
    if config.margin is not None and config.effect is not None \
            and config.effect >= config.margin:
        raise BiasscopeError(f"--effect {config.effect:g} with --margin {config.margin:g}: "
                             "the true difference equivalence is planned under must be "
                             "smaller than the margin; give a smaller --effect (default 0)")
    if config.margin is not None and not 0 < config.alpha < 0.5:  # as compare's TOST takes
        raise BiasscopeError(f"--alpha {config.alpha:g} with --margin: give a number between 0 "
                             "and 0.5 (the level of each one-sided test of equivalence)")
    # core.power's own checks, said as the flags ("power 1.0 must lie between alpha and 1")
    if not 0 < config.alpha < 1:
        raise BiasscopeError(f"--alpha {config.alpha:g}: give a number above 0 and below 1 "
                             "(the significance level)")
    if not config.alpha < config.power < 1:
        raise BiasscopeError(f"--power {config.power:g} with --alpha {config.alpha:g}: give a "
                             "--power above --alpha and below 1 (the chance of finding the "
                             "difference)")
    notes: list[str] = []
    try:
        rows = pilot_rows(config, notes) if config.pilot is not None else [_sd_row(config)]
    except ValueError as exc:
        raise BiasscopeError(str(exc)) from None
    return {"alpha": config.alpha, "power": config.power, "effect": config.effect,
            "margin": config.margin, "rows": rows,
            "sentences": [_say(config, r) for r in rows] + notes}


def _sd_row(config: PowerConfig) -> dict[str, Any]:
    """The plan from ``--sd``; with ``--margin``, raised to compare's minimum for
    ``--measure``, else to the least minimum of any measure whose range allows the margin."""
    assert config.sd is not None
    design: P.Design = config.design or (MEASURES[config.measure].design if config.measure
                                         else "two-groups")
    row: dict[str, Any] = {"design": design, "sd": config.sd,
                           "items_needed": _need(config, config.sd, design)}
    if config.margin is None:
        return row
    if config.measure is not None:
        check_margin(config.measure, config.margin)
        floor = measure_floor(config.measure, config.margin, config.alpha)
        return _floor({**row, "measure": config.measure, "minimum_for": config.measure}, floor)
    allowed = [m for m, known in MEASURES.items() if config.margin <= known.max_margin]
    if not allowed:
        top = max(known.max_margin for known in MEASURES.values())
        raise BiasscopeError(f"--margin {config.margin:g}: give a number at most {top:.3g} (the "
                             "largest range of any measure compare tests; --measure names the "
                             "measure planned for)")
    floor = min(measure_floor(m, config.margin, config.alpha) for m in allowed)
    return _floor({**row, "minimum_for": "any measure"}, floor)


def _say(config: PowerConfig, row: dict[str, Any]) -> str:
    where = f"{row['probe']} {row['words']} at {row['checkpoint']}: " if "probe" in row else ""
    per = " per group" if row["design"] == "two-groups" else ""
    if "detectable_now" in row and not math.isfinite(row["detectable_now"]):
        n = row["items_per_group"]
        why = f"fewer than 2 items{per}" if n < 2 else "its values do not vary"
        return (where + f"with {n} items{per} nothing can be planned from this run: {why}; "
                "plan with --sd (and no --pilot) from the standard deviation you expect")
    now = (f"with {row['items_per_group']} items{per} this run could have detected a "
           f"difference of {num(row['detectable_now'])} or more "
           f"({config.power:.0%} power, α = {config.alpha:g})" if "detectable_now" in row
           else "")
    need = row["items_needed"]
    if need is None:
        ask = ""
    elif config.margin is not None and "items_by_power" in row:
        whose = f" for {row['minimum_for']}" if "minimum_for" in row else ""
        ask = (f"showing equivalence within ±{config.margin:g} needs {need} items{per}: "
               f"compare's minimum{whose}, not power, sets it (biasscope compare calls fewer "
               f"\"too few items\" whatever their values; {row['items_by_power']} by power "
               f"alone, {config.power:.0%} power, α = {config.alpha:g})")
        if row.get("minimum_for") == "any measure":
            ask += "; --measure gives the measure's own minimum, which may be higher"
    elif config.margin is not None:
        ask = (f"showing equivalence within ±{config.margin:g} needs {need} items{per} "
               f"({config.power:.0%} power, α = {config.alpha:g})")
    else:
        ask = (f"detecting {config.effect:g} needs {need} items{per} "
               f"({config.power:.0%} power, α = {config.alpha:g}, sd {num(row['sd'])}"
               f"{' from the jackknife' if row.get('sd_from') == 'jackknife' else ''})")
    return where + "; ".join(p for p in (now, ask) if p)
