"""The statistics of an intervention: each arm over steps, the difference in differences, the
perplexity cost, and which checkpoint to ship.

Both arms are scored on the same WinoBias prompts and the same held-out documents at every
step, so every comparison is paired:

- **Measures** per prompt (seed means first, `probes.winobias.values`): the *male lean*
  ``P(male) − P(female)`` (softmax over the three options; positive leans male) on every
  prompt, and *pro − anti*: per WinoBias pair, correct on the pro-stereotypical sentence minus
  correct on the anti-stereotypical one (referenced prompts; positive: stereotyped).
- **Difference in differences** at step s, per prompt: ``(arm_s − arm_0) − (control_s −
  control_0)``; its mean with a bootstrap CI over prompts (resampled whole, so pairing is kept)
  and a test of that mean (`biasscope.core.stats.mean_test`, with Cohen's d_z); p-values
  corrected over steps (Holm by default). Positive: the intervention moved the measure up
  relative to the control. Wilcoxon's signed-rank test was used before: it tests symmetry, not
  a mean of 0, and where the intervention moved a tenth of the prompts far one way and the rest
  a little the other, averaging 0, it called the difference significant at some step in 24% of
  40-prompt runs and all but 1 in 400 of 400-prompt runs.
- **Fairness gain** of the intervention at s: the DiD of the male lean towards zero, i.e.
  ``−sign(lean at step 0) × DiD``; positive is fairer than the control.
- **Perplexity cost** at s: ``ppl(arm_s) / ppl(control_s) − 1`` on the held-out documents, with
  a paired bootstrap CI over documents.
- **Recommended stop**: among steps after 0 whose cost estimate is within ``budget``, the one
  with the largest fairness gain (the sentence says whether its cost's interval is within the
  budget too); a gain is claimed only where its corrected test is
  significant and its CI excludes 0, else the sentence says the data cannot tell. The claim is
  about these two runs (`ONE_RUN`): with one run per arm there is nothing to test the
  intervention itself against.
- **Several runs per arm** (``--runs``; `run_name`, `runs_in`): the DiD and the log of the
  perplexity ratio are averaged over runs and prompts (documents), with `crossed_mean`'s
  interval and test over both, and the verdict is about the intervention (`RUNS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from biasscope.core import stats
from biasscope.core.bootstrap import index_blocks, resampling
from biasscope.core.crossed import crossed_mean
from biasscope.core.intervals import group_t_interval, mean_ci, percentile_interval
from biasscope.core.levels import thin_tails
from biasscope.core.numbers import (
    ci_decimals,
    num,
    percent,
    pvalue,
    resampled_same,
    setting_percent,
    with_ci,
)
from biasscope.core.renamed import renamed
from biasscope.core.stats import mean_test
from biasscope.intervene.settings import InterventionAnalysisConfig as InterventionAnalysisConfig
from biasscope.probes import perplexity, winobias
from biasscope.probes.winobias.values import breakdown_values, prompt_means
from biasscope.report.headline import plural
from biasscope.store.directory import RunStore

MEASURES = ("male_lean", "pro_anti")
#: What a verdict over several runs per arm rests on.
RUNS = ("The test is over runs and prompts (each run's effect beside the others', and each "
        "prompt's beside the others'), so it speaks for the intervention on prompts like "
        "these, not only for these runs.")
#: What a verdict between the arms rests on: their difference beyond run-to-run variation is
#: not measured, and another data order can move a small model's lean as much.
ONE_RUN = ("One training run per arm: the test is over prompts, so it shows that these two "
           "runs differ, not that the intervention would beat the control again; another run "
           "(the arms see their documents in different orders) can move a small model's lean "
           "as much.")


def run_name(arm: str, run: int) -> str:
    """The model name of ``arm``'s run ``run`` (from 1) in the run directory: the first run
    keeps the arm's own name, so a one-run intervention is named as it always was."""
    return arm if run == 1 else f"{arm}-run{run}"


def runs_in(models: set[str], arm: str, control: str) -> list[int]:
    """The runs (from 1) whose both arms are in ``models``."""
    found = {1} if {arm, control} <= models else set()
    for name in models:
        tail = name.rpartition("-run")[2]
        run = int(tail) if tail.isdigit() else 0
        if run > 1 and name == run_name(arm, run) and run_name(control, run) in models:
            found.add(run)
    return sorted(found)


def _per_prompt(pm: pd.DataFrame) -> dict[str, pd.Series]:
    """Per measure, the per-prompt (or per-pair) values of one (arm, step)'s prompt means."""
    lean = pm.set_index("prompt")["p_diff"].astype(np.float64)
    ref = pm[pm["kind"] == "referenced"].pivot_table(index="pair", columns="split",
                                                     values="correct", observed=True)
    pairs = ((ref["pro"] - ref["anti"]).dropna() if {"pro", "anti"} <= set(ref.columns)
             else pd.Series(dtype=np.float64))
    return {"male_lean": lean, "pro_anti": pairs.astype(np.float64)}


def occupations(pm: pd.DataFrame, config: InterventionAnalysisConfig) -> dict[str, dict[str, Any]]:
    """Per occupation, the male lean over its prompts (both kinds) with a Student's t CI over
    them (none from a single prompt) and the number of prompts."""
    names = pm["occupation"].astype(str)
    order = sorted(names.unique(), key=str.lower)
    code = {n: i for i, n in enumerate(order)}
    groups = names.map(code).to_numpy(dtype=np.int64)
    mean, low, high = group_t_interval(pm["p_diff"].to_numpy(dtype=np.float64), groups,
                                       len(order), config.confidence)
    counts = np.bincount(groups, minlength=len(order))
    return {n: {"estimate": mean[i], "low": low[i], "high": high[i], "n": int(counts[i])}
            for n, i in code.items()}


def _documents(records: pd.DataFrame) -> pd.DataFrame:
    out: pd.DataFrame = records.set_index("item_id")[["logprob", "tokens"]]
    typed: pd.DataFrame = out.astype(np.float64).sort_index()
    return typed


def _ci(values: Any, config: InterventionAnalysisConfig,
        bounds: tuple[float, float] | None = None) -> dict[str, float]:
    return mean_ci(np.asarray(values, dtype=np.float64), config.confidence,
                   config.n_resamples, bounds=bounds).as_dict()


def _cost(arm: pd.DataFrame, control: pd.DataFrame, config: InterventionAnalysisConfig
          ) -> dict[str, float]:
    """ppl(arm) / ppl(control) − 1 on the documents both scored, paired bootstrap CI."""
    both = arm.index.intersection(control.index)
    a, c = arm.loc[both], control.loc[both]
    lp_a, n_a = a["logprob"].to_numpy(), a["tokens"].to_numpy()
    lp_c, n_c = c["logprob"].to_numpy(), c["tokens"].to_numpy()
    estimate = perplexity.perplexity(lp_a, n_a) / perplexity.perplexity(lp_c, n_c) - 1
    if len(both) < 2:
        return {"estimate": estimate, "low": math.nan, "high": math.nan}
    ratio = np.concatenate([
        np.exp(lp_c[pick].sum(1) / n_c[pick].sum(1) - lp_a[pick].sum(1) / n_a[pick].sum(1))
        for pick in index_blocks(len(both), config.n_resamples, np.random.default_rng(0))])
    return percentile_interval(estimate, ratio - 1, config.confidence).as_dict()


def _names(arm: str | Sequence[str]) -> list[str]:
    return [arm] if isinstance(arm, str) else list(arm)


def _did(series: dict[tuple[str, int], dict[str, pd.Series]], arms: Sequence[str],
         controls: Sequence[str], step: int, measure: str, config: InterventionAnalysisConfig
         ) -> dict[str, Any]:
    """Per prompt ``(arm_s − arm_0) − (control_s − control_0)``, run by run (arm and control
    paired by position); one run: a bootstrap CI over prompts and `mean_test`; several: the
    mean over runs and prompts, `crossed_mean`."""
    parts = [[series[(a, step)][measure], series[(a, 0)][measure], series[(c, step)][measure],
              series[(c, 0)][measure]] for a, c in zip(arms, controls)]
    common = parts[0][0].index
    for part in (p for run in parts for p in run):
        common = common.intersection(part.index)
    grid = np.array([(a - a0) - (c - c0) for a, a0, c, c0 in (
        (p.loc[common].to_numpy() for p in run) for run in parts)], dtype=np.float64)
    if len(parts) == 1:
        return {**_ci(grid[0], config), "test": mean_test(grid[0]), "n": int(grid.shape[1])}
    found = crossed_mean(grid, config.confidence)
    test = {k: found[k] for k in ("p_value", "effect_size", "df")}
    return {**{k: found[k] for k in ("estimate", "low", "high")},
            "test": {**test, "runs": len(parts), "n": int(grid.shape[1])},
            "n": int(grid.shape[1]), "by_run": grid.mean(axis=1).tolist()}


def differences(series: dict[tuple[str, int], dict[str, pd.Series]],
                arm: str | Sequence[str], control: str | Sequence[str], steps: Sequence[int],
                config: InterventionAnalysisConfig, measures: Sequence[str] = MEASURES
                ) -> dict[str, dict[int, dict[str, Any]]]:
    """Per measure and step after 0, the difference in differences with its test, p-values
    adjusted over the steps (``series``: per (arm, step) the per-prompt values of each
    measure; ``arm`` and ``control``: a name, or each run's names, paired by position)."""
    arms, controls = _names(arm), _names(control)
    did = {m: {s: _did(series, arms, controls, s, m, config) for s in steps}
           for m in measures}
    for measure in measures:
        p = [did[measure][s]["test"]["p_value"] for s in steps]
        for s, adj in zip(steps, stats.adjust_pvalues(p, config.correction)):
            did[measure][s]["test"]["p_adjusted"] = float(adj)
    return did


def runs_cost(arms: Sequence[pd.DataFrame], controls: Sequence[pd.DataFrame],
              config: InterventionAnalysisConfig) -> dict[str, float]:
    """ppl(arm) / ppl(control) − 1 over several runs: the log of a run's ratio is a
    token-weighted mean over documents of the per-token log-prob difference, so its mean over
    runs has a `crossed_mean` interval (documents shared by the runs)."""
    both = arms[0].index
    for frame in (*arms, *controls):
        both = both.intersection(frame.index)
    tokens = controls[0].loc[both, "tokens"].to_numpy()
    grid = np.array([c.loc[both, "logprob"].to_numpy() / c.loc[both, "tokens"].to_numpy()
                     - a.loc[both, "logprob"].to_numpy() / a.loc[both, "tokens"].to_numpy()
                     for a, c in zip(arms, controls)], dtype=np.float64)
    log = crossed_mean(grid, config.confidence, weights=tokens)
    return {k: math.exp(log[k]) - 1 for k in ("estimate", "low", "high")}


def analyse(store: RunStore, arm: str, control: str = "control",
            config: InterventionAnalysisConfig = InterventionAnalysisConfig()) -> dict[str, Any]:
    """Everything the intervention report shows, as plain JSON-ready values; every run whose
    both arms are in the records (`runs_in`) counts, over the steps all of them reached.
    ``thin_tails``: the sentence that the level is too fine for the resamples, as the other
    commands' summaries say it, where some interval was a bootstrap (`resampling`: a mean of
    a few prompts is Student's t, several runs' effects `crossed_mean`'s t)."""
    with resampling() as resampled:
        out = _analysed(store, arm, control, config)
    if resampled.drawn and out.get("steps") and (coarse := thin_tails(
            config.confidence, config.n_resamples, "the intervention's")):
        out["thin_tails"] = coarse
    return out


def _analysed(store: RunStore, arm: str, control: str, config: InterventionAnalysisConfig
              ) -> dict[str, Any]:
    records = store.records()
    wino = records[records["probe"] == winobias.NAME]
    ppl = records[records["probe"] == perplexity.NAME]
    runs = runs_in(set(wino["model"].astype(str).unique()), arm, control)
    pairs = [(run_name(arm, r), run_name(control, r)) for r in runs]
    names = [n for pair in pairs for n in pair]
    steps = sorted(set.intersection(*(set(wino.loc[wino["model"] == n, "step"].dropna()
                                          .astype(int)) for n in names))) if names else []
    if 0 not in steps:
        return {"steps": [], "sentence": "no step 0 in both arms yet: nothing to compare"}
    series, docs = {}, {}
    arms: dict[str, dict[str, Any]] = {name: {} for name in names}
    for name in names:
        for step in steps:
            rows = wino[(wino["model"] == name) & (wino["step"] == step)]
            pm = prompt_means(breakdown_values(rows))
            series[(name, step)] = _per_prompt(pm)
            entry: dict[str, Any] = {m: _ci(series[(name, step)][m], config, (-1.0, 1.0))
                                     for m in MEASURES}  # a lean, a difference of accuracies
            entry["occupations"] = occupations(pm, config)
            chunk = ppl[(ppl["model"] == name) & (ppl["step"] == step)]
            if len(chunk):
                docs[(name, step)] = _documents(chunk)
                entry["perplexity"] = perplexity.perplexity_interval(
                    chunk["logprob"], chunk["tokens"], config.confidence,
                    config.n_resamples).as_dict()
            arms[name][str(step)] = entry
    later = [s for s in steps if s > 0]
    did = differences(series, [a for a, _ in pairs], [c for _, c in pairs], later, config)
    cost = {s: (_cost(docs[(pairs[0][0], s)], docs[(pairs[0][1], s)], config)
                if len(pairs) == 1 else
                runs_cost([docs[(a, s)] for a, _ in pairs], [docs[(c, s)] for _, c in pairs],
                          config))
            for s in later if all((n, s) in docs for n in names)}
    lean0 = float(np.mean([series[(c, 0)]["male_lean"].mean() for _, c in pairs]))
    out = {"arm": arm, "control": control, "runs": runs, "run_arms": pairs, "steps": steps,
           "arms": arms,
           "did": {m: {str(s): v for s, v in d.items()} for m, d in did.items()},
           "cost": {str(s): v for s, v in cost.items()}, "lean_at_start": lean0,
           "options": {"budget": config.budget, "alpha": config.alpha,
                       "confidence": config.confidence, "correction": config.correction,
                       "n_resamples": config.n_resamples}}
    out.update(recommend(arm, later, did["male_lean"], cost, lean0, config, len(runs)))
    plain: dict[str, Any] = _plain(out)
    return plain


def recommend(arm: str, steps: Sequence[int], did: dict[int, dict[str, Any]],
              cost: dict[int, dict[str, float]], lean0: float, config: InterventionAnalysisConfig,
              runs: int = 1) -> dict[str, Any]:
    """The recommended checkpoint of the intervention arm (its first run's), and the
    sentence: about these two runs with one run per arm, about the intervention with more."""
    sign = 1.0 if lean0 >= 0 else -1.0
    within = [s for s in steps if s in cost and math.isfinite(cost[s]["estimate"])
              and cost[s]["estimate"] <= config.budget]
    if not within:
        return {"recommended": None, "sentence": over_budget(arm, cost, config, runs)}
    # −sign × DiD: its bounds swap when sign is +1 only (a start leaning female keeps them)
    ends = {s: sorted((-sign * did[s]["low"], -sign * did[s]["high"])) for s in within}
    gain = {s: {"estimate": -sign * did[s]["estimate"], "low": ends[s][0], "high": ends[s][1]}
            for s in within}
    best = max(within, key=lambda s: gain[s]["estimate"])
    g, c, p = gain[best], cost[best], did[best]["test"].get("p_adjusted", math.nan)
    effect = num(did[best]["test"]["effect_size"], 2, True)
    over = f"{stats.CORRECTIONS[config.correction]} over {plural(len(steps), 'step')}"
    test = (f"mean test p = {pvalue(p)} after {over}, d_z = {effect}" if runs == 1 else
            f"p = {pvalue(p)} after {over} (t over {runs} runs per arm and "
            f"{did[best]['n']} prompts), {effect} run-to-run SDs")
    one = runs == 1
    lead = f"This run of {arm}" if one else f"Over {runs} training runs per arm, {arm}"
    other = "the control's" if one else "the control"
    unsure = (f"this run of {arm} beat the control's" if one else
              f"{arm} beat the control over {runs} training runs per arm")
    same = (resampled_same(config.confidence) if runs == 1 else
            f"the {runs} runs gave each prompt the same difference; no interval")
    won = with_ci(g["estimate"], g["low"], g["high"], config.confidence, True, test, same=same)
    said = (f"at step {best}, {arm}'s fairness gain over the control (how much further its male "
            f"lean moved towards zero) was {won}, at "
            f"a perplexity cost of {_cost_text(c, config)}{_within(c, config)}")
    caveat = ONE_RUN if one else RUNS
    significant = math.isfinite(p) and p < config.alpha
    if significant and g["low"] > 0:
        weights = "" if one else " (the first run's weights)"
        verdict = (f"{lead} beat {other}: {said}. Recommended checkpoint: step {best}"
                   f"{weights}. {caveat}")
    elif significant and g["high"] < 0:
        verdict = f"{lead} did worse than {other}: {said}. {caveat}"
    else:
        verdict = (f"The data cannot tell whether {unsure}: {said}; the best within budget is "
                   f"step {best}, but its gain is not distinguishable from 0.")
    return {"recommended": best, "gain": {str(s): v for s, v in gain.items()},
            "beat_control": bool(significant and g["low"] > 0), "sentence": verdict}


def over_budget(arm: str, cost: dict[int, dict[str, float]],
                config: InterventionAnalysisConfig, runs: int = 1) -> str:
    """Why no stop is recommended: no perplexity, or how far the cheapest step missed (its
    mean over ``runs`` runs per arm)."""
    seen = {s: c for s, c in cost.items() if math.isfinite(c["estimate"])}
    if not seen:
        return (f"No perplexity of {arm} against the control was measured after step 0: "
                "no stop is recommended.")
    step = min(seen, key=lambda s: seen[s]["estimate"])
    over = 100 * (seen[step]["estimate"] - config.budget)
    places = ci_decimals(100 * seen[step]["low"], 100 * seen[step]["high"])
    budget = setting_percent(config.budget)
    over_runs = "" if runs == 1 else f" over {runs} training runs per arm"
    return (f"No checkpoint of {arm} stays within the {budget} perplexity budget{over_runs}: "
            f"the smallest increase seen was {_cost_text(seen[step], config)} at step {step}, "
            f"{num(over, places)} percentage points over the budget; no stop is recommended.")


def _cost_text(cost: dict[str, float], config: InterventionAnalysisConfig) -> str:
    return percent(cost["estimate"], cost["low"], cost["high"], config.confidence, True)


def _within(cost: dict[str, float], config: InterventionAnalysisConfig) -> str:
    """Whether a step chosen within the budget by its cost's estimate is within it by the
    interval's upper bound too."""
    if not math.isfinite(cost["high"]):
        return ""
    budget = setting_percent(config.budget)
    return (f", shown within the {budget} budget" if cost["high"] <= config.budget else
            f", within the {budget} budget by its estimate but not by its interval")


def _plain(value: Any) -> Any:
    """NaN to None and numpy scalars to floats, recursively: the result goes to JSON."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"Options": "InterventionAnalysisConfig"},
                          globals().__getitem__)
