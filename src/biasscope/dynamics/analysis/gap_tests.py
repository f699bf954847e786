"""The source's gap tests over WinoBias records: per checkpoint, male against female prompts
(Figs. 4b, 5b), and model against model (Fig. 6b), on per-prompt values averaged over seeds.

Per-prompt values come from the probe (`biasscope.probes.winobias.values`), and so do the
WinoBias pairs the per-checkpoint test is paired over. The generic pieces (Mann-Whitney, the
signed-rank test, corrections, the test table) are `biasscope.core.stats`; the conventions
(seeds as replicates, rank-biserial effect sizes, families) are described there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from biasscope.core.numbers import num
from biasscope.core.power import mann_whitney_detectable, minimum_detectable_effect
from biasscope.core.stats import Correction, group_test_row, paired_test_row, tests_table
from biasscope.probes.winobias import GENDERS
from biasscope.probes.winobias.values import paired_values
from biasscope.probes.winobias.values import (  # the probe's own values, re-exported
    prompt_ids as prompt_ids,
)
from biasscope.probes.winobias.values import prompt_values as prompt_values
from biasscope.probes.winobias.values import record_values as record_values
from biasscope.probes.winobias.values import seed_means as seed_means


def checkpoint_tests(records: pd.DataFrame, value: str = "jsdp_correct",
                     groups: tuple[str, str] = GENDERS, correction: Correction = "holm",
                     alpha: float = 0.01) -> pd.DataFrame:
    """Per (model, step): male against female prompts (per-prompt values averaged over
    seeds), by Wilcoxon's signed-rank test of the pairs' differences with the matched-pairs
    rank-biserial r where the prompts are WinoBias pairs, else (the source's test) Mann-Whitney
    U between prompts whose answer is ``groups[0]`` and those whose answer is ``groups[1]``.

    ``value="jsdp_correct"`` is the paper's Fig. 4(b), ``"target_rank"`` its Fig. 5(b).
    Columns: model, step, seeds, n_<g>, mean_<g>, gap (mean of group 1 minus group 2),
    statistic, p_value, effect_size, test, p_adjusted (within each model), significant.
    """
    pv = prompt_values(records[records["answer_label"].isin(groups)], value)
    return tests_table(checkpoint_rows(pv, groups), ("model", "step", "seeds"), groups,
                       pv["step"].dtype, "model", correction, alpha)


def checkpoint_rows(pv: pd.DataFrame, groups: tuple[str, str] = GENDERS
                    ) -> list[dict[str, Any]]:
    """`checkpoint_tests`' rows before correction, from `prompt_values` (any checkpoints):
    Wilcoxon's signed-rank test of the pairs' differences over the complete WinoBias pairs
    of a checkpoint (`paired_values`), Mann-Whitney U else (``test`` says which)."""
    rows = []
    for (model, step), chunk in pv.groupby(["model", "step"], dropna=False, sort=True):
        if (pairs := paired_values(chunk, groups)) is not None:
            row = paired_test_row(*pairs, groups)
        else:
            label, value = chunk["answer_label"].to_numpy(), chunk["value"].to_numpy()
            row = group_test_row(value[label == groups[0]], value[label == groups[1]], groups)
        rows.append({"model": model, "step": step, "seeds": int(chunk["seeds"].max()), **row})
    return rows


def model_tests(records: pd.DataFrame, model_a: str, model_b: str, value: str = "jsdp:male",
                answer: str = "not specified", correction: Correction = "holm",
                alpha: float = 0.01) -> pd.DataFrame:
    """Per step that both models have: Mann-Whitney U between model A's and model B's
    per-prompt values on prompts whose answer is ``answer`` (the paper's Fig. 6(b)).

    The paper's test is kept although both samples are the same prompts: it is valid, just
    less powerful than a paired test. Gap is A minus B; columns as in `checkpoint_tests`,
    with groups named ``a`` and ``b``, corrected over the steps compared.
    """
    keep = (records["answer_label"] == answer) & records["model"].isin([model_a, model_b])
    pv = prompt_values(records[keep], value)
    return tests_table(model_rows(pv, model_a, model_b), ("step", "seeds"), ("a", "b"),
                       pv["step"].dtype, None, correction, alpha)


def model_rows(pv: pd.DataFrame, model_a: str, model_b: str) -> list[dict[str, Any]]:
    """`model_tests`' rows before correction, from `prompt_values` already restricted to one
    answer (any checkpoints)."""
    by_model = {m: dict(tuple(c.groupby("step"))) for m, c in pv.groupby("model")}
    a, b = by_model.get(model_a, {}), by_model.get(model_b, {})
    return [{"step": step, "seeds": int(max(a[step]["seeds"].max(), b[step]["seeds"].max())),
             **group_test_row(a[step]["value"].to_numpy(), b[step]["value"].to_numpy(), ("a", "b"))}
            for step in sorted(set(a) & set(b))]  # type: ignore[type-var]


def detectable_gap(history: Mapping[int, pd.DataFrame], tests: pd.DataFrame, alpha: float,
                   power: float = 0.8) -> str | None:
    """Beside a gap that is never significant: the smallest gap the last checkpoint's test
    could have detected with ``power``, at α divided by the checkpoints tested (Bonferroni: no
    weaker than Holm's first step), for prompts shaped like its own (``history``: per step,
    per-prompt values, wordings averaged here). Where the prompts are WinoBias pairs (tested by
    signed rank) the paired t's, from the SD of the pairs' differences (the signed-rank test
    is within its efficiency of it, 0.955 for normal differences): the unpaired estimate
    assumed the two prompts of a pair independent. Else Mann-Whitney's
    (`biasscope.core.power.mann_whitney_detectable`). None without them."""
    rows = tests.dropna(subset=["step"])
    if rows.empty or (values := history.get(int(rows["step"].iloc[-1]))) is None:
        return None
    per = values.groupby(["prompt", "answer_label"], observed=True)["value"].mean()
    level = alpha / len(rows)
    if (pairs := paired_values(per.reset_index(), GENDERS)) is not None:
        d = pairs[0] - pairs[1]
        se = float(d.std(ddof=1)) / math.sqrt(d.size) if d.size > 1 else math.nan
        mde, test = minimum_detectable_effect(se, d.size - 1, level, power), "paired"
    else:
        label = per.index.get_level_values("answer_label")
        mde = mann_whitney_detectable(per[label == GENDERS[0]].to_numpy(),
                                      per[label == GENDERS[1]].to_numpy(), level, power)
        test = "Mann-Whitney"
    if not math.isfinite(mde):
        return None
    return (f"this run could have detected a JSD-P gap of {num(mde)} or more at its last "
            f"checkpoint ({power:.0%} power of its {test} test, α = {alpha:g} over "
            f"{len(rows)} checkpoints)")
