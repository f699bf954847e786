"""The report reads a run a step at a time and gives what the whole records would give."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import biasscope.dynamics.summary.build as analysis
import biasscope.dynamics.summary.model as model_analysis
import biasscope.dynamics.summary.reading as analysis_pass
from biasscope.core.levels import thin_tails
from biasscope.dynamics.analysis import emergence, gap_tests, occupations, performance, tradeoff
from biasscope.dynamics.analysis.breakdown import checkpoint_breakdown
from biasscope.dynamics.analysis.breakdown import record_values as breakdown_values
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.units import summarise, unit_summary
from biasscope.dynamics.summary.build import full_summary
from biasscope.dynamics.summary.model import ModelInputs
from biasscope.probes import Probe, load_probe
from biasscope.probes.winobias import GENDERS
from biasscope.probes.winobias import NAME as PROBE
from biasscope.store import reading
from biasscope.store.directory import RunStore
from numbers_close import assert_close
from test_report import make_run, pythia

OPTIONS = AnalysisConfig(n_resamples=200)


def whole_records_summary(store: RunStore, options: AnalysisConfig) -> dict[str, Any]:
    """summary.json as biasscope computed it before the report streamed: every record of the
    run in one frame, each statistic over all checkpoints at once."""
    summary = summarise(unit_summary(f) for f in store.iter_units() if not f.empty)
    records = store.records()
    records = records[(records["probe"] == PROBE) & records["step"].notna()]
    out: dict[str, Any] = {**options.__dict__, "models": {}, "comparisons": [],
                           "step_mismatch": {}, "sentences": [], "equivalence": []}
    models = sorted(records["model"].unique())
    perf = performance.load(store, summary)
    history: dict[str, dict[int, Any]] = {}
    for model in models:
        chunk = records[records["model"] == model]
        pvs = {v: gap_tests.prompt_values(chunk, v) for v in analysis_pass.VALUES}
        gendered = pvs["jsdp_correct"][pvs["jsdp_correct"]["answer_label"].isin(GENDERS)]
        history[model] = {int(step): at[["prompt", "answer_label", "value"]]
                          for step, at in gendered.groupby("step", sort=True)}
        inputs = ModelInputs(
            {v: gap_tests.checkpoint_tests(chunk, v, correction=options.correction,
                                       alpha=options.alpha)
             for v in ("jsdp_correct", "target_rank")},
            emergence.sharpest_change(chunk, confidence=options.confidence,
                                  n_resamples=options.n_resamples),
            analysis.intervals(pvs, options),
            {int(step): checkpoint_breakdown(breakdown_values(at), options.confidence,
                                             options.n_resamples)
             for step, at in chunk.groupby("step", sort=True)}, history=history[model])
        out["models"][model] = model_analysis.analyse_model(model, inputs, summary, perf.get(model),
                                                      options)
        out["sentences"] += out["models"][model]["sentences"]
    steps = {m: set(out["models"][m]["steps"]) for m in models}
    for model in models:
        if missing := sorted(set().union(*steps.values()) - steps[model]):
            out["step_mismatch"][model] = missing
            out["sentences"].append(f"{model} has no records at steps "
                                    f"{', '.join(map(str, missing))}: compared only where "
                                    "both models have a checkpoint.")
    for a, b in itertools.combinations(models, 2):
        for option in ("male", "female"):
            table = gap_tests.model_tests(records, a, b, value=f"jsdp:{option}",
                                      correction=options.correction, alpha=options.alpha)
            out["comparisons"].append({"model_a": a, "model_b": b, "value": f"jsdp:{option}",
                                       "answer": "not specified",
                                       "rows": model_analysis.json_rows(table)})
        out["equivalence"].append(tradeoff.model_equivalence(
            a, b, history[a], history[b], options.alpha, out["sentences"]))
    analysis._occupation_statistics(out, occupations.load(), options)
    if coarse := thin_tails(options.confidence, options.n_resamples, "the WinoBias",
                            "the analysis' n_resamples"):
        out["sentences"].insert(0, coarse)  # 200 resamples leave 5 beyond each 95% bound
        out["thin_tails"] = coarse
    summary["analysis"] = out
    return summary


def as_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, default=str)


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, winobias: Probe) -> Path:
    """Two models with different steps (one step only one of them has), three seeds."""
    root = tmp_path_factory.mktemp("sweep")
    make_run(root, winobias, pythia(steps=(0, 500, 1000, 3000)), seeds=(0, 1, 2))
    make_run(root, winobias, pythia("EleutherAI/pythia-160m", steps=(0, 1000, 2000, 3000)),
             seeds=(0, 1, 2))
    return root


def test_streamed_summary_is_the_whole_records_summary(sweep: Path) -> None:
    store = RunStore(sweep)
    streamed = full_summary(store, OPTIONS)
    whole = whole_records_summary(store, OPTIONS)
    # Up to rounding: `mean_cis` batches samples of one size together, and which
    # share a batch differs between the passes (last bits, seen on AVX-512 machines).
    assert_close(json.loads(as_json(streamed)), json.loads(as_json(whole)))
    result = streamed["analysis"]
    assert set(result["models"]) == {"EleutherAI/pythia-70m", "EleutherAI/pythia-160m"}
    assert result["step_mismatch"] == {"EleutherAI/pythia-160m": [500],
                                       "EleutherAI/pythia-70m": [2000]}
    assert [len(c["rows"]) for c in result["comparisons"]] == [3, 3]
    assert result["models"]["EleutherAI/pythia-70m"]["sharpest_change"] is not None


def test_each_unit_file_is_read_once_and_one_step_at_a_time(
        sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(sweep)
    reads: list[Path] = []
    held: list[int] = []
    real_read = reading.read_unit

    def read(store: RunStore, path: Path) -> pd.DataFrame | None:
        reads.append(path)
        return real_read(store, path)

    def add_step(run: Any, models: Any, by_model: Any, intervals: Any) -> None:
        held.append(sum(len(f) for f in by_model.values()))
        real_add(run, models, by_model, intervals)

    real_add = analysis_pass.add_step
    monkeypatch.setattr(analysis_pass, "read_unit", read)
    monkeypatch.setattr(analysis_pass, "add_step", add_step)
    full_summary(store, OPTIONS)
    assert sorted(reads) == store.unit_files()  # each once
    per_unit = len(pd.read_parquet(store.unit_files()[0]))
    # steps 0, 500, 1000, 2000, 3000: the records of one step's units at a time, never more
    assert held == [per_unit * n for n in (6, 3, 6, 3, 6)]


def test_ranks_are_kept_narrow_when_exact(winobias: Probe, tmp_path: Path) -> None:
    store = RunStore(make_run(tmp_path, winobias, pythia(steps=(0,)), seeds=(0,)))
    frame = store.records()
    values = analysis_pass.unit_values(frame)
    assert values["target_rank"].dtype == "float32"
    assert values["prompt"].dtype == "category"
    frame["target_rank"] = frame["target_rank"] + 2**25 + 0.5  # not exact in float32
    assert analysis_pass.unit_values(frame)["target_rank"].dtype == "float64"
