"""What a training resumed into a live run must score: the run's probes and seeds, no more
and no fewer. The steps already held are not scored again (their weights are gone), so an added
probe or seed would lack them for good, and a dropped one would stop at the resumed step while
run.json lists every later step for it. And no step a sweep scored from checkpoint folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.live.evaluate import LiveConfig, listed_steps
from biasscope.probes import Probe
from biasscope.store.directory import RunStore

#: Per step, the seeds of each probe the run holds (`live.held_units`).
Held = dict[int, dict[str, set[int]]]


def units_text(lacking: dict[str, list[int]]) -> str:
    """``winobias-gender seed 1; bbq seeds 0, 1``: a step's missing units (`live.lacking`)."""
    return "; ".join(f"{name} {seeds_text(seeds)}" for name, seeds in lacking.items())


def seeds_text(seeds: Sequence[int]) -> str:
    """``seed 1`` or ``seeds 1, 2``."""
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def _whose(out: Path, config: LiveConfig, held: Held) -> str:
    steps = ", ".join(map(str, sorted(held)[:10])) + (" …" if len(held) > 10 else "")
    return f"{out} holds steps {steps} of model_name {config.model_name!r}"


def refuse_other_probes(probes: Sequence[Probe], out: Path, config: LiveConfig, held: Held,
                        at: int) -> None:
    """A training resumed at step ``at`` scores the probes the run has, refused before any
    update otherwise. An added one: the steps already held are not scored again, so its
    curve would start at ``at`` with the earlier steps missing, beside probes that have
    them. A dropped one: run.json lists each step for every probe the run has, so its
    curve would stop at its last step and the report call every later step unscored."""
    recorded = {name for units in held.values() for name in units}
    names = [p.name for p in probes]
    added = [n for n in names if n not in recorded]
    whose = _whose(out, config, held)
    ours = f"resume with the run's probes ({', '.join(sorted(recorded)) or 'none'})"
    if added:
        raise BiasscopeError(
            f"probes: {whose} without {', '.join(added)}, which this training resumed at "
            f"step {at} adds; those steps are not scored again: give the added probes a "
            f"BiasCallback of their own with another out (its curve starts at step {at}), "
            f"or {ours}")
    if dropped := sorted(recorded - set(names)):
        last = max(s for s, units in held.items() if set(units) & set(dropped))
        raise BiasscopeError(
            f"probes: {whose} with {', '.join(dropped)}, which this training resumed at "
            f"step {at} leaves out; its curve would stop at step {last} and the report "
            f"would call every later step unscored: {ours}, or give this training "
            "another out")


def refuse_other_seeds(probes: Sequence[Probe], out: Path, config: LiveConfig, held: Held,
                       at: int) -> None:
    """A training resumed at step ``at`` scores the seeds the run has, as it does its
    probes: an added seed would have no records of the steps already held (their weights
    are gone), so each step's seed mean before ``at`` would be over other option orders
    than after it, and the report would call those steps unfinished for good; a dropped
    one would stop at ``at``, every later step named unscored."""
    seeded = {p.name for p in probes if getattr(p, "seeded", True)}
    recorded = {s: {seed for name, seeds in units.items() if name in seeded for seed in seeds}
                for s, units in held.items()}
    ours = set().union(*recorded.values())
    if not ours:  # no seeded probe: every unit is seed 0
        return
    whose = _whose(out, config, held)
    theirs = f"resume with the run's seeds (LiveConfig(seeds={tuple(sorted(ours))}))"
    if added := sorted(set(config.seeds) - ours):
        raise BiasscopeError(
            f"seeds: {whose} without {seeds_text(added)}, which this training resumed at "
            f"step {at} adds; the steps before it are not scored again (their weights are "
            "gone), so their seed means would be over other option orders than later steps': "
            f"{theirs}, or give the added seeds a BiasCallback of their own with another out "
            f"(its curve starts at step {at})")
    if dropped := sorted(ours - set(config.seeds)):
        last = max(s for s, seeds in recorded.items() if seeds & set(dropped))
        raise BiasscopeError(
            f"seeds: {whose} with {seeds_text(dropped)}, which this training resumed at step "
            f"{at} leaves out; {'their' if len(dropped) > 1 else 'its'} records would stop at "
            f"step {last} and the report would call every later step unscored: {theirs}, or "
            "give this training another out")


def refuse_swept(out: Path, config: LiveConfig, at: int) -> None:
    """Steps of this model a `biasscope dynamics` sweep scored from checkpoint folders (the
    Trainer's saved ones, under this model_name) that a training starting (or resumed) at step
    ``at`` would reach, refused before any update: the training keys its units by the step,
    the sweep by the folder, so one step would hold two sets of records. A training resumed
    at the sweep's last step goes on from it (that step is not scored again)."""
    swept = listed_steps(RunStore(out), config.model_name, in_memory=False)
    if clash := [s for s in sorted(swept) if s > at or at == 0]:
        shown = ", ".join(map(str, clash[:10])) + (" …" if len(clash) > 10 else "")
        where = "from step 0" if at == 0 else f"resumed at step {at}"
        raise BiasscopeError(
            f"out: {out} holds steps {shown} of model_name {config.model_name!r} scored by "
            f"biasscope dynamics from checkpoint folders ({swept[clash[0]]}"
            f"{' …' if len(clash) > 1 else ''}), which this training, {where}, would score "
            "again in memory; one step's records come from one source: give another out or "
            "LiveConfig(model_name=...)")
