"""The settings a run directory was made with, checked on every rerun into it.

A run directory is resumable: a rerun skips the units it already holds. That is only sound
when the rerun would compute the same thing, so every run kind records in ``run.json`` the
settings that determine its results (inputs by content hash, limits, models, probe options)
and ``merge_settings`` refuses a rerun that differs, naming the setting, its old and new
value, and what to do. Some settings are collections a rerun may extend (more probes, more
reward models) as long as the entries already there are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.store.files import json_safe

_ABSENT = object()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The file's SHA-256 (hex), read in blocks; an unreadable file is a one-line error."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise BiasscopeError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return digest.hexdigest()


def sha256_json(value: Any) -> str:
    """SHA-256 of a JSON-able value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "(not recorded)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:24] + "..."  # a SHA-256 by its first 23


def _difference(old: Any, new: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first place where ``old`` and ``new`` differ: (dotted path, old, new)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            found = _difference(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}")
            if found:
                return found
        return None
    if old is _ABSENT or new is _ABSENT:
        return None if old is new else (path, old, new)
    return None if _stored(old) == _stored(new) else (path, old, new)


def _stored(value: Any) -> Any:
    """The value as run.json holds it (tuples become lists, non-finite floats null)."""
    return json.loads(json.dumps(json_safe(value), default=str))


def merge_settings(where: str | Path, before: Mapping[str, Any], now: Mapping[str, Any],
                   grow: Mapping[str, str] | None = None, added: tuple[str, ...] = ()
                   ) -> dict[str, Any]:
    """``now`` merged over ``before`` (the settings in ``where``), or a one-line
    BiasscopeError naming the first setting that differs.

    ``grow`` names the settings that map names to entries a rerun may add to (``{"probes":
    "probe"}``: the noun for the message); entries already recorded must stay the same. Every
    other setting of ``now`` must equal the recorded one; one never recorded (a run from an
    older biasscope) counts as different, since the run cannot show it was the same, except
    the ``added`` ones: a measurement of its own that an older run lacked and now gains (its
    records were never made under another value).
    """
    grow = grow or {}
    merged = dict(before)
    for key, value in now.items():
        if key in grow and isinstance(value, Mapping):
            old = before.get(key) or {}
            for name, entry in value.items():
                found = _difference(old[name], entry, f"{key}.{name}") if name in old else None
                if found:
                    raise BiasscopeError(
                        f"{where} was made with different settings of {grow[key]} {name!r} "
                        f"({found[0]}: {_show(found[1])} then, {_show(found[2])} now); use "
                        "another --out or the same settings")
            merged[key] = {**old, **value}
            continue
        if key in added and key not in before:
            merged[key] = value
            continue
        found = _difference(before.get(key, _ABSENT), value, key)
        if found:
            at = "" if found[0] == key else f"{found[0]}: "
            raise BiasscopeError(
                f"{where} was made with a different {key!r} ({at}{_show(found[1])} then, "
                f"{_show(found[2])} now); use another --out or the same settings")
        merged[key] = value
    return merged


__all__ = ["merge_settings", "sha256_file", "sha256_json"]
