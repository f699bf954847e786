"""Every registered probe through every facet of its registry entry (`biasscope.probes.facets`):
each facet is given and works on tiny data (a sweep's records of two checkpoints, scored by a
seeded fake scorer), or is declared absent with a reason that the job or the report which would
use it says in words. A probe registered without a facet cannot be built, so it fails here
instead of disappearing from a report.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.audit import scored
from biasscope.backends.base import ContinuationScore, NextTokenScore, OptionScore
from biasscope.compare.runs import compare_runs
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring import units as scoring
from biasscope.dynamics.summary.build import full_summary
from biasscope.probes import FACETS, PROBES, Absent, load_probe, requests_of
from biasscope.probes.facets import (
    AcrossWordings,
    Compare,
    Panels,
    Performance,
    ProbeInfo,
    StepStatistics,
    Wordings,
)
from biasscope.probes.specs import load_probes
from biasscope.probes.wording_measures import absent, across_wordings
from biasscope.probes.wordings import builtin, check, wordings_for
from biasscope.report import probe_panels
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit
from every_probe_data import write_every_probe

NAMES = list(PROBES)
KINDS = {"wordings": Wordings, "step_statistics": StepStatistics, "panels": Panels,
         "compare": Compare, "across_wordings": AcrossWordings, "performance": Performance}
OPTIONS = AnalysisConfig(n_resamples=100)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_every_probe(tmp_path_factory.mktemp("probe-data"))


class Fake:
    """A checkpoint that answers every sweep request kind with seeded random scores."""

    def __init__(self, step: int) -> None:
        self.label, self.rng = f"fake@{step}", np.random.default_rng(step)

    def score_next_token(self, items: Any) -> list[NextTokenScore]:
        return [NextTokenScore(tuple(float(v) for v in self.rng.normal(-3, 1, len(i.options))),
                               int(self.rng.integers(1, 50))) for i in items]

    def score_continuation(self, items: Any) -> list[ContinuationScore]:
        return [ContinuationScore(float(-self.rng.uniform(1, 20)), bool(self.rng.random() < .5),
                                  int(self.rng.integers(1, 9))) for _ in items]

    def score_options(self, items: Any, messages: Any) -> list[OptionScore]:
        return [OptionScore(tuple(float(v) for v in self.rng.normal(0, 2, len(i.options))))
                for i in items]


def unit_records(name: str, data_dir: Path, step: int, model: str = "m",
                 templates: str | None = None) -> tuple[Unit, pd.DataFrame]:
    """One unit of ``name`` as a sweep stores it: a few items, scored by `Fake`."""
    probe = (load_probes(name, data_dir=data_dir, wordings=templates)[0] if templates
             else load_probe(name, data_dir=data_dir))
    items = scoring.unit_items(probe, 0, 16 if templates else 8)
    kind, asking = scoring.ask(probe, items)
    unit = Unit(model, f"step{step}", name, 0, step, f"{model}@{step}")
    return unit, scoring.unit_frame(Fake(step), unit, kind, items, asking)


def run(name: str, data_dir: Path, root: Path, steps: tuple[int, ...] = (10, 20),
        model: str = "m") -> RunStore:
    """A run of ``name`` at ``steps``, with its summary.json numbers."""
    store = RunStore(root)
    for step in steps:
        store.write_unit(*unit_records(name, data_dir, step, model))
    return store


def test_every_facet_is_given_or_absent_with_a_reason() -> None:
    for name, info in PROBES.items():
        for facet in FACETS:
            value = getattr(info, facet)
            if isinstance(value, Absent):
                assert value.reason.strip() and not value.reason.endswith("."), (name, facet)
                assert info.absent(facet) == f"{name} has no {FACETS[facet]}: {value.reason}"
            else:
                assert info.absent(facet) is None
                if facet in KINDS:
                    assert isinstance(value, KINDS[facet]), (name, facet)
                elif facet != "detector":
                    assert callable(value), (name, facet)


def test_a_probe_without_a_facet_cannot_be_registered() -> None:
    entry = {f.name: getattr(PROBES["bbq"], f.name) for f in fields(ProbeInfo)}
    for facet in FACETS:
        given = {k: v for k, v in entry.items() if k != facet}
        with pytest.raises(TypeError, match=facet):
            ProbeInfo(**given)
    assert set(FACETS) < {f.name for f in fields(ProbeInfo)}


@pytest.mark.parametrize("name", NAMES)
def test_every_probe_is_one_folder_with_one_registry_line(name: str) -> None:
    info = PROBES[name]
    package = info.load.__module__.rsplit(".", 1)[0]
    assert package.startswith("biasscope.probes.") and package.count(".") == 2
    module = importlib.import_module(package)
    assert module.PROBE is info and Path(module.__file__).name == "__init__.py"
    assert info.about == (module.__doc__ or "").strip().splitlines()[0].rstrip(".")


@pytest.mark.parametrize("name", NAMES)
def test_seeded_is_the_loaded_probes(name: str, data_dir: Path) -> None:
    """A report reads from the registry which seeds a run asks of each probe (one unit, seed
    0, of an unseeded one), without loading its data."""
    assert PROBES[name].seeded == getattr(load_probe(name, data_dir=data_dir), "seeded", True)


@pytest.mark.parametrize("name", NAMES)
def test_detector(name: str, data_dir: Path) -> None:
    info, probe = PROBES[name], load_probe(name, data_dir=data_dir)
    if isinstance(info.detector, Absent):
        assert "generate" not in info.requests and getattr(probe, "detector", None) is None
        return
    assert probe.detector is info.detector  # type: ignore[attr-defined]
    item = probe.items(0)[0]
    read = info.detector.detect(item, item.options[item.answer])
    assert read.label == item.options[item.answer] and not read.refused


@pytest.mark.parametrize("name", NAMES)
def test_wordings(name: str, data_dir: Path) -> None:
    facet = PROBES[name].wordings
    if isinstance(facet, Absent):
        with pytest.raises(BiasscopeError, match=f"probe {name} has no wordings"):
            wordings_for(name, "builtin")
        return
    shipped = check(name, builtin(name))
    assert len(shipped) == len(facet.builtin) >= 2
    own = load_probe(name, data_dir=data_dir).config()
    assert own.get("template", shipped[0].template) == shipped[0].template  # the first is its own
    worded = load_probes(name, data_dir=data_dir, wordings="builtin")[0]
    asked = {str(i.groups["template"]) for i in worded.items(0)}
    assert asked == {w.id for w in shipped}


@pytest.mark.parametrize("name", NAMES)
def test_unit_metrics(name: str, data_dir: Path) -> None:
    facet = PROBES[name].unit_metrics
    _, records = unit_records(name, data_dir, 10)
    chosen = scoring.unit_metrics(name, records)
    if isinstance(facet, Absent):  # the numbers of the request kind its records answer
        assert chosen in (scoring.options.option_metrics, scoring.dynamics_metrics)
    else:
        assert chosen is facet
    numbers = chosen(records)
    assert numbers and all(isinstance(v, float) for v in numbers.values())
    assert any(math.isfinite(v) for v in numbers.values())


@pytest.mark.parametrize("name", NAMES)
def test_step_statistics(name: str, data_dir: Path, tmp_path: Path) -> None:
    info = PROBES[name]
    facet = info.step_statistics
    if isinstance(facet, Absent):
        if requests_of(load_probe(name, data_dir=data_dir))[0] == "options":  # pragma: no cover
            pytest.fail(f"{name} is asked by options but has no statistics over steps")
        return  # e.g. WinoBias: the dynamics analysis itself
    store = run(name, data_dir, tmp_path / "run")
    section = full_summary(store, OPTIONS)["analysis"]["probes"][name]
    model = section["models"]["m"]
    assert model["steps"] == [10, 20] and section["headline"] == list(facet.headline)
    for checkpoint in model["checkpoints"]:
        assert set(facet.headline) <= set(checkpoint["values"])
        assert all("estimate" in v for v in checkpoint["values"].values())
        assert all(v["confidence"] == OPTIONS.confidence for v in checkpoint["values"].values()
                   if "low" in v)  # each interval says its level
    # Every interval follows the level asked (a run's `confidence`), none stays at 95%.
    records = store.records()
    records = records[(records["probe"] == name) & (records["step"] == 20)]
    narrow, wide = (facet.values(records.reset_index(drop=True), c) for c in (0.8, 0.99))
    spread = [k for k, v in narrow.items()  # (none where every answer is alike)
              if v.get("low") is not None and math.isfinite(v["low"]) and v["low"] < v["high"]]
    for key in spread:
        assert wide[key]["low"] <= narrow[key]["low"] <= narrow[key]["high"] <= wide[key]["high"]
    assert not spread or any(wide[k]["high"] - wide[k]["low"] > narrow[k]["high"]
                             - narrow[k]["low"] for k in spread), f"{name}: none widens"


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if not isinstance(PROBES[n].step_statistics, Absent)])
def test_step_statistics_draw_the_resamples_asked(name: str, data_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A dynamics run's ``n_resamples`` reaches every bootstrap of a probe's values over steps
    (they drew 2000, StereoSet's 1000, whatever the run said), and the same count gives the
    same values (seeded). BBQ's intervals are its templates' jackknife: nothing to draw;
    Adult's three pairs here give every resample's gap (its spy: below). A mean of these few
    items, of any number, is t widened (no resamples): bootstrapped here, as means of 20 items
    and more were until 2026-12, for the 0/1 rates that still are."""
    from biasscope.core import intervals

    monkeypatch.setattr(intervals, "_resampled", lambda values, bounds: True)
    facet = PROBES[name].step_statistics
    assert not isinstance(facet, Absent)
    probe = load_probe(name, data_dir=data_dir)
    items = scoring.unit_items(probe, 0, 48)  # enough for a bootstrap's bounds to vary
    kind, asking = scoring.ask(probe, items)
    records = scoring.unit_frame(Fake(20), Unit("m", "step20", name, 0, 20, "m@20"), kind,
                                 items, asking)
    few, again, many = (facet.values(records, 0.95, n) for n in (100, 100, 3000))
    assert few == again
    moved = [k for k, v in few.items() if (v.get("low"), v.get("high"))
             != (many[k].get("low"), many[k].get("high"))]
    assert bool(moved) == (name not in ("bbq", "adult-counterfactual")), (name, moved)
    assert all(few[k]["estimate"] == pytest.approx(many[k]["estimate"]) for k in few
               if few[k].get("estimate") is not None and math.isfinite(few[k]["estimate"]))


def test_adults_gaps_draw_the_resamples_asked(data_dir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from adult_fixture import counted_draws

    drawn = counted_draws(monkeypatch)
    records = run("adult-counterfactual", data_dir, tmp_path / "run", steps=(20,)).records()
    PROBES["adult-counterfactual"].step_statistics.values(records, 0.95, 300)
    assert drawn and set(drawn) == {300}
    drawn.clear()
    PROBES["adult-counterfactual"].step_statistics.values(records)  # the audit's own
    assert set(drawn) == {2000}


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if not isinstance(PROBES[n].step_statistics, Absent)])
def test_every_audit_headline_value_has_words(name: str, data_dir: Path) -> None:
    """The audit's sentence on its Holm-corrected tests names each value in words: Winogender's
    read "p gap male female", a raw key. Every key an audited probe's headline holds (from
    option scores too) has a name, so a new one without words fails here."""
    records = unit_records(name, data_dir, 10)[1]
    probe = load_probe(name, data_dir=data_dir)
    if scored.is_scored(probe):
        headline = scored.summary_entry(name, records.assign(source="fake"))["headline"]
    else:
        headline = probe.metrics(records)["headline"]
    keys = [k for k, v in headline.items() if isinstance(v, dict)]
    assert keys and [k for k in keys if not PROBES[name].name_of(k)] == []
    assert name != "professional-bias" or "p_pronoun_effect" in keys  # from option scores


def test_winogender_s_probability_gap_is_named_as_elsewhere() -> None:
    assert PROBES["winogender"].name_of("p_gap_male_female") == (
        "P(occupation reading), he − she (paired by sentence)")
    assert PROBES["bbq"].name_of("bias_ambiguous:Age") == (
        "BBQ bias score in ambiguous contexts (s_AMB), Age")
    assert PROBES["professional-bias"].name_of("no_such_value") is None


def test_an_options_probe_without_step_statistics_says_so(data_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    info = PROBES["bbq"]
    monkeypatch.setitem(PROBES, "bbq", replace(info, step_statistics=Absent("none yet")))
    analysis = full_summary(run("bbq", data_dir, tmp_path / "run"), OPTIONS)["analysis"]
    assert analysis["probes"]["bbq"]["unavailable"] == "none yet"
    assert "bbq: no statistics over steps: none yet." in analysis["sentences"]


@pytest.mark.parametrize("name", NAMES)
def test_panels(name: str, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> None:
    info = PROBES[name]
    if isinstance(info.panels, Absent):
        assert isinstance(info.step_statistics, Absent)  # nothing over steps to draw
        return
    assert not isinstance(info.step_statistics, Absent)
    section = full_summary(run(name, data_dir, tmp_path / "run"), OPTIONS)["analysis"][
        "probes"][name]
    drawn: list[int] = []

    def figure_html(fig: Any, index: int) -> str:
        drawn.append(index)
        return f"<figure {index}>"

    page = probe_panels.section_html({name: section}, figure_html, 0, "holm", 0.05)
    assert f"<h2>{info.panels.title}</h2>" in page
    for panel in info.panels.figures:
        assert probe_panels.values_of(panel, section["models"]["m"]), panel.title
        assert "95%" not in panel.caption, panel.title  # the run's level: `{level}`
    assert drawn == list(range(len(info.panels.figures)))  # every figure has its values
    monkeypatch.setitem(PROBES, name, replace(info, panels=Absent("not drawn yet")))
    page = probe_panels.section_html({name: section}, figure_html, 0, "holm", 0.05)
    assert "No figures: not drawn yet." in page and f"<h2>{name} over training steps" in page


@pytest.mark.parametrize("name", NAMES)
def test_compare(name: str, data_dir: Path, tmp_path: Path) -> None:
    facet = PROBES[name].compare
    a = run(name, data_dir, tmp_path / "a", (10,), "a").records()
    b = run(name, data_dir, tmp_path / "b", (20,), "b").records()
    found, notes = compare_runs(a, b)
    if isinstance(facet, Absent):
        assert found == []
        assert notes == [f"{name}: not compared: {name} has no measures to compare: "
                         f"{facet.reason}."]
        return
    declared = {m.name for m in facet.measures}
    values = facet.values(a)
    assert values and {v.measure for v in values} <= declared
    assert {c.measure for c in found} == {v.measure for v in values}
    assert all(c.probe == name and c.sentence for c in found)


@pytest.mark.parametrize("name", NAMES)
def test_across_wordings(name: str, data_dir: Path, tmp_path: Path) -> None:
    facet = PROBES[name].across_wordings
    if isinstance(facet, Absent):
        assert absent(name) == f"{name} has no measures across wordings: {facet.reason}"
        return
    assert not isinstance(PROBES[name].wordings, Absent)
    _, records = unit_records(name, data_dir, 10, templates="2")
    assert records["template"].nunique() == 2
    measures, wordings, clusters = facet.rows(records)
    assert {m.name for m in measures} == set(facet.labels)
    assert len(wordings) == len(clusters)
    found = across_wordings(name, records, n_resamples=50)
    assert set(found) == set(facet.labels)
    assert all(r["verdict"] and r["label"] == facet.labels[k] for k, r in found.items())
    if not isinstance(PROBES[name].step_statistics, Absent):  # dynamics --wordings: its last step
        store = RunStore(tmp_path / "run")
        for step in (10, 20):
            store.write_unit(*unit_records(name, data_dir, step, templates="2"))
        model = full_summary(store, OPTIONS)["analysis"]["probes"][name]["models"]["m"]
        assert model["wordings"]["step"] == 20
        assert set(model["wordings"]["measures"]) == set(facet.labels)


@pytest.mark.parametrize("name", NAMES)
def test_performance(name: str, data_dir: Path, tmp_path: Path) -> None:
    facet = PROBES[name].performance
    store = run(name, data_dir, tmp_path / "run")
    summary = scoring.summarise(scoring.unit_summary(f) for f in store.iter_units())
    series = performance.load(store, summary)
    if isinstance(facet, Absent):
        assert series == {}
        return
    assert facet.metric in summary["checkpoints"][0]["mean"]
    source, values = series["m"]
    assert source == facet.name and set(values) == {10, 20}



@pytest.mark.parametrize("name", NAMES)
def test_power(name: str, data_dir: Path, tmp_path: Path) -> None:
    """`biasscope power` plans every measure a probe compares, per checkpoint of a pilot."""
    from biasscope import sweep
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.compare.power import PowerConfig, plan

    facet = PROBES[name].compare
    checkpoints = [Checkpoint("m", f"in-memory/m{s}", f"step{s}", s) for s in (10, 20)]
    pilot = sweep(load_probe(name, data_dir=data_dir),
                  scoring.SweepConfig(checkpoints, tmp_path / "pilot", [0]),
                  lambda cks: (Fake(c.step or 0) for c in cks), quiet=True)
    planned = plan(PowerConfig(pilot=str(pilot.root), effect=0.05))
    if isinstance(facet, Absent):
        assert planned["rows"] == [] and planned["sentences"] == [
            f"{name}: not planned: {name} has no measures to compare: {facet.reason}."]
        return
    rows = planned["rows"]
    records = pilot.records()
    measures = {v.measure for v in facet.values(records[records["step"] == 10])}
    assert {r["measure"] for r in rows} == measures
    assert {r["checkpoint"] for r in rows} == ({"m@10", "m@20"} if measures else set())
    assert all(r["items_per_group"] > 0 for r in rows), rows
    assert all(r["sd_from"] == "jackknife" for r in rows if r["measure"] in {"s_dis", "s_amb"})
    assert len(planned["sentences"]) == len(rows)

def test_compare_and_power_name_what_they_leave_out(data_dir: Path, tmp_path: Path) -> None:
    from biasscope.compare.power import PowerConfig, plan

    a = run("bbq", data_dir, tmp_path / "a", (10,), "a").records()
    b = run("professional-bias", data_dir, tmp_path / "b", (10,), "b").records()
    assert compare_runs(a, b) == ([], [
        "bbq: not compared: only run A has it.",
        "professional-bias: not compared: only run B has it."])
    from biasscope import sweep
    from biasscope.backends.checkpoints import Checkpoint

    checkpoints = [Checkpoint("m", f"in-memory/m{s}", f"step{s}", s) for s in (10, 20)]
    pilot = sweep(load_probe("perplexity", data_dir=data_dir),
                  scoring.SweepConfig(checkpoints, tmp_path / "pilot", [0]),
                  lambda cks: (Fake(c.step or 0) for c in cks), quiet=True)
    said = plan(PowerConfig(pilot=str(pilot.root), effect=0.05))["sentences"]
    assert said == [f"perplexity: not planned: perplexity has no measures to compare: "
                    f"{PROBES['perplexity'].compare.reason}."]  # type: ignore[union-attr]


def test_an_audit_under_wordings_says_when_there_is_nothing_to_pool(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = PROBES["bbq"]
    monkeypatch.setitem(PROBES, "bbq", replace(info, across_wordings=Absent("none yet")))
    worded = load_probes("bbq", data_dir=data_dir, wordings="2")[0]
    _, records = unit_records("bbq", data_dir, 10, templates="2")
    result = worded.metrics(records)  # type: ignore[attr-defined]
    assert "Bbq has no measures across wordings: none yet." in result["sentences"]
    assert result["wordings"] == {}
