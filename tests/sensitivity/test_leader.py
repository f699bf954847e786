""""The reward rises most for principle P" is said only when P's effect is shown larger than
every other principle's, paired over the prompts both revised."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biasscope.sensitivity.indices import sensitivity_indices
from biasscope.sensitivity.summary import leader, sentences


def frame(shifts: list[float], prompts: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    original = rng.normal(0, 1, prompts)
    return pd.DataFrame({
        "model": "rm", "principle": np.repeat([f"p{k}" for k in range(len(shifts))], prompts),
        "prompt_id": np.tile(np.arange(prompts), len(shifts)),
        "original": np.tile(original, len(shifts)),
        "perturbed": np.concatenate([original + s + rng.normal(0, 0.5, prompts)
                                     for s in shifts])})


def said(rewards: pd.DataFrame) -> tuple[dict[str, object], str]:
    result: dict[str, object] = {"preambles": 0, "failed": 0}
    text = sentences(sensitivity_indices(rewards, n_resamples=200), result, rewards)[0]
    leaders = result["leaders"]
    assert isinstance(leaders, dict)
    return leaders["rm"], text


def test_a_clear_leader_rises_most() -> None:
    found, text = said(frame([0.0, 0.3, 1.5]))
    assert found["leads"] and found["principle"] == "p2"
    assert text.startswith("rm: the reward rises most for principle p2: mean effect +1.")
    assert "more than for each other principle (paired over prompts; the closest, p1, by +1.11" \
        in text


def test_two_principles_alike_are_not_ranked() -> None:
    rewards = frame([0.0, 0.9, 0.9], seed=1)
    found, text = said(rewards)
    assert not found["leads"]
    top = str(found["principle"])
    other = "p1" if top == "p2" else "p2"
    assert text.startswith(f"rm: the largest mean effect is principle {top}'s: ")
    assert f"it is not shown larger than {other}'s" in text and "rises most" not in text
    rows = {r["principle"]: r for r in found["comparisons"]}  # type: ignore[attr-defined]
    both = rewards.pivot(index="prompt_id", columns="principle", values="perturbed")
    assert rows[other]["difference"] == pytest.approx((both[top] - both[other]).mean())
    assert rows["p0"]["p_value"] < 0.05 <= rows[other]["p_value"]


def test_principles_are_paired_on_the_prompts_both_revised() -> None:
    rewards = frame([0.0, 1.0], prompts=30)
    rewards = rewards[~((rewards["principle"] == "p0") & (rewards["prompt_id"] < 10))]
    found = leader(rewards, "rm", "p1")
    assert found["comparisons"][0]["n"] == 20  # type: ignore[index]
