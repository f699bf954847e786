"""What a sweep's ``run.json`` asks for that has no unit yet: a sweep stopped (killed, a
checkpoint that failed) leaves records of some checkpoints only, and a report drawn from them
must say that it rests on those, not look like the run's last word.

run.json lists every checkpoint, probe and seed a call asked for before it scored any: each
checkpoint's unit of each probe, per seed (once, as seed 0, for a probe whose items do not
depend on the seed). A unit deleted after it was written is `RunStore.missing_units`' and not
counted again here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY
from biasscope.core.numbers import plural
from biasscope.probes import PROBES
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit


def checkpoint_label(entry: Mapping[str, Any]) -> str:
    """A checkpoint as the report names it: ``step N``, else its revision's name."""
    if entry.get("step") is not None:
        return f"step {entry['step']}"
    return f"revision {entry.get('revision') or 'main'}"


def _seeded(name: str, settings: Any) -> bool:
    base = settings.get("probe", name) if isinstance(settings, Mapping) else name
    info = PROBES.get(str(base).partition(":")[0])
    return info.seeded if info is not None else True


def unscored(store: RunStore, run: Mapping[str, Any]) -> dict[str, Any] | None:
    """summary.json's ``unfinished``: how many of the checkpoints ``run`` (its run.json) asks
    for are scored, and per checkpoint the probes and seeds that have no unit file; None when
    every asked unit has one (or is a `RunStore.missing_units`)."""
    probes = run.get("settings", {}).get("probes", {})
    entries = run.get("checkpoints", [])
    if not isinstance(probes, Mapping) or not isinstance(entries, list) or not entries:
        return None
    seeds = sorted({int(s) for s in run.get("seeds", [])}) or [0]
    have = {p.name for p in store.unit_files()} | set(store.missing_units())
    missing: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "model" not in entry:
            continue
        for probe, settings in probes.items():
            lacking = [s for s in (seeds if _seeded(probe, settings) else [0])
                       if not have & _names(entry, probe, s)]
            if lacking:
                missing.append({"model": str(entry["model"]), "revision": entry.get("revision"),
                                "step": entry.get("step"), "probe": probe, "seeds": lacking,
                                "live": entry.get("source") == IN_MEMORY,
                                "all_seeds": len(lacking) == len(
                                    seeds if _seeded(probe, settings) else [0])})
    if not missing:
        return None
    unfinished = {(m["model"], m["revision"], m["step"]) for m in missing}
    return {"checkpoints": len(entries), "scored": len(entries) - len(unfinished),
            "units": sum(len(m["seeds"]) for m in missing), "probes": len(probes),
            "missing": missing}


def _names(entry: Mapping[str, Any], probe: str, seed: int) -> set[str]:
    """The file names a checkpoint's unit may have: keyed by its identity, or by its name and
    revision as a run made before identities keyed it (rekeyed when it is next run)."""
    identity = entry.get("identity")
    units = {Unit(str(entry["model"]), entry.get("revision"), probe, seed, entry.get("step"),
                  None if identity is None else str(identity)),
             Unit(str(entry["model"]), entry.get("revision"), probe, seed, entry.get("step"))}
    return {f"{u.key}.parquet" for u in units}


def _listed(values: Sequence[object]) -> str:
    return ", ".join(map(str, values))


def named(labels: Sequence[str]) -> str:
    """``step 30``, ``steps 30, 40``, ``revisions best, final``: labels of one kind as one."""
    kinds: dict[str, list[str]] = {}
    for label in labels:
        kind, _, value = label.partition(" ")
        kinds.setdefault(kind, []).append(value)
    return "; ".join(f"{kind}{'s' if len(values) > 1 else ''} {', '.join(values)}"
                     for kind, values in kinds.items())


def sentence(section: Mapping[str, Any], root: object) -> str:
    """The run's state in one sentence: how many checkpoints are scored, which units are not
    (per model where there are several, per probe where the run has several: a live step
    whose evaluation raised after one probe was stored lacks the others only; seeds where not
    all), and how to finish."""
    missing: Sequence[Mapping[str, Any]] = section["missing"]
    several = (len({m["model"] for m in missing}) > 1,
               max(len({m["probe"] for m in missing}), int(section.get("probes", 1))) > 1)
    groups: dict[tuple[str, str], list[str]] = {}
    for m in missing:
        said = groups.setdefault((m["model"], m["probe"]), [])
        if m["all_seeds"]:
            said.append(checkpoint_label(m))
        else:
            seeds = ", ".join(map(str, m["seeds"]))
            said.append(f"{checkpoint_label(m)} (seed{'s' if len(m['seeds']) > 1 else ''} "
                        f"{seeds})")
    clauses = []
    for (model, probe), labels in groups.items():
        whole = named([x for x in labels if "(" not in x])
        text = "; ".join(filter(None, [whole, *(x for x in labels if "(" in x)]))
        clauses.append((f"{probe} at " if several[1] else "") + text
                       + (f" of {model}" if several[0] else ""))
    listed = "; ".join(clauses[:6]) + (f" and {len(clauses) - 6} more" if len(clauses) > 6
                                       else "")
    finish = (f"To finish it, run `biasscope dynamics` with --out {root} again over the same "
              "checkpoints (where run.json says they are).")
    if all(m.get("live") for m in missing):  # BiasCallback's: the weights were in memory
        finish = ("They are scored live, from weights in memory, as the training reaches "
                  "them: it has not yet, is scoring them now, was killed, or their evaluation "
                  "failed (its warning says why); a step it has passed is completed only by "
                  "a training resumed from that step's checkpoint (the run's last step), on "
                  "the weights it was scored on.")
    return (f"Unfinished: {section['scored']} of {plural(section['checkpoints'], 'checkpoint')} "
            f"in run.json fully scored; no records yet for {listed}. The findings rest on the "
            f"scored checkpoints only. {finish}")


def on_scored(sentence: str, unscored: Sequence[str]) -> str:
    """A verdict over the whole curve (where a gap emerges, changes most, where to stop and
    what that costs), saying that it rests on the scored checkpoints only where ``unscored``
    (`curve_checkpoints`) are not."""
    if not unscored:
        return sentence
    return (f"{sentence} This rests on the scored checkpoints only: the run is unfinished "
            f"({named(unscored)} not yet scored).")


def curve_checkpoints(section: Mapping[str, Any] | None, model: str, probe: str
                      ) -> tuple[str, ...]:
    """The checkpoints with a training step of ``model``'s curve of ``probe`` that lack some
    unit (``section``: summary.json's ``unfinished``), as the report names them."""
    missing = (section or {}).get("missing", [])
    return tuple(checkpoint_label(m) for m in missing if m["model"] == model
                 and m["probe"] == probe and m.get("step") is not None)
