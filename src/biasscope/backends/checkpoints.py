"""Which checkpoints a sweep visits: hub ids with revisions, local dirs, or a glob of dirs."""

from __future__ import annotations

import glob as globlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from biasscope.backends.gguf import is_gguf, provenance
from biasscope.backends.loading import require_model_dir
from biasscope.core.errors import BiasscopeError

_STEP = re.compile(r"(?:^|[^a-z])(?:step|checkpoint)[-_]?(\d+)$", re.IGNORECASE)


IN_MEMORY = "<in-memory>"  # the source of weights scored live, during training


@dataclass(frozen=True)
class Checkpoint:
    """One model state. ``source`` is a hub id or a local directory.

    ``identity`` says which weights these are (a local directory's resolved path, or hub id
    @ revision): units are keyed by it, so two checkpoints never share results however they
    are named. ``model`` is only a label; ``named`` says the user chose it. ``fingerprint``
    says what the weights are (see ``runs.fingerprints``; None: not computed, or no files),
    ``files_fingerprint`` what its tokenizer, chat template and config files are
    (``backends.fingerprints.answer_files``; None for a hub id, a GGUF file or weights in memory),
    ``commit`` which commit a hub id's revision resolved to when it loaded (``main``, a branch or
    a tag may move; None for a revision that is a commit, or one not loaded yet).
    ``remote_code``: where its ``auto_map`` names code, whether it ran (the code files'
    fingerprint) or not (``"not run"``: transformers' own classes), as a local model's identity
    holds it (`backends.fingerprints.remote_code`); the same files score other answers either way.
    ``given``: a local path as the user gave it (absolute, symbolic links kept), which default
    names come from: a link to a folder elsewhere is named after where the user put it.
    """

    model: str
    source: str
    revision: str | None = None
    step: int | None = None
    named: bool = field(default=False, compare=False)
    identity: str = ""
    fingerprint: str | None = field(default=None, compare=False)
    files_fingerprint: str | None = field(default=None, compare=False)
    commit: str | None = field(default=None, compare=False)
    given: str = field(default="", compare=False)
    remote_code: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", identity_of(self.model, self.source,
                                                             self.revision))

    @property
    def label(self) -> str:
        return f"{self.model}@{self.revision}" if self.revision else self.model

    @property
    def shown(self) -> str:
        """How a line on stderr names the checkpoint as it loads: a GGUF file by its file's
        name, as its conversion line does (`audit` labels ``m.gguf`` ``m``, `dynamics`
        ``m.gguf``: labels run.json and the units keep, so only the line is one rule), any
        other by its label."""
        return Path(self.given or self.identity).name if is_gguf(self.identity) else self.label

    @property
    def given_source(self) -> str:
        """``source`` as the user gave it: a GGUF file's own path, not its cache copy's."""
        return self.identity if is_gguf(self.identity) else self.source

    def as_dict(self) -> dict[str, object]:
        entry: dict[str, object] = {"model": self.model, "source": self.given_source,
                                    "revision": self.revision, "step": self.step,
                                    "identity": self.identity}
        if self.fingerprint:
            entry["fingerprint"] = self.fingerprint
        if self.files_fingerprint:
            entry["files_fingerprint"] = self.files_fingerprint
        if self.commit:
            entry["commit"] = self.commit
        if self.remote_code:
            entry["remote_code"] = self.remote_code
        made = provenance(self.source)
        if made is not None:  # a GGUF file, scored from its dequantised cache copy
            entry["gguf"] = {**made, "path": self.identity}
        return entry


def identity_of(model: str, source: str, revision: str | None) -> str:
    """A local directory's resolved path; ``hub/id@revision`` for the hub (``@main`` when no
    revision is given); the label and step for weights scored in memory."""
    if source == IN_MEMORY:
        return f"{IN_MEMORY}{model}@{revision or 'main'}"
    if _is_local(source):
        return str(Path(source).expanduser().resolve())
    return f"{source}@{revision or 'main'}"


def recorded_source(ckpt: Checkpoint) -> str:
    """``ckpt``'s source as run.json records it: a local path resolved (absolute, symbolic
    links followed), so that ``./rm``, ``/abs/rm`` and a link to it are one model's; a hub id
    as typed; a GGUF file's own path, never the cache folder it loads from (moved with
    ``$BIASSCOPE_GGUF_CACHE``, cleared, another machine's: the same model)."""
    if is_gguf(ckpt.identity):
        return ckpt.identity
    if ckpt.source != IN_MEMORY and _is_local(ckpt.source):
        return str(Path(ckpt.source).expanduser().resolve())
    return ckpt.source


def gguf_identity(ckpt: Checkpoint) -> dict[str, str]:
    """What names a GGUF checkpoint's model, whatever its cache copy: the file (``gguf_file``),
    its SHA-256 and quantisation; read from the cache copy's `provenance`, or before there is
    one from the file's header (`gguf.header`: its saved tokenizer's record, else the file;
    nothing converted or loaded). {} for any other checkpoint."""
    if not (is_gguf(ckpt.identity) and ckpt.fingerprint):
        return {}
    made = provenance(ckpt.source)
    if made is None:
        from biasscope.backends.gguf import header

        made = {"quantization": header(Path(ckpt.identity), ckpt.fingerprint)["quantization"]}
    return {"gguf_file": ckpt.identity, "gguf_sha256": ckpt.fingerprint,
            "gguf_quantization": str(made.get("quantization"))}


def parse_step(name: str | None) -> int | None:
    """Training step from ``stepN`` (Pythia revisions) or ``checkpoint-N`` (Trainer dirs)."""
    if not name:
        return None
    match = _STEP.search(name.rstrip("/"))
    return int(match.group(1)) if match else None


def _is_local(source: str) -> bool:
    """Written as a path, a ``.gguf`` file (no hub id is one), or there."""
    return (source.startswith((".", "/", "~")) or is_gguf(Path(source))
            or Path(source).expanduser().exists())


def _given(path: Path) -> Path:
    """``path`` made absolute without resolving symbolic links."""
    return Path(os.path.abspath(path.expanduser()))


def from_model(model: str, revisions: Sequence[str] = (), *, convert: bool = True
               ) -> list[Checkpoint]:
    """``hub/id``, ``hub/id@rev`` or a local dir, at each of ``revisions`` (if any);
    ``convert``: see `gguf_checkpoint`."""
    source, _, pinned = model.partition("@")
    if _is_local(source):
        path = Path(source).expanduser()
        if is_gguf(path) and path.is_file():
            if revisions or pinned:
                raise BiasscopeError(f"{path} is a local file: revisions apply to hub ids only")
            return [gguf_checkpoint(path, None, None, convert=convert)]
        if not path.is_dir():
            kind = "file" if is_gguf(path) else "directory"
            raise BiasscopeError(f"checkpoint {kind} {path} does not exist")
        if revisions or pinned:
            raise BiasscopeError(f"{path} is a local directory: revisions apply to hub ids only")
        require_model_dir(path, "model folder")
        return [Checkpoint(path.name, str(path), None, parse_step(path.name),
                           given=str(_given(path)))]
    revs: list[str | None] = list(revisions) or [pinned or None]
    if pinned and revisions:
        raise BiasscopeError(f"{model}: give the revision with @ or --revisions, not both")
    return [Checkpoint(source, source, rev, parse_step(rev)) for rev in revs]


def from_dirs(paths: Iterable[str | Path], model: str | None = None, *, convert: bool = True
              ) -> list[Checkpoint]:
    """Local checkpoint dirs of one training run, ordered by step (then name)."""
    out = []
    for raw in paths:
        path = Path(raw).expanduser()
        if is_gguf(path) and path.is_file():
            out.append(gguf_checkpoint(path, model or _given(path).parent.name, path.stem,
                                       named=model is not None, convert=convert))
            continue
        if not path.is_dir():
            raise BiasscopeError(f"checkpoint {path} is not a directory or a .gguf file")
        require_model_dir(path)
        if not (path / "config.json").is_file():
            raise BiasscopeError(f"checkpoint {path} has no config.json: not a model directory")
        name = model or _given(path).parent.name  # never where a link points
        out.append(Checkpoint(name, str(path), path.name, parse_step(path.name),
                              named=model is not None, given=str(_given(path))))
    return sorted(out, key=lambda c: (c.step is None, c.step or 0, c.source))


def from_glob(pattern: str, model: str | None = None, *, convert: bool = True
              ) -> list[Checkpoint]:
    matches = [p for p in globlib.glob(str(Path(pattern).expanduser()))
               if Path(p).is_dir() or (is_gguf(p) and Path(p).is_file())]
    if not matches:
        raise BiasscopeError(f"--checkpoint-glob {pattern!r} matches no directory or .gguf file")
    return from_dirs(matches, model, convert=convert)


def gguf_checkpoint(path: Path, model: str | None, revision: str | None,
                    named: bool = False, convert: bool = True) -> Checkpoint:
    """A GGUF file: loaded from its dequantised copy in the GGUF cache, its path its identity,
    its SHA-256 its fingerprint. The copy is made now if it is not there yet (see
    ``backends.gguf``), unless ``convert`` is False: then `convert_gguf` makes it, once a run
    has checked the fingerprint (a changed file is refused before minutes of conversion)."""
    from biasscope.backends.gguf import cache_root, converted, file_sha256

    sha = file_sha256(path)
    source = converted(path) if convert else cache_root() / sha
    return Checkpoint(model or path.stem, str(source), revision, parse_step(path.stem),
                      named=named, identity=str(path.resolve()), fingerprint=sha,
                      given=str(_given(path)))


def convert_gguf(checkpoints: Iterable[Checkpoint]) -> None:
    """Make the cache copy of each GGUF checkpoint listed with ``convert=False`` that has none
    yet (`gguf_checkpoint`), so that it loads from its ``source``."""
    from biasscope.backends.gguf import converted

    for ckpt in checkpoints:
        if unconverted(ckpt):
            converted(ckpt.identity)


def unconverted(ckpt: Checkpoint) -> bool:
    """A GGUF checkpoint listed with ``convert=False`` whose cache copy is not made yet."""
    return is_gguf(ckpt.identity) and provenance(ckpt.source) is None


def _series(identity: str, revision: str | None) -> Path | None:
    """The folder a local checkpoint's default name comes from: the training run's output
    folder for ``checkpoint-N`` dirs (which carry a revision), else the model dir itself."""
    path = Path(identity)
    if not path.is_absolute():
        return None  # a hub id or in-memory weights: named by their id
    return path.parent if revision is not None else path


def _tail(path: Path, depth: int) -> str:
    return "/".join(path.parts[-depth:]).lstrip("/") or str(path)


def distinct(checkpoints: Sequence[Checkpoint], known: Sequence[dict[str, Any]] = ()
             ) -> list[Checkpoint]:
    """The checkpoints once each (by identity), named so that different checkpoints never
    share a (name, revision): ``known`` (run.json's entries) keep the names they have; a default
    name shared by two training-run folders grows by parent folders (``seed1/out``,
    ``seed2/out``) until it is unique; a clash of names the user chose is an error."""
    pinned = {str(k["identity"]): str(k["model"]) for k in known if k.get("identity")}
    unique: dict[str, Checkpoint] = {}
    for ckpt in checkpoints:
        name = pinned.get(ckpt.identity)
        if name is not None and name != ckpt.model:
            if ckpt.named:
                raise BiasscopeError(f"checkpoint {ckpt.source} is in this run as model {name!r},"
                                     f" not {ckpt.model!r}: use that name or another --out")
            ckpt = replace(ckpt, model=name)
        unique.setdefault(ckpt.identity, ckpt)
    # Every training-run folder in the run, with the depth its name is fixed at (None: free).
    roots: dict[Path, int | None] = {}
    fixed = {str(k["model"]) for k in known} | {c.model for c in unique.values() if c.named}
    for entry in known:
        root = _series(str(entry.get("identity", "")), entry.get("revision"))
        if root is not None:
            roots[root] = 0
    free = [c for c in unique.values() if c.identity not in pinned and not c.named]
    for ckpt in free:
        root = _series(ckpt.given or ckpt.identity, ckpt.revision)
        if root is not None:
            roots.setdefault(root, None)
    depth = {root: 1 for root, at in roots.items() if at is None}
    while True:
        clashing = {root for root, d in depth.items()
                    if _tail(root, d) in fixed or any(
                        other != root and _tail(other, d) == _tail(root, d)
                        for other in roots)}
        clashing = {root for root in clashing if depth[root] < len(root.parts)}
        if not clashing:
            break
        for root in clashing:
            depth[root] += 1
    out = []
    for ckpt in unique.values():
        root = _series(ckpt.given or ckpt.identity, ckpt.revision)
        if ckpt in free and root is not None and root in depth:
            ckpt = replace(ckpt, model=_tail(root, depth[root]))
        out.append(ckpt)
    owners: dict[tuple[str, str | None], str] = {
        (str(k["model"]), k.get("revision")): str(k.get("identity")) for k in known}
    for ckpt in out:
        owner = owners.setdefault((ckpt.model, ckpt.revision), ckpt.identity)
        if owner != ckpt.identity:
            raise BiasscopeError(f"checkpoints {owner} and {ckpt.identity} would both be "
                                 f"{ckpt.label}: give them different names (NAME=GLOB)")
    return out


MAX_SEEDS = 10_000  # each seed is a whole pass over every checkpoint


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,7`` (or a mix) to a sorted list of distinct seeds, at most
    ``MAX_SEEDS`` of them (counted before any range is built: ``0-99999999999`` is refused,
    not a memory error). An empty entry (``0,,2``, ``0-4,``) and a seed named twice
    (``0,0``, ``0-4,3``) are refused, not skipped or merged."""
    seeds: set[int] = set()
    parts = [p.strip() for p in text.split(",")]
    if any(parts) and not all(parts):
        raise BiasscopeError(f"--seeds {text.strip()!r}: an empty entry between commas; remove "
                             "the extra comma")
    for part in filter(None, parts):
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo, hi = int(lo_text), int(hi_text if dash else lo_text)
        except ValueError:
            raise BiasscopeError(f"--seeds {text!r}: use a range like 0-4 or a list like "
                                 "0,2,7 (seeds are 0 or more)") from None
        if hi < lo:
            raise BiasscopeError(f"--seeds {text!r}: {part} is an empty range; write {hi}-{lo}")
        if hi - lo + 1 + len(seeds) > MAX_SEEDS:
            raise BiasscopeError(f"--seeds {text!r}: more than {MAX_SEEDS} seeds; each is a "
                                 "pass over every checkpoint, so name fewer")
        if twice := sorted(seeds.intersection(range(lo, hi + 1))):
            raise BiasscopeError(f"--seeds {text.strip()!r}: seed {twice[0]} is named more than "
                                 "once; name each seed once")
        seeds.update(range(lo, hi + 1))
    if not seeds:
        raise BiasscopeError("--seeds is empty: give a range like 0-4 or a list like 0,2,7")
    return sorted(seeds)
