"""A notebook's mistakes in a config or an entry point's arguments are one line naming the
setting and what to give (not a TypeError from deep inside, nor a run that does something
else), and a value with one obvious meaning (a Path for a path, ``margin=0.02``) is taken."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from biasscope.audit.job import AuditConfig, ItemsConfig
from biasscope.audit.settings import Prompting
from biasscope.backends.base import GenerateParams
from biasscope.backends.hf_model import HFConfig
from biasscope.compare.job import CompareConfig
from biasscope.core.config import written
from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import Levels
from biasscope.dynamics.job import DynamicsConfig
from biasscope.dynamics.settings import Performance
from biasscope.generate.batch import GenerateConfig
from biasscope.intervene.settings import InterveneConfig, Training
from biasscope.judge.job import JudgeConfig
from biasscope.sensitivity.job import SensitivityConfig

SENSITIVITY = {"out": "r", "reward_models": ["m"], "perturber": "p"}


@pytest.mark.parametrize(("make", "says"), [
    (lambda: CompareConfig(run_a=None, run_b="b"), "run_a: give text, not None"),  # type: ignore[arg-type]
    (lambda: CompareConfig(run_a=3, run_b="b"), "run_a: 3 is not text"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out=None), "--out (out): give text or a path, not None"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out=3), "--out (out): 3 is not text or a path"),
    (lambda: ItemsConfig(probe=None, out="x"), "--probe (probe): give a list, not None"),  # type: ignore[arg-type]
    (lambda: JudgeConfig(out="r", models=["m"], input=None), "--input (input): give text"),  # type: ignore[arg-type]
    (lambda: GenerateConfig(model=None, input="i", out="o"), "--model (model): give text"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", quiet="no"), "--quiet (quiet): 'no' is not True or False"),
    (lambda: AuditConfig(out="r", model=3), "--model (model): 3 is not text"),
    (lambda: AuditConfig(out="r", base_rate=0.3), "--base-rate (base_rate): 0.3 is not text"),
    (lambda: DynamicsConfig(out="r", limit="many"), "--limit (limit): 'many' is not a whole"),
    (lambda: SensitivityConfig(**SENSITIVITY, sanity_lines=1000),
     "--sanity-lines (sanity_lines): 1000 is not text"),
    (lambda: Training(seed=None), "--seed (seed): give a whole number, not None"),  # type: ignore[arg-type]
    (lambda: Performance(csv=3), "--performance-csv (csv): give a list, not int 3"),
    (lambda: InterveneConfig(out="r", model="m", seeds=5), "seeds: give a list, not int 5"),
    (lambda: DynamicsConfig(out="r", scoring=4), "scoring: give HFConfig(...)"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", scoring={"bs": 4}), "scoring: HFConfig has no setting bs"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", analysis=[("alpha", 0.05)]), "analysis: give a dict"),  # type: ignore[arg-type]
    (lambda: SensitivityConfig(**SENSITIVITY, templates=["critique.txt"]),  # type: ignore[arg-type]
     "templates: give a dict"),
    (lambda: SensitivityConfig(**SENSITIVITY, directions=["sideways"]),
     "--direction (directions): 'sideways' is not toward or away"),
    # A setting given in a part's dict is named with the part (once without it).
    (lambda: SensitivityConfig(**SENSITIVITY, reward={"transform": "raw"}),  # type: ignore[arg-type]
     "--transform (reward.transform): 'raw' is not one of logit"),
    (lambda: SensitivityConfig(**SENSITIVITY, backend={"device": "gpu"}),  # type: ignore[arg-type]
     "--device (backend.device): 'gpu' is not a device"),
    (lambda: InterveneConfig(out="r", model="m", training={"steps": 0}),  # type: ignore[arg-type]
     "--steps (training.steps): 0 is not 1 or more"),
])
def test_a_wrong_kind_is_refused_naming_the_setting(make, says) -> None:
    with pytest.raises(BiasscopeError, match=re.escape(says)):
        make()


@pytest.mark.parametrize(("make", "field", "means"), [
    (lambda: CompareConfig(run_a="a", run_b="b", margin=0.02), "margin", ["0.02"]),  # type: ignore[arg-type]
    (lambda: CompareConfig(run_a="a", run_b="b", margin=[0.02]), "margin", ["0.02"]),  # type: ignore[list-item]
    (lambda: CompareConfig(run_a=Path("a"), run_b="b"), "run_a", "a"),  # type: ignore[arg-type]
    (lambda: CompareConfig(run_a="a", run_b="b", alpha="0.1"), "alpha", 0.1),  # type: ignore[arg-type]
    (lambda: AuditConfig(out="r", base_rate=0.5), "base_rate", "0.5"),  # type: ignore[arg-type]
    (lambda: AuditConfig(out="r", base_rate=1), "base_rate", "1.0"),  # type: ignore[arg-type]
    (lambda: AuditConfig(out="r", responses=Path("a.jsonl")), "responses", "a.jsonl"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", data_dir=Path("d")), "data_dir", "d"),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", models=Path("m")), "models", ["m"]),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", checkpoint_globs=[Path("c/checkpoint-*")]),  # type: ignore[list-item]
     "checkpoint_globs", ["c/checkpoint-*"]),
    (lambda: DynamicsConfig(out=Path("r")), "out", Path("r")),
    (lambda: DynamicsConfig(out="r", limit="8"), "limit", 8),  # type: ignore[arg-type]
    (lambda: DynamicsConfig(out="r", scoring={"batch_size": 4}), "scoring",  # type: ignore[arg-type]
     HFConfig(batch_size=4)),
    (lambda: InterveneConfig(out="r", model="m", training={"steps": 3}), "training",  # type: ignore[arg-type]
     Training(steps=3)),
    (lambda: ItemsConfig(probe=["bbq"], out=Path("i.jsonl")), "out", "i.jsonl"),  # type: ignore[arg-type]
])
def test_a_value_with_one_meaning_is_taken(make, field, means) -> None:
    assert getattr(make(), field) == means


@pytest.mark.parametrize(("make", "field", "means"), [
    (lambda: DynamicsConfig(out="r", quiet=np.bool_(True)), "quiet", True),
    (lambda: DynamicsConfig(out="r", limit=np.int64(8)), "limit", 8),
    (lambda: DynamicsConfig(out="r", seeds=np.arange(3)), "seeds", [0, 1, 2]),
    (lambda: AuditConfig(out="r", base_rate=np.float64(0.5)), "base_rate", "0.5"),  # type: ignore[arg-type]
    (lambda: Prompting(temperature=np.float32(0.5)), "temperature", 0.5),
    (lambda: GenerateParams(max_tokens=np.int32(4), logprobs=np.bool_(False)), "max_tokens", 4),
    (lambda: GenerateParams(logit_bias={np.int64(5): np.float64(100)}), "logit_bias",
     ((5, 100.0),)),
])
def test_a_numpy_value_is_taken_as_the_python_one(make, field, means) -> None:
    """Before: np.bool_ was "not True or False", np.int64 "not a whole number" (a notebook's
    values from an array); now taken as the bool, int or float, which run.json can hold."""
    value = getattr(make(), field)
    assert value == means and json.dumps(value) == json.dumps(means)


def test_a_list_setting_from_a_generator_keeps_its_entries() -> None:
    """Before: a generator of names was read once to look for paths, leaving no models."""
    assert DynamicsConfig(out="r", models=(m for m in ["a", "b"])).models == ["a", "b"]  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [
    lambda out: DynamicsConfig(out=out),
    lambda out: AuditConfig(out=out),
    lambda out: JudgeConfig(out=out, models=["m"], input="i"),
    lambda out: CompareConfig(run_a="a", run_b="b", out=out),
    lambda out: SensitivityConfig(**{**SENSITIVITY, "out": out}),
    lambda out: InterveneConfig(out=out, model="m"),
])
@pytest.mark.parametrize("kind", [str, Path])
def test_an_out_where_a_file_stands_is_refused_when_the_config_is_made(make, kind,
                                                                       tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BiasscopeError, match=r"--out \(out\): .*file is a file: give a dir"):
        make(kind(tmp_path / "file"))


def test_render_and_load_probe_refuse_what_is_no_path_or_name(tmp_path) -> None:
    from biasscope.jobs import render
    from biasscope.probes import load_probe

    for call, says in ((lambda: render(None), "run: give a path"),  # type: ignore[arg-type]
                       (lambda: render(tmp_path, analysis=[1]), "analysis: give a dict"),  # type: ignore[arg-type]
                       (lambda: load_probe(None), "load_probe: give a probe's name as text"),  # type: ignore[arg-type]
                       (lambda: load_probe(Path("bbq")), "not PosixPath"),  # type: ignore[arg-type]
                       (lambda: load_probe("bbq", nope=1), "'bbq' takes no option nope")):
        with pytest.raises(BiasscopeError, match=re.escape(says)):
            call()


def test_an_unknown_analysis_setting_is_named(tmp_path) -> None:
    from biasscope.dynamics import job

    with pytest.raises(BiasscopeError, match="analysis 'alpah': is no analysis setting"):
        job.run(DynamicsConfig(out=tmp_path / "run", models=[str(tmp_path / "m")],
                               analysis={"alpah": 0.05}))


def test_an_analysis_setting_given_as_text_or_numpy_is_taken(tmp_path) -> None:
    """Before: {"alpha": "0.05"} was "--alpha 0.05: must be a finite number", not saying the
    text was the problem; text for a number is taken as the flag reads it, as a config's
    ``limit="8"`` is, and so is a NumPy number."""
    from biasscope.dynamics.analysis.config import AnalysisConfig, stored_options
    from biasscope.store.directory import RunStore

    chosen = stored_options(RunStore(tmp_path / "run"), {
        "alpha": "0.05", "n_resamples": np.int64(500), "budget": np.float32(0.25)})
    assert (chosen.alpha, chosen.n_resamples, chosen.budget) == (0.05, 500, 0.25)
    assert type(chosen.n_resamples) is int and type(chosen.budget) is float
    assert AnalysisConfig(min_gap="0.1").min_gap == 0.1  # type: ignore[arg-type]
    for given, says in (({"alpha": "5%"}, "--alpha 5%: is text, not a number (give e.g. 0.01)"),
                        ({"n_resamples": "2e3"}, "is text, not a whole number (give e.g. 2000)")):
        with pytest.raises(BiasscopeError, match=re.escape(says)):
            stored_options(RunStore(tmp_path / "run"), given)
    with pytest.raises(BiasscopeError, match=re.escape("alpha = '5%': is text, not a number")):
        AnalysisConfig(alpha="5%")  # type: ignore[arg-type]


@pytest.mark.parametrize(("analysis", "says"), [
    ({"budget": -1}, "--budget (analysis.budget): -1 is negative"),
    ({"alpha": 5}, "analysis setting alpha = 5: must be strictly between 0 and 1"),
    ({"correction": "nope"}, "analysis setting correction = 'nope': must be one of holm"),
    ({"n_resamples": 0}, "analysis setting n_resamples = 0: must be a whole number"),
])
def test_an_interventions_analysis_settings_are_checked(analysis, says) -> None:
    """Before: InterventionAnalysisConfig took any value (budget=-1 despite its check)."""
    with pytest.raises(BiasscopeError, match=re.escape(says)):
        InterveneConfig(out="r", model="m", analysis=analysis)  # type: ignore[arg-type]
    taken = InterveneConfig(out="r", model="m", analysis={  # type: ignore[arg-type]
        "alpha": "0.1", "budget": np.float32(0.5), "n_resamples": np.int64(100)}).analysis
    assert (taken.alpha, taken.budget, taken.n_resamples) == (0.1, 0.5, 100)


@pytest.mark.parametrize(("given", "says"), [
    ({"probes": "winobias-gender"}, "probes: give a probe made by biasscope.load_probe"),
    ({"probes": []}, "probes: give a probe"),
    ({"out": None}, "out: give the run directory"),
    ({"out": "FILE"}, "out: FILE is a file"),
    ({"config": {"every": 0}}, "config.every: 0 is not 1 or more"),
    ({"config": {"evry": 5}}, "config: LiveConfig has no setting evry"),
    ({"step": "100"}, "step: give the training step"),
])
def test_evaluate_now_refuses_a_careless_call(given, says, tmp_path, monkeypatch) -> None:
    from biasscope.dynamics.live import evaluate_now
    from biasscope.probes import load_probe
    from winobias_fixture import write_winobias

    monkeypatch.chdir(tmp_path)
    Path("FILE").write_text("x")
    probe = load_probe("winobias-gender", data_dir=write_winobias(tmp_path / "data"))
    call = {"probes": [probe], "out": "run", "step": 0, **given}
    with pytest.raises(BiasscopeError, match=re.escape(says)):
        evaluate_now(None, None, call.pop("probes"), call.pop("out"), call.pop("step"), **call)


@pytest.mark.parametrize(("value", "shown"), [
    (5.0, "5"), (95.0, "95"), (0.0, "0"), (2.5, "2.5"), (1e-07, "1e-07"),
    (0.123456789, 0.123456789), (float("nan"), None), (5, 5), ("5", "5")])
def test_a_flag_value_is_shown_as_written(value, shown):
    """``--alpha 5`` parses as 5.0: its line said "--alpha 5.0", which the user never wrote.
    A float shows without a spurious ".0", and in full where ``g`` would round it."""
    got = written(value)
    assert got == shown if shown is not None else got is value


def test_a_percentage_for_a_level_names_the_flag_as_written():
    with pytest.raises(BiasscopeError) as caught:
        Levels(confidence=95.0)
    assert str(caught.value).startswith("--confidence 95: must be strictly between 0 and 1: "
                                        "write 0.95 for 95%")
