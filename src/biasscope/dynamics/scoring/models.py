"""Which checkpoints a dynamics run visits: ``--model`` (hub ids, local dirs, ``.gguf`` files),
``--checkpoint-glob`` and ``--models-file``, each checked where it is read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from biasscope.backends.checkpoints import Checkpoint, from_glob, from_model
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import read_option_file, why


def named(value: str) -> tuple[str | None, str]:
    """``NAME=VALUE`` or ``VALUE`` (a path or glob is never taken for a name)."""
    name, eq, rest = value.partition("=")
    return (name, rest) if eq and "/" not in name and "*" not in name else (None, value)


def local_model(spec: str, option: str) -> str:
    """A model whose weights can be read: a hub id or local path, written bare or as ``hf:``;
    a sweep reads full next-token distributions, which an API does not give."""
    kind, colon, rest = spec.partition(":")
    if colon and kind == "hf":
        return rest
    if colon and kind in ("openai", "openai-compatible", "litellm"):
        raise BiasscopeError(f"{option} {spec}: a checkpoint sweep reads the model's weights; "
                             "give a hub id, a local folder or a .gguf file (hf: optional)")
    return spec


def refuse_empty(flag: str, value: str) -> None:
    """An empty ``--model`` or ``--checkpoint-glob`` (an unset ``$VARIABLE``), or a glob's empty
    ``NAME=``: the folder ``.`` was read for it, or the default name taken for ``=GLOB``."""
    takes = {"--model": "a hub id, a local model folder or a .gguf file"}.get(
        flag, "a glob of checkpoint folders such as 'out/checkpoint-*'")
    if not value.strip():
        raise BiasscopeError(f"{flag} is empty: give {takes}")
    name, source = named(value)
    if flag == "--checkpoint-glob" and name is not None and not (name.strip() and source.strip()):
        empty = "the name before '='" if not name.strip() else "the glob after '='"
        raise BiasscopeError(f"{flag} {value}: {empty} is empty; write NAME=GLOB, or the glob "
                             "alone for the folder's name")


def list_checkpoints(models: Sequence[str], revisions: Sequence[str],
                     checkpoint_globs: Sequence[str], models_file: str | None
                     ) -> list[Checkpoint]:
    """Every checkpoint of the run, in the order given: each model at each revision, then
    each glob's folders, then the models file's entries. ``revisions`` apply to ``models``
    only: refused without one rather than dropped, so a run never scores other weights than
    those asked for."""
    if revisions and not models:
        raise BiasscopeError("--revisions needs --model with a hub id (e.g. --model "
                             "EleutherAI/pythia-70m --revisions step1000,step143000); a "
                             "--models-file entry takes its own 'revisions'")
    for flag, values in (("--model", models), ("--checkpoint-glob", checkpoint_globs)):
        for value in values:
            refuse_empty(flag, value)
    specs: list[dict[str, Any]] = [{"model": local_model(m, "--model"),
                                    "revisions": list(revisions)} for m in models]
    specs += [{"checkpoint_glob": g, "name": n} for n, g in map(named, checkpoint_globs)]
    if models_file is not None:  # "" (an unset $VARIABLE) is refused, not left out
        specs += read_models_file(models_file)  # each entry's fields checked, by number
    if not specs:
        raise BiasscopeError("give --model, --checkpoint-glob or --models-file")
    checkpoints = []
    for spec in specs:
        if "checkpoint_glob" in spec:
            checkpoints += from_glob(spec["checkpoint_glob"], spec.get("name"), convert=False)
        else:  # GGUF files are converted once the run has checked them (`runfile.init_run`)
            checkpoints += from_model(spec["model"], list(spec.get("revisions", [])),
                                      convert=False)
    return checkpoints


#: What ``--models-file`` takes, in the line refusing a path that is no file.
MODELS_FILE = "a JSON list of {model[, revisions]} or {checkpoint_glob[, name]} entries"
_ENTRY: dict[str, type | tuple[type, ...]] = {
    "model": str, "revisions": list, "checkpoint_glob": str, "name": (str, type(None))}


def read_models_file(path: str) -> list[dict[str, Any]]:
    """The entries of ``--models-file``: ``{model[, revisions]}`` or ``{checkpoint_glob[,
    name]}`` objects, each field of the right type, or one line naming the entry and field."""
    where = f"--models-file {path}"
    try:
        loaded = json.loads(read_option_file(path, "--models-file", what=MODELS_FILE))
    except (json.JSONDecodeError, RecursionError) as exc:
        line = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise BiasscopeError(f"{where}: not valid JSON ({why(exc)}{line})") from None
    if not isinstance(loaded, list):
        raise BiasscopeError(f"{where}: expected a JSON list of entries")
    for number, entry in enumerate(loaded, start=1):
        if not isinstance(entry, dict) or not ({"model", "checkpoint_glob"} & set(entry)):
            raise BiasscopeError(f"{where}: entry {number} needs 'model' or 'checkpoint_glob'")
        for field, value in entry.items():
            kinds = _ENTRY.get(field)
            if kinds is None:
                raise BiasscopeError(f"{where}: entry {number} has an unknown field {field!r} "
                                     f"(use {', '.join(_ENTRY)})")
            listed: list[Any] = value if isinstance(value, list) else []
            if not isinstance(value, kinds) or not all(isinstance(r, str) for r in listed):
                want = "a list of strings" if field == "revisions" else "a string"
                raise BiasscopeError(f"{where}: entry {number}: {field!r} must be {want}, "
                                     f"not {json.dumps(value)[:40]}")
    return loaded
