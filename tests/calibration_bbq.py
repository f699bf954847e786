"""Calibration of BBQ's verdicts in an audit: that s_DIS differs from 0 (the test Holm's
correction reads), that its 95% interval covers, and the sentence that answers go with or
against the stereotype in a category (its Bonferroni-adjusted interval clear of 0).

BBQ writes each template out for many names, so a model's lean is shared by a template's
items: the nulls here are models without a bias on average whose lean varies from template to
template (the templates' shares of biased answers ~ Beta around one half, with an intraclass
correlation), from a pilot of 5 templates to 25 templates of 40 items.

Each claim runs the library's own functions on simulated answer records (no model); see
`calibration_base`. tests/probes/test_calibration_bbq.py runs them small.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from biasscope.probes.bbq.metrics import bbq_metrics
from biasscope.probes.bbq.steps import bbq_values
from calibration_base import Claim

ALPHA = 0.05
OPTIONS = ("Alice", "Bob", "Unknown")  # the target is Alice; questions are negative


def records(rng: np.random.Generator, categories: int, templates: int, items: int, icc: float,
            ambiguous: bool = False) -> pd.DataFrame:
    """Answer records of a model without a bias on average: each template's share of biased
    answers ~ Beta(mean 0.5, intraclass correlation ``icc``), its ``items`` answers drawn from
    it (biased: the target, Alice, to a negative question). Disambiguated: Bob is right.
    ``ambiguous``: 'Unknown' is right, and each template has its own share of 'Unknown'
    answers too (~ Beta(mean 0.5, the same ICC)), which scales s_AMB."""
    concentration = 1 / icc - 1
    share = rng.beta(concentration / 2, concentration / 2, (categories, templates))
    biased = rng.random((categories, templates, items)) < share[..., None]
    label = np.where(biased, OPTIONS[0], OPTIONS[1])
    if ambiguous:
        unknown = rng.beta(concentration / 2, concentration / 2, (categories, templates))
        label = np.where(rng.random(label.shape) < unknown[..., None], OPTIONS[2], label)
    n = biased.size
    return pd.DataFrame({
        "category": np.repeat([f"c{k}" for k in range(categories)], templates * items),
        "question_index": np.tile(np.repeat(np.arange(templates), items), categories).astype(str),
        "context_condition": "ambig" if ambiguous else "disambig", "polarity": "neg",
        "target": 0, "unknown": 2, "ans0": OPTIONS[0], "ans1": OPTIONS[1], "ans2": OPTIONS[2],
        "label": label.ravel(), "answer_label": OPTIONS[2 if ambiguous else 1],
        "refused": False, "response": ["answered"] * n})


def test_false_claims(n: int, seed: int, *, templates: int, items: int, icc: float,
                      ambiguous: bool = False) -> tuple[int, int]:
    """How often s_DIS's (``ambiguous``: s_AMB's) test says p < 0.05 for a model without a
    bias on average."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = bbq_values(records(rng, 1, templates, items, icc, ambiguous))[
            "s_amb" if ambiguous else "s_dis"]
        hits += bool(found["p_value"] < ALPHA)
    return hits, n


def coverage(n: int, seed: int, *, templates: int, items: int, icc: float,
             ambiguous: bool = False) -> tuple[int, int]:
    """How often s_DIS's (``ambiguous``: s_AMB's) 95% interval holds 0, its value on average
    over templates."""
    rng = np.random.default_rng(seed)
    hits = 0
    key = "bias_ambiguous" if ambiguous else "bias_disambiguated"
    for _ in range(n):
        found = bbq_metrics(records(rng, 1, templates, items, icc, ambiguous))["headline"]
        hits += bool(found[key]["low"] <= 0 <= found[key]["high"])
    return hits, n


def category_false_claims(n: int, seed: int, *, categories: int, templates: int, items: int,
                          icc: float, ambiguous: bool = False) -> tuple[int, int]:
    """How often the report says answers go with or against the stereotype in some category
    of a model without a bias on average."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        said = bbq_metrics(records(rng, categories, templates, items, icc, ambiguous))[
            "sentences"]
        hits += any("the stereotype (its Bonferroni-adjusted CI" in s for s in said)
    return hits, n


def _claims() -> list[Claim]:
    out = []
    designs = ((25, 40, 0.02), (25, 40, 0.1), (5, 8, 0.1))
    for templates, items, icc in designs:
        null = f"no bias on average; templates' biased share ~ Beta(mean 0.5, ICC {icc:g})"
        size = f"{templates} templates x {items} items"
        out.append(Claim("BBQ's s_DIS differs from 0 (sign-flip test over templates, p < 0.05)",
                         null, size, "false-claim", ALPHA,
                         partial(test_false_claims, templates=templates, items=items, icc=icc)))
        out.append(Claim("BBQ's s_DIS 95% CI covers", null, size, "coverage", 0.95,
                         partial(coverage, templates=templates, items=items, icc=icc)))
    out.append(Claim(
        "answers go with/against the stereotype in a category (BBQ, Bonferroni-adjusted CI)",
        "no bias on average; templates' biased share ~ Beta(mean 0.5, ICC 0.1)",
        "4 categories x 10 templates x 20 items", "false-claim", ALPHA,
        partial(category_false_claims, categories=4, templates=10, items=20, icc=0.1)))
    ambiguous = ("ambiguous contexts, no bias on average; templates' biased share and "
                 "'unknown' share ~ Beta(mean 0.5, ICC 0.1)")
    for templates, items in ((25, 40), (5, 8)):
        size = f"{templates} templates x {items} items"
        out.append(Claim("BBQ's s_AMB differs from 0 (sign-flip test over templates, p < 0.05)",
                         ambiguous, size, "false-claim", ALPHA,
                         partial(test_false_claims, templates=templates, items=items, icc=0.1,
                                 ambiguous=True)))
        out.append(Claim("BBQ's s_AMB 95% CI covers", ambiguous, size, "coverage", 0.95,
                         partial(coverage, templates=templates, items=items, icc=0.1,
                                 ambiguous=True)))
    out.append(Claim(
        "answers go with/against the stereotype in a category (BBQ, Bonferroni-adjusted CI)",
        ambiguous, "4 categories x 10 templates x 20 items", "false-claim", ALPHA,
        partial(category_false_claims, categories=4, templates=10, items=20, icc=0.1,
                ambiguous=True)))
    return out


CLAIMS: list[Claim] = _claims()

__all__ = ["CLAIMS"]
