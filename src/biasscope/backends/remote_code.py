"""The code a model trusted to run its own (``trust_remote_code``) runs: the modules its
``auto_map`` names, read from its folder or, for a hub id, from huggingface_hub's cache.

A model whose config.json or tokenizer_config.json has an ``auto_map`` loads the classes it
names from Python files beside it when it is trusted to, and transformers' own classes (or
none) when it is not: two models, one path. Its identity says which (`backends.fingerprints`'s
``remote_code``): the fingerprint of the files that code is (each module ``auto_map`` names and
the modules they import relatively, as transformers follows them), or "not run". Code that
transformers would fetch from another hub repository (``<org/repo>--<module>.<Class>``: that
repository's ``main``, whatever it holds that day) is in no file the identity covers, and is
refused (`refuse_remote_code`). Nothing here reads the network: a hub id's files are those
its cache holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from biasscope.core.errors import ModelError

#: The files whose ``auto_map`` names code: the model's and the tokenizer's.
AUTO_MAP_FILES = ("config.json", "tokenizer_config.json")
#: A code module's relative imports, found as transformers finds them (`get_relative_imports`).
_RELATIVE = re.compile(r"^\s*import\s+\.(\S+)\s*$|^\s*from\s+\.(\S+)\s+import", re.MULTILINE)
#: What a model that is not trusted to run its code records in place of the code's fingerprint.
NOT_RUN = "not run"

Finder = Callable[[str], "Path | None"]


def finder(source: str | Path, revision: str | None = None) -> tuple[Finder, bool] | None:
    """How to find a model's files by name, and whether it is a local folder: the folder's
    own, or a hub id's in huggingface_hub's cache (at ``revision``, ``main`` by default; no
    request made); None where there is neither (an in-memory label)."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return (lambda name: folder / name if (folder / name).is_file() else None), True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # comes with transformers; without it nothing loads from the hub
        return None

    def cached(name: str) -> Path | None:
        try:
            found = try_to_load_from_cache(str(source), name, revision=revision or "main")
        except (ValueError, OSError):  # not a repo id, or an unreadable cache
            return None
        return Path(found) if isinstance(found, str) else None

    return cached, False


def auto_map(find: Finder) -> list[tuple[Path, str]]:
    """Every class reference an ``auto_map`` names, with the file naming it."""
    found = []
    for name in AUTO_MAP_FILES:
        file = find(name)
        if file is None:
            continue
        try:
            mapping = json.loads(file.read_text(encoding="utf-8")).get("auto_map")
        except (OSError, ValueError, AttributeError):  # not the loaders' to read: theirs says
            continue
        values = mapping.values() if isinstance(mapping, dict) else (
            mapping if isinstance(mapping, list) else [])
        for value in values:
            found += [(file, entry) for entry in (value if isinstance(value, list) else [value])
                      if isinstance(entry, str) and entry]
    return found


def names_code(source: str | Path, revision: str | None = None) -> bool:
    """Whether the model's ``auto_map`` names any class (a hub id's: in its cached files)."""
    found = finder(source, revision)
    return found is not None and bool(auto_map(found[0]))


def refuse_remote_code(source: str | Path, revision: str | None = None) -> None:
    """Refuse to load, with ``trust_remote_code``, a model whose config.json or
    tokenizer_config.json ``auto_map`` names ``<org/repo>--<module>.<Class>`` of another
    repository: code transformers fetches from that hub repository (its ``main``, whatever it
    holds that day), which no file of the model is, so the run's identity would not say what
    ran. A local folder's files are read, a hub id's from the cache (where it is not there yet
    the check is made again once it has loaded, by its identity: `code_files`); a hub id may
    name its own repository (loaded at its own revision). Without ``trust_remote_code`` the
    entry is ignored (transformers' own class loads), so only a load that trusts it calls
    this. Pinned by copying the module into the folder, where it is hashed with the rest."""
    found = finder(source, revision)
    if found is None:
        return
    find, local = found
    for file, entry in auto_map(find):
        repo, dashes, rest = entry.partition("--")
        if not dashes or (not local and repo == str(source)):
            continue
        module = rest.rpartition(".")[0] or rest
        where = Path(source).expanduser() if local else f"a folder of {source}'s files"
        shown = file if local else f"{source}'s {file.name}"
        raise ModelError(
            f"{shown}: auto_map names {entry}, code transformers fetches from the hub "
            f"repository {repo} when a model trusted to run its code loads, which no identity "
            f"of this {'folder' if local else 'model'} covers: pin it by copying {repo}'s "
            f"{module}.py (and the modules it imports) into {where} and writing {rest} for it "
            "in auto_map")


def code_files(source: str | Path, revision: str | None = None) -> dict[str, Path] | None:
    """The files of the code a model trusted to run its own runs: each module its
    ``auto_map`` names and those they import relatively, by file name. None where it names none (or
    a hub id's config is not in the cache yet: nothing is known before its first load).
    Refused, in one line, where code is named that is not there to hash (a hub id's module
    not in the cache) or would come from another repository (`refuse_remote_code`)."""
    found = finder(source, revision)
    if found is None:
        return None
    refuse_remote_code(source, revision)
    find, local = found
    modules = sorted({entry.partition("--")[2 if "--" in entry else 0].rpartition(".")[0]
                      for _, entry in auto_map(find)} - {""})
    files: dict[str, Path] = {}
    while modules:
        module = modules.pop()
        name = f"{module}.py"
        if name in files:
            continue
        file = find(name)
        if file is None:
            where = (f"{Path(source).expanduser()} has no {name}" if local else
                     f"{name} of {source}@{revision or 'main'} is not in the Hugging Face cache")
            raise ModelError(f"{source}: auto_map names code in {module}.py, and {where}: "
                             + ("copy it there from the model's source" if local else
                                "load the model once online with trust_remote_code, or "
                                "download the repository, so that its code can be hashed"))
        files[name] = file
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # the loader says what is wrong with it
            continue
        modules += [a or b for a, b in _RELATIVE.findall(text)]
    return dict(sorted(files.items())) or None


__all__ = ["AUTO_MAP_FILES", "NOT_RUN", "auto_map", "code_files", "finder", "names_code",
           "refuse_remote_code"]
