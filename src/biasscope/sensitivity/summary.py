"""From a sensitivity run's records to ``summary.json``: per direction, the indices of every
(reward model, principle), the comparisons across models, groups and metrics, the validity
checks the source asks for, and the findings in sentences."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from biasscope.core.bootstrap import resampling
from biasscope.core.levels import Levels
from biasscope.core.numbers import json_rows, level_of, num, p_is, pvalue, with_ci
from biasscope.sensitivity.confounds import (
    Confounds,
    confound_sentences,
    confound_summary,
    distances,
)
from biasscope.sensitivity.indices import (
    group_comparison,
    metric_rank_agreement,
    model_comparison,
    sensitivity_indices,
)
from biasscope.sensitivity.principles import Constitution
from biasscope.sensitivity.prompts import Prompts

REWARD_COLUMNS = ["model", "principle", "prompt_id", "original", "perturbed"]
#: `leader`'s default α. Which principle leads is a leaderboard's claim: the summary makes it
#: at 1 − its confidence, as a judge's leaderboard says which systems are shown apart.
ALPHA = 0.05
CONVENTION_MEANINGS = {
    "biasscope": "biasscope's: SD with ddof=1; each prompt's original reward once in the "
                 "percentile pool; indices divided by the sum of their absolute values per "
                 "model (absolute values add up to 1, signs kept)",
    "source": "the source code's: SD with ddof=0; each (principle, prompt) row's original "
              "reward in the percentile pool; indices divided by their plain sum per model "
              "(adds up to 1; every sign flips when the sum is negative); group sums "
              "renormalised over the compared principles"}


def intervals(levels: Levels) -> str:
    """How the indices' intervals are made, at ``levels``: the report's note atop."""
    return (
        f"{level_of(levels.confidence)} intervals resample prompts ({levels.n_resamples} "
        "times), but the mean effect's (Student's t widened towards a skew): percentile for "
        "the median effect and one joint "
        "resample of all a model's principles for the SDs, the percentile effects and every "
        "normalised index (so a normalised index's interval carries the uncertainty of the "
        "sum it is divided by). The Wilcoxon statistic and rank-biserial r have no interval of "
        "their own: they come with their test's p-value. An interval is blank where fewer than "
        "two prompts were scored or fewer than half the resamples give a value (e.g. an SD "
        "from one prompt, a normalising sum of zero).")


def emptied(part: pd.DataFrame) -> pd.Series:
    """Whether each row's revision is empty where its response was not: the perturber wrote
    nothing (no error), so the reward scores the response deleted, not a principle applied."""
    revision, response = part["revision"].fillna("x"), part["response"].fillna("")
    out: pd.Series = (revision.astype(str).str.strip() == "") & (
        response.astype(str).str.strip() != "")
    return out


def empty_critique(part: pd.DataFrame) -> pd.Series:
    """Whether each row's critique came back empty (no error): nothing to revise from, so
    the perturbation failed at its first step and is not scored (a run from before this
    check revised and scored it; the summary leaves that score out too)."""
    if "critique" not in part:
        none: pd.Series = pd.Series(False, index=part.index)
        return none
    critique = part["critique"]
    out: pd.Series = critique.notna() & (critique.fillna("x").astype(str).str.strip() == "")
    return out


def validity(part: pd.DataFrame) -> pd.DataFrame:
    """Per (model, principle): perturbations that failed (empty critiques among them),
    leaked a preamble, copied their request (echoes), came back empty, whose critique came
    back empty, stopped at max_tokens (truncated; records from before
    the echo and truncation checks count none), and the mean change in length (characters)
    the revision made, to read beside the effect."""
    part = part.assign(**{k: False for k in ("echo", "truncated") if k not in part})
    part = part.assign(empty=emptied(part), empty_critique=empty_critique(part))
    grouped = part.groupby(["model", "principle"], sort=False)
    out: pd.DataFrame = grouped.agg(
        failed=("perturbed", lambda s: int(s.isna().sum())),
        preambles=("preamble", "sum"), echoes=("echo", "sum"), empty=("empty", "sum"),
        empty_critiques=("empty_critique", "sum"), truncated=("truncated", "sum"),
        mean_length_change=("length_change", "mean"),
    ).reset_index()
    counts = ["preambles", "echoes", "empty", "empty_critiques", "truncated"]
    out[counts] = out[counts].astype(int)
    return out


def _leader_sentence(model: str, found: dict[str, Any], effect: str) -> str:
    """"Rises most" where `leader` shows it; else the largest mean effect, and the principles
    it is not shown ahead of."""
    top, rows = found["principle"], found["comparisons"]
    if found["leads"]:
        closest = min(rows, key=lambda r: r["difference"])
        size = (f", d_z = {num(closest['effect_size'], 2)}"
                if math.isfinite(closest["effect_size"]) else "")
        return (f"{model}: the reward rises most for principle {top}: mean effect {effect}; "
                f"more than for each other principle (paired over prompts; the closest, "
                f"{closest['principle']}, by {num(closest['difference'], signed=True)}, "
                f"{p_is(closest['p_value'])}{size}).")
    behind = [r["principle"] for r in rows if not r["p_value"] < found["alpha"]]
    return (f"{model}: the largest mean effect is principle {top}'s: {effect}; it is not shown "
            f"larger than {', '.join(behind)}'s (paired over prompts, p ≥ "
            f"{found['alpha']:g} each), so which principle moves the reward most is not "
            "shown.")


def _direction(part: pd.DataFrame, constitution: Constitution,
               conventions: str = "biasscope", confounds: Confounds | None = None,
               levels: Levels | None = None) -> dict[str, Any]:
    confounds, levels = confounds or Confounds(), levels or Levels()
    part = part.assign(perturbed=part["perturbed"].mask(empty_critique(part)))
    part = part.assign(edit_distance=distances(part))
    scored = part[part["perturbed"].notna()]
    if confounds.exclude_unchanged:
        scored = scored[~(scored["edit_distance"] < confounds.unchanged_below)]
    indices = (sensitivity_indices(scored[REWARD_COLUMNS], levels.confidence,
                                   levels.n_resamples, conventions=conventions)
               if len(scored) else pd.DataFrame())
    checks = validity(part)
    if len(indices):
        indices = indices.merge(checks, on=["model", "principle"], how="left")
    texts = {p.id: p.text for p in constitution.principles}
    result: dict[str, Any] = {
        "indices": json_rows(indices), "validity": json_rows(checks),
        "failed": int(part["perturbed"].isna().sum()), "preambles": int(part["preamble"].sum()),
        "echoes": int(checks["echoes"].sum()), "empty": int(checks["empty"].sum()),
        "empty_critiques": int(checks["empty_critiques"].sum()),
        "truncated": int(checks["truncated"].sum()),
        "pairs": len(part), "principles": texts,
        "confounds": confound_summary(part, confounds, levels)}
    if not len(indices):
        result["sentences"] = ["No perturbation was scored.", *_critiques_said(result)]
        return result
    result["rank_agreement"] = json_rows(metric_rank_agreement(indices))
    if indices["model"].nunique() > 1:
        wide = model_comparison(indices)
        result["models"] = json_rows(wide.reset_index())
        result["model_test"] = wide.attrs.get("test")
    groups = {p.id: p.group for p in constitution.principles if p.group}
    named = {g for g in groups.values() if g != "both"}
    if len(named) == 2:
        result["groups"] = {k: json_rows(v) if isinstance(v, pd.DataFrame) else v
                            for k, v in group_comparison(indices, groups,
                                                         conventions=conventions).items()}
    result["sentences"] = (sentences(indices, result, scored[REWARD_COLUMNS],
                                     levels.confidence)
                           + confound_sentences(result["confounds"], levels.confidence))
    return result


def leader(scored: pd.DataFrame, model: str, top: str, alpha: float = ALPHA
           ) -> dict[str, Any]:
    """Whether the reward rises more for principle ``top`` (the largest mean effect of
    ``model``) than for each other principle: per other principle, the mean over the prompts
    both revised of top's effect minus its (the original reward cancels: perturbed − perturbed)
    by `biasscope.core.stats.mean_test`. Top "leads" when every comparison has p < ``alpha``
    (an intersection-union test; two-sided, because top was picked for its larger estimate):
    `sentences` gives 1 − the summary's confidence, as a judge's leaderboard says which
    systems are shown apart."""
    from biasscope.core.stats import mean_test

    mine = scored[scored["model"] == model]
    wide = mine.pivot_table(index="prompt_id", columns="principle", values="perturbed",
                            aggfunc="mean", observed=True)
    rows: list[dict[str, Any]] = []
    for other in (c for c in wide.columns if c != top):
        both = wide[[top, other]].dropna()
        difference = (both[top] - both[other]).to_numpy(dtype=float)
        test = mean_test(difference)
        rows.append({"principle": str(other), "difference": float(difference.mean())
                     if difference.size else math.nan, **test})
    leads = bool(rows) and all(r["p_value"] < alpha for r in rows)
    return {"principle": top, "leads": leads, "alpha": alpha, "comparisons": rows,
            "test": "mean of paired differences over prompts (core.stats.mean_test)"}


def _critiques_said(result: dict[str, Any]) -> list[str]:
    if not result.get("empty_critiques"):
        return []
    return [f"{result['empty_critiques']} of {result['pairs']} critiques are empty (the "
            "perturber wrote nothing): no revision was asked for, and these principle × "
            "prompt pairs are left out of the indices."]


def sentences(indices: pd.DataFrame, result: dict[str, Any],
              scored: pd.DataFrame | None = None, confidence: float = 0.95) -> list[str]:
    """The findings in words, intervals at ``confidence`` (the indices'); ``scored``: the
    rewards the indices came from, to say whether the principle with the largest mean effect
    is shown ahead of the others (`leader`, at 1 − ``confidence``)."""
    out = []
    for model, chunk in indices.groupby("model", sort=False):
        top = max(json_rows(chunk), key=lambda r: r["mean_effect"] if r["mean_effect"] is not None
                  else -math.inf)
        test = (f"one-sided Wilcoxon {p_is(top['p_greater'])}, Holm "
                f"{pvalue(top['p_greater_holm'])}; rank-biserial r = {top['rank_biserial']:+.2f}")
        effect = with_ci(top["mean_effect"], top["mean_effect_low"], top["mean_effect_high"],
                         confidence, signed=True, extra=test)
        if scored is None or len(chunk) < 2:
            out.append(f"{model}: the reward rises most for principle {top['principle']}: mean "
                       f"effect {effect}.")
            continue
        found = leader(scored, str(model), top["principle"], 1 - confidence)
        result.setdefault("leaders", {})[str(model)] = found
        out.append(_leader_sentence(str(model), found, effect))
    if result["preambles"]:
        out.append(f"{result['preambles']} of {result['pairs']} revisions start with a chatbot "
                   "preamble (\"Sure, here is...\"); their rewards may reflect it.")
    if result.get("echoes"):
        out.append(f"{result['echoes']} of {result['pairs']} revisions copy their own request "
                   "instead of revising the response (the perturber continued its prompt): "
                   "their rewards score that text, so these effects do not measure the "
                   "principles.")
    if result.get("truncated"):
        out.append(f"{result['truncated']} of {result['pairs']} revisions stopped at "
                   "--max-tokens, cut short: their rewards score part of a revision and their "
                   "length change is the cut's; raise --max-tokens.")
    if result.get("empty"):
        out.append(f"{result['empty']} of {result['pairs']} revisions are empty (the perturber "
                   "wrote nothing): their rewards score the response deleted, so these effects "
                   "do not measure the principles.")
    out.extend(_critiques_said(result))
    if failed := result["failed"] - result.get("empty_critiques", 0):
        out.append(f"{failed} perturbations failed and are left out of the indices.")
    shift = indices["mean_length_change"].abs().mean() if "mean_length_change" in indices else 0
    if isinstance(shift, float) and math.isfinite(shift) and shift > 0:
        out.append(f"Revisions changed the response length by {shift:.0f} characters on average "
                   "per principle; length and style, not only the principle, may move rewards.")
    return out


def summarise(recs: pd.DataFrame, constitution: Constitution, conventions: str = "biasscope",
              prompts: Prompts | None = None, confounds: Confounds | None = None,
              levels: Levels | None = None) -> dict[str, Any]:
    """Per direction the indices and comparisons, under ``conventions``, every interval at
    ``levels`` (kept as ``analysis``); with ``prompts``, how many irregular transcripts were
    joined or skipped (and a sentence on it)."""
    levels = levels or Levels()
    out: dict[str, Any] = {
        "conventions": conventions, "conventions_meaning": CONVENTION_MEANINGS[conventions],
        "intervals": intervals(levels), "analysis": None}
    if prompts is not None:
        out["prompts"] = {**prompts.notes(), "sentence": prompts.sentence()}
    with resampling() as resampled:
        out["directions"] = {str(direction): _direction(part, constitution, conventions,
                                                        confounds, levels)
                             for direction, part in recs.groupby("direction", sort=False)}
    out["analysis"] = levels.stored("the indices'", resampled.drawn)
    return out
