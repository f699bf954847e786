from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from biasscope.cli.main import main

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def two_models(checkpoint_dirs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second 'model' sharing the first's parent glob layout but missing step 20."""
    import shutil

    root = tmp_path_factory.mktemp("other")
    for ckpt in (checkpoint_dirs[0], checkpoint_dirs[2]):
        shutil.copytree(ckpt, root / ckpt.name)
    return root


def run(tmp_path: Path, checkpoint_dirs: list[Path], data: Path, *extra: str) -> int:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return main(["dynamics", "--checkpoint-glob", f"small={glob}", "--data-dir", str(data),
                 "--out", str(tmp_path / "run"), "--seeds", "0-1", "--quiet", *extra])


def test_summary_gains_tests_cis_emergence_and_a_stop(tmp_path, checkpoint_dirs, winobias_dir):
    csv = tmp_path / "perf.csv"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv),
               "--budget", "0.05", "--correction", "bh") == 0
    analysis = json.loads((tmp_path / "run" / "summary.json").read_text())["analysis"]
    assert analysis["correction"] == "bh" and analysis["budget"] == 0.05
    small = analysis["models"]["small"]
    assert small["steps"] == [10, 20, 30]
    rows = small["tests"]["jsdp_correct"]
    assert [r["step"] for r in rows] == [10, 20, 30]
    assert all(0 <= r["p_value"] <= r["p_adjusted"] <= 1 for r in rows)
    assert all(-1 <= r["effect_size"] <= 1 for r in rows)
    assert {"jsdp_correct/male", "jsdp_gap", "average_rank/not specified",
            "jsdp_not_specified/male"} <= set(small["ci"]["20"])
    low, high = small["ci"]["20"]["jsdp_gap"]
    assert low <= high
    assert small["performance"]["values"] == {"10": 0.2, "20": 0.3, "30": 0.31}
    rec = small["recommendation"]
    assert rec["step"] in (20, 30) and rec["sentence"].startswith(("stop at step", "train to"))
    assert any("JSD-P gap" in s for s in analysis["sentences"])


def test_performance_file_must_cover_every_checkpoint(tmp_path, checkpoint_dirs, winobias_dir,
                                                      capsys):
    csv = tmp_path / "perf.csv"
    csv.write_text("10,0.2\n30,0.3\n")
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 2
    assert "missing steps 20" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", " inf", "-Infinity"])
def test_performance_csv_refuses_a_value_that_is_no_finite_number(
        tmp_path, checkpoint_dirs, winobias_dir, capsys, value):
    """Kept, a NaN was dropped later: the stop then read another final checkpoint, unsaid."""
    csv = tmp_path / "perf.csv"
    csv.write_text(f"step,lambada\n10,0.2\n20,0.3\n30,{value}\n")
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 2
    err = capsys.readouterr().err
    assert err == (f"biasscope: error: {csv}:4: value {value.strip()!r} is not a finite number; "
                   "give step 30 the score measured there\n")
    assert not (tmp_path / "run" / "summary.json").exists()


def test_lm_eval_results_refuse_a_metric_that_is_no_finite_number(
        tmp_path, checkpoint_dirs, winobias_dir, capsys):
    folder = tmp_path / "lm_eval"
    folder.mkdir()
    for step, acc in ((10, 0.1), (20, float("nan")), (30, 0.25)):  # dumped as NaN
        (folder / f"results_{step}.json").write_text(json.dumps({
            "results": {"lambada_openai": {"acc,none": acc}},
            "config": {"model_args": f"pretrained=x,revision=step{step}"}}))
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--lm-eval-results",
               str(folder / "*.json"), "--lm-eval-metric", "lambada_openai/acc") == 2
    assert capsys.readouterr().err == (
        f"biasscope: error: {folder / 'results_20.json'}: field results.lambada_openai.acc,none: "
        "value nan is not a finite number; rerun lm-evaluation-harness at that checkpoint\n")


def test_lm_eval_results_refuse_a_metric_that_is_no_number(tmp_path) -> None:
    """JSON's true read as 1.0: a bool is an int in Python."""
    from biasscope.core.errors import BiasscopeError
    from biasscope.dynamics.analysis.performance import from_lm_eval

    for value in (True, "N/A", None):
        (tmp_path / "results.json").write_text(json.dumps({
            "results": {"lambada_openai": {"acc,none": value}},
            "config": {"model_args": "pretrained=x,revision=step10"}}))
        with pytest.raises(BiasscopeError, match=(
                rf"results.json: field results.lambada_openai.acc,none: value "
                rf"{re.escape(json.dumps(value))} is not a number; name a metric that holds")):
            from_lm_eval(str(tmp_path / "*.json"), "lambada_openai/acc")
    with pytest.raises(BiasscopeError, match=r"has no metric 'f1' \(has acc,none\)"):
        from_lm_eval(str(tmp_path / "*.json"), "lambada_openai/f1")


def test_lm_eval_results_are_read_per_checkpoint(tmp_path, checkpoint_dirs, winobias_dir):
    folder = tmp_path / "lm_eval"
    folder.mkdir()
    for step, acc in ((10, 0.1), (20, 0.2), (30, 0.25)):
        (folder / f"results_{step}.json").write_text(json.dumps({
            "results": {"lambada_openai": {"acc,none": acc, "acc_stderr,none": 0.01}},
            "config": {"model_args": f"pretrained=x,revision=step{step}"}}))
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--lm-eval-results",
               str(folder / "*.json"), "--lm-eval-metric", "lambada_openai/acc") == 0
    perf = json.loads((tmp_path / "run" / "performance.json").read_text())
    assert perf["series"]["small"]["values"] == {"10": 0.1, "20": 0.2, "30": 0.25}


def test_two_models_are_compared_and_mismatched_steps_reported(
        tmp_path, checkpoint_dirs, winobias_dir, two_models):
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--checkpoint-glob",
               f"other={two_models}/checkpoint-*") == 0
    analysis = json.loads((tmp_path / "run" / "summary.json").read_text())["analysis"]
    assert set(analysis["models"]) == {"small", "other"}
    assert analysis["step_mismatch"] == {"other": [20]}
    comparison = analysis["comparisons"][0]
    assert (comparison["model_a"], comparison["model_b"]) == ("other", "small")
    assert [r["step"] for r in comparison["rows"]] == [10, 30]
    assert any("other has no records at steps 20" in s for s in analysis["sentences"])


def test_the_bls_sentence_says_tracks_only_where_the_correlation_is_shown() -> None:
    """'tracks' needs a negative ρ with p < α and an interval below 0; an interval holding 0,
    or no interval, says the correlation is not shown."""
    from biasscope.dynamics.analysis.occupations import sentence

    def said(**rho: object) -> str:
        return sentence("m", 0, {"spearman": {"estimate": -0.5, "n": 20, **rho}}, 0.95, [],
                        False)

    assert "tracks the share of women" in said(low=-0.81, high=-0.01, p_value=0.025)
    assert "runs against the share" in said(low=0.1, high=0.8, p_value=0.01)
    assert "is not shown to follow" in said(low=-0.81, high=0.05, p_value=0.03)
    assert "is not shown to follow" in said(low=-0.81, high=-0.01, p_value=0.06)
    assert "is not shown to follow" in said(low=None, high=None, p_value=None, too_few=True)
    assert "ρ = -0.50 (95% CI -0.81 to -0.01, p = 0.025;" in said(low=-0.81, high=-0.01,
                                                                  p_value=0.025)
    assert "ρ = -0.50 (at least 95% of resamples gave -1.00, p = 0.0020;" in said(
        low=-1.0, high=-1.0, p_value=0.002)  # "(95% CI -1.00 to -1.00)"


def test_pro_anti_takes_occupations_as_units_within_their_stereotype() -> None:
    """A default pronoun moves every male-stereotyped occupation's pairs one way and every
    female-stereotyped one's the other: the strata's difference is no noise of the mean, so
    the error is the occupations' within their stratum (by hand: k/(k − 1) Σ of each
    occupation's deviation from its stratum's mean, times its share, squared); a stratum of
    one occupation has no spread, and the occupations are then one stratum."""
    import numpy as np
    import pandas as pd

    from biasscope.core.student import t_ppf
    from biasscope.dynamics.analysis.breakdown import by_occupation

    means = {"m0": 0.9, "m1": 0.7, "m2": 0.8, "f0": -0.5, "f1": -0.7, "f2": -0.6}
    rng = np.random.default_rng(3)
    job = np.repeat(list(means), 20).astype(object)
    diff = np.array([means[j] for j in job]) + rng.normal(0, 0.01, job.size)
    stereotype = np.array(["male" if j[0] == "m" else "female" for j in job], dtype=object)
    interval, test = by_occupation(diff, job, stereotype, 0.95, None)
    variance = 0.0
    for side in ("m", "f"):
        part = pd.Series(diff[[j[0] == side for j in job]]).groupby(
            [j for j in job if j[0] == side]).mean()
        variance += 0.5 ** 2 * 3 / 2 * float(((part - part.mean()) / 3) ** 2 @ np.ones(3))
    half = t_ppf(0.975, 4) * np.sqrt(variance)
    assert (interval["low"], interval["high"]) == (pytest.approx(diff.mean() - half),
                                                   pytest.approx(diff.mean() + half))
    assert test["df"] == 4 and test["occupations"] == 6 and half < 0.2  # strata apart: ±0.7
    lone = np.where(job == "f0", "female", "male").astype(object)
    merged, _ = by_occupation(diff, job, lone, 0.95, None)
    assert merged["high"] - merged["low"] > 5 * (interval["high"] - interval["low"])


def test_pro_anti_alike_within_each_stereotype_keeps_an_interval() -> None:
    """+1 on every male-stereotyped pair and −1 on every female-stereotyped one: no spread
    within a stratum, so the pairs' own spread gives the interval, which is not of width 0."""
    import numpy as np

    from biasscope.dynamics.analysis.breakdown import by_occupation

    job = np.repeat(["m0", "m1", "f0", "f1", "f2"], 4).astype(object)
    side = np.array([j[0] for j in job], dtype=object)
    diff = np.where(side == "m", 1.0, -1.0)
    interval, test = by_occupation(diff, job, side, 0.95, (-1.0, 1.0))
    assert interval["low"] < interval["estimate"] < interval["high"]
    assert 0 < test["p_value"] < 1 and test["df"] == 3


def test_the_most_gendered_occupations_count_leans_after_holm() -> None:
    """Twelve occupations of eight prompts: the two that lean (+3 against noise of SD 0.5) are
    significant after Holm over all twelve, the ten that do not are not; each occupation's
    p is Student's t over its prompts."""
    import numpy as np
    import pandas as pd
    from scipy import stats as sps

    from biasscope.dynamics.analysis import breakdown, findings

    rng = np.random.default_rng(7)
    job = np.repeat(np.arange(12), 8)
    lean = np.where(job < 2, 3.0, 0.0) + rng.normal(0, 0.5, job.size)
    pm = pd.DataFrame({"prompt": [f"p{k}" for k in range(job.size)], "pair": "", "split": "",
                       "kind": "not-referenced", "occupation": [f"o{k:02d}" for k in job],
                       "stereotype": "male", "lp_diff": lean, "p_diff": lean / 10,
                       "correct": 0.0, "jsdp_correct": 0.0})
    rows = breakdown.occupations(pm, 0.95)
    assert rows[0]["not-referenced/lp_diff"]["p_value"] == pytest.approx(
        sps.ttest_1samp(lean[job == 0], 0.0).pvalue)
    said = findings.occupation_sentences("m", 0, rows, 0.95, False, top=4)[0]
    assert "2 of 4 lean significantly: t over its prompts, Holm over the 12 occupations" in said


def test_a_level_too_fine_for_the_resamples_is_a_warning_too(tmp_path, checkpoint_dirs,
                                                             winobias_dir, capsys):
    """The summary's sentence that 99.9% from 2000 resamples leaves one draw beyond each bound
    is said on stderr too (it was in summary.json and the report alone); the default says
    nothing of it."""
    assert run(tmp_path, checkpoint_dirs, winobias_dir) == 0
    analysis = json.loads((tmp_path / "run" / "summary.json").read_text())["analysis"]
    assert "thin_tails" not in analysis and "warning:" not in capsys.readouterr().err
    assert run(tmp_path, checkpoint_dirs, winobias_dir, "--confidence", "0.999") == 0
    analysis = json.loads((tmp_path / "run" / "summary.json").read_text())["analysis"]
    said = analysis["thin_tails"]
    assert said == analysis["sentences"][0] and said.startswith(
        "At the 99.9% confidence level, the WinoBias bootstrap intervals of 2000 resamples")
    assert "give --resamples 20000 (the analysis' n_resamples) or more" in said
    assert f"warning: {said}\n" in capsys.readouterr().err
