"""The analysis' statistical choices, range-checked wherever they come from: a flag, a library
call, or a ``summary.json`` written by an earlier analysis."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from biasscope.core.config import percent_hint, plain_scalar, same_setting, setting, written
from biasscope.core.corrections import CORRECTIONS, Correction
from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import Levels, level_problem, resamples_problem

if TYPE_CHECKING:
    from biasscope.store.directory import RunStore


@dataclass(frozen=True)
class AnalysisConfig:
    """Statistical choices, stored with the analysis. Holm is the default correction."""

    correction: Correction = setting(
        "holm", "multiple-comparison control across checkpoints (default holm)",
        choices=CORRECTIONS)
    alpha: float = setting(0.01, "significance level (default 0.01)", parse=float)
    budget: float = setting(0.02, "performance loss allowed when recommending where to stop "
                            "(fraction of the final checkpoint's; default 0.02)", parse=float)
    confidence: float = same_setting(
        Levels, "confidence", help="confidence level of every interval of the analysis, the "
        "audit probes' included, strictly between 0 and 1 (0.99, not 99; default 0.95)")
    n_resamples: int = same_setting(
        Levels, "n_resamples", help="bootstrap resamples of every interval and test of the "
        "analysis, the audit probes' included (default 2000)")
    min_gap: float = setting(
        0.0, "smallest JSD-P gap of interest, from 0 to ½ ln 2 ≈ 0.347 (the largest possible "
        "gap): emergence needs a significant gap at least this large (default 0: "
        "significance alone)", parse=float)

    def __post_init__(self) -> None:
        for name in FIELDS:
            object.__setattr__(self, name, taken(name, getattr(self, name)))
            if reason := option_problem(name, getattr(self, name)):
                raise BiasscopeError(f"analysis setting {name} = {getattr(self, name)!r}: "
                                     f"{reason}")


#: A correct option's JSD-P lies in [0, ½ ln 2] (natural log; 0 when the model puts all its
#: mass on the answer, ½ ln 2 when it puts none), so a gap between two groups' means lies in
#: [−½ ln 2, ½ ln 2]. Appendix B of the dynamics source; tests/dynamics/test_metrics.py
#: checks both ends.
MAX_GAP = math.log(2) / 2
#: The range of any option's JSD-P part (the correct one's above; another's is p·½ ln 2, p its
#: probability) and so of a mean of them (`intervals.mean_ci`'s ``bounds``).
JSDP_RANGE = (0.0, MAX_GAP)
#: The range of the correct token's rank over the whole vocabulary: 1 (the most probable) up
#: to the vocabulary's size, which the records do not hold, so open above.
RANK_RANGE = (1.0, math.inf)
#: The smallest JSD-P gap of interest when ``min_gap`` is 0: a significant gap below it is
#: flagged, not hidden. The male and female prompts differ in one word, so even a randomly
#: initialised model has systematic gaps, significant with effect size up to ±1: up to 0.041
#: on the real WinoBias files and 0.054 on the test fixture (README, "Statistics defaults").
#: 0.1 is about twice those and 29% of the largest possible gap, ½ ln 2.
FLAG_GAP = 0.1
#: The default equivalence margin of a JSD-P gap (docs/claims.md): a fifth of `FLAG_GAP`.
JSDP_MARGIN = 0.02
#: Below this, the final performance counts as zero: a relative budget of it is undefined.
ZERO_PERFORMANCE = 1e-9
FIELDS = ("correction", "alpha", "budget", "confidence", "n_resamples", "min_gap")
FLAGS = FIELDS  # those `biasscope dynamics` and `biasscope report` take


def flag_of(name: str) -> str:
    """The flag of the analysis setting ``name`` (``--resamples`` for ``n_resamples``)."""
    meta = next(f.metadata for f in fields(AnalysisConfig) if f.name == name)
    return str(meta.get("flag") or "--" + name.replace("_", "-"))


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def taken(name: str, value: Any) -> Any:
    """``value`` as the analysis setting ``name`` takes it: a NumPy number as the Python one,
    text for a number as its flag reads it (``"0.05"`` as ``--alpha 0.05``; a value with one
    meaning is taken, as in a job's config); anything else as it is, for `option_problem`."""
    value = plain_scalar(value)
    if name in FIELDS and name != "correction" and isinstance(value, str):
        try:
            return int(value) if name == "n_resamples" else float(value)
        except ValueError:
            return value
    return value


def option_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the analysis setting ``name``; None if it can. A stored or typed
    value out of range would otherwise be repaired silently (α = 5 shown as 0.01) or crash."""
    if name not in FIELDS:
        return f"is no analysis setting; give {', '.join(FIELDS)}"
    if name == "correction":
        known = CORRECTIONS
        return None if value in known else f"must be one of {', '.join(known)}"
    if isinstance(value, str):  # text `taken` could not read as a number
        return (f"is text, not {'a whole number' if name == 'n_resamples' else 'a number'} "
                f"(give e.g. {getattr(AnalysisConfig, name)})")
    if name == "n_resamples":  # the checks `biasscope audit` and `judge` make too
        return resamples_problem(value)
    if name == "confidence":
        return level_problem(value)
    if not _real(value) or not math.isfinite(value):
        return "must be a finite number"
    bounds = {"alpha": (0.0, 1.0, False, "strictly between 0 and 1"),
              "budget": (0.0, 1.0, True, "from 0 to 1 (a fraction of the final performance)"),
              "min_gap": (0.0, MAX_GAP, True, f"from 0 to ½ ln 2 = {MAX_GAP:.4f} (the "
                          "largest JSD-P gap)")}
    low, high, closed, say = bounds[name]
    inside = low <= value <= high if closed else low < value < high
    if name != "min_gap":  # 5 for 5%: the fraction is asked
        say += percent_hint(value)
    return None if inside else f"must be {say}"


def stored_options(store: RunStore, given: Mapping[str, Any] | None = None) -> AnalysisConfig:
    """``given`` options over those of the last analysis in summary.json, over the defaults.

    A stored value that is no valid option (hand-edited, or written by an older version that
    did not check) is a one-line error naming the file and field, unless ``given`` replaces it.
    """
    if given is not None and not isinstance(given, Mapping):
        raise BiasscopeError(f"analysis: give a dict such as {{'alpha': 0.05}}, not "
                             f"{type(given).__name__} {given!r}")
    given = {name: taken(name, value) for name, value in (given or {}).items()}
    for name, value in given.items():
        if name not in FIELDS:
            raise BiasscopeError(f"analysis {name!r}: {option_problem(name, value)}")
        if reason := option_problem(name, value):
            raise BiasscopeError(f"{flag_of(name)} {written(value)}: {reason}")
    summary = store.read_json("summary.json") if store.summary_json.is_file() else {}
    previous = summary.get("analysis") if isinstance(summary, dict) else None
    previous = previous if isinstance(previous, dict) else {}
    chosen: dict[str, Any] = {}
    for name in FIELDS:
        if name in previous and name not in given:
            value = previous[name]
            if reason := option_problem(name, value):
                flag = f"pass {flag_of(name)} or " if name in FLAGS else ""
                raise BiasscopeError(
                    f"{store.summary_json}: analysis.{name} = {json.dumps(value)} {reason}; "
                    f"{flag}delete the field for the default")
            chosen[name] = value
    return AnalysisConfig(**{**chosen, **given})
