"""The settings of ``biasscope compare`` (`CompareConfig`) and ``biasscope power``
(`PowerConfig`), apart from the run code in `biasscope.compare.job` and `biasscope.compare.power`
(which re-export them): the commands' flags are built from these, so their ``--help`` imports
no pandas and no NumPy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biasscope.core.config import POSITIVE, PROBABILITY, check_settings, setting
from biasscope.store.directory import run_dir

if TYPE_CHECKING:
    from biasscope.core.power import Design


@dataclass(frozen=True)
class CompareConfig:
    """Two run directories, margins (``0.03`` for every measure or ``jsdp_gap=0.02``; others
    keep their defaults), α of the tests, and where the comparison goes."""

    run_a: str
    run_b: str
    margin: Sequence[str] = setting((), "equivalence margin: a number for every measure or "
                                    "MEASURE=NUMBER (repeatable); defaults in docs/claims.md",
                                    many=True, numbers=True)
    alpha: float = setting(0.05, "level of each one-sided test", check=PROBABILITY)
    out: str = setting("comparison", "directory for comparison.json and its page",
                       parse=run_dir)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class PowerConfig:
    """An effect (in the measure's units) and either ``sd`` (per-item standard deviation) or
    a ``pilot`` run; ``margin``: plan for equivalence within ±margin instead (as ``biasscope
    compare`` tests it: a plan is never below compare's "too few items" floor; from ``sd``,
    ``measure``'s, else the least of any measure's)."""

    effect: float | None = setting(None, "size of the difference to detect, in the measure's "
                                   "units", check=POSITIVE)
    sd: float | None = setting(None, "per-item standard deviation", check=POSITIVE)
    pilot: str | None = setting(None, "a finished run to plan from")
    alpha: float = setting(0.05, "significance level", check=PROBABILITY)
    power: float = setting(0.8, "the power wanted", check=PROBABILITY)
    design: Design | None = setting(None, "two independent groups, or paired items (default: "
                                    "--measure's own design, else two-groups)",
                                    choices=("two-groups", "paired"))
    margin: float | None = setting(None, "plan for equivalence within ±this, as "
                                   "compare tests it", check=POSITIVE)
    measure: str | None = setting(None, "with --sd and --margin: the measure planned for "
                                  "(e.g. flip_rate); its range sets compare's fewest items "
                                  "and the largest margin")

    def __post_init__(self) -> None:
        check_settings(self)
