"""Units, the unit of work and storage of a run, and how a unit file says which it holds.

A checkpoint's unit is keyed by the checkpoint's identity, never by its label alone, and its
records carry their own key columns, so a unit file copied or swapped onto another unit's
name is recognised and redone instead of counted twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

_READABLE = 120  # characters of a key's readable part: names stay far below 255 bytes


@dataclass(frozen=True)
class Unit:
    """``checkpoint`` is the identity of the weights scored (see ``Checkpoint.identity``);
    ``model`` is their label. Units without one (audit, sensitivity, and dynamics runs made
    before identities) are keyed by label and revision."""

    model: str
    revision: str | None
    probe: str
    seed: int
    step: int | None = None
    checkpoint: str | None = None

    @property
    def key(self) -> str:
        """A file-safe, collision-free name: readable parts plus a hash of the exact ones."""
        if self.checkpoint is None:
            exact = json.dumps([self.model, self.revision, self.probe, self.seed])
            digest = hashlib.sha256(exact.encode()).hexdigest()[:10]
        else:
            exact = json.dumps([self.checkpoint, self.probe, self.seed])
            digest = hashlib.sha256(exact.encode()).hexdigest()[:16]
        parts = [self.model.replace("/", "--"), self.revision or "main", self.probe,
                 f"seed{self.seed}"]
        safe = "__".join(re.sub(r"[^A-Za-z0-9._=-]+", "_", p) for p in parts)
        if safe.startswith("."):  # a hidden file, taken for a temp file and never read
            safe = "_" + safe[1:]
        return f"{safe[:_READABLE]}__{digest}"


def holds_other(data: bytes, unit: Unit) -> str | None:
    """Which key column of a unit file disagrees with ``unit`` (``column=value``), or None."""
    import pyarrow.parquet as pq

    wanted: dict[str, object] = {"model": unit.model, "probe": unit.probe}
    if unit.checkpoint is not None:
        wanted |= {"revision": unit.revision, "step": unit.step, "seed": unit.seed,
                   "checkpoint": unit.checkpoint}
    present = [c for c in wanted if c in pq.read_schema(io.BytesIO(data)).names]
    if not present:
        return None
    table = pq.read_table(io.BytesIO(data), columns=present)
    for column in present:
        values = set(table.column(column).unique().to_pylist())
        if values - {wanted[column]}:
            return f"{column}={sorted(values - {wanted[column]}, key=str)[0]!r}"
    return None


def row_count(data: bytes) -> int:
    """The records a unit file holds, from its parquet footer (no column is read)."""
    import pyarrow.parquet as pq

    return int(pq.read_metadata(io.BytesIO(data)).num_rows)


def records_of(data: bytes) -> pd.DataFrame:
    """A unit file's records, as ``pandas.read_parquet`` gives them, in half its time on a
    unit of a few thousand rows: the file is read by ``pyarrow`` alone, in one thread (no
    dataset layer, no thread pool for a few column chunks)."""
    import pyarrow.parquet as pq

    frame: pd.DataFrame = pq.ParquetFile(io.BytesIO(data)).read(use_threads=False).to_pandas(
        use_threads=False)
    return frame


def unit_in(frame: pd.DataFrame) -> Unit | None:
    """The checkpoint unit a records frame says it holds; None for other units (audit,
    sensitivity, runs before identities). Rows of several units give a unit no file is named
    after."""
    columns = ("model", "revision", "probe", "seed", "step", "checkpoint")
    if frame.empty or not set(columns) <= set(frame.columns):
        return None
    if any(frame[c].nunique(dropna=False) != 1 for c in columns):
        return Unit("several-units", None, "", -1, checkpoint="")  # matches no file name
    import pandas as pd

    head: dict[str, Any] = {c: None if pd.isna(frame[c].iloc[0]) else frame[c].iloc[0]
                            for c in columns}
    return Unit(str(head["model"]), None if head["revision"] is None else str(head["revision"]),
                str(head["probe"]), int(head["seed"]),
                None if head["step"] is None else int(head["step"]),
                None if head["checkpoint"] is None else str(head["checkpoint"]))
