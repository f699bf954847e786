"""The run directory: ``run.json``, ``records/<unit>.parquet``, ``summary.json``.

A unit (model, revision, probe, seed) is the unit of work and of storage. Every file is
written to a temporary name in the same directory, flushed to disk and renamed into place,
so a killed run leaves either a whole unit file or none, and resumes without double counts.

Renames do not protect against later damage (a bad disk, a bad copy, a truncating sync), so
each unit's SHA-256 goes to ``checksums/<unit>.parquet.sha256`` (``sha256sum`` format; kept
out of ``records/`` so that folder holds only records), written after the parquet. A unit
counts as done only when it matches; a damaged one is moved aside to
``records/<unit>.parquet.corrupt-<n>`` (kept, never read) and redone.

``root`` may also be an fsspec URL (``s3://bucket/run``), so the workers of a cluster share one
run (`biasscope.store.remote`): ``root`` is then a local staging folder that every Path-based
reader uses unchanged. The remote's files are pulled into it on construction and by
``refresh``, a unit missing there is pulled by ``has``, each unit written is uploaded, parquet
then checksum, and other files are uploaded by ``publish``. ``file://`` is a plain local path.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import warnings
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasscope.core.errors import BiasscopeError
from biasscope.store import files as store_files
from biasscope.store.files import (
    move_aside,
    remove_stale_temp_files,
    write_bytes,
    write_error,
)
from biasscope.store.remote import Remote, is_remote
from biasscope.store.units import Unit, holds_other, records_of, row_count, unit_in

if TYPE_CHECKING:  # imported where records are read: a report reusing its analysis reads none
    import pandas as pd

RECORDS = "records"
CHECKSUMS = "checksums"
ID_FILE = ".run.id"  # a dot file, as the lock: never taken for a run file, never uploaded
_UNIT_NAME = re.compile(r"__[0-9a-f]{10}(?:[0-9a-f]{6})?\.parquet$")  # see Unit.key


class CorruptUnitWarning(UserWarning):
    """A unit file failed its checksum, or holds another unit's records, and was moved aside
    to be redone."""


def _reads_as_parquet(data: bytes) -> bool:
    import pyarrow.parquet as pq

    try:
        pq.read_table(io.BytesIO(data))
    except Exception:  # pyarrow raises several types for a damaged file
        return False
    return True


# The run.json fields every reader relies on, with the JSON types biasscope writes there.
_RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "kind": (str,), "schema": (str,), "settings": (dict,), "versions": (dict,),
    "seeds": (list,), "checkpoints": (list,), "limit": (int, type(None))}
_RUN_ITEMS: dict[str, type | tuple[type, ...]] = {"seeds": int, "checkpoints": dict}


def run_dir(text: str) -> str:
    """``text`` if it can name a run directory (or an fsspec URL): refused now, in one line, if
    a file stands where the directory or one of its parents should be."""
    if not text.strip():
        raise BiasscopeError("give a directory")
    if is_remote(text):
        return text
    path = Path(text.removeprefix("file://")).expanduser()
    for place in (path, *path.parents):
        try:
            if not place.exists():
                continue
        except OSError as exc:  # a name too long for the file system, say
            raise BiasscopeError(f"{text}: {exc.strerror or exc}") from None
        if not place.is_dir():
            what = "is a file" if place == path else f"is inside the file {place}"
            raise BiasscopeError(f"{text} {what}: give a directory")
        break
    return text


class RunStore:
    """One run directory. Safe to share between processes: units never overlap."""

    def __init__(self, root: str | Path) -> None:
        self.remote: str | None = None  # the fsspec URL of a remote run, else None
        self._mirror: Remote | None = None
        if is_remote(root):
            self._mirror = Remote(str(root))
            self.remote, root = self._mirror.url, self._mirror.staging
        elif isinstance(root, str) and root.startswith("file://"):
            root = root.removeprefix("file://")
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise BiasscopeError(f"{self.root} is a file, not a run directory: give the run's "
                                 "folder")
        self.records_dir = self.root / RECORDS
        self.checksums_dir = self.root / CHECKSUMS
        # key -> (size, mtime_ns, rows) of a file already verified: `has` hashes each file once.
        self._verified: dict[str, tuple[int, int, int]] = {}
        # The token in RUN/.run.id when this process first wrote there: a folder deleted and
        # made again under the same name (a rerun, perhaps with other settings) gets another
        # token, and nothing more of this run may land in it. (Inodes are reused: not those.)
        self._identity: str | None = None
        # The run files a call watches (`run_json.unsettled`: run.json, and the files beside
        # it), each as this call last left it (None: absent) while no other call has written
        # it since the call began (`wrote`); one another call wrote leaves: a call that stops
        # puts back only its own.
        self.own: dict[Path, bytes | None] = {}
        self.refresh()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem of a remote run, else None."""
        return self._mirror.fs if self._mirror else None

    def _relative(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.root.resolve()).as_posix()

    def refresh(self) -> None:
        """Copy the remote's run files into staging: JSON files, units and their checksums
        (those other workers wrote since, too). A no-op for a local run."""
        if self._mirror is None:
            return
        for relative, size in self._mirror.files().items():
            folder, _, base = relative.rpartition("/")
            wanted = ((folder == "" and base.endswith(".json"))
                      or (folder == RECORDS and base.endswith(".parquet"))
                      or (folder == CHECKSUMS and base.endswith(".parquet.sha256")))
            if not wanted or base.startswith("."):
                continue
            with contextlib.suppress(OSError):
                if (self.root / relative).stat().st_size == size and folder:
                    continue  # a unit file is never rewritten in place: same size, same file
            self._pull(relative)

    def pull(self, relative: str) -> bool:
        """Refresh one file of a remote run from the remote (False: it has none; a local run:
        always False)."""
        return self._pull(relative)

    def _pull(self, relative: str) -> bool:
        """Copy one remote file into staging; False if the remote has no such file."""
        data = self._mirror.pull(relative) if self._mirror else None
        if data is None:
            return False
        write_bytes(self.root / relative, data)
        return True

    def publish(self, path: Path) -> None:
        """Upload one staged file of a remote run (a no-op for a local run)."""
        if self._mirror is not None:
            self._mirror.push(self._relative(path), Path(path).read_bytes())

    def _folder_token(self) -> str | None:
        """The run folder's token (made on first use: the first writer's wins); None when the
        folder is missing or read-only."""
        path = self.root / ID_FILE
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            return path.read_text() or None
        if not self.root.is_dir():
            return None
        token = secrets.token_hex(8)
        mine = path.with_name(f"{ID_FILE}.{token}")
        try:
            mine.write_text(token)
            with contextlib.suppress(FileExistsError):
                os.link(mine, path)  # exclusive: of two first writers, one token wins
            mine.unlink()
            return path.read_text() or None
        except OSError:
            return None

    def check_same_folder(self) -> None:
        """Raise if the run's folder was deleted or replaced since this process first wrote
        into it: the units, ``run.json`` and summary written after that would otherwise
        describe another run (or recreate a folder without a ``run.json``)."""
        token = self._folder_token()
        if self._identity is None:
            self._identity = token
        elif token != self._identity:
            raise BiasscopeError(
                f"{self.root} was deleted or replaced while this run was writing to it; this "
                "process stopped without writing more. Rerun the command to redo what is "
                "missing (one process per run folder at a time while you delete it)")

    def wrote(self, path: Path, was: bytes | None) -> None:
        """``path`` (a file `own` watches) was just written or removed, under the run's lock,
        over ``was`` (None: absent): still this call's alone where it found the file as this
        call left it; another call's write in between makes it theirs too, for good."""
        if path not in self.own:
            return
        if self.own[path] == was:
            self.own[path] = path.read_bytes() if path.is_file() else None
        else:
            del self.own[path]

    def forget_identity(self) -> None:
        """Forget the folder's token this process saw: a first call that stored nothing took
        away the ``.run.id`` it made, and the next call here is a first one again."""
        self._identity = None

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    def unit_path(self, unit: Unit) -> Path:
        return self.records_dir / f"{unit.key}.parquet"

    def checksum_path(self, unit: Unit) -> Path:
        return self.checksums_dir / f"{unit.key}.parquet.sha256"

    def has(self, unit: Unit, rows: int | None = None) -> bool:
        """Whether the unit is done: its file exists, matches its checksum, its own key
        columns (model, probe; for a checkpoint's unit also revision, step, seed, checkpoint)
        say it is this unit, and it holds ``rows`` records where the caller knows how many the
        unit asks (one per item).

        A damaged, misplaced or short file is quarantined (with a CorruptUnitWarning) so the
        unit is redone. A file without a checksum (older biasscope, or killed between the two
        writes) is accepted if it reads as parquet and passes those checks (else a unit cut
        short by a copy or a sync would pass as finished), and its checksum is recorded then.
        """
        path = self.unit_path(unit)
        if self._mirror is not None and not path.exists():  # pulled if the remote has it
            if not self._pull(self._relative(path)):
                return False
            self._pull(self._relative(self.checksum_path(unit)))
        try:
            stat = path.stat()
        except FileNotFoundError:
            return False
        known = self._verified.get(unit.key)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns) and (
                rows is None or known[2] == rows):
            return True
        data = path.read_bytes()
        actual = hashlib.sha256(data).hexdigest()
        expected = self._recorded(path)
        if expected is None and not _reads_as_parquet(data):
            self._quarantine(unit, "unreadable and has no checksum")
            return False
        if expected is not None and expected != actual:
            self._quarantine(unit, f"SHA-256 {actual[:12]} is not the recorded {expected[:12]}")
            return False
        if (other := holds_other(data, unit)) is not None:  # swapped or copied over
            self._quarantine(unit, f"it holds another unit's records: {other}")
            return False
        held = row_count(data)
        if rows is not None and held != rows:
            self._quarantine(unit, f"it holds {held} records, the unit asks {rows}")
            return False
        if expected is None:  # a read-only run can still be checked; a later writer records it
            with contextlib.suppress(BiasscopeError):
                self._write_checksum(unit, actual)
        self._verified[unit.key] = (stat.st_size, stat.st_mtime_ns, held)
        return True

    def write_unit(self, unit: Unit, records: pd.DataFrame) -> Path:
        """Write the parquet, then its checksum: a unit without a valid pair is not done."""
        self.check_same_folder()
        path = self.unit_path(unit)
        data = records.to_parquet(None, index=False)
        try:
            store_files.atomic_write(path, lambda h: h.write(data))
        except OSError as exc:
            raise write_error(path, exc) from None
        try:
            self._write_checksum(unit, hashlib.sha256(data).hexdigest())
        except BiasscopeError:
            path.unlink(missing_ok=True)  # half a unit would be adopted unchecked next time
            raise
        try:
            self.publish(path)
            self.publish(self.checksum_path(unit))
        except BiasscopeError:  # not shared yet: redo it rather than trust the staged copy
            path.unlink(missing_ok=True)
            self.checksum_path(unit).unlink(missing_ok=True)
            raise
        stat = path.stat()
        self._verified[unit.key] = (stat.st_size, stat.st_mtime_ns, len(records))
        return path

    def _recorded(self, path: Path) -> str | None:
        """The SHA-256 recorded for unit file ``path``; None: none, or a damaged record."""
        try:
            return (self.checksums_dir / f"{path.name}.sha256").read_text().split()[0]
        except (FileNotFoundError, UnicodeDecodeError, IndexError):
            return None

    def read_unit(self, path: Path) -> pd.DataFrame | None:
        """One unit file's records for analysis, its bytes read once: refused in one line if
        they no longer match their recorded SHA-256 (a report must neither use nor silently
        drop them; a rerun's `has` sets the unit aside and redoes it), read as they are where
        no checksum was recorded (older runs); None if it holds another unit (set aside)."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BiasscopeError(f"records file {path}: cannot read ({exc.strerror})") from None
        expected = self._recorded(path)
        if expected is not None and (actual := hashlib.sha256(data).hexdigest()) != expected:
            raise BiasscopeError(
                f"records file {path} changed after it was written (SHA-256 {actual[:12]}, "
                f"recorded {expected[:12]}): run the same command that scored it again to "
                "redo that unit")
        try:
            frame = records_of(data)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise BiasscopeError(
                f"records file {path} is unreadable ({type(exc).__name__}); delete it and "
                "run the same command again to redo that unit") from None
        if (named := unit_in(frame)) is not None and f"{named.key}.parquet" != path.name:
            self.set_aside(path, f"it holds the records of {named.key}")
            return None
        return frame

    def _write_checksum(self, unit: Unit, digest: str) -> None:
        write_bytes(self.checksum_path(unit), f"{digest}  {unit.key}.parquet\n".encode())

    def _quarantine(self, unit: Unit, why: str) -> None:
        self._verified.pop(unit.key, None)
        self.set_aside(self.unit_path(unit), why)

    def set_aside(self, path: Path, why: str) -> None:
        """Move a damaged or misplaced unit file aside: never read again, kept for inspection."""
        aside = move_aside(path, "corrupt")
        (self.checksums_dir / f"{path.name}.sha256").unlink(missing_ok=True)
        warnings.warn(f"records file {path} cannot be trusted ({why}); moved to "
                      f"{aside.name}, the unit will be redone", CorruptUnitWarning, stacklevel=4)

    def retire(self, unit: Unit) -> None:
        """Move a finished unit aside to ``<unit>.parquet.stale-<n>`` (kept, never read), so
        it is redone: its checkpoint's weights changed since it was scored."""
        path = self.unit_path(unit)
        if path.exists():
            move_aside(path, "stale")
        self.checksum_path(unit).unlink(missing_ok=True)
        self._verified.pop(unit.key, None)
        if self._mirror is not None:  # else `has` would pull the old unit back
            self._mirror.remove(self._relative(self.checksum_path(unit)))
            self._mirror.remove(self._relative(path))

    def move_file(self, path: Path, to: Path) -> None:
        """Move one file of the run to ``to``, another place in the run, whole (a remote run's
        is uploaded there and removed where it was): a dropped checkpoint's units are kept
        where no reader looks, not deleted."""
        try:
            to.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, to)
        except OSError as exc:
            raise write_error(to, exc) from None
        self._verified.pop(path.name.partition(".parquet")[0], None)
        if self._mirror is not None:
            self.publish(to)
            self._mirror.remove(self._relative(path))

    def remove_file(self, path: Path) -> None:
        """Delete one file of the run (a remote run's there too) that no longer says anything:
        one that is gone already is fine."""
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise write_error(path, exc) from None
        if self._mirror is not None:
            self._mirror.remove(self._relative(path))

    def rekey(self, old: Unit, new: Unit) -> None:
        """Move a finished unit to another key (a run made before checkpoint identities)."""
        if self.unit_path(new).exists():
            self.set_aside(self.unit_path(old), f"{new.key} is there already")
            return
        try:
            os.replace(self.unit_path(old), self.unit_path(new))
        except OSError as exc:
            raise write_error(self.unit_path(new), exc) from None
        self._write_checksum(new, hashlib.sha256(self.unit_path(new).read_bytes()).hexdigest())
        self.checksum_path(old).unlink(missing_ok=True)
        self._verified.pop(old.key, None)
        if self._mirror is not None:
            self.publish(self.unit_path(new))
            self.publish(self.checksum_path(new))
            self._mirror.remove(self._relative(self.checksum_path(old)))
            self._mirror.remove(self._relative(self.unit_path(old)))

    def read_json(self, name: str) -> dict[str, Any]:
        path = self.root / name
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BiasscopeError(f"{path} not found: is {self.root} a biasscope run?") from None
        except json.JSONDecodeError as exc:
            raise BiasscopeError(f"{path} is not valid JSON (line {exc.lineno}){self._fix(name)}"
                                 ) from None
        except (UnicodeDecodeError, RecursionError):
            raise BiasscopeError(f"{path} is not UTF-8 JSON: is {self.root} a biasscope run?"
                                 f"{self._fix(name)}") from None
        except OSError as exc:
            raise BiasscopeError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if name != "run.json":  # derived files: their readers fall back on another shape
            derived: dict[str, Any] = loaded
            return derived
        if not isinstance(loaded, dict):
            raise BiasscopeError(f"{path} holds a JSON {type(loaded).__name__}, not the object "
                                 f"biasscope writes: is {self.root} a biasscope run?"
                                 f"{self._fix(name)}")
        for field, kinds in _RUN_FIELDS.items():
            value = loaded.get(field)
            items = value if isinstance(value, list) else ()
            if field in loaded and not (isinstance(value, kinds) and all(
                    isinstance(x, _RUN_ITEMS.get(field, object)) for x in items)):
                raise BiasscopeError(f"{path}: field {field!r} has the wrong shape "
                                     f"({json.dumps(value)[:40]}); was it edited by hand?"
                                     f"{self._fix(name)}")
        return loaded

    def _fix(self, name: str) -> str:
        """What to do about a damaged ``name`` of this run (said after the error)."""
        if name == "run.json":  # it says what the run holds: nothing can rebuild it
            return (f"; restore it from a copy, or move {self.root} away and run the command "
                    "that made it again (or give that command another --out)")
        if name == "summary.json":  # a rerun rewrites it from the stored units
            return ("; move it away, then run the command that made the run again (its stored "
                    "results are kept) to rewrite it")
        return ""

    def remove_stale_temp_files(self) -> list[Path]:
        """What writers on this host killed mid-write left in the run's folders (its root,
        ``records/``, ``checksums/``); a live writer's file, and another host's, stay. No run
        file is named so (nothing reads them): a call removes them once it has passed every
        check, so that a refused one leaves --out as it found it."""
        return [path for folder in (self.root, self.records_dir, self.checksums_dir)
                for path in remove_stale_temp_files(folder)]

    def unit_files(self) -> list[Path]:
        """Unit files only: named as ``Unit.key`` names them, which leaves out temp files,
        ``.corrupt-<n>`` quarantine and anything else a user put in ``records/``."""
        return sorted(p for p in self.records_dir.glob("*.parquet") if _UNIT_NAME.search(p.name))

    def missing_units(self) -> list[str]:
        """Unit files (``<key>.parquet``) this run wrote and no longer has: deleted (their
        checksum is left) or set aside as damaged (``.corrupt-<n>``). A rerun of the same
        command scores them again; until then a report leaves them out, and says so."""
        gone = {p.name.removesuffix(".sha256") for p in self.checksums_dir.glob("*.sha256")}
        gone |= {p.name.rsplit(".corrupt-", 1)[0]
                 for p in self.records_dir.glob("*.parquet.corrupt-*")}
        return sorted(n for n in gone if _UNIT_NAME.search(n)
                      and not (self.records_dir / n).exists())

    def iter_units(self) -> Iterator[pd.DataFrame]:
        """Every unit's records, each checked as `read_unit` checks it."""
        for path in self.unit_files():
            if (frame := self.read_unit(path)) is not None:
                yield frame

    def records(self) -> pd.DataFrame:
        import pandas as pd

        frames = list(self.iter_units())
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def unit_dict(self, unit: Unit) -> dict[str, Any]:
        return {**asdict(unit), "key": unit.key}
