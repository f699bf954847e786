"""Runs every calibration claim of ``tests/calibration_*.py`` at full size and writes the
"Calibration" section of docs/validation.md: per printed claim and null, how often the claim
was made when false (or how often an interval covered the truth), with its simulation SE.

Each module's ``CLAIMS`` (a list of `calibration_base.Claim`) is what the tests run small;
here every claim runs ``--n-sims`` times. A claim passes when its false-claim rate is at most
α plus three simulation SEs (coverage: at least nominal minus three); the script exits 1 when
one does not, after writing the table.

Usage::

    PYTHONPATH=src python scripts/calibrate.py                  # all claims, 2000 sims each
    PYTHONPATH=src python scripts/calibrate.py --only equivalent --n-sims 500 --jobs 2
    PYTHONPATH=src python scripts/calibrate.py --dry-run        # print, write nothing

With ``--only``, the rows of other claims already in the table are kept.
"""

from __future__ import annotations

import argparse
import importlib
import math
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DOC = ROOT / "docs" / "validation.md"
HEADING = "## Calibration"
HEADER = ("| claim | null | size | nominal | measured (± simulation SE) | within 3 SE |\n"
          "| --- | --- | --- | --- | --- | --- |")


def modules() -> list[str]:
    """The calibration modules, by name (`calibration_base` defines the claim, no claims)."""
    return sorted(p.stem for p in TESTS.glob("calibration_*.py") if p.stem != "calibration_base")


def _claims_of(name: str) -> list[Any]:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    return list(importlib.import_module(name).CLAIMS)


def claims(names: Sequence[str], only: str | None) -> list[tuple[str, int, Any]]:
    """Every module's ``CLAIMS`` in module order, those matching ``only`` (case-insensitive
    text of the claim, null, size or module name), each with its module and place there (a
    worker process looks it up by those: a claim's simulation may be a closure, which does
    not pickle)."""
    out = []
    for name in names:
        for index, claim in enumerate(_claims_of(name)):
            text = f"{name} {claim.claim} {claim.null} {claim.size}".lower()
            if only is None or only.lower() in text:
                out.append((name, index, claim))
    return out


def _run(job: tuple[str, int, int, int]) -> tuple[int, int, float]:
    name, index, n_sims, seed = job
    claim = _claims_of(name)[index]
    start = time.monotonic()
    hits, n = claim.simulate(n_sims, seed)
    return hits, n, time.monotonic() - start


def row(claim: Any, hits: int, n: int) -> tuple[str, bool]:
    """The table row of one claim's result, and whether it is within 3 SEs."""
    from calibration_base import within

    ok, _ = within(claim, hits, n)
    rate = hits / n
    se = math.sqrt(rate * (1 - rate) / n)
    nominal = (f"α = {claim.nominal:g}" if claim.kind == "false-claim"
               else f"{claim.nominal:.0%} coverage")
    cells = [claim.claim, claim.null, claim.size, nominal,
             f"{rate:.3f} ± {se:.3f} ({hits} of {n})", "yes" if ok else "**no**"]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |", ok


def _key(line: str) -> str:
    """A table row's claim, null and size."""
    return "|".join(c.strip() for c in re.split(r"(?<!\\)\|", line)[1:4])


def section(rows: Sequence[str], old: str | None, n_sims: int, seed: int) -> str:
    """The Calibration section: an introduction and the table (rows of claims not run this
    time, from ``old``, kept after the new ones)."""
    ran = {_key(r) for r in rows}
    kept = [line for line in (old or "").splitlines()
            if line.startswith("| ") and not line.startswith("| claim |")
            and not line.startswith("| ---") and _key(line) not in ran]
    intro = textwrap.fill(
        "Every verdict biasscope prints is simulated under the nulls real runs meet (each row "
        "names its own): the rate at which a claim is made where it is false must be at most "
        "α plus three simulation standard errors, the coverage of an interval at least "
        "nominal minus three. The simulations are `tests/calibration_*.py` (the tests run "
        "each small); this table is their full runs, each row with the number of data sets it "
        f"simulated (rows are rerun by claim, with --only; the command below runs {n_sims} "
        f"per claim, seed {seed}):", width=96, break_on_hyphens=False)
    return "\n".join([
        HEADING, "", intro, "",
        "```", f"PYTHONPATH=src python scripts/calibrate.py --n-sims {n_sims}"
        + (f" --seed {seed}" if seed else ""), "```", "",
        HEADER, *rows, *kept, ""])


def write(doc: Path, text: str) -> None:
    """Replace the Calibration section of ``doc`` (or add it at the end)."""
    current = doc.read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", current, re.M | re.S)
    if match:
        updated = current[:match.start()] + text + ("\n" if match.end() < len(current) else "") \
            + current[match.end():]
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    doc.write_text(updated, encoding="utf-8")


def old_section(doc: Path) -> str | None:
    match = re.search(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", doc.read_text(encoding="utf-8"),
                      re.M | re.S)
    return match.group(0) if match else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-sims", type=int, default=2000, help="simulations per claim")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="run the claims whose text contains this")
    parser.add_argument("--jobs", type=int, default=1, help="claims run at once")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--dry-run", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    if args.n_sims < 10 or args.jobs < 1:
        parser.error("--n-sims must be at least 10 and --jobs at least 1")
    chosen = claims(modules(), args.only)
    if not chosen:
        parser.error(f"no claim matches --only {args.only!r}")
    jobs = [(name, index, args.n_sims, args.seed) for name, index, _ in chosen]
    rows, failed = [], 0
    with ProcessPoolExecutor(args.jobs) if args.jobs > 1 else nullcontext() as pool:
        results = pool.map(_run, jobs) if pool is not None else map(_run, jobs)
        for (_, _, claim), (hits, n, took) in zip(chosen, results):
            line, ok = row(claim, hits, n)
            rows.append(line)
            failed += not ok
            print(f"{took:7.1f} s  {line}", flush=True)
    text = section(rows, old_section(args.doc) if args.only else None, args.n_sims, args.seed)
    if not args.dry_run:
        write(args.doc, text)
        print(f"wrote the Calibration section of {args.doc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
