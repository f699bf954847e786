"""One number format for every report: fixed-point decimals, as many as the uncertainty
supports.

A value with a confidence interval is written to two significant digits of the interval's
half-width (the estimate and both bounds to the same decimal place), so ``-0.06521 ±
0.0001055`` and ``0 ± 0`` read as ``-0.0652`` and ``0``; a value without one to three
significant digits. No exponent notation: ``1.765e-05`` is ``0.0000177``. p-values get two
significant digits and a floor (``< 0.0001``), since smaller ones differ only in how far the
test's approximations hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

MAX_DECIMALS = 10
P_FLOOR = 1e-4


def plural(n: int, word: str) -> str:
    """``1 checkpoint``, ``2 checkpoints``: a count with its noun."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def plain(value: Any) -> Any:
    """A number as JSON holds it: numpy scalars as Python ones, NaN and infinities as None."""
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def json_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as JSON holds them (`plain` values; NA and NaN as None), every float
    kept whole: pandas' ``to_json`` rounds to 10 decimals, which wrote a p-value of 1e-15 as
    0 and a report then read it as smaller than a double holds."""
    from pandas import NA, NaT  # a table is given: pandas is loaded

    return [{str(k): None if v is NA or v is NaT else plain(v) for k, v in row.items()}
            for row in table.to_dict(orient="records")]


def finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def decimals(value: float, digits: int = 3) -> int:
    """Decimal places that show ``digits`` significant digits of ``value``."""
    if value == 0:
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    places = min(MAX_DECIMALS, max(0, digits - 1 - magnitude))
    # Rounding can carry into the next power of ten (0.9996 to two digits is 1.0, not 1.00):
    # one place fewer, so that a column holds "1.0" once, not "1.00" beside "1.0".
    rounded = round(abs(value), places)
    if places > 0 and rounded > 0 and math.floor(math.log10(rounded)) > magnitude:
        places -= 1
    return places


def ci_decimals(low: Any, high: Any) -> int | None:
    """Decimal places for two significant digits of the interval's half-width (None: no
    usable interval, or one of no width: 0.30000000000000004 to 0.3 would ask for 17)."""
    if not (finite(low) and finite(high)) or high <= low or _collapsed(low, high):
        return None
    return decimals((high - low) / 2, 2)


def _collapsed(low: Any, high: Any) -> bool:
    """An interval of no width up to rounding (every value alike)."""
    return bool(finite(low) and finite(high)
                and 0 <= high - low <= 1e-9 * max(abs(low), abs(high)))


def _fixed(value: float, places: int, signed: bool) -> str:
    text = f"{value:{'+' if signed else ''},.{places}f}"
    if float(text.replace(",", "")) == 0:  # "-0.000" and "+0": zero has no sign
        text = text.lstrip("+-")
    return text


def num(value: Any, places: int | None = None, signed: bool = False) -> str:
    """``value`` to ``places`` decimals, else to three significant digits; "n/a" if it is no
    finite number (callers should rather leave the sentence out)."""
    if not finite(value):
        return "n/a"
    if float(value).is_integer() and places is None:
        return _fixed(float(value), 0, signed)
    return _fixed(float(value), decimals(float(value)) if places is None else places, signed)


def with_ci(value: Any, low: Any, high: Any, confidence: float | None = 0.95,
            signed: bool = False, extra: str = "", unit: str = "", same: str | None = None
            ) -> str:
    """``value (95% CI low to high)`` at the interval's precision (one of no width at the
    value's); ``value`` alone when there is no interval. ``extra`` goes inside the brackets
    after the interval; ``unit`` (``%``) follows each number. ``same``: what an interval of
    no width means for the caller's kind of interval, in its place ("every one of the 12
    values is {value}; no interval", ``{value}`` the value as written): "0 (95% CI 0 to 0)"
    read as a misprint, or as certainty. Without it, such an interval is given as any."""
    places = ci_decimals(low, high)
    level = f"{level_of(confidence)} CI " if confidence is not None else ""
    if places is None and finite(value) and _collapsed(low, high):  # said, as any interval
        places = 0 if float(value).is_integer() else decimals(float(value))
        if same is not None:
            shown = num(value, places, signed) + unit
            return f"{shown} ({same.format(value=shown)}{f'; {extra}' if extra else ''})"
    if places is None:
        return num(value, signed=signed) + unit + (f" ({extra})" if extra else "")
    tail = f"; {extra}" if extra else ""
    return (f"{num(value, places, signed)}{unit} ({level}{num(low, places, signed)}{unit} to "
            f"{num(high, places, signed)}{unit}{tail})")


def level_of(confidence: float) -> str:
    """A confidence level in percent as it was chosen: 0.95 is "95%", 0.999 "99.9%" (not
    rounded to "100%", which no interval is)."""
    return f"{100 * float(confidence):.6g}%"


def resampled_same(confidence: float | None = 0.95) -> str:
    """`with_ci`'s ``same`` for a percentile bootstrap interval, in `resampled_ci`'s words:
    bounds of one value mean that at least the interval's share of resamples gave it."""
    return f"at least {level_of(confidence or 0.95)} of resamples gave {{value}}"


def ci_cell(low: Any, high: Any, places: int | None = None, same: str | None = None) -> str:
    """A table's interval cell, ``low to high`` at ``places``; one of no width, where ``same``
    is given (`with_ci`'s, ``{value}`` the bound), in its words: "1 to 1" read as a misprint."""
    if same is not None and finite(low) and _collapsed(low, high):
        return same.format(value=num(low, places))
    return f"{num(low, places)} to {num(high, places)}"


def resampled_ci(low: Any, high: Any, shown: str | Callable[[Any], str], confidence: float,
                 same: str = "gave {value}") -> str:
    """``95% CI low to high`` of a percentile bootstrap interval, each bound written by
    ``shown`` (a format spec, ``"+.2f"``, or a function). Bounds of one value say so in words
    ("at least 95% of resamples gave +1.00", ``same`` with the bound as ``value``): "CI 167 to
    167" read as a misprint. At least that share, since every resample between the two
    percentiles agrees; the stored bounds are as they were."""
    text = shown if callable(shown) else (lambda value: format(value, shown))
    level = level_of(confidence)
    if finite(low) and finite(high) and low == high:
        return f"at least {level} of resamples {same.format(value=text(low))}"
    return f"{level} CI {text(low)} to {text(high)}"


def spread(value: Any, places: int | None) -> str:
    """A standard deviation or range beside an estimate, at the estimate's ``places`` (one
    precision in one bracket): ``< 0.001`` where a positive spread would round to 0."""
    if places is None or not finite(value):
        return num(value)
    if 0 < abs(value) < 0.5 * 10.0 ** -places:
        return f"< {num(10.0 ** -places, places)}"
    return num(value, places)


def pvalue(p: Any) -> str:
    """Two significant digits, ``< 0.0001`` below that."""
    if not finite(p):
        return "n/a"
    if p < P_FLOOR:
        return f"< {P_FLOOR:g}"
    return num(p, decimals(p, 2))


def p_is(p: Any, name: str = "p") -> str:
    """``p = 0.012`` or ``p < 0.0001``: the p-value with its relation, so a floored one does
    not read "p = < 0.0001"."""
    text = pvalue(p)
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def percent(value: Any, low: Any = None, high: Any = None, confidence: float | None = 0.95,
            signed: bool = False, extra: str = "") -> str:
    """A share or relative change in percent, with its CI when there is one: the same digits
    as ``with_ci`` on the values times 100, each number with its % sign; ``extra`` as in
    ``with_ci``."""
    if not finite(value):
        return "n/a"
    low, high = (100 * v if finite(v) else v for v in (low, high))
    return with_ci(100 * value, low, high, confidence, signed, extra, unit="%")


def setting_percent(value: Any) -> str:
    """A setting given as a share (a budget, a margin), in percent as the user gave it:
    0.02 is "2%", 0.025 "2.5%", 0.0001 "0.01%" (no rounding: it is not an estimate)."""
    return f"{100 * float(value):g}%" if finite(value) else "n/a"


def entry_with_ci(entry: Mapping[str, Any] | None, confidence: float | None = 0.95,
                  signed: bool = False, share: bool = False) -> str:
    """`with_ci` (``share``: `percent`) of a stored ``{estimate, low, high}`` entry."""
    entry = entry or {}
    show = percent if share else with_ci
    return show(entry.get("estimate"), entry.get("low"), entry.get("high"), confidence, signed)
