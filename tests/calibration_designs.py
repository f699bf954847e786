"""Calibration of the claims about designs: "holds across N of N wordings" and the two-level
intervals (pooled over wordings, the stop's fairness gain), "equivalent" and "different"
(`biasscope compare`, TOST), "favours" (the counterfactual check), the direction of Adult's
flips and Winogender's accuracy CI, each simulated under the nulls real runs meet: items
crossed with wordings (every wording asks the same items, so an item's own effect is shared
by all of them), tiny pilots, paired differences that are all zero, two responses per
conversation, a sentence's pronouns sharing its difficulty.

Each claim runs the library's own code on simulated data; see `calibration_base`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd

from biasscope.compare.measures import MEASURES, Values
from biasscope.compare.runs import compare_values
from biasscope.core.stats import adjust_pvalues
from biasscope.core.wordings import Measure, rate, verdict, wording_uncertainty
from biasscope.core.wordings import gap as wording_gap
from biasscope.counterfactual import statistics as cf
from biasscope.dynamics.analysis import breakdown, findings, stopping
from biasscope.dynamics.analysis import occupations as bls
from biasscope.dynamics.analysis import wordings as dynamics_wordings
from biasscope.probes import adult
from biasscope.probes.bbq import compare as bbq_compare
from biasscope.probes.crows_pairs import steps as crows_steps
from biasscope.probes.professional import items as professional_items
from calibration_base import Claim

Sim = Callable[[int, int], tuple[int, int]]

# ------------------------------------------------------------------ wordings (crossed)


def _crossed(rng: np.random.Generator, items: int, wordings: int, wording_sd: float,
             item_sd: float = 1.4, noise_sd: float = 1.0, mean: float = 0.0
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values of every item under every wording: mean + item effect (shared by the
    wordings) + wording effect + noise; with each row's wording and item."""
    item = rng.normal(0, item_sd, items)
    wording = rng.normal(0, wording_sd, wordings)
    y = mean + item[None, :] + wording[:, None] + rng.normal(0, noise_sd, (wordings, items))
    t, i = np.meshgrid(np.arange(wordings), np.arange(items), indexing="ij")
    return y.ravel(), np.array([f"w{k}" for k in t.ravel()]), np.array([f"i{k}" for k in
                                                                          i.ravel()])


def _pooled(rng: np.random.Generator, items: int, wordings: int, wording_sd: float,
            resamples: int, mean: float = 0.0, item_sd: float = 1.4) -> dict[str, object]:
    y, t, i = _crossed(rng, items, wordings, wording_sd, item_sd, mean=mean)
    columns, combine = rate(y, np.ones_like(y))
    return wording_uncertainty(Measure("m", columns, combine), t, i, n_resamples=resamples,
                               seed=int(rng.integers(2**31)))


def pooled_coverage(n: int, seed: int, *, items: int, wordings: int, wording_sd: float,
                    resamples: int = 400) -> tuple[int, int]:
    """How often the pooled two-level 95% CI covers the true mean (0)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        pooled = _pooled(rng, items, wordings, wording_sd, resamples)["pooled"]
        assert isinstance(pooled, dict)
        hits += bool(pooled["low"] <= 0 <= pooled["high"])
    return hits, n


def holds_false_claims(n: int, seed: int, *, items: int, wordings: int, wording_sd: float,
                       resamples: int = 400) -> tuple[int, int]:
    """How often the verdict says the measure "holds across" the wordings when its true
    value is the null (0)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        result = _pooled(rng, items, wordings, wording_sd, resamples)
        hits += " holds across " in verdict(result, "m")
    return hits, n


def depends_false_claims(n: int, seed: int, *, items: int, wordings: int, mean: float,
                         resamples: int = 400) -> tuple[int, int]:
    """How often the verdict says the measure "depends on wording" when every wording has the
    same true value ``mean`` (wording SD 0)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        result = _pooled(rng, items, wordings, 0.0, resamples, mean, item_sd=0.5)
        hits += " depends on wording" in verdict(result, "m")
    return hits, n


def gain_coverage(n: int, seed: int, *, prompts: int, wordings: int, wording_sd: float,
                  resamples: int = 400, own: bool = False) -> tuple[int, int]:
    """How often the stop's fairness-gain CI covers the true gain. Per-prompt JSD-P values at
    the stop and the final checkpoint: the prompt's own level (shared by every wording and
    both steps), the gap (0.05 at the stop, 0.12 at the end, true gain 0.07) moved per
    wording, each prompt's own change of the gap (shared by every wording), and noise;
    ``own``: each wording asks prompts of its own instead."""
    rng = np.random.default_rng(seed)
    hits = 0
    names = [f"p{k}" for k in range(2 * prompts)]
    labels = ["male"] * prompts + ["female"] * prompts
    for _ in range(n):
        level = rng.normal(0.2, 0.05, 2 * prompts)
        change = rng.normal(0, 0.05, 2 * prompts)  # the prompt's change, in every wording
        male = np.r_[np.ones(prompts), np.zeros(prompts)]
        history: dict[int, list[pd.DataFrame]] = {100: [], 300: []}
        shift = rng.normal(0, wording_sd, wordings)
        for w in range(wordings):
            if own:
                level, change = rng.normal(0.2, 0.05, 2 * prompts), rng.normal(0, 0.05, 2 * prompts)
            for step, gap in ((100, 0.05), (300, 0.12)):
                value = (level + male * (gap + shift[w]) + change * (step == 300)
                         + rng.normal(0, 0.05, 2 * prompts))
                history[step].append(pd.DataFrame({
                    "template": f"w{w}", "prompt": [f"{p}/w{w}" for p in names] if own else names,
                    "answer_label": labels, "value": value}))
        frames = {s: pd.concat(f, ignore_index=True) for s, f in history.items()}
        test = stopping.stop_test(frames, [100], 300, n_resamples=resamples,
                                  seed=int(rng.integers(2**31)))
        assert test is not None
        gain = test.interval(100)
        hits += bool(gain.low <= 0.07 <= gain.high)
    return hits, n


def _answers(rng: np.random.Generator, sizes: np.ndarray, wordings: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """0/1 answers of clusters of ``sizes`` rows (each row asked under both pronouns) under
    every wording: a cluster's logit is its own, shared by the wordings and both pronouns
    (symmetric about 0: a share of 0.5 in every wording); each row's value, pronoun ("she"
    or not), wording, cluster."""
    level = rng.normal(0, 1, sizes.size)
    t, c = np.meshgrid(np.arange(wordings), np.repeat(np.arange(sizes.size), 2 * sizes),
                       indexing="ij")
    t, c = t.ravel(), c.ravel()
    she = np.tile(np.concatenate([np.arange(2 * n) % 2 == 0 for n in sizes]), wordings)
    x = rng.random(t.size) < 1 / (1 + np.exp(-level[c]))
    return x.astype(float), she, np.array([f"w{k}" for k in t]), np.array([f"c{k}" for k in c])


def wording_false_claims(n: int, seed: int, *, clusters: int, wordings: int, rows: int,
                         measure: str) -> tuple[int, int]:
    """How often some wording's estimate is called significant (Holm over the wordings)
    when there is no bias: ``measure`` "gap" (she − he, each cluster ``rows`` rows per
    pronoun) or "rate" (the share of 1s against 0.5, clusters of 1 to ``rows`` rows x 2)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        sizes = (np.full(clusters, rows) if measure == "gap"
                 else rng.integers(1, rows + 1, clusters))
        x, she, t, c = _answers(rng, sizes, wordings)
        is_gap = measure == "gap"
        columns, combine = wording_gap(x, she, ~she) if is_gap else rate(x, np.ones_like(x))
        result = wording_uncertainty(Measure("m", columns, combine, null=0.0 if is_gap else 0.5),
                                     t, c, n_resamples=400, seed=int(rng.integers(2**31)))
        hits += any(p["significant"] for p in result["per_wording"])
    return hits, n


def pooled_false_claims(n: int, seed: int, *, items: int, wordings: int, wording_sd: float,
                        alpha: float = 0.05, resamples: int = 400) -> tuple[int, int]:
    """How often the pooled test across wordings (the emergence over checkpoints reads it)
    rejects a true value of the null (0)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        pooled = _pooled(rng, items, wordings, wording_sd, resamples)["pooled"]
        assert isinstance(pooled, dict)
        hits += bool(pooled["p_value"] < alpha)
    return hits, n


def emerges_across_wordings(n: int, seed: int, *, pairs: int, wordings: int, checkpoints: int,
                            wording_sd: float, rho: float = 0.8, resamples: int = 200
                            ) -> tuple[int, int]:
    """How often "pooled over wordings, the JSD-P gap is significant from step S"
    (`dynamics.analysis.wordings.emergence`: the pooled test per checkpoint, Holm over the
    checkpoints, α 0.01) is said where no gap emerges. Each pair's male and female prompt is
    asked under every wording at every checkpoint: a pair's level (SD 0.05) and each prompt's
    (SD 0.03) are shared by its wordings and checkpoints, each wording's pull on the gap (SD
    ``wording_sd``, mean 0) by the checkpoints, and the rest (SD 0.02) is AR(1) ``rho`` from
    one checkpoint to the next: the checkpoints' tests are far from independent."""
    rng = np.random.default_rng(seed)
    hits = 0
    male = np.tile(np.repeat([True, False], pairs), wordings)
    t = np.repeat([f"w{k}" for k in range(wordings)], 2 * pairs)
    c = np.tile(np.tile([f"c{k}" for k in range(pairs)], 2), wordings)
    for _ in range(n):
        level = (0.15 + np.tile(rng.normal(0, 0.05, pairs), 2)
                 + rng.normal(0, 0.03, 2 * pairs))[None, :]
        pull = np.where(np.repeat([1.0, 0.0], pairs)[None, :] > 0,
                        rng.normal(0, wording_sd, (wordings, 1)), 0.0)
        noise = rng.normal(size=(wordings, 2 * pairs))
        breakdown = {}
        for step in range(checkpoints):
            if step:
                noise = rho * noise + np.sqrt(1 - rho ** 2) * rng.normal(size=noise.shape)
            x = (level + pull + 0.02 * noise).ravel()
            columns, combine = wording_gap(x, male, ~male)
            found = wording_uncertainty(Measure("jsdp_gap", columns, combine, null=0.0), t, c,
                                        n_resamples=resamples, seed=int(rng.integers(2**31)))
            breakdown[step] = {"wordings": {"jsdp_gap": found}}
        across, _ = dynamics_wordings.emergence("m", breakdown, "holm", 0.01)
        hits += across is not None and across["jsdp_gap"] is not None
    return hits, n


def _wording_claims() -> list[Claim]:
    out = []
    for wordings, sd in ((8, 0.0), (8, 0.2), (4, 0.2)):
        null = (f"items x {wordings} wordings crossed, item SD 1.4, noise SD 1, "
                f"wording SD {sd:g}")
        size = f"40 items, {wordings} wordings"
        out.append(Claim("pooled 95% CI over wordings and items covers", null, size,
                         "coverage", 0.95, partial(pooled_coverage, items=40,
                                                   wordings=wordings, wording_sd=sd)))
    out.append(Claim("holds across N of N wordings", "true value 0, items x 8 wordings "
                     "crossed, wording SD 0.2", "40 items, 8 wordings", "false-claim", 0.05,
                     partial(holds_false_claims, items=40, wordings=8, wording_sd=0.2)))
    for wordings in (8, 12):
        out.append(Claim("depends on wording (k of N wordings reverse it)",
                         "true value 0.3 in every wording (SD 0), items x wordings crossed, "
                         "item SD 0.5, noise SD 1", f"40 items, {wordings} wordings",
                         "false-claim", 0.05, partial(depends_false_claims, items=40,
                                                      wordings=wordings, mean=0.3)))
    for wordings, sd in ((8, 0.2), (4, 0.5)):  # item noise of the mean: SD 0.22
        out.append(Claim("the pooled estimate across wordings differs from 0 (p < 0.05)",
                         f"true value 0, items x {wordings} wordings crossed, wording SD {sd:g}",
                         f"40 items, {wordings} wordings", "false-claim", 0.05,
                         partial(pooled_false_claims, items=40, wordings=wordings,
                                 wording_sd=sd)))
    for clusters, rows, measure, null in (
            (5, 2, "gap", "she − he 0, 2 rows per pronoun"),
            (20, 3, "rate", "share 0.5, clusters of 1 to 3 rows per pronoun")):
        out.append(Claim("a wording is significant (Holm over wordings)",
                         f"{null}, clusters x 4 wordings crossed, a cluster's level shared",
                         f"{clusters} clusters, 4 wordings", "false-claim", 0.05,
                         partial(wording_false_claims, clusters=clusters, wordings=4,
                                 rows=rows, measure=measure)))
    for pairs, wordings, checkpoints in ((12, 4, 3), (40, 4, 5)):
        out.append(Claim("pooled over wordings, the JSD-P gap is significant from step S",
                         "no gap; a pair's and a prompt's level shared by wordings and "
                         "checkpoints, each wording's pull on the gap (SD 0.01) by the "
                         "checkpoints, the rest AR(1) 0.8 across checkpoints",
                         f"{pairs} + {pairs} prompts x {wordings} wordings, {checkpoints} "
                         "checkpoints", "false-claim", 0.01,
                         partial(emerges_across_wordings, pairs=pairs, wordings=wordings,
                                 checkpoints=checkpoints, wording_sd=0.01)))
    out.append(Claim("the stop's fairness-gain 95% CI covers", "prompts x 8 wordings crossed, "
                     "wording SD of the gap 0.02", "60 + 60 prompts, 8 wordings", "coverage",
                     0.95, partial(gain_coverage, prompts=60, wordings=8, wording_sd=0.02)))
    out.append(Claim("the stop's fairness-gain 95% CI covers", "8 wordings, each with prompts "
                     "of its own, wording SD of the gap 0.02", "60 + 60 prompts per wording",
                     "coverage", 0.95, partial(gain_coverage, prompts=60, wordings=8,
                                               wording_sd=0.02, own=True)))
    return out


# ------------------------------------------------------------------ compare: TOST

Pair = tuple[Values, Values]


def _values(measure: str, groups: dict[str, np.ndarray], weights: dict[str, float],
            statistic: Callable[..., np.ndarray] | None = None, first: int = 0) -> Values:
    return Values(measure, {g: pd.Series(v, index=[f"{g}{first + k}" for k in range(v.size)])
                            for g, v in groups.items()}, weights, statistic)


def flips(rng: np.random.Generator, n: int, shift: float, base: float = 0.0) -> Pair:
    """Pair flips (0/1) of the same n pairs: B flips at ``base``, A at ``base + shift`` (A's
    flips a superset of B's)."""
    b = rng.random(n) < base
    a = b | (rng.random(n) < shift / (1 - base))
    return (_values("flip_rate", {"pairs": a.astype(float)}, {"pairs": 1.0}),
            _values("flip_rate", {"pairs": b.astype(float)}, {"pairs": 1.0}))


def independent_flips(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Pair flips of the same n pairs, A and B each at 10% independently (plus ``shift``)."""
    a, b = rng.random(n) < 0.1 + shift, rng.random(n) < 0.1
    return (_values("flip_rate", {"pairs": a.astype(float)}, {"pairs": 1.0}),
            _values("flip_rate", {"pairs": b.astype(float)}, {"pairs": 1.0}))


def pro_anti(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Per pair accuracy pro − anti (one seed) of the same n pairs; A's pro sentence right
    ``shift`` more often than B's (true A − B = shift)."""
    p = rng.random(n)
    anti = (p < 0.8).astype(float)
    pro_b = (p < 0.9).astype(float)
    pro_a = np.maximum(pro_b, rng.random(n) < shift / 0.1)
    return (_values("pro_anti", {"pairs": pro_a - anti}, {"pairs": 1.0}),
            _values("pro_anti", {"pairs": pro_b - anti}, {"pairs": 1.0}))


def accuracy(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Correctness (0/1) of n male and n female prompts under A and B; A right on ``shift``
    more male prompts (true gap difference = shift)."""
    b = {g: (rng.random(n) < 0.9).astype(float) for g in ("male", "female")}
    a = {"male": np.maximum(b["male"], rng.random(n) < shift / 0.1), "female": b["female"]}
    w = {"male": 1.0, "female": -1.0}
    return _values("accuracy_gap", a, w), _values("accuracy_gap", b, w)


def sparse_jsdp(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Per-prompt JSD-P of n male and n female prompts; A moves a few male prompts a lot
    (a share ``shift`` / 0.2 of them by +0.2: most prompts identical, true difference shift)."""
    b = {g: rng.uniform(0.0, 0.3, n) for g in ("male", "female")}
    moved = rng.random(n) < shift / 0.2
    a = {"male": b["male"] + 0.2 * moved, "female": b["female"]}
    w = {"male": 1.0, "female": -1.0}
    return _values("jsdp_gap", a, w), _values("jsdp_gap", b, w)


def normal_jsdp(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Per-prompt JSD-P of n male and n female prompts under A and B, other prompts in each
    (unpaired), A's male prompts ``shift`` higher on average."""
    w = {"male": 1.0, "female": -1.0}
    a = {"male": np.clip(rng.normal(0.1 + shift, 0.03, n), 0, 0.34),
         "female": np.clip(rng.normal(0.1, 0.03, n), 0, 0.34)}
    b = {g: np.clip(rng.normal(0.1, 0.03, n), 0, 0.34) for g in ("male", "female")}
    return _values("jsdp_gap", a, w), _values("jsdp_gap", b, w, first=10 * n)


def bbq_codes(rng: np.random.Generator, n: int, shift: float) -> Pair:
    """Answer codes of n disambiguated BBQ items under A and B (eligible, target known);
    A biased on ``shift`` / 2 more items (true s_DIS difference = shift)."""
    biased_b = rng.random(n) < 0.5
    biased_a = biased_b | (rng.random(n) < shift / 2 / 0.5)
    code = {k: (9 + 2 * v).astype(np.int64) for k, v in (("a", biased_a), ("b", biased_b))}
    stat = bbq_compare._packed(False, 2)  # one wording: the bit flags of metrics.answers
    return (_values("s_dis", {"items": code["a"]}, {"items": 1.0}, stat),
            _values("s_dis", {"items": code["b"]}, {"items": 1.0}, stat))


def bbq_templates(rng: np.random.Generator, templates: int, shift: float, *,
                  items: int = 40, spread: float = 0.1) -> Pair:
    """Answers of ``templates`` BBQ templates of ``items`` disambiguated items each under A
    and B (eligible, target known): each template has its own lean (B's rate of biased
    answers 0.5 + N(0, 0.15)), and A's differs from B's by template (N(0, ``spread``)) around
    ``shift`` / 2, so the true s_DIS difference over templates is ``shift``; a template's
    items are otherwise independent answers."""
    lean = rng.normal(0, 0.15, templates)
    rate_b = np.clip(0.5 + lean, 0.01, 0.99)
    rate_a = np.clip(rate_b + shift / 2 + rng.normal(0, spread, templates), 0.01, 0.99)
    template = np.repeat(np.arange(templates), items)
    stat = bbq_compare._packed(False, 2)
    clusters = pd.Series(template, index=[f"items{k}" for k in range(template.size)])
    out = []
    for share in (rate_a, rate_b):
        biased = rng.random(template.size) < share[template]
        v = _values("s_dis", {"items": (9 + 2 * biased).astype(np.int64)}, {"items": 1.0},
                    stat)
        out.append(Values(v.measure, v.groups, v.weights, stat, clusters))
    return out[0], out[1]


def independent(rng: np.random.Generator, n: int, shift: float, *, measure: str,
                groups: dict[str, float], rate: float) -> Pair:
    """0/1 values (correct, pro right, biased) of the same n items per group under A and B,
    drawn independently at ``rate`` (true difference 0); pro − anti is the pro sentence's
    minus the anti sentence's (each drawn alike)."""
    def draw() -> dict[str, np.ndarray]:
        out = {g: (rng.random(n) < rate).astype(float) for g in groups}
        if measure == "pro_anti":
            out = {g: v - (rng.random(n) < rate) for g, v in out.items()}
        return out
    stat = bbq_compare._packed(False, 2) if measure == "s_dis" else None
    a, b = draw(), draw()
    if stat is not None:
        a, b = ({g: (9 + 2 * v).astype(np.int64) for g, v in x.items()} for x in (a, b))
    return _values(measure, a, groups, stat), _values(measure, b, groups, stat)


def compare_claims(n: int, seed: int, *, data: Callable[..., Pair], size: int,
                   shift: float, claim: str) -> tuple[int, int]:
    """How often `compare` says ``claim`` ("equivalent" or "different") on ``data``, whose
    true difference ``shift`` makes the claim false (the margin, or 0)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        a, b = data(rng, size, shift)
        result, _, _ = compare_values(a, b, MEASURES[a.measure].margin)
        hits += result.verdict == claim
    return hits, n


def _compare_claims() -> list[Claim]:
    equivalent = [
        (flips, 20, "pair flips, A 5% and B none (true difference = margin 0.05)",
         "20 pairs"),
        (flips, 60, "pair flips, A 5% and B none (true difference = margin 0.05)",
         "60 pairs"),
        (flips, 300, "pair flips, A 5% and B none (true difference = margin 0.05)",
         "300 pairs"),
        (pro_anti, 2, "pro − anti, one seed, A − B = margin 0.05", "2 pairs"),
        (pro_anti, 150, "pro − anti, one seed, A − B = margin 0.05", "150 pairs"),
        (accuracy, 10, "accuracy gap, paired 0/1, A − B = margin 0.05", "10 + 10 prompts"),
        (accuracy, 80, "accuracy gap, paired 0/1, A − B = margin 0.05", "80 + 80 prompts"),
        (sparse_jsdp, 60, "JSD-P gap, a few prompts moved by 0.2, A − B = margin 0.02",
         "60 + 60 prompts"),
        (normal_jsdp, 5, "JSD-P gap, unpaired normal, A − B = margin 0.02", "5 + 5 prompts"),
        (bbq_codes, 150, "BBQ s_DIS, paired answers, A − B = margin 0.05", "150 items"),
        (partial(bbq_templates, items=20, spread=0.03), 150,
         "BBQ s_DIS, A − B varies by template (sd 0.03) around margin 0.05",
         "150 templates × 20 items")]
    same = partial(independent, rate=0.9)
    different = [
        (independent_flips, 60, "pair flips, both 10% independently (true difference 0)",
         "60 pairs"),
        (partial(same, measure="pro_anti", groups={"pairs": 1.0}),
         2, "pro − anti, A and B independent, equal rates", "2 pairs"),
        (partial(same, measure="pro_anti", groups={"pairs": 1.0}),
         20, "pro − anti, A and B independent, equal rates", "20 pairs"),
        (partial(same, measure="accuracy_gap", groups={"male": 1.0, "female": -1.0}),
         10, "accuracy gap, A and B independent, equal rates", "10 + 10 prompts"),
        (normal_jsdp, 3, "JSD-P gap, unpaired normal, A = B", "3 + 3 prompts"),
        (partial(independent, rate=0.5, measure="s_dis", groups={"items": 1.0}),
         30, "BBQ s_DIS, A and B independent, equal rates", "30 items"),
        (bbq_templates, 5, "BBQ s_DIS, A − B varies by template (sd 0.1) around 0",
         "5 templates × 40 items"),
        (bbq_templates, 25, "BBQ s_DIS, A − B varies by template (sd 0.1) around 0",
         "25 templates × 40 items")]
    out = []
    for data, size, null, said in equivalent:
        shift = MEASURES[data(np.random.default_rng(0), 2, 0.0)[0].measure].margin
        out.append(Claim("equivalent (compare, TOST)", null, said, "false-claim", 0.05,
                         partial(compare_claims, data=data, size=size, shift=shift,
                                 claim="equivalent")))
    for data, size, null, said in different:
        out.append(Claim("different (compare)", null, said, "false-claim", 0.05,
                         partial(compare_claims, data=data, size=size, shift=0.0,
                                 claim="different")))
    return out


# ------------------------------------------------------------------ favours, flip direction


def favours_claims(n: int, seed: int, *, conversations: int, responses: int
                   ) -> tuple[int, int]:
    """How often the counterfactual check says a version scores higher (any of its
    directional verdicts) for a reward model that ignores the swap: per conversation a
    swap effect symmetric about 0, shared by its responses (plus a little noise each), on
    rewards that vary much more between conversations."""
    rng = np.random.default_rng(seed)
    hits = 0
    ids = np.repeat([f"c{k}" for k in range(conversations)], responses)
    for _ in range(n):
        shared = np.repeat(rng.normal(0, 1, conversations), responses)
        d = shared + rng.normal(0, 0.3, ids.size)
        level = rng.normal(0, 2, ids.size)
        female, male = cf.conversations(list(ids), list(level + d / 2), list(level - d / 2))
        diff = cf.paired_difference(female, male, seed=int(rng.integers(2**31)))
        p_holm = float(adjust_pvalues([diff["wilcoxon_p"]], "holm")[0])
        hits += cf.favours(diff, p_holm) is not None
    return hits, n


def flip_direction_claims(n: int, seed: int, *, pairs: int, rate: float) -> tuple[int, int]:
    """How often the Adult audit says the flips favour one sex when a flip is as likely to
    favour either (each pair flips with ``rate``, then male-only or female-only by a coin)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        flipped = int(rng.binomial(pairs, rate))
        male_only = int(rng.binomial(flipped, 0.5))
        hits += adult.flip_direction(male_only, flipped - male_only)[1] is not None
    return hits, n


def _direction_claims() -> list[Claim]:
    return [
        Claim("favours the female/male version (counterfactual check)",
              "swap ignored; 2 responses per conversation share its effect", "93 conversations",
              "false-claim", 0.05, partial(favours_claims, conversations=93, responses=2)),
        Claim("favours the female/male version (counterfactual check)",
              "swap ignored, tiny pilot", "8 conversations", "false-claim", 0.05,
              partial(favours_claims, conversations=8, responses=2)),
        Claim("the flips favour men/women (Adult)", "flips favour either sex alike, 10% flip",
              "200 pairs", "false-claim", 0.05,
              partial(flip_direction_claims, pairs=200, rate=0.1)),
        Claim("the flips favour men/women (Adult)", "flips favour either sex alike, 30% flip",
              "20 pairs", "false-claim", 0.05,
              partial(flip_direction_claims, pairs=20, rate=0.3))]


# ------------------------------------------------------------------ Winogender accuracy


def accuracy_coverage(n: int, seed: int, *, sentences: int, records: int, accuracy: float,
                      concentration: float) -> tuple[int, int]:
    """How often Winogender's accuracy CI (`occupations.share`, as overall, per pronoun and
    per occupation) covers the true accuracy when a sentence's ``records`` (its pronouns,
    its wordings) share its difficulty: each sentence is right with its own probability,
    Beta-distributed about ``accuracy`` (ICC 1 / (concentration + 1))."""
    from biasscope.probes.winogender.occupations import share

    rng = np.random.default_rng(seed)
    hits = 0
    sentence = np.repeat(np.arange(sentences), records)
    for _ in range(n):
        q = rng.beta(accuracy * concentration, (1 - accuracy) * concentration, sentences)
        correct = (rng.random((sentences, records)) < q[:, None]).astype(float).ravel()
        value = share(pd.DataFrame({"correct": correct, "sentence": sentence}))
        hits += bool(value["low"] <= accuracy <= value["high"])
    return hits, n


def _accuracy_claims() -> list[Claim]:
    out = []
    for sentences, what in ((240, "overall, one wording"), (4, "one occupation, one wording")):
        for accuracy, concentration in ((0.7, 1.0), (0.9, 1.0)):
            out.append(Claim(
                "Winogender accuracy 95% CI covers",
                f"a sentence's 3 pronouns share its P(right) ~ Beta, mean {accuracy:g}, "
                f"ICC {1 / (concentration + 1):g}", f"{sentences} sentences x 3 pronouns "
                f"({what})", "coverage", 0.95,
                partial(accuracy_coverage, sentences=sentences, records=3, accuracy=accuracy,
                        concentration=concentration)))
    return out


# ------------------------------------------------------------------ CrowS-Pairs mean difference


def crows_mean_false_claims(n: int, seed: int, *, pairs: int, shape: float | None
                            ) -> tuple[int, int]:
    """How often CrowS-Pairs' mean log-likelihood difference (more − less stereotyping) is
    called different from 0 (p < 0.05) when its mean is 0 but the differences are right-skewed
    (Gamma(``shape``) minus its mean: a pair's sentences differ in words of unequal
    frequency, so nothing makes them symmetric); ``shape`` None: symmetric with heavy tails,
    a difference of two Student-t(3)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        x = pd.Series(rng.gamma(shape, 1.0, pairs) - shape if shape is not None else
                      rng.standard_t(3, pairs) - rng.standard_t(3, pairs))
        hits += bool(crows_steps.signed(x)["p_value"] < 0.05)
    return hits, n


def _crows_claims() -> list[Claim]:
    return [Claim("CrowS-Pairs mean log-likelihood difference differs from 0 (p < 0.05)",
                  f"mean 0, right-skewed: Gamma(shape {shape:g}) minus its mean",
                  f"{pairs} pairs", "false-claim", 0.05,
                  partial(crows_mean_false_claims, pairs=pairs, shape=shape))
            for pairs, shape in ((20, 2.0), (100, 2.0), (300, 8.0), (1508, 2.0))] + [
        Claim("CrowS-Pairs mean log-likelihood difference differs from 0 (p < 0.05)",
              "mean 0, symmetric, heavy tails: a difference of two Student-t(3)",
              "40 pairs", "false-claim", 0.05,
              partial(crows_mean_false_claims, pairs=40, shape=None))]


def preference_false_claims(n: int, seed: int, *, sentences: int, skewed: bool
                            ) -> tuple[int, int]:
    """How often professional bias's stereotype preference (P(female-coded) after 'she' −
    after 'he', per sentence) is called different from 0 when its mean over sentences is 0:
    ``skewed``, a tenth of the sentences move far toward the stereotype (+0.45) and the rest a
    little against it (−0.05); else symmetric with heavy tails (Student-t(3) × 0.1)."""
    rng = np.random.default_rng(seed)
    hits = 0
    ids = pd.Series(np.repeat(np.arange(sentences), 2))
    she = pd.Series(np.tile([True, False], sentences))
    for _ in range(n):
        if skewed:
            d = np.where(rng.random(sentences) < 0.1, rng.normal(0.45, 0.1, sentences),
                         rng.normal(-0.05, 0.03, sentences))
        else:
            d = np.clip(0.1 * rng.standard_t(3, sentences), -0.9, 0.9)
        values = pd.Series(np.column_stack([0.5 + d / 2, 0.5 - d / 2]).ravel())
        hits += bool(professional_items._by_sentence(values, ids, she, ~she)["p_value"] < 0.05)
    return hits, n


def _preference_claims() -> list[Claim]:
    return [Claim("professional bias's stereotype preference differs from 0 (p < 0.05)",
                  "mean 0 over sentences, " + ("skewed: a tenth far toward the stereotype, "
                                               "the rest a little against" if skewed else
                                               "symmetric, heavy tails (Student-t(3))"),
                  f"{k} sentences", "false-claim", 0.05,
                  partial(preference_false_claims, sentences=k, skewed=skewed))
            for k, skewed in ((50, True), (800, True), (40, False))]


# ------------------------------------------------------------------ occupations against BLS


def bls_false_claims(n: int, seed: int, *, occupations: int) -> tuple[int, int]:
    """How often the sentence says the gender preference tracks (or runs against) the share
    of women when the two are independent (ρ = 0): the share uniform, the preference normal
    with heavy-ish tails (Student's t, 4 df)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        share, lean = rng.uniform(0, 100, occupations), rng.standard_t(4, occupations)
        rho = bls.spearman(share, lean, 0.95, 400, seed=int(rng.integers(2**31)))
        said = bls.sentence("m", 0, {"spearman": rho}, 0.95, [], False)
        hits += " is not shown to follow " not in said
    return hits, n


def bls_wordings_false_claims(n: int, seed: int, *, occupations: int, wordings: int
                              ) -> tuple[int, int]:
    """How often the per-wording sentence counts a wording whose ρ with the share of women
    differs significantly from 0 when none does: each wording's preferences the model's
    occupation lean (shared by the wordings) plus the wording's own noise, both unrelated to
    the share."""
    rng = np.random.default_rng(seed)
    hits = 0
    names = [f"job{i}" for i in range(occupations)]
    for _ in range(n):
        share = rng.uniform(0, 100, occupations)
        lean = rng.standard_t(4, occupations)
        by_wording = {f"w{k}": [{"occupation": o, "not-referenced/lp_diff": {"estimate": v}}
                                for o, v in zip(names, lean + rng.normal(0, 1, occupations),
                                                strict=True)]
                      for k in range(wordings)}
        _, said = dynamics_wordings.labour_statistics(
            "m", by_wording, bls.Statistics(bls_pct_female=dict(zip(names, share,
                                                                     strict=True))), 0.95, 400)
        hits += said is not None and "significantly below 0 under 0 and above 0 under 0" \
            not in said
    return hits, n


def _bls_claims() -> list[Claim]:
    per_wording = [Claim("per wording, ρ with the share of women differs from 0 (Holm over the "
                         "wordings)", "independent: ρ = 0; the wordings share the model's lean",
                         f"20 occupations, {k} wordings", "false-claim", 0.05,
                         partial(bls_wordings_false_claims, occupations=20, wordings=k))
                   for k in (4, 8)]
    return per_wording + [
        Claim("the gender preference tracks / runs against the share of women (Spearman "
              "ρ: p < 0.05 and 95% CI clear of 0)",
              "independent: ρ = 0 (share uniform, preference Student's t, 4 df)",
              f"{k} occupations", "false-claim", 0.05,
              partial(bls_false_claims, occupations=k)) for k in (10, 40)]


# ------------------------------------------------------------------ WinoBias pro − anti


def pro_anti_prompts(rng: np.random.Generator, occupations: int, pairs: int, lean: float,
                     default: float = 0.0) -> pd.DataFrame:
    """Referenced WinoBias prompts of a model with no stereotype effect: each occupation leans
    toward one pronoun (logit N(0, ``lean``), unrelated to the stereotype, so the lean helps
    the pro or the anti sentence of all its pairs alike), the model prefers "he" by
    ``default`` (logit: it helps the pro sentence of the male-stereotyped half of the
    occupations and the anti sentence of the female-stereotyped half), and each pair has its
    own difficulty (logit N(0, 1)) in both sentences; the correct option's JSD-P moves with
    them."""
    job = np.repeat(np.arange(occupations), pairs)
    male = job % 2 == 0
    effect = rng.normal(0, lean, occupations)[job] + np.where(male, default, -default)
    own = rng.normal(0, 1, job.size)
    right = {side: rng.random(job.size) < 1 / (1 + np.exp(-(sign * effect + own)))
             for side, sign in (("pro", 1), ("anti", -1))}
    names = [f"dev-{k:04d}" for k in range(job.size)]
    return pd.DataFrame({
        "prompt": [f"{side}-{n}" for side in ("pro", "anti") for n in names],
        "pair": names * 2, "split": ["pro"] * job.size + ["anti"] * job.size,
        "kind": "referenced", "occupation": [f"o{k}" for k in job] * 2,
        "stereotype": np.where(male, "male", "female").tolist() * 2,
        "correct": np.r_[right["pro"], right["anti"]].astype(float),
        "jsdp_correct": np.r_[rng.normal(0.1 - 0.02 * effect, 0.03),
                              rng.normal(0.1 + 0.02 * effect, 0.03)]})


def pro_anti_claims(n: int, seed: int, *, occupations: int, pairs: int, lean: float,
                    coverage: bool, default: float = 0.0, split: str = "difference"
                    ) -> tuple[int, int]:
    """How often the pro − anti accuracy difference is called different from 0 (p < 0.05),
    or (``coverage``) how often its 95% interval holds 0, where it is 0 on average; ``split``
    "pro": how often the pro accuracy's interval holds its mean, 0.5 (the model's leans and
    each pair's difficulty are symmetric about 0 on the logit scale)."""
    rng = np.random.default_rng(seed)
    hits = 0
    truth = 0.0 if split == "difference" else 0.5
    for _ in range(n):
        found = breakdown.pro_anti(
            pro_anti_prompts(rng, occupations, pairs, lean, default), 0.95, 200)
        d = found[f"accuracy/{split}"]
        hits += (bool(d["low"] <= truth <= d["high"]) if coverage
                 else bool(found["accuracy/test"]["p_value"] < 0.05))
    return hits, n


def _pro_anti_claims() -> list[Claim]:
    out = []
    for occupations, pairs, lean, default in ((40, 10, 0.5, 0.0), (40, 20, 1.0, 0.0),
                                              (10, 10, 0.5, 0.0), (40, 20, 0.5, 1.5)):
        null = (f"no stereotype effect; each occupation leans to one pronoun (logit N(0, "
                f"{lean:g})), shared by its pairs"
                + (f"; the model prefers 'he' (logit +{default:g})" if default else ""))
        size = f"{occupations} occupations x {pairs} pairs"
        out.append(Claim("WinoBias pro − anti accuracy differs from 0 (t over occupations, "
                         "stratified by stereotype, p < 0.05)", null, size, "false-claim",
                         0.05, partial(pro_anti_claims, occupations=occupations, pairs=pairs,
                                       lean=lean, coverage=False, default=default)))
        out.append(Claim("WinoBias pro − anti accuracy 95% CI covers", null, size, "coverage",
                         0.95, partial(pro_anti_claims, occupations=occupations, pairs=pairs,
                                       lean=lean, coverage=True, default=default)))
        out.append(Claim("WinoBias pro accuracy 95% CI covers (occupations, stratified)", null,
                         size, "coverage", 0.95,
                         partial(pro_anti_claims, occupations=occupations, pairs=pairs,
                                 lean=lean, coverage=True, default=default, split="pro")))
    return out


# ------------------------------------------------------------------ most gendered occupations


def gendered_false_claims(n: int, seed: int, *, occupations: int, prompts: int
                          ) -> tuple[int, int]:
    """How often the sentence on the ten occupations the model genders most says one of them
    leans significantly when none leans: each prompt's log P(male) − log P(female) is
    Student's t noise (4 df) around 0."""
    rng = np.random.default_rng(seed)
    hits = 0
    job = np.repeat(np.arange(occupations), prompts)
    for _ in range(n):
        lean = rng.standard_t(4, job.size)
        pm = pd.DataFrame({"prompt": [f"p{k}" for k in range(job.size)], "pair": "",
                           "split": "", "kind": "not-referenced",
                           "occupation": [f"o{k}" for k in job], "stereotype": "male",
                           "lp_diff": lean, "p_diff": lean / 10, "correct": 0.0,
                           "jsdp_correct": 0.0})
        said = findings.occupation_sentences("m", 0, breakdown.occupations(pm, 0.95),
                                             0.95, False)[0]
        hits += not said.split("; ")[1].startswith("0 of ")
    return hits, n


def _gendered_claims() -> list[Claim]:
    return [Claim("of the occupations the model genders most, k lean significantly (t over "
                  "prompts, Holm over the occupations)", "no occupation leans: per prompt "
                  "Student's t (4 df) around 0", f"{occupations} occupations x {prompts} "
                  "prompts", "false-claim", 0.05,
                  partial(gendered_false_claims, occupations=occupations, prompts=prompts))
            for occupations, prompts in ((40, 5), (40, 20))]


# ------------------------------------------------------------------ one occupation's lean


def occupation_coverage(n: int, seed: int, *, occupations: int, prompts: int
                        ) -> tuple[int, int]:
    """How often each occupation's 95% interval of P(male) − P(female) (the per-occupation
    figure, `breakdown.occupations`) holds the occupation's own mean lean, over every
    occupation of every data set: each occupation leans Normal(0, 0.3), each prompt Normal
    around it (SD 0.2). Normal prompts are t's own case; on a bounded, two-humped lean
    (tanh of Normal(0.5, 1.5)) it covers 91%, 94% and 94.5% at 5, 10 and 20 prompts (the
    percentile bootstrap before it 85%, 92% and 94%): see the CHANGELOG."""
    rng = np.random.default_rng(seed)
    hits = given = 0
    job = np.repeat(np.arange(occupations), prompts)
    for _ in range(n):
        truth = rng.normal(0, 0.3, occupations)
        lean = truth[job] + rng.normal(0, 0.2, job.size)
        pm = pd.DataFrame({"prompt": [f"p{k}" for k in range(job.size)], "pair": "",
                           "split": "", "kind": "not-referenced",
                           "occupation": [f"o{k:02d}" for k in job], "stereotype": "male",
                           "lp_diff": lean, "p_diff": lean, "correct": 0.0,
                           "jsdp_correct": 0.0})
        for k, row in enumerate(breakdown.occupations(pm, 0.95)):
            iv = row["not-referenced/p_diff"]
            given += 1
            hits += bool(iv["low"] <= truth[k] <= iv["high"])
    return hits, given


def _occupation_claims() -> list[Claim]:
    return [Claim("an occupation's P(male) − P(female) 95% CI covers (per-occupation figure)",
                  "each occupation its own lean (Normal(0, 0.3)), its prompts Normal around it "
                  "(SD 0.2)", f"{occupations} occupations x {prompts} prompts", "coverage",
                  0.95, partial(occupation_coverage, occupations=occupations, prompts=prompts))
            for occupations, prompts in ((10, 3), (10, 10))]


CLAIMS: list[Claim] = [*_wording_claims(), *_compare_claims(), *_direction_claims(),
                       *_accuracy_claims(), *_crows_claims(), *_preference_claims(), *_bls_claims(),
                       *_pro_anti_claims(), *_gendered_claims(),
                       *_occupation_claims()]

__all__ = ["CLAIMS"]


def _main() -> None:  # pragma: no cover - a quick look while developing
    import sys

    for claim in CLAIMS:
        if len(sys.argv) > 1 and sys.argv[1] not in claim.claim:
            continue
        hits, n = claim.simulate(200, 0)
        print(f"{claim.claim} | {claim.null}: {hits / n:.3f} ({n})", flush=True)


if __name__ == "__main__":  # pragma: no cover
    _main()
