"""A report of a run whose analysis is already stored reuses it instead of computing it again.

The analysis (bootstraps, tests, sentences) is a function of the run's stored inputs and the
analysis settings alone, so `inputs_key` hashes exactly those: every unit file's bytes, the
units the run lost, ``run.json``, an imported ``performance.json`` (and a staged series), the
occupation statistics read, the options, biasscope's own code (every module's source, so a new
version or an edited tree never reuses an older analysis) and the versions of the libraries
whose numbers it uses. The analysed ``summary.json`` records the key (`FIELD`); a later report
whose key is equal reads that file instead of analysing again, and any change (a unit added,
rewritten or lost, other options, another version) gives another key, so the analysis is
computed and written again. The key stands beside the content it describes, written in one
atomic file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from biasscope.core.digest import file_sha256
from biasscope.core.imports import installed_version
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.analysis.occupations import Statistics
from biasscope.dynamics.analysis.performance import FILE as PERFORMANCE
from biasscope.dynamics.analysis.performance import staged_files
from biasscope.store.directory import RunStore

#: The summary.json field that holds the key of the inputs its analysis was computed from.
FIELD = "analysed_from"
#: Libraries whose versions can change the numbers (bootstrap draws, test statistics).
LIBRARIES = ("numpy", "scipy", "pandas")
#: biasscope's package folder, whose sources `code_digest` hashes.
PACKAGE = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes (`file_sha256`: an unreadable one is a one-line error);
    None if absent."""
    return file_sha256(path) if path.exists() else None


def code_digest(package: Path) -> str:
    """SHA-256 over the path and bytes of every module of ``package`` (3 MB: milliseconds),
    its ``__init__.py`` and so its version included."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def inputs_key(store: RunStore, options: AnalysisConfig, statistics: Statistics
               ) -> dict[str, str]:
    """What `FIELD` records: a SHA-256 over every input of the analysis of ``store`` with
    ``options``, biasscope's code included, and one over the occupation ``statistics``' shares
    (kept apart: see `stored`)."""
    inputs = {
        "code": code_digest(PACKAGE),
        "options": asdict(options),
        "versions": {name: installed_version(name) for name in LIBRARIES},
        "units": [[path.name, _digest(path)] for path in store.unit_files()],
        "missing_units": store.missing_units(),
        "run.json": _digest(store.run_json),
        PERFORMANCE: _digest(store.root / PERFORMANCE),
    }
    if staged := staged_files(store):  # a killed call's series, read where run.json vouches
        inputs["staged"] = [[path.name, _digest(path)] for path in staged]
    shares = json.dumps(sorted(statistics.bls_pct_female.items())).encode()
    return {"sha256": hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str)
                                     .encode()).hexdigest(),
            "occupation_statistics": hashlib.sha256(shares).hexdigest()}


def stored(paths: list[Path], key: dict[str, str], statistics_from: Path | None = None
           ) -> tuple[dict[str, Any], Path] | None:
    """The first summary among ``paths`` that was analysed from inputs of this ``key``, and
    where it was; None when none was (absent, unreadable, or from other inputs). The
    occupation statistics may differ when they were read from that very summary
    (``statistics_from``, a report without --data-dir): they are the ones its analysis used,
    kept there without the occupations the run does not have."""
    for path in paths:
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            continue
        found = summary.get(FIELD) if isinstance(summary, dict) else None
        if not isinstance(found, dict) or found.get("sha256") != key["sha256"]:
            continue
        if (found.get("occupation_statistics") == key["occupation_statistics"]
                or path == statistics_from):
            return summary, path
    return None
