"""The confidence level and the bootstrap resamples of a job's analysis (``--confidence``,
``--resamples``), checked in one place for every command that takes them: ``dynamics`` and
``report`` (`biasscope.dynamics.analysis.config`), ``audit``, ``judge``, ``judge-audit``,
``counterfactual``, ``sensitivity`` and ``intervene``; where the level is too fine for the
resamples, each says so (`thin_tails`).

They change the summary alone, never what a model was asked, so a run stores them with its
summary (``summary.json``'s ``analysis``) and a later call without the flags keeps them
(`stored_levels`). NumPy is not imported here: ``--help`` reads these settings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from biasscope.core.config import percent_hint, plain_scalar, setting, written
from biasscope.core.errors import BiasscopeError

#: The fewest and most resamples an analysis takes. Below 100 no level from 80% up leaves 10
#: resamples beyond each bound (100 leave 10 at 80%), so every interval would rest on its few
#: outermost draws; above 100,000 the resamples of one item-level bootstrap stop fitting in
#: memory.
MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000
NAMES = ("confidence", "n_resamples")
#: The fewest resamples beyond each bound of a percentile bootstrap interval for its bound to
#: be read at the level chosen rather than as one draw's value: 2000 resamples leave 50 each
#: side at 95% and 10 at 99, but 1 at 99.9%.
TAIL_RESAMPLES = 10


def parse_level(text: str) -> float:
    """A level's text as its number; ``95%`` is refused pointing to 0.95, which it means."""
    if text.strip().endswith("%"):
        try:
            fraction = float(text.strip()[:-1]) / 100
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        raise ValueError(f"{text!r} is a percentage: write {round(fraction, 12):g}")
    return float(text)


def parse_count(text: str) -> int:
    """A count's text as its number (``--resamples``)."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number (give e.g. 2000)") from None


def level_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a confidence level (95 for 95% says the fraction to write)."""
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not real or not math.isfinite(value):
        return "must be a finite number"
    return None if 0 < value < 1 else f"must be strictly between 0 and 1{percent_hint(value)}"


def resamples_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a number of bootstrap resamples."""
    ok = (isinstance(value, int) and not isinstance(value, bool)
          and MIN_RESAMPLES <= value <= MAX_RESAMPLES)
    return None if ok else f"must be a whole number from {MIN_RESAMPLES} to {MAX_RESAMPLES}"


def problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the level setting ``name``; text for a number is said so."""
    if isinstance(value, str):
        what = "a whole number" if name == "n_resamples" else "a number"
        return f"is text, not {what} (give e.g. {getattr(Levels, name)})"
    return level_problem(value) if name == "confidence" else resamples_problem(value)


@dataclass(frozen=True)
class Levels:
    """The level of every interval a summary gives, and the resamples of every bootstrap."""

    confidence: float = setting(
        0.95, "confidence level of every interval of the summary, strictly between 0 and 1 "
        "(0.99, not 99; default 0.95)", parse=parse_level)
    n_resamples: int = setting(
        2000, "bootstrap resamples of every interval and test of the summary (default 2000)",
        flag="--resamples", parse=parse_count)

    def __post_init__(self) -> None:
        for name in NAMES:
            value = plain_scalar(getattr(self, name))
            object.__setattr__(self, name, value)
            if reason := problem(name, value):
                raise BiasscopeError(f"{flag_of(name)} {written(value)}: {reason}")

    def stored(self, whose: str | None = None, bootstrapped: bool = True) -> dict[str, Any]:
        """As summary.json's ``analysis`` holds them; with ``whose`` (the intervals', as
        `thin_tails` names them), also ``thin_tails``, the sentence saying that the level is
        too fine for the resamples, where it is and some interval was ``bootstrapped``
        (`biasscope.core.bootstrap.resampling`): Student's t or Wilson's rest on no
        resamples."""
        out: dict[str, Any] = asdict(self)
        if whose is not None and bootstrapped and (
                said := thin_tails(self.confidence, self.n_resamples, whose)):
            out["thin_tails"] = said
        return out


def flag_of(name: str) -> str:
    """The flag of ``name`` (``--resamples`` for ``n_resamples``)."""
    meta = next(f.metadata for f in fields(Levels) if f.name == name)
    return str(meta.get("flag") or "--" + name.replace("_", "-"))


def taken(name: str, value: Any) -> Any:
    """``value`` as the flag reads it where it is text for a number (``"0.9"``); else as it
    is, for `problem`."""
    value = plain_scalar(value)
    if isinstance(value, str):
        try:
            return int(value) if name == "n_resamples" else float(value)
        except ValueError:
            return value
    return value


def stored_levels(summary: Any, where: str | Path, given: Mapping[str, Any] | None = None
                  ) -> Levels:
    """``given`` levels over those ``summary`` (a run's summary.json as read, at ``where``;
    None where there is none) stored, over the defaults. A summary written before the levels
    were stored was at the defaults. A stored value that is no level (hand-edited) is one
    line naming the file and the field, unless ``given`` replaces it; a given one, one line
    naming its flag."""
    if given is not None and not isinstance(given, Mapping):
        raise BiasscopeError(f"analysis: give a dict such as {{'confidence': 0.9}}, not "
                             f"{type(given).__name__} {given!r}")
    given = {name: taken(name, value) for name, value in (given or {}).items()}
    for name, value in given.items():
        if name not in NAMES:
            raise BiasscopeError(f"analysis {name!r}: is no setting of this summary; give "
                                 f"{', '.join(NAMES)}")
        if reason := problem(name, value):
            raise BiasscopeError(f"{flag_of(name)} {written(value)}: {reason}")
    previous = summarised_levels(summary)
    for name, value in previous.items():
        if name not in given and (reason := problem(name, value)):
            raise BiasscopeError(f"{where}: analysis.{name} = {json.dumps(value)} {reason}; "
                                 f"pass {flag_of(name)} or delete the field for the default")
    return Levels(**{**previous, **given})


def summarised_levels(summary: Any) -> dict[str, Any]:
    """The levels ``summary`` (summary.json as read) records; {} for none."""
    analysis = summary.get("analysis") if isinstance(summary, dict) else None
    return {k: v for k, v in analysis.items() if k in NAMES} if isinstance(
        analysis, dict) else {}


def computed_levels(summary: Any) -> Levels:
    """The levels ``summary``'s entries were computed at, for a report to say: a summary from
    before the levels were stored (or with one edited into no level) was at the defaults."""
    return Levels(**{**Levels().stored(), **_valid(summarised_levels(summary))})


def same_levels(summary: Any, levels: Levels) -> bool:
    """Whether ``summary``'s entries were computed at ``levels`` (one from before the levels
    were stored: at the defaults)."""
    return computed_levels(summary) == levels


def _valid(held: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in held.items() if problem(k, v) is None}


def thin_tails(confidence: float, n_resamples: int, whose: str, setting: str | None = None
               ) -> str | None:
    """The sentence saying that ``whose`` bootstrap intervals (``n_resamples`` each) are too
    coarse at ``confidence`` (fewer than `TAIL_RESAMPLES` resamples beyond each bound), or
    None; a caller says it only where some interval is a bootstrap. The intervals stay at the
    level asked: the sentence says what their bounds rest on and the flags that would make
    them finer, rather than another level being used in its place without a word.
    ``setting``: where the resamples are set besides ``--resamples``, said after it
    (dynamics' "the analysis' n_resamples")."""
    from biasscope.core.numbers import level_of  # NumPy: not for `--help`, which reads these

    beyond = n_resamples * (1 - confidence) / 2
    if beyond >= TAIL_RESAMPLES:
        return None
    level = level_of(confidence)
    enough = math.ceil(2 * TAIL_RESAMPLES / (1 - confidence))
    also = f" ({setting})" if setting else ""
    more = (f"give --resamples {enough}{also} or more, or "
            if enough <= MAX_RESAMPLES else "")
    return (f"At the {level} confidence level, {whose} bootstrap intervals of {n_resamples} "
            f"resamples leave {beyond:.3g} beyond each bound (at least {TAIL_RESAMPLES} "
            f"wanted), so each bound is one of the few outermost draws, not an estimate of the "
            f"{level} limit: read them as rough, or {more}choose a lower --confidence.")


def said_thin(summary: Any) -> str | None:
    """The `thin_tails` sentence ``summary`` (summary.json as read) stores in its
    ``analysis``, for a command to say on stderr too; None for none."""
    analysis = summary.get("analysis") if isinstance(summary, dict) else None
    said = analysis.get("thin_tails") if isinstance(analysis, dict) else None
    return said if isinstance(said, str) else None
