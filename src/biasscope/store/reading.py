"""Reading a run one unit at a time, in the order an analysis needs, never all at once.

`RunStore.iter_units` gives every unit in file order. A report needs the units of one
training step together (the seeds of a checkpoint are averaged, models are compared at the
same step) and nothing else at the same time, so its memory stays flat in the number of
units. `unit_index` reads the key columns of every unit file (a few kilobytes each) to say
which file holds which checkpoint; `read_unit` then reads one file whole, when it is
needed, and checks it against its recorded SHA-256. The key columns read here only plan the
reading: an analysis reads every indexed file whole (`dynamics.summary.reading.read_run`), so a
changed file is refused before anything is written; each file's bytes are hashed once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from biasscope.core.errors import BiasscopeError
from biasscope.store.directory import RunStore

_KEYS = ("model", "step", "probe", "revision")


@dataclass(frozen=True)
class UnitEntry:
    """One unit file and the (model, step) pairs its rows of each probe hold (step None for
    rows without a training step), and the revisions of those without one."""

    path: Path
    checkpoints: frozenset[tuple[str, str, int | None]]  # (probe, model, step)
    stepless: frozenset[tuple[str, str, str | None]] = frozenset()  # (probe, model, revision)

    def steps(self, probe: str) -> set[int]:
        return {s for p, _, s in self.checkpoints if p == probe and s is not None}


def _unreadable(path: Path, exc: Exception) -> BiasscopeError:
    return BiasscopeError(f"records file {path} is unreadable ({type(exc).__name__}); delete it "
                          "and run the same command again to redo that unit")


#: Entries already read, by file and its stamp (size, mtime, inode): an analysis plans its
#: reading more than once (the steps, the probes), and each file's key columns are read once.
_INDEXED: dict[tuple[str, int, int, int], UnitEntry] = {}
_INDEXED_MAX = 100_000


def unit_index(store: RunStore) -> list[UnitEntry]:
    """Every unit file (in file order) with the checkpoints its rows hold, from the key columns
    alone. An unreadable file is the one-line error `RunStore.iter_units` gives."""
    entries = []
    for path in store.unit_files():
        try:
            stat = path.stat()
        except OSError as exc:
            raise _unreadable(path, exc) from None
        key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        if key not in _INDEXED:
            if len(_INDEXED) >= _INDEXED_MAX:
                _INDEXED.clear()
            _INDEXED[key] = _entry(path)
        entries.append(_INDEXED[key])
    return entries


def _entry(path: Path) -> UnitEntry:
    try:
        parquet = pq.ParquetFile(path)
        columns = [c for c in _KEYS if c in parquet.schema_arrow.names]
        keys = parquet.read(columns=columns)
        pairs = _distinct(keys, columns)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise _unreadable(path, exc) from None
    rows = [tuple(_value(pair.get(c)) for c in _KEYS) for pair in pairs]
    return UnitEntry(path, frozenset(
        (str(p), str(m), None if s is None else int(s)) for m, s, p, _ in rows),
        frozenset((str(p), str(m), None if r is None else str(r))
                  for m, s, p, r in rows if s is None))


def _distinct(keys: pa.Table, columns: list[str]) -> list[dict[str, Any]]:
    """Each distinct row of ``keys`` once, in Arrow (under half the time of pandas'
    ``drop_duplicates``). A unit's rows share one key, seen column by column without Arrow's
    grouping engine (whose import alone costs a report more than reading every key)."""
    if not columns:
        return [{}] * min(keys.num_rows, 1)
    chosen = keys.slice(0, 1) if all(len(keys.column(c).unique()) <= 1 for c in columns) \
        else keys.group_by(columns).aggregate([])
    found: list[dict[str, Any]] = chosen.to_pylist()
    return found


def _value(value: Any) -> Any:
    """A key's value, None where it is missing (null, or NaN in a float column)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def read_unit(store: RunStore, path: Path) -> pd.DataFrame | None:
    """One unit file's records, checked (its recorded SHA-256, the unit its key columns name)
    as `RunStore.read_unit` checks them; None where it was set aside."""
    return store.read_unit(path)
