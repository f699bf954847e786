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
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.store.files import json_safe

_ABSENT = object()


def sha256_json(value: Any) -> str:
    """SHA-256 of a JSON-able value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


#: Where two settings differ: (setting, its entry's name for a growing one else "", the
#: dotted path under it, old value, new value).
Difference = tuple[str, str, str, Any, Any]


def _differences(old: Any, new: Any, key: str, path: str, name: str = "") -> list[Difference]:
    """Every place where ``old`` and ``new`` differ under setting ``key``. Lists of entries
    with ids (a probe's wordings) are compared entry by entry when they hold the same ids."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        # Wordings asked then and not now (or the reverse): that says it all, not the probe
        # config's other keys that come and go with them.
        for part in sorted(set(old) ^ set(new), key=str):
            if _ids(old.get(part, new.get(part))):
                return [(key, name, f"{path}.{part}" if path else str(part),
                         old.get(part, _ABSENT), new.get(part, _ABSENT))]
        out: list[Difference] = []
        for part in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(part, _ABSENT), new.get(part, _ABSENT), key,
                                f"{path}.{part}" if path else str(part), name)
        return out
    if _ids(old) and _ids(old) == _ids(new):
        return [d for a, b in zip(old, new, strict=True)
                for d in _differences(a, b, key, f"{path}.{a['id']}" if path else a["id"],
                                      name)]
    if old is _ABSENT or new is _ABSENT:
        return [] if old is new else [(key, name, path, old, new)]
    return [] if _stored(old) == _stored(new) else [(key, name, path, old, new)]


def _ids(value: Any) -> list[str] | None:
    """The ids of a list of entries that each have one (wordings), else None."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) and "id" in v
                                                 for v in value):
        return [str(v["id"]) for v in value]
    return None


_HEX = re.compile(r"[0-9a-f]{40,64}")  # a SHA-1 or SHA-256, as run.json holds them


def _hashed(difference: Difference) -> bool:
    """Whether a difference is in a hash: shown only when nothing the user gave differs."""
    return any(isinstance(v, str) and _HEX.fullmatch(v) for v in difference[3:]) or (
        "sha256" in difference[2].rsplit(".", 1)[-1])


def _shown(old: Any, new: Any, path: str) -> tuple[str, str]:
    """Both values in words: a list of wordings by count and ids, a hash by its first digits,
    long texts by the part where they differ."""
    if (isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > 40
            and not (_HEX.fullmatch(old) or _HEX.fullmatch(new))):
        return _window(old, new), _window(new, old)
    if _ids(old) or _ids(new):
        return _entries(old, path), _entries(new, path)
    return _one(old), _one(new)


def in_words(old: Any, new: Any) -> tuple[str, str]:
    """Two values of one setting in words, as a rerun's refusal says them (`changed`): a hash
    by its first digits, long texts by the part where they differ."""
    return _shown(old, new, "")


def _entries(value: Any, path: str) -> str:
    """A list of entries with ids by count and ids ("none" where there is no list)."""
    ids = _ids(value)
    if ids is None:
        return "none"
    listed = ", ".join(ids[:6]) + (", …" if len(ids) > 6 else "")
    return f"{len(ids)} {path.rsplit('.', 1)[-1]} ({listed})"


def _one(value: Any) -> str:
    if value is _ABSENT:
        return "not recorded"
    if isinstance(value, str) and _HEX.fullmatch(value):
        return value[:12] + "…"
    text = json.dumps(_stored(value), sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "…"


def _window(text: str, other: str, width: int = 30) -> str:
    """``text`` around where it first differs from ``other``, quoted, with … for the rest."""
    start = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b),
                 min(len(text), len(other)))
    start = max(0, start - 8)
    part = text[start:start + width]
    return (("…" if start else "") + json.dumps(part, ensure_ascii=False)
            + ("…" if start + width < len(text) else ""))


def changed(where: str | Path, found: list[Difference], grow: Mapping[str, str]) -> str:
    """The refusal of a rerun in one line: the setting that changed, its old and new values
    in words (the values the user gave, before any hash of what they select), and what to
    do."""
    plain = [d for d in found if not _hashed(d)]
    key, name = (plain or found)[0][:2]
    ours = [d for d in plain or found if d[:2] == (key, name)]  # the one setting named
    # Only hashes differ: the most specific one (a wording's prompts rather than all items').
    shown = ours[:3] if plain else sorted(ours, key=lambda d: -d[2].count("."))[:1]
    what = (f"different settings of {grow[key]} {name!r}" if name else
            f"a different {key!r}")
    said = []
    for _, _, path, old, new in shown:
        then, now = _shown(old, new, path)
        said.append(f"{'' if path in (key, '') else path + ': '}{then} then, {now} now")
    more = len(plain or found) - len(shown)
    tail = f"; and {more} more" if more > 0 else ""
    return (f"{where} was made with {what} ({'; '.join(said)}{tail}); use another --out or "
            "the same settings")


def _stored(value: Any) -> Any:
    """The value as run.json holds it (tuples become lists, non-finite floats null)."""
    return json.loads(json.dumps(json_safe(value), default=str))


def merge_settings(where: str | Path, before: Mapping[str, Any], now: Mapping[str, Any],
                   grow: Mapping[str, str] | None = None, added: tuple[str, ...] = ()
                   ) -> dict[str, Any]:
    """``now`` merged over ``before`` (the settings in ``where``), or a one-line
    BiasscopeError naming what differs (`changed`).

    ``grow`` names the settings that map names to entries a rerun may add to (``{"probes":
    "probe"}``: the noun for the message); entries already recorded must stay the same. Every
    other setting of ``now`` must equal the recorded one; one never recorded (a run from an
    older biasscope) counts as different, since the run cannot show it was the same, except
    the ``added`` ones: a measurement of its own that an older run lacked and now gains (its
    records were never made under another value); a dotted one (``intervention.base``,
    ``intervention.base.commit``) is such a key inside a setting.
    """
    grow = grow or {}
    for name in added:
        key, dot, part = name.partition(".")
        if dot:
            before = _gained(before, now, key.split(".") + part.split("."))
    merged = dict(before)
    found: list[Difference] = []
    for key, value in now.items():
        if key in grow and isinstance(value, Mapping):
            old = before.get(key) or {}
            for name, entry in value.items():
                if name in old:
                    found += _differences(old[name], entry, key, "", str(name))
            merged[key] = {**old, **value}
            continue
        if key in added and key not in before:
            merged[key] = value
            continue
        found += _differences(before.get(key, _ABSENT), value, key, key)
        merged[key] = value
    if found:
        raise BiasscopeError(changed(where, found, grow))
    return merged


def _gained(before: Mapping[str, Any], now: Mapping[str, Any], path: list[str]
            ) -> Mapping[str, Any]:
    """``before`` with the key at ``path`` (``intervention.base.commit``) taken from ``now``
    where every mapping above it is in both and only ``before`` lacks the key."""
    key, rest = path[0], path[1:]
    if not rest:
        return {**before, key: now[key]} if key in now and key not in before else before
    old, new = before.get(key), now.get(key)
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return before
    return {**before, key: _gained(old, new, rest)}


def refuse_renamed(where: str | Path, before: Any, now: Mapping[str, Any], noun: str,
                   whole: Callable[[Any], Any] | None = None) -> None:
    """One line where an entry of ``now`` under a new name is one ``before`` holds under another,
    the same model with the same settings (``R=./rm`` into a run of ``rm``): the run would
    hold it twice, compared with itself. ``whole``: for the check before the models load,
    whose entries hold only what is known then (`known_part`): an entry that matches a
    recorded one on those is made whole (its weights' fingerprint: None where that cannot be
    known before it loads) and compared as the loaded model would be."""
    recorded = {name: _stored(entry) for name, entry in (before or {}).items()
                if name not in now}
    for name, entry in now.items():
        if before and name in before:
            continue
        for old, stored in recorded.items():
            if whole is None:
                same = stored == _stored(entry)
            else:
                part = known_part(stored, entry)
                same = part == _stored(entry) and _stored(whole(entry)) == stored
            if same:
                raise BiasscopeError(f"{where} holds this {noun} as {old!r}, and this call names "
                                     f"it {name!r}: give it the name {old!r} again (or no name), "
                                     "or use another --out")


def check_known(where: str | Path, before: Mapping[str, Any], now: Mapping[str, Any],
                models: str, noun: str, whole: Callable[[Any], Any],
                grow: Mapping[str, str], added: tuple[str, ...] = ()) -> None:
    """Refuse before the models load what `merge_settings` and `refuse_renamed` will refuse
    once they have: ``now`` holds the settings known then, its ``models`` entries each
    model's identity as known before it loads, and each recorded entry of the same name is
    compared on those keys only (`known_part`); ``whole``: see `refuse_renamed`."""
    before = gain_identity(before, now)
    refuse_renamed(where, before.get(models), now[models], noun, whole)
    entries = before.get(models) or {}
    merge_settings(where, {**before, models: {
        name: known_part(entry, now[models][name]) if name in now[models] else entry
        for name, entry in entries.items()}}, now, grow, added)


def known_part(recorded: Any, known: Mapping[str, Any]) -> Any:
    """A recorded entry cut to the keys of ``known``, an entry as known before its model
    loads: what a check then can compare (a key it lacks stays absent, and differs)."""
    if not isinstance(recorded, Mapping):
        return recorded
    return {k: recorded[k] for k in known if k in recorded}


#: What a model's identity (or the responder around it) gained after runs were recorded
#: without it: a local folder's weights' fingerprint, a local model's dtype, whether it has
#: a chat template, the fingerprint of a local folder's tokenizer, template and config files,
#: the commit a hub id's branch resolved to, the code an ``auto_map`` names (``remote_code``:
#: recorded for every such model, "not run" where it is not trusted, so only a run from before
#: lacks it).
GAINED = ("fingerprint", "dtype", "chat_template", "files_fingerprint", "commit", "remote_code")


def gain_identity(before: Any, now: Any) -> Any:
    """``before`` (run.json's settings) with the `GAINED` keys taken from ``now`` for every
    model entry (an identity: it names a ``backend``) that recorded none. A run made before
    cannot show which weights (or dtype, or tokenizer and template) it used, and is trusted as
    ``biasscope dynamics`` trusts such a run's checkpoints: it resumes and records them, and
    from then on other weights (or files) under the same path, or another dtype, are
    refused. A GGUF file recorded by its cache copy's folder takes the file's path and
    ``gguf_*`` keys where the copy is of the same SHA-256 (`as_gguf_file`)."""
    if not (isinstance(before, Mapping) and isinstance(now, Mapping)):
        return before
    out = {k: gain_identity(v, now[k]) if k in now else v for k, v in before.items()}
    if "backend" in before:
        out.update({k: now[k] for k in GAINED if k in now and k not in before})
        if _same_folder(before.get("source"), now.get("source")):
            out["source"] = now["source"]
        out = as_gguf_file(out, now)
    return out


def as_gguf_file(before: Any, now: Any) -> Any:
    """A model's identity ``before`` whose ``source`` is the cache copy (a folder named by the
    file's SHA-256) of the GGUF file ``now`` names, with the file's path and ``gguf_*`` keys
    from ``now``; any other ``before`` as it is. Older biasscope recorded where the file was
    converted, which moves with ``$BIASSCOPE_GGUF_CACHE``: the same bytes are the same model."""
    if not (isinstance(before, Mapping) and isinstance(now, Mapping)):
        return before
    sha, source = now.get("gguf_sha256"), before.get("source")
    if not (isinstance(sha, str) and isinstance(source, str) and source != now.get("source")
            and before.get("gguf_sha256", sha) == sha and Path(source).name == sha):
        return before
    return {**before, **{k: v for k, v in now.items()
                         if k == "source" or (k.startswith("gguf_") and k not in before)}}


def _same_folder(before: Any, now: Any) -> bool:
    """Whether a model's recorded ``source``, a local path as typed (runs from before local
    paths were recorded resolved), names the folder ``now`` records resolved. A relative one
    is resolved from the working directory, the only one known: the spelling a rerun from
    where the run was made would give; a folder elsewhere under that name is told apart by
    the weights' fingerprint, which the entry holds or gains."""
    if not (isinstance(before, str) and isinstance(now, str)) or before == now:
        return False
    if not Path(now).is_absolute():  # a hub id: as typed
        return False
    try:
        return Path(before).expanduser().resolve() == Path(now)
    except (OSError, RuntimeError, ValueError):
        return False


__all__ = ["as_gguf_file", "check_known", "gain_identity", "in_words", "known_part",
           "merge_settings", "refuse_renamed", "sha256_json"]
