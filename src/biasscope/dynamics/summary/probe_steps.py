"""The probes with statistics over training steps (the audit probes: BBQ, Adult counterfactuals
and professional bias), checkpoint by checkpoint, from stored records alone.

Each checkpoint's records of a probe go through the probe's own step statistics
(``PROBES[name].step_statistics``, from the numbers `biasscope audit` gives for one model),
reduced at once to a few values with their CIs; only those are kept, so memory follows one
step's records. Tested values (those with a p-value) are then corrected over the
model's checkpoints (Holm or BH, as the WinoBias gap), and emergence is the first step from
which every later checkpoint is significant with the final checkpoint's sign.

Seeds: these probes' items do not depend on the seed, so a run usually holds one seed per
checkpoint. Where it holds several, each seed is scored on its own; the checkpoint's estimate
is the seeds' mean, its interval the hull of theirs, and its p-value their largest (the effect
must be significant in every seed: an intersection-union test, valid at any seed count).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import p_is, with_ci
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.probes import PROBES
from biasscope.probes.facets import Absent, StepStatistics, StepValues, StepValuesOf
from biasscope.probes.wording_measures import across_wordings
from biasscope.store.directory import RunStore
from biasscope.store.reading import read_unit, unit_index

Values = StepValues


def stepped() -> dict[str, StepStatistics]:
    """The registered probes read over training steps, each with its statistics
    (``PROBES[name].step_statistics``)."""
    return {name: info.step_statistics for name, info in PROBES.items()
            if not isinstance(info.step_statistics, Absent)}


#: p-values a value may hold beside ``p_value`` (Winogender's per occupation, adjusted over
#: the occupations), combined as it is.
OTHER_P = ("p_exact", "p_occupations")
SPREAD = ("estimate", "low", "high", "n", "effect_size")


def combine_seeds(per_seed: list[Values]) -> Values:
    """One checkpoint's values from each seed's: mean estimate, hull of the intervals, the
    largest p-value, the mean effect size, the seeds' range (``seed_low``/``seed_high``) and
    whatever else every seed gives alike (an occupation's share of women)."""
    if len(per_seed) == 1:
        return {k: {**v, "seeds": 1} for k, v in per_seed[0].items()}
    out: Values = {}
    for key in sorted(set().union(*per_seed)):
        entries = [v[key] for v in per_seed if key in v]

        def gather(name: str, entries: list[dict[str, Any]] = entries) -> list[float]:
            return [float(e[name]) for e in entries if e.get(name) is not None]

        est = gather("estimate")
        row: dict[str, Any] = {
            "estimate": float(np.mean(est)) if est else None,
            "low": min(gather("low"), default=None), "high": max(gather("high"), default=None),
            "n": entries[0].get("n"), "seeds": len(entries),
            "seed_low": min(est, default=None), "seed_high": max(est, default=None)}
        for name in ("p_value", *OTHER_P):  # significant only where it is in every seed
            if any(name in e for e in entries):
                p = gather(name)
                row[name] = max(p) if len(p) == len(entries) else None
        if any("effect_size" in e for e in entries):
            es = gather("effect_size")
            row["effect_size"] = float(np.mean(es)) if es else None
        row.update({k: v for k, v in entries[0].items() if k not in row and k not in SPREAD
                    and all(e.get(k) == v for e in entries)})  # what all seeds agree on
        out[key] = row
    return out


def tested(entry: Mapping[str, Any], same: str | None = None) -> str:
    """One checkpoint's tested value as every sentence over checkpoints gives it: estimate
    with its CI at the entry's level (``confidence``), the test's p and effect size
    (``p_value``, ``effect_size``); ``same``: `with_ci`'s (`StepStatistics.same`)."""
    size = entry.get("effect_size")
    test = f"{p_is(entry.get('p_value'))}, effect size {'n/a' if size is None else f'{size:.2f}'}"
    return with_ci(entry.get("estimate"), entry.get("low"), entry.get("high"),
                   entry.get("confidence", 0.95), extra=test, same=same)


#: Per probe and model: its measures across wordings at the last step that has several
#: (``{"step": step or None, "measures": ...}``, `biasscope.probes.wording_measures`).
Across = dict[str, dict[str, dict[str, Any]]]


def worded(part: pd.DataFrame) -> bool:
    """Whether these records were asked under several wordings (--wordings)."""
    return "template" in part and part["template"].nunique() > 1


def across(found: Across, latest: dict[tuple[str, str], tuple[int | None, pd.DataFrame]],
           options: Mapping[str, Any]) -> None:
    """Into ``found``: each (probe, model)'s measures across wordings of ``latest``'s records
    (none for a probe without them)."""
    for (probe, model), (step, part) in sorted(latest.items()):
        if measures := across_wordings(probe, part, **options):
            found.setdefault(probe, {})[model] = {"step": step, "measures": measures}


def read_checkpoints(store: RunStore, unavailable: dict[str, str] | None = None,
                     wordings: Across | None = None, options: Mapping[str, Any] | None = None
                     ) -> dict[str, dict[str, dict[int, Values]]]:
    """Per audit probe, model and training step: the checkpoint's values, reading the unit
    files of one step at a time (records without a step are left out). A probe whose metrics
    cannot run here (a missing optional extra: fairlearn for Adult) is left out, and the
    one-line reason goes into ``unavailable``. ``options``: the analysis' confidence (each
    value's interval is at it), resamples (each bootstrap draws them), α and correction.
    With ``wordings``: into it, each model's measures across wordings at its last step asked
    under several, from that step's records alone."""
    unavailable = {} if unavailable is None else unavailable
    confidence, n_resamples = level(options), resamples(options)
    latest: dict[tuple[str, str], tuple[int | None, pd.DataFrame]] = {}
    statistics = stepped()
    index = unit_index(store)
    by_step: dict[int, list[int]] = {}
    for i, entry in enumerate(index):
        for probe in statistics:
            for step in entry.steps(probe):
                by_step.setdefault(step, []).append(i)
    out: dict[str, dict[str, dict[int, Values]]] = {}
    for step in sorted(by_step):
        chunks = []
        for i in sorted(set(by_step[step])):
            frame = read_unit(store, index[i].path)
            if frame is None:
                continue
            keep = frame["probe"].isin(list(statistics)) & (frame["step"] == step).fillna(False)
            chunks.append(frame[keep])
            del frame
        if not chunks:
            continue
        rows = pd.concat(chunks, ignore_index=True)
        del chunks
        for (probe, model), part in rows.groupby(["probe", "model"], sort=True):
            if str(probe) in unavailable:
                continue
            values = statistics[str(probe)].values
            try:
                found = _values(part, values, confidence, n_resamples)
            except BiasscopeError as exc:
                unavailable[str(probe)] = str(exc)
                out.pop(str(probe), None)
                continue
            out.setdefault(str(probe), {}).setdefault(str(model), {})[int(step)] = found
            if wordings is not None and worded(part):
                latest[(str(probe), str(model))] = (int(step), part)
        del rows
    if wordings is not None:
        across(wordings, {k: v for k, v in latest.items() if k[0] not in unavailable},
               options or {})
    return out


def level(options: Mapping[str, Any] | None) -> float:
    """The run's confidence level among the analysis ``options`` (the default's without)."""
    return float((options or {}).get("confidence", AnalysisConfig.confidence))


def resamples(options: Mapping[str, Any] | None) -> int:
    """The run's resamples among the analysis ``options`` (the default's without)."""
    return int((options or {}).get("n_resamples", AnalysisConfig.n_resamples))


def _values(part: pd.DataFrame, values: StepValuesOf, confidence: float, n_resamples: int
            ) -> Values:
    """One checkpoint's values of one probe and model, each interval at ``confidence`` and
    saying so (``confidence``), so a sentence, table or hover gives the level it was made at;
    each bootstrap draws ``n_resamples`` (seeded: the same records give the same values).
    Several wordings (--wordings) are combined as seeds are: the largest p-value makes a
    checkpoint significant only when it is under every wording."""
    part = part.assign(seed=part["seed"].fillna(0) if "seed" in part else 0)
    keys = ["seed", "template"] if "template" in part else ["seed"]
    found = combine_seeds([values(chunk.reset_index(drop=True), confidence, n_resamples)
                           for _, chunk in part.groupby(keys, sort=True)])
    for entry in found.values():
        if "low" in entry:
            entry["confidence"] = confidence
    return found


#: Per probe, (model, revision) without a training step (revision None: a folder given
#: without one) and its values, as one checkpoint's.
Stepless = dict[str, dict[tuple[str, str | None], Values]]


def read_stepless(store: RunStore, checkpoints: Mapping[str, Mapping[str, set[str | None]]],
                  wordings: dict[str, dict[tuple[str, str | None], dict[str, Any]]] | None = None,
                  options: Mapping[str, Any] | None = None) -> Stepless:
    """Per probe, model and revision of ``checkpoints`` (probe: model: revisions), the values
    of its records without a training step (`--model ./final`, a Trainer's ``best``): each
    revision's statistics on its own, as at one checkpoint, never pooled with another's
    (with ``wordings``: its measures across wordings into it, as `read_checkpoints`). The
    units of one revision are read at a time, and only its stepless rows of these probes
    kept."""
    statistics = stepped()
    index = unit_index(store)
    wanted = sorted({(m, r) for models in checkpoints.values() for m, rs in models.items()
                     for r in rs}, key=lambda mr: (mr[0], mr[1] or ""))
    out: Stepless = {}
    for model, revision in wanted:
        probes = [p for p, models in checkpoints.items() if revision in models.get(model, ())]
        chunks = []
        for entry in index:
            if not any((p, model, revision) in entry.stepless for p in probes):
                continue
            frame = read_unit(store, entry.path)
            if frame is None:
                continue
            named = ((frame["revision"] == revision if revision is not None
                      else frame["revision"].isna()) if "revision" in frame else True)
            chunks.append(frame[frame["probe"].isin(probes) & frame["step"].isna()
                                & (frame["model"] == model) & named])
            del frame
        if not chunks:
            continue
        rows = pd.concat(chunks, ignore_index=True)
        del chunks
        for probe, part in rows.groupby("probe", sort=True):
            try:
                found = _values(part, statistics[str(probe)].values, level(options),
                                resamples(options))
            except BiasscopeError:
                continue  # said for the probe's stepped checkpoints as well
            out.setdefault(str(probe), {})[(model, revision)] = found
            if wordings is not None and worded(part) and (
                    measures := across_wordings(str(probe), part, **(options or {}))):
                wordings.setdefault(str(probe), {})[(model, revision)] = {
                    "step": None, "revision": revision, "measures": measures}
        del rows
    return out
