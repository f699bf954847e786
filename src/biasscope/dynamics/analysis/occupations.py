"""The model's gender preference per occupation against the share of women in it, as the U.S.
Bureau of Labor Statistics reported it and the Winogender schemas published it
(``winogender/occupations-stats.tsv``, pinned in `biasscope.data.sources`).

Matching rule: a WinoBias occupation matches the row whose ``occupation`` equals its name in
lower case. No aliases: the near misses (WinoBias "chief" against "chef", "construction
worker" against "worker") are different jobs, so they are reported as unmatched rather than
guessed. The statistics are read, never downloaded, by a report: without the file the report
says how to get it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from biasscope.core.bootstrap import block_statistics
from biasscope.core.errors import DataError
from biasscope.core.imports import lazy
from biasscope.core.jsonl import read_text
from biasscope.core.numbers import p_is, resampled_ci
from biasscope.core.ranktests import rank_rows
from biasscope.data.sources import SOURCES, cache_dir, data_path, resolve_data_dir

SOURCE, NAME = "winogender", "occupations-stats.tsv"
COLUMNS = ("occupation", "bergsma_pct_female", "bls_pct_female", "bls_year")
sps = lazy("scipy.stats")  # imported at first use


@dataclass(frozen=True)
class Statistics:
    """Share of women (%) per lower-case occupation, or why there is none."""

    bls_pct_female: dict[str, float] = field(default_factory=dict)
    bls_year: dict[str, int] = field(default_factory=dict)
    path: str | None = None
    unavailable: str | None = None
    reused: bool = False  # the figures a previous analysis stored (`stored`), not the file


def stored(section: Any) -> Statistics | None:
    """The figures a previous analysis of the run kept in summary.json
    (``analysis.occupation_statistics``), or None if it had none. They are all the matched
    occupations', so the comparison comes out as it did with the file."""
    shares = section.get("bls_pct_female") if isinstance(section, dict) else None
    if not isinstance(shares, dict) or not shares or section.get("unavailable"):
        return None
    try:
        figures = {str(k).lower(): float(v) for k, v in shares.items()}
    except (TypeError, ValueError):
        return None
    path = section.get("path")
    return Statistics(figures, path=str(path) if path else None, reused=True)


def how_to_get() -> str:
    known = SOURCES[(SOURCE, NAME)]
    return (f"run `biasscope data fetch {SOURCE}` (downloads {known.url}), or pass --data-dir "
            f"with {SOURCE}/{NAME} in it")


def load(data_dir: str | os.PathLike[str] | None = None) -> Statistics:
    """The statistics from ``--data-dir`` or the cache, never the network; a missing or
    malformed file gives a `Statistics` that says why, not an error."""
    try:
        path = data_path(SOURCE, NAME, data_dir, download=False)
        text = read_text(path, error=DataError)
    except DataError as exc:
        root = resolve_data_dir(data_dir)
        where = root / SOURCE / NAME if root is not None else cache_dir() / SOURCE / NAME
        why = (f"it is neither in --data-dir / $BIASSCOPE_DATA_DIR nor in the cache (looked "
               f"for {where})" if "missing data file" in str(exc) else f"{exc}")
        return Statistics(unavailable=f"{why}; {how_to_get()}")
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    if not rows or not set(COLUMNS) <= set(rows[0]):
        return Statistics(path=str(path), unavailable=(
            f"{path} has no columns {', '.join(COLUMNS)}; {how_to_get()}"))
    shares, years = {}, {}
    for row in rows:
        try:
            share = float(row["bls_pct_female"])
        except (TypeError, ValueError):
            continue
        if math.isfinite(share):
            name = str(row["occupation"]).strip().lower()
            shares[name] = share
            year = str(row.get("bls_year") or "").strip()
            if year.isdigit():
                years[name] = int(year)
    return Statistics(shares, years, str(path))


def for_run(summary_json: Path, data_dir: str | os.PathLike[str] | None) -> Statistics:
    """The statistics from ``data_dir`` (else $BIASSCOPE_DATA_DIR or the cache); without
    ``data_dir`` and the file, those the run's last analysis used (`stored`, from its
    ``summary_json``): a report must not drop a comparison the run had for want of a flag."""
    found = load(data_dir)
    if data_dir is not None or not found.unavailable:
        return found
    try:
        previous = json.loads(summary_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return found
    analysis = previous.get("analysis") if isinstance(previous, dict) else None
    section = analysis.get("occupation_statistics") if isinstance(analysis, dict) else None
    return stored(section) or found


def fewest_for_interval(confidence: float) -> int:
    """The fewest pairs for which ρ gets an interval and a p-value: those where even a perfect
    ranking could be told from chance at the interval's level (exact permutation test, two
    sided: p = 2/n!; 5 pairs at 95 %, 6 at 99 %). Below that the bootstrap's few distinct
    resamples give ρ = ±1 "to ±1" and the t approximation p = 0: certainty from 3 or 4
    occupations, which no statistic can give."""
    n = 3
    while 2 / math.factorial(n) >= 1 - confidence:
        n += 1
    return n


def spearman(x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int,
             seed: int = 0) -> dict[str, Any]:
    """Spearman's ρ of paired values with a percentile bootstrap CI over the pairs
    (occupations resampled with replacement; resamples where a side is constant skipped);
    the estimate alone, ``too_few`` set, below `fewest_for_interval` pairs."""
    n = len(x)
    out: dict[str, Any] = {"estimate": None, "low": None, "high": None, "p_value": None, "n": n}
    if n < 3:
        return out
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # ρ is undefined, not 0: say so, not a warning
        out["constant"] = True
        return out
    result = sps.spearmanr(x, y)
    out["estimate"] = float(result.statistic)
    if n < fewest_for_interval(confidence):
        out["too_few"] = True
        return out
    out["p_value"] = float(result.pvalue)
    rho = np.concatenate(block_statistics(_rho, [x, y], n_resamples,
                                          np.random.default_rng(seed)))
    ok = rho[np.isfinite(rho)]
    if ok.size >= n_resamples / 2:
        tail = 100 * (1 - confidence) / 2
        out["low"], out["high"] = (float(v) for v in np.percentile(ok, [tail, 100 - tail]))
    return out


#: Cells of a block `_rho` ranks at once: its rows' ranks and their temporaries (about ten
#: arrays of this many) stay a few MiB beside the block (`rankdata` of the whole block held
#: several copies of it: 8.4 blocks at its peak, 3 now).
_RANKED_CELLS = 1 << 15


def _rho(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of ``x`` and ``y`` (NaN where a row is constant), ranked a
    few rows at a time into two reused buffers (`rank_rows`: ``rankdata``'s ranks, so the
    numbers are its numbers bit for bit)."""
    rows, n = x.shape
    rho = np.empty(rows, dtype=np.float64)
    step = max(1, _RANKED_CELLS // max(n, 1))
    buffers = np.empty((2, min(step, rows), n), dtype=np.float64)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        rx = rank_rows(x[start:stop], buffers[0, :stop - start])
        ry = rank_rows(y[start:stop], buffers[1, :stop - start])
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho[start:stop] = (rx * ry).sum(axis=1) / np.sqrt((rx ** 2).sum(axis=1)
                                                              * (ry ** 2).sum(axis=1))
    return rho


def compare(occupations: list[dict[str, Any]], statistics: Statistics, confidence: float,
            n_resamples: int, preference: str = "not-referenced/lp_diff") -> dict[str, Any]:
    """Spearman's ρ between the model's preference (male − female) and the share of women,
    over the matched occupations; a stereotyped model gives a negative ρ."""
    pairs = [(statistics.bls_pct_female[str(o["occupation"]).lower()],
              float(o[preference]["estimate"])) for o in occupations
             if str(o["occupation"]).lower() in statistics.bls_pct_female
             and (o.get(preference) or {}).get("estimate") is not None]
    x = np.array([p[0] for p in pairs], dtype=np.float64)
    y = np.array([p[1] for p in pairs], dtype=np.float64)
    return {"preference": preference, "spearman": spearman(x, y, confidence, n_resamples)}


def matching(names: list[str], statistics: Statistics) -> dict[str, list[str]]:
    matched = [n for n in names if n.lower() in statistics.bls_pct_female]
    return {"matched": matched, "unmatched": [n for n in names if n not in matched]}


def sentence(model: str, step: int, result: dict[str, Any], confidence: float,
             unmatched: list[str], several: bool) -> str:
    rho = result["spearman"]
    where = f" at step {step}" if several else ""
    if rho["estimate"] is None:
        return (f"{model}{where}: too few occupations match the labour statistics "
                f"({rho['n']}) for a correlation.")
    if rho.get("too_few"):
        ci = f"too few occupations for an interval (n={rho['n']})"
    else:
        ci = ("no CI" if rho["low"] is None else
              resampled_ci(rho["low"], rho["high"], "+.2f", confidence))
    missing = ", ".join(unmatched) if unmatched else "none"
    low, high, p = rho.get("low"), rho.get("high"), rho.get("p_value")
    shown = p is not None and p < 1 - confidence and low is not None and high is not None
    if shown and high < 0:
        how = "tracks the share of women (U.S. BLS)"
    elif shown and low > 0:
        how = "runs against the share of women (U.S. BLS)"
    else:  # an interval that holds 0, a test that does not reject, or neither: not shown
        how = "is not shown to follow the share of women (U.S. BLS)"
    test = "" if p is None else f", {p_is(p)}"
    return (f"{model}{where}: across {rho['n']} occupations, the gender preference where the "
            f"sentence gives no gender {how}: Spearman ρ = {rho['estimate']:+.2f} ({ci}{test}; "
            f"negative: the more women in the job, the more the model leans female). No BLS "
            f"figure for: {missing}.")
