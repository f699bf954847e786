"""A step's per-prompt tables are pandas' grouped means of the records' values, to the bit:
sorted by model, step, (wording,) prompt and answer, a missing key last, a prompt's seeds
counted once however many wordings it ran under."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biasscope.dynamics.summary.reading import VALUES, prompt_tables


def pandas_tables(values: pd.DataFrame, by_wording: bool) -> dict[str, pd.DataFrame]:
    """What the tables are: one pandas grouping of the values as plain columns."""
    keys = ["model", "step", *(["template"] if by_wording else []), "prompt", "answer_label"]
    frame = pd.DataFrame({k: values[k].to_numpy(dtype=object) if k != "step" else
                          values[k].array for k in keys} |
                         {c: values[c].to_numpy(dtype=np.float64) for c in VALUES.values()})
    grouped = frame.groupby(keys, dropna=False, sort=True)
    means, sizes = grouped[list(VALUES.values())].mean(), grouped.size()
    if not by_wording and "template" in values:
        wordings = values["template"].to_numpy(dtype=object)
        sizes = sizes // frame.assign(w=wordings).groupby(keys, dropna=False, sort=True)[
            "w"].nunique().clip(lower=1)
    return {value: pd.DataFrame({"value": means[column], "seeds": sizes}).reset_index()
            for value, column in VALUES.items()}


@pytest.mark.parametrize(("seed", "worded", "by_wording"), [
    (0, False, False), (1, True, False), (2, True, True), (3, False, False)])
def test_tables_are_pandas_grouped_means(seed: int, worded: bool, by_wording: bool) -> None:
    rng = np.random.default_rng(seed)
    n = 3000
    prompts = np.array([f"winobias-gender:pro-dev-{i:03d}:referenced" for i in range(120)],
                       dtype=object)
    values = pd.DataFrame({
        "model": pd.Categorical(rng.choice(["b/m", "a/m"], n)),
        "step": pd.array(rng.choice([0, 1000, 2000], n), dtype="Int64"),
        "prompt": pd.Categorical(rng.choice(prompts, n)),
        "answer_label": pd.Categorical(rng.choice(["male", "female", "not specified"], n)),
        "jsdp_correct": rng.random(n) * 0.3, "target_rank": rng.integers(1, 500, n).astype(
            np.float32), "correct": (rng.random(n) < 0.5).astype(np.float32),
        "jsdp_male": rng.random(n), "jsdp_female": rng.random(n)})
    values.loc[rng.random(n) < 0.05, "jsdp_male"] = np.nan
    if seed == 3:  # a step missing on some records, prompts as plain strings
        values.loc[rng.random(n) < 0.02, "step"] = pd.NA
        values["prompt"] = values["prompt"].astype(str)
    if worded:
        values["template"] = pd.Categorical(rng.choice(["w1", "w2", "w3"], n))
    ours, theirs = prompt_tables(values, by_wording), pandas_tables(values, by_wording)
    assert list(ours) == list(theirs)
    for value in ours:
        pd.testing.assert_frame_equal(ours[value], theirs[value], check_exact=True)
