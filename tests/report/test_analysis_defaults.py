"""Statistics defaults that must not mislead: a significant but tiny JSD-P gap (as a random
model's) is flagged against a stated smallest gap of interest, and no stop is recommended, nor
any "nan%" printed, where the performance change is undefined."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from biasscope.backends.base import NextTokenScore
from biasscope.cli.main import main
from biasscope.core.items import Item
from biasscope.dynamics.analysis import emergence, performance
from biasscope.dynamics.analysis.config import FLAG_GAP
from biasscope.probes import Probe, load_probe
from biasscope.store.directory import RunStore
from test_report import make_run, pythia


@pytest.fixture(scope="module")
def random_run(checkpoint_dirs: list[Path], winobias_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three random-init checkpoints swept, with a performance of 0 at every step."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("random")
    csv = root / "perf.csv"
    csv.write_text("step,acc\n10,0.0\n20,0.0\n30,0.0\n")
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    assert main(["dynamics", "--checkpoint-glob", f"random={glob}", "--data-dir",
                 str(winobias_dir), "--out", str(root / "run"), "--seeds", "0", "--quiet",
                 "--performance-csv", str(csv)]) == 0
    return root / "run"


def analysis(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["analysis"]


def test_a_random_model_gets_the_flag_and_no_stop(random_run: Path) -> None:
    result = analysis(random_run)
    model = result["models"]["random"]
    rows = model["tests"]["jsdp_correct"]
    # What the issue saw: significant everywhere, effect size ±1, from the prompts' form.
    assert all(r["significant"] for r in rows)
    assert all(abs(r["gap"]) < FLAG_GAP for r in rows), [(r["gap"], r["effect_size"]) for r in rows]
    assert all(r["below_gap_of_interest"] for r in rows)
    assert model["gap_of_interest"] == FLAG_GAP
    said = " ".join(result["sentences"])
    assert (f"at 3 of 3 checkpoints (steps 10, 20, 30) the JSD-P gap is significant but below "
            f"the smallest gap of interest {FLAG_GAP:g}") in said
    # A performance of 0 at the final step: no relative loss, so no recommendation.
    assert model["recommendation"] is None
    assert model["recommendation_refused"].startswith(
        "no stop recommended: the final checkpoint's performance (perf.csv) is 0")
    page = (random_run / "report.html").read_text(encoding="utf-8")
    assert f"yes, but |gap| &lt; {FLAG_GAP:g}" in page
    assert "No stop recommended: the final checkpoint" in page
    visible = re.sub(r"<script.*?</script>", "", page, flags=re.DOTALL)  # plotly.js: isNaN%
    for text in (visible, (random_run / "summary.json").read_text()):
        assert "nan%" not in text.lower() and "NaN" not in text


def test_min_gap_sets_the_gap_of_interest(random_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(random_run, tmp_path / "run"))
    gaps = [abs(r["gap"]) for r in analysis(run)["models"]["random"]["tests"]["jsdp_correct"]]
    below = min(gaps) / 2
    assert main(["report", str(run), "--min-gap", f"{below}"]) == 0
    model = analysis(run)["models"]["random"]
    assert model["gap_of_interest"] == below
    assert not any(r["below_gap_of_interest"] for r in model["tests"]["jsdp_correct"])
    assert not any("below the smallest gap" in s for s in analysis(run)["sentences"])
    above = max(gaps) * 2
    assert main(["report", str(run), "--min-gap", f"{above}"]) == 0
    result = analysis(run)
    assert result["models"]["random"]["emergence"]["jsdp_correct"] is None
    assert any(f"below the smallest gap of interest {above:g} (--min-gap)" in s
               for s in result["sentences"])


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


def male_later(items: Sequence[Item], step: int, seed: int) -> list[NextTokenScore]:
    """Option log-probs without a lean at step 0 that favour "male" strongly later."""
    rng = np.random.default_rng(1000 * step + seed)
    scores = []
    for item in items:
        logits = rng.normal(0.0, 0.3, size=len(item.options)) - 6.0
        logits[item.options.index("male")] += 3.0 * (step > 0)
        scores.append(NextTokenScore(tuple(float(x) for x in logits), 10))
    return scores


def test_an_untrained_recommended_step_is_flagged(tmp_path: Path, winobias: Probe) -> None:
    run = make_run(tmp_path, winobias, pythia(steps=(0, 1000, 2000)), scores=male_later)
    # Performance that never rises: every step is within budget, and the least-trained step's
    # gap is shown the smallest.
    performance.save(RunStore(run), "EleutherAI/pythia-70m", {0: 0.3, 1000: 0.3, 2000: 0.3},
                     "accuracy")
    assert main(["report", str(run)]) == 0
    result = analysis(run)
    rec = result["models"]["EleutherAI/pythia-70m"]["recommendation"]
    assert rec["step"] == 0 and rec["p_adjusted"] < 0.01
    assert any("caution: the recommended step 0 performs no better than the first "
               "checkpoint" in s for s in result["sentences"])


def test_a_change_relative_to_zero_is_never_a_percentage() -> None:
    rec = emergence.recommend_stop([1, 2], [0.0, 0.0], [0.5, 0.5], tested={1: 0.001})
    assert rec.step == 1 and math.isnan(rec.gap_change_pct)
    assert "nan" not in rec.sentence.lower()
    assert "gap 0 against 0" in rec.sentence
    rec = emergence.recommend_stop([1, 2, 3], [0.01, 0.2, 0.3], [0.0, 0.0, 0.0],
                                   tested={1: 0.001, 2: 0.5})
    assert "nan" not in rec.sentence.lower() and "performance 0 against 0" in rec.sentence



def test_an_average_rank_gap_counts_only_where_the_jsdp_gap_is_of_interest(
        random_run: Path, tmp_path: Path) -> None:
    """A rank gap has no size: the random model's Average Rank gap is significant at every
    checkpoint, and emerged from step 20 although no JSD-P gap reaches the smallest gap of
    interest. It is flagged as the JSD-P gap is, and does not emerge."""
    run = Path(shutil.copytree(random_run, tmp_path / "run"))
    assert main(["report", str(run), "--min-gap", "0.3"]) == 0
    result = analysis(run)
    model = result["models"]["random"]
    assert all(r["significant"] for r in model["tests"]["target_rank"])
    assert model["emergence"] == {"jsdp_correct": None, "target_rank": None}
    assert all(r["below_gap_of_interest"] for r in model["tests"]["target_rank"])
    assert any("the Average Rank gap is significant where the JSD-P gap is below the smallest "
               "gap of interest 0.3" in s for s in result["sentences"])
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "yes, but |JSD-P gap| &lt; 0.3" in page
    assert "gap significant from step" not in page  # no emergence marker on any figure
