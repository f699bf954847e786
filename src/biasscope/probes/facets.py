"""What a probe tells the jobs and the report about itself: one registry entry of facets.

A probe is one folder, ``probes/<name>/``, whose ``__init__`` builds ``PROBE = ProbeInfo(...)``;
``probes.PROBES`` lists each ``PROBE`` once. Jobs and the report ask the entry
(``PROBES[name].compare``), never a table of their own. Every facet is given, or declared
``Absent`` with a reason that a consumer prints instead of leaving the probe out unsaid:

* ``load``, ``requests``, ``data``, ``metrics``, ``about``: how to build it, the request kinds
  it can be asked (``REQUEST_KINDS``), the data source it reads, the names of what it
  measures and one line on what it is (``biasscope probes``);
* ``detector``: what reads a free-text answer (``biasscope audit`` with generate requests);
* ``wordings``: its built-in wordings and the fields a template must have (``--wordings``);
* ``unit_metrics``: one unit's headline numbers in a sweep's summary.json;
* ``step_statistics``: its values per checkpoint, tested over training steps (dynamics);
* ``panels``: the report's section over training steps, as data the report draws;
* ``compare``: its measures as per-item values, for ``biasscope compare`` and ``power``;
* ``across_wordings``: its bias measures over all wordings of a run (``--wordings``);
* ``performance``: the performance series it gives a fairness curve (LAMBADA, perplexity).

Facets are plain data and plain functions over records (pandas frames), so a probe imports
only the layers below it and a job or the report calls what the probe gives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.items import Item
from biasscope.core.numbers import level_of, resampled_same
from biasscope.core.numbers import plain as plain  # where the probes look for it
from biasscope.core.stats import Array
from biasscope.core.wordings import Measure as WordingMeasure

if TYPE_CHECKING:
    from biasscope.core.power import Design

#: What each request kind asks a backend for.
REQUEST_KINDS = {
    "next_token": "next-token log-probs of each option over the full vocabulary, and the "
                  "answer's rank (biasscope dynamics)",
    "continuation": "summed log-prob of the answer's continuation, and whether greedy "
                    "decoding gives it (biasscope dynamics)",
    "options": "each option's full log-prob after the probe's chat; the likeliest is the answer "
               "(biasscope dynamics, biasscope audit)",
    "generate": "text, read by the probe's detector (biasscope audit)",
}


class Probe(Protocol):
    """Something that yields the items of one seed, and says what makes it comparable.

    Optional attributes: ``requests`` (the request kinds it can be asked, default
    ``("next_token",)``) and ``seeded`` (False when items do not depend on the seed; default
    True). Probes that take ``options`` or ``generate`` requests also have ``messages(item)``
    (the chat turns), ``detector`` and ``metrics(records)`` (``biasscope.probes.base``).
    """

    name: str

    def items(self, seed: int) -> list[Item]: ...

    def config(self) -> dict[str, object]: ...


ProbeFactory = Callable[..., Probe]


@dataclass(frozen=True)
class Absent:
    """A facet the probe does not have, and why: what a consumer says instead of using it."""

    reason: str


# -- wordings (--wordings) ------------------------------------------------------------------

#: A built-in wording: (id, system turn or None, template).
Builtin = tuple[str, "str | None", str]


@dataclass(frozen=True)
class Wordings:
    """The probe's built-in wordings (the first is its own default template) and what a
    template must hold: its ``fields``; ``cued`` when the next token after the prompt is the
    answer (the template must end at the answer cue); ``system`` when it takes a system turn."""

    fields: tuple[str, ...]
    builtin: tuple[Builtin, ...]
    cued: bool = False
    system: bool = False


# -- per unit and over training steps (dynamics) ---------------------------------------------

#: One unit's headline numbers from its records (a flat dict, for summary.json).
UnitMetrics = Callable[[pd.DataFrame], dict[str, float]]
#: One checkpoint's values: name -> {estimate, low, high, n[, p_value, effect_size]}.
StepValues = dict[str, dict[str, Any]]


class StepValuesOf(Protocol):
    """One checkpoint's values from its records, each interval at ``confidence`` and each
    bootstrap of ``n_resamples`` (the run's analysis settings, so a dynamics run does not mix
    the probes' 95% with WinoBias's level, nor their resamples with the ones it was given)."""

    def __call__(self, records: pd.DataFrame, confidence: float = 0.95,
                 n_resamples: int = 2000) -> StepValues: ...


@dataclass(frozen=True)
class StepStatistics:
    """How the probe is read over training steps: its values per checkpoint (from one
    checkpoint's records), the values its sentences, emergence markers and stopping
    recommendation follow (the first leads), and words for each value."""

    values: StepValuesOf
    headline: tuple[str, ...]
    names: Mapping[str, str] = field(default_factory=dict)
    #: Values given per group (``"occupation_gap"`` for ``occupation_gap:<occupation>``):
    #: many at once, so a table and a figure show them, not the headline.
    groups: tuple[str, ...] = ()
    #: Sentences from one checkpoint's values and α, beyond the headline (which groups
    #: differ); the summary says them of each model's last checkpoint.
    findings: Callable[[StepValues, float], list[str]] | None = None
    #: Values (by name: ``"ss"`` for ``"ss:<domain>"`` too) whose interval is a bootstrap's
    #: over items, which has no width where every resample agrees: said so in words
    #: (`same`), not "0 (95% CI 0 to 0)". A Wilson interval never collapses.
    resampled: tuple[str, ...] = ()

    def same(self, key: str, confidence: float | None = 0.95) -> str | None:
        """`with_ci`'s ``same`` for value ``key``: the bootstrap's words, or None."""
        return resampled_same(confidence) if key.split(":", 1)[0] in self.resampled else None


def step_value(entry: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """An interval entry (`probes.base.interval` and the probes' headlines) as a step value:
    the keys kept over steps, NaN as None, numpy numbers as Python ones."""
    keep = ("estimate", "low", "high", "n", "p_value", "effect_size")
    return {**{k: plain(entry[k]) for k in keep if k in entry}, **extra}


@dataclass(frozen=True)
class Panel:
    """One figure of the probe's section over steps: its title, its caption (``{level}`` for
    its intervals' confidence level) and the values it draws. A value ``"s_dis:*"`` draws
    every per-group value ``s_dis:<group>`` a checkpoint has (e.g. each BBQ category).
    ``by``: ``"step"`` draws each value over the steps; ``"group"`` draws the groups side by
    side at each model's last checkpoint (60 occupations read as rows, not as 60 lines),
    ordered by the entries' key ``order`` names (e.g. ``"bls_pct_female"``), else by name."""

    title: str
    caption: str
    values: tuple[str, ...]
    by: str = "step"
    order: str | None = None

    def caption_at(self, confidence: float) -> str:
        """The caption with its intervals' level (``{level}`` in it) as the run chose it: a
        run at 99% has no 95% intervals to caption."""
        return self.caption.replace("{level}", level_of(confidence))


@dataclass(frozen=True)
class Panels:
    """The report's section of the probe over training steps: its heading and figures."""

    title: str
    figures: tuple[Panel, ...]


@dataclass(frozen=True)
class Performance:
    """A performance series the probe gives, read against the fairness curves: the unit
    metric it is, and its name; ``invert`` when lower is better (perplexity: 1 / it), since
    budgets read a series where higher is better."""

    metric: str
    name: str
    invert: bool = False


# -- compare and power -----------------------------------------------------------------------

@dataclass(frozen=True)
class Measure:
    """What a compared measure is: its words, its default margin, its largest meaningful
    margin, the range one item's value can take (for intervals that cannot collapse, and
    for the fewest items a comparison could conclude from), and its design for ``biasscope
    power``: ``two-groups`` where its values are two groups' items (a gap between groups),
    ``paired`` where they are one series (per-pair differences, flips, a ratio score); and
    what its items are called, for the note that a run has none (it is then not compared)."""

    name: str
    words: str
    margin: float
    max_margin: float
    bounds: tuple[float, float] = (0.0, 1.0)
    design: Design = "paired"
    items: str = "items"


@dataclass(frozen=True)
class Values:
    """One measure of one checkpoint: per-item values per group (indexed by item key) and the
    group weights; or, for a non-linear measure, one coded series, its statistic and each
    item's cluster (same index, named by what the clusters are; BBQ's templates: the unit a
    comparison leaves out, since a model's lean varies by template; None: every item its
    own)."""

    measure: str
    groups: dict[str, pd.Series]
    weights: dict[str, float]
    statistic: Callable[..., Array] | None = field(default=None)
    clusters: pd.Series | None = field(default=None)

    def clusters_of(self, keys: pd.Index) -> npt.NDArray[Any]:
        """The clusters of the items ``keys``."""
        found = keys if self.clusters is None else self.clusters[keys]
        return np.asarray(found, dtype=object)

    def has_items(self) -> bool:
        """Whether every group holds an item: without, there is nothing to compare or plan
        from (a verdict on n = 0 would say nothing about the model)."""
        return all(len(s) for s in self.groups.values())

    def on(self, keys: Mapping[str, pd.Index]) -> Values:
        """The measure over the items ``keys`` of each group (a comparison's pairs)."""
        return replace(self, groups={g: s[keys[g]] for g, s in self.groups.items()})

    def estimate(self) -> float:
        if self.statistic is not None:
            codes = next(iter(self.groups.values())).to_numpy()
            return float(self.statistic(codes)) if codes.size else math.nan
        means = [self.weights[g] * s.mean() for g, s in self.groups.items()]
        return float(sum(means)) if all(len(s) for s in self.groups.values()) else math.nan


#: A record's wording suffix in its item id (``...@w3`` before an optional ``:seed<N>``).
WORDING = re.compile(r"@[A-Za-z0-9][A-Za-z0-9_.-]*(?=(:seed\d+)?$)")
DEFAULT = ""  # the wording label of a run asked under one wording (no ``template`` column)


def item_keys(ids: pd.Series) -> pd.Series:
    """Item ids without their wording: the same item under every wording."""
    return ids.astype(str).str.replace(WORDING, "", regex=True)


def labels(records: pd.DataFrame) -> pd.Series:
    """Each record's wording label (``DEFAULT`` without several wordings)."""
    if "template" not in records:
        return pd.Series(DEFAULT, index=records.index, dtype=object)
    named: pd.Series = records["template"].astype(object)
    out: pd.Series = named.where(named.notna(), DEFAULT)
    return out


def per_item(frame: pd.DataFrame, key: str, value: str) -> pd.Series:
    """``value`` per ``key``, averaged over an item's rows (its wordings)."""
    out: pd.Series = frame.groupby(key, sort=False)[value].mean().astype("float64")
    kept: pd.Series = out.dropna()
    return kept


@dataclass(frozen=True)
class Compare:
    """The probe's measures for ``biasscope compare`` and ``power``: what each is, and their
    per-item values from one checkpoint's records."""

    measures: tuple[Measure, ...]
    values: Callable[[pd.DataFrame], list[Values]]


# -- across wordings -------------------------------------------------------------------------

#: The measures over all wordings' records, each row's wording, and each row's cluster.
WordingRows = tuple[list[WordingMeasure], np.ndarray, np.ndarray]


@dataclass(frozen=True)
class AcrossWordings:
    """The probe's bias measures over all its wordings (`biasscope.core.wordings`): the
    measures with each row's wording and the cluster it is resampled with, and a readable
    name per measure for the verdict sentences."""

    rows: Callable[[pd.DataFrame], WordingRows]
    labels: Mapping[str, str]


# -- the registry entry ----------------------------------------------------------------------

#: The facets of an entry, each with the words a sentence says it in ("has no ...").
FACETS = {"detector": "detector", "wordings": "wordings",
          "unit_metrics": "unit metrics of its own", "step_statistics": "statistics over steps",
          "panels": "report panels", "compare": "measures to compare",
          "across_wordings": "measures across wordings", "performance": "performance series"}


@dataclass(frozen=True, kw_only=True)
class ProbeInfo:
    """One registered probe: how to load it, what it can be asked, needs and measures, and each
    facet the jobs and the report ask it for (or why it has none)."""

    name: str
    load: ProbeFactory
    requests: tuple[str, ...]
    data: str | None
    metrics: tuple[str, ...]
    about: str
    detector: Any | Absent
    wordings: Wordings | Absent
    unit_metrics: UnitMetrics | Absent
    step_statistics: StepStatistics | Absent
    panels: Panels | Absent
    compare: Compare | Absent
    across_wordings: AcrossWordings | Absent
    performance: Performance | Absent
    #: The keyword of ``load`` that a selection (``--probe NAME:A,B``) fills, if it takes one.
    selection: str | None = None
    #: Whether its items depend on the seed (its loaded probe's ``seeded``): a sweep scores an
    #: unseeded probe once per checkpoint, as seed 0, so a run asks for that one unit.
    seeded: bool = True
    #: Words for the audit headline's values that ``step_statistics`` does not name (an asked
    #: probe's headline has keys of its own), so the audit's sentences name no raw key.
    headline_names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if unknown := [r for r in self.requests if r not in REQUEST_KINDS]:
            raise ValueError(f"probe {self.name}: unknown request kinds {unknown}")

    def absent(self, facet: str) -> str | None:
        """Why the probe has no ``facet`` (a sentence), or None when it has it."""
        value = getattr(self, facet)
        return f"{self.name} has no {FACETS[facet]}: {value.reason}" if isinstance(
            value, Absent) else None

    def name_of(self, key: str) -> str | None:
        """Words for the headline value ``key`` (``prefix:group`` as its prefix's, then the
        group), or None where the probe has none."""
        names = {**({} if isinstance(stats := self.step_statistics, Absent) else stats.names),
                 **self.headline_names}
        prefix, _, group = key.partition(":")
        if key in names or prefix not in names:
            return names.get(key)
        return f"{names[prefix]}, {group.replace('_', ' ')}"

    def same_of(self, key: str, confidence: float | None = 0.95) -> str | None:
        """`with_ci`'s ``same`` for the headline value ``key`` at ``confidence``
        (`StepStatistics.same`)."""
        stats = self.step_statistics
        return None if isinstance(stats, Absent) else stats.same(key, confidence)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "requests": list(self.requests), "data": self.data,
                "metrics": list(self.metrics), "about": self.about}

    def describe(self) -> str:
        """What ``biasscope probes`` says of it: what it is, asks, needs and measures."""
        data = (f"{self.data} (`biasscope data fetch {self.data}`, or --data-dir)"
                if self.data else "none (ships with biasscope)")
        select = f"\n  select:   {self.name}:<{self.selection}>" if self.selection else ""
        return (f"{self.name}: {self.about}\n  requests: {', '.join(self.requests)}\n"
                f"  data:     {data}\n  metrics:  {', '.join(self.metrics)}{select}")


def about(docstring: str | None) -> str:
    """A probe's one line for ``biasscope probes``: its docstring's first line, no full stop."""
    return (docstring or "").strip().splitlines()[0].rstrip(".")
