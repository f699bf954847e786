"""The audit probes over training steps (summary.json's ``analysis.probes``): the numbers of
`biasscope audit` per checkpoint, emergence at the step a synthetic effect appears, seeds,
the stopping recommendation, and memory kept to one step's records."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.backends.base import OptionScore
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.asking import Asking, option_frame
from biasscope.dynamics.summary import probe_steps as audit_dynamics
from biasscope.dynamics.summary.build import full_summary
from biasscope.probes import PROBES, load_probe, professional
from biasscope.probes.facets import StepStatistics
from biasscope.probes.professional.steps import professional_values
from biasscope.store import reading
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit

STEPS = (0, 100, 200, 300, 400, 500)


def professional_records(step: int, strength: float, seed: int = 0, model: str = "m",
                         noise: int = 0) -> pd.DataFrame:
    """One professional-bias unit as a sweep stores it: each item's two option log-probs, the
    stereotyped occupation (the female-coded one after 'she', the male-coded after 'he')
    ``strength`` nats ahead, plus a little noise so every checkpoint can be tested."""
    probe = load_probe("professional-bias")
    items = probe.items(seed)
    rng = np.random.default_rng(step * 7 + noise)
    scores = []
    for item in items:
        stereo = item.groups["female_occupation" if item.groups["trigger"] else "male_occupation"]
        scores.append(OptionScore(tuple(
            float((strength if option == stereo else 0.0) + rng.normal(0, 0.3))
            for option in item.options)))
    unit = Unit(model, f"step{step}", "professional-bias", seed, step, f"{model}@{step}")
    return option_frame(unit, items, scores, Asking((), probe.detector))


def write_run(root: Path, emerge_at: int, seeds: tuple[int, ...] = (0,),
              models: tuple[str, ...] = ("m",), until: int = 10**9) -> RunStore:
    """A professional-bias sweep whose stereotype preference is there from step
    ``emerge_at`` up to (not including) step ``until``."""
    store = RunStore(root)
    for model in models:
        for step in STEPS:
            for seed in seeds:
                frame = professional_records(step, 2.0 if emerge_at <= step < until else 0.0,
                                             seed, model, noise=seed)
                unit = Unit(model, f"step{step}", "professional-bias", seed, step,
                            f"{model}@{step}")
                store.write_unit(unit, frame)
    return store


OPTIONS = AnalysisConfig(n_resamples=200)


def with_statistics(monkeypatch: pytest.MonkeyPatch, values: Any) -> None:
    """Professional bias read over steps by ``values`` instead of its own statistics."""
    info = PROBES["professional-bias"]
    monkeypatch.setitem(PROBES, info.name, replace(
        info, step_statistics=StepStatistics(values, ("preference",))))


def test_emergence_is_found_at_the_step_the_preference_appears(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=300)
    analysis = full_summary(store, OPTIONS)["analysis"]
    section = analysis["probes"]["professional-bias"]
    model = section["models"]["m"]
    assert model["steps"] == list(STEPS)
    assert model["emergence"]["preference"] == 300
    values = {c["step"]: c["values"]["preference"] for c in model["checkpoints"]}
    assert all(values[s]["significant"] for s in STEPS if s >= 300)
    assert not any(values[s]["significant"] for s in STEPS if s < 300)
    for entry in values.values():  # every number with its CI, every p with an effect size
        assert {"estimate", "low", "high", "p_value", "p_adjusted", "effect_size"} <= set(entry)
    assert values[500]["low"] > 0
    assert any("from step 300 on" in s for s in analysis["sentences"])
    # No WinoBias records: the WinoBias analysis is empty, not an error.
    assert analysis["models"] == {}


def test_no_effect_emerges_nowhere(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=10**9)
    model = full_summary(store, OPTIONS)["analysis"]["probes"]["professional-bias"]["models"]["m"]
    assert model["emergence"]["preference"] is None
    assert "not significant (Holm-corrected, α = 0.01) at any checkpoint" in model["sentences"][0]


def test_an_effect_that_fades_has_not_emerged_and_the_sentence_says_where_it_was(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=200, until=400)
    model = full_summary(store, OPTIONS)["analysis"]["probes"]["professional-bias"]["models"]["m"]
    assert model["emergence"]["preference"] is None
    assert "at 2 of 6 checkpoints (steps 200, 300) but not at the last" in model["sentences"][0]


def test_a_checkpoint_gives_the_numbers_of_biasscope_probe(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=200)
    model = full_summary(store, OPTIONS)["analysis"]["probes"]["professional-bias"]["models"]["m"]
    at = {c["step"]: c["values"] for c in model["checkpoints"]}
    # the audit's metrics, their bootstraps drawing the run's resamples (the audit's: 2000)
    head = professional.metrics(professional_records(400, 2.0), 0.95,
                                OPTIONS.n_resamples)["headline"]
    for key, name in (("p_pronoun_effect", "preference"), ("pronoun_effect", "pronoun_effect"),
                      ("stereotyped_rate", "stereotyped_rate")):
        for field in ("estimate", "low", "high", "p_value", "effect_size"):
            if field in head[key]:
                want = head[key][field]  # NaN (d_z of differences all alike) is stored as null
                assert at[400][name][field] == (None if want != want else pytest.approx(want)), \
                    (key, field)


def test_seeds_are_combined_and_stay_significant_only_if_every_seed_is(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=300, seeds=(0, 1, 2))
    model = full_summary(store, OPTIONS)["analysis"]["probes"]["professional-bias"]["models"]["m"]
    last = model["checkpoints"][-1]["values"]["preference"]
    assert last["seeds"] == 3 and last["seed_low"] <= last["estimate"] <= last["seed_high"]
    per_seed = [professional_values(professional_records(500, 2.0, s, noise=s), 0.95,
                                    OPTIONS.n_resamples) for s in (0, 1, 2)]
    assert last["p_value"] == pytest.approx(max(v["preference"]["p_value"] for v in per_seed))
    assert last["low"] == pytest.approx(min(v["preference"]["low"] for v in per_seed))
    assert model["emergence"]["preference"] == 300


def test_the_stop_recommendation_follows_the_preference(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=300)
    performance.save(store, "m", {s: 0.5 + s / 10_000 for s in STEPS}, "accuracy")
    model = full_summary(store, AnalysisConfig(n_resamples=200, budget=0.055)
                         )["analysis"]["probes"]["professional-bias"]["models"]["m"]
    rec = model["recommendation"]
    assert rec is not None and rec["step"] == 200  # the last step before it emerges within 5.5%
    assert any("stop at step 200" in s for s in model["sentences"])


def test_units_are_read_one_step_at_a_time(tmp_path, monkeypatch):
    store = write_run(tmp_path / "run", emerge_at=300, models=("a", "b"))
    held: list[int] = []
    reads: list[Path] = []
    original = reading.read_unit

    def spy(store: RunStore, path: Path) -> Any:
        reads.append(path)
        return original(store, path)

    seen: list[int] = []
    values = PROBES["professional-bias"].step_statistics.values

    def counting(records: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
                 ) -> Any:
        seen.append(int(records["step"].iloc[0]))
        held.append(len(records))
        return values(records, confidence, n_resamples)

    monkeypatch.setattr(audit_dynamics, "read_unit", spy)
    with_statistics(monkeypatch, counting)
    audit_dynamics.read_checkpoints(store)
    assert seen == sorted(seen)  # step by step
    assert len(reads) == len(set(reads)) == 2 * len(STEPS)  # each unit once
    assert max(held) == 80  # one checkpoint's records at a time


def test_the_summary_is_json(tmp_path):
    store = write_run(tmp_path / "run", emerge_at=300)
    json.dumps(full_summary(store, OPTIONS), allow_nan=False)


def test_a_probe_whose_metrics_cannot_run_says_why_in_one_line(tmp_path, monkeypatch):
    def missing(records: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
                ) -> Any:
        raise BiasscopeError("professional-bias's metrics need the 'x' extra: pip install x")

    with_statistics(monkeypatch, missing)
    store = write_run(tmp_path / "run", emerge_at=300)
    analysis = full_summary(store, OPTIONS)["analysis"]
    section = analysis["probes"]["professional-bias"]
    assert section["models"] == {} and "pip install x" in section["unavailable"]
    assert any("no statistics over steps" in s for s in analysis["sentences"])


def test_an_unfinished_run_says_its_verdicts_over_steps_rest_on_the_scored_ones(tmp_path):
    """As the WinoBias verdicts do: emergence and the stop of an audit probe name the
    checkpoints run.json lists that have no records yet."""
    from biasscope.dynamics.summary.probes import analyse_probes

    store = write_run(tmp_path / "run", emerge_at=300)
    performance.save(store, "m", {s: 0.5 + s / 10_000 for s in (*STEPS, 600)}, "accuracy")
    summary = full_summary(store, OPTIONS)
    summary["unfinished"] = {"missing": [{"model": "m", "probe": "professional-bias",
                                          "step": 600, "revision": "step600"}]}
    rests = ("This rests on the scored checkpoints only: the run is unfinished (step 600 not "
             "yet scored).")
    said = analyse_probes(store, summary, OPTIONS)["professional-bias"]["models"]["m"]
    assert "from step 300 on" in said["sentences"][0] and said["sentences"][0].endswith(rests)
    assert any("(budget:" in s and s.endswith(rests) for s in said["sentences"])
