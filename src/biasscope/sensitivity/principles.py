"""Principles and conversations for reward-model sensitivity: CCAI, hh-rlhf, or the user's own.

The source work perturbs hh-rlhf ``harmless-base`` test responses by each of the
top-10-consensus principles of the two CCAI opinion groups. Loaders return frozen values with
stable ids, so a run can be resumed and compared. The conversations a principle is applied to
are loaded by ``biasscope.sensitivity.prompts``.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError, DataError
from biasscope.core.jsonl import MAX_TEMPLATE, read_jsonl
from biasscope.core.jsonl import why as _why
from biasscope.data.sources import data_path
from biasscope.sensitivity.prompts import PathLike

CCAI_GROUPS = ("group_0", "group_1")
BOTH = "both"
CCAI_COLUMNS = ("comment-id", "comment-body", *(f"{g}_consensus" for g in CCAI_GROUPS))
_CCAI_SPEC = re.compile(r"ccai:top(\d+)")
_ENTRY_KEYS = {"id", "text", "group"}



@dataclass(frozen=True)
class Principle:
    """One constitutional principle; ``group`` and ``consensus`` say whose and how agreed."""

    id: str
    text: str
    group: str | None = None
    consensus: float | None = None


@dataclass(frozen=True)
class Constitution:
    """Principles to perturb by, with each group's chosen ids (``top``) kept explicit."""

    principles: tuple[Principle, ...]
    source: str
    top: dict[str, tuple[str, ...]]

    @property
    def union(self) -> tuple[str, ...]:
        """Ids in any group's top-k, in group order then rank order."""
        return tuple(dict.fromkeys(pid for ids in self.top.values() for pid in ids))

    @property
    def overlap(self) -> tuple[str, ...]:
        """Ids in every group's top-k: the principles a group comparison must leave out."""
        sets = [set(ids) for ids in self.top.values()]
        return tuple(pid for pid in self.union if all(pid in s for s in sets))


# -- principles -------------------------------------------------------------------------------


def load_principles(spec: str, data_dir: PathLike | None = None) -> Constitution:
    """``ccai:topK`` (e.g. ``ccai:top10``) for the CCAI groups' top-K, otherwise a file path."""
    match = _CCAI_SPEC.fullmatch(spec.strip())
    if match and int(match.group(1)) >= 1:
        return load_ccai(data_dir, top_k=int(match.group(1)))
    if spec.startswith("ccai:"):
        raise BiasscopeError(f"--principles {spec}: write ccai:topK with K 1 or more (e.g. "
                             "ccai:top10), or give a file of principles")
    return load_constitution(spec)


def load_ccai(data_dir: PathLike | None = None, top_k: int = 10) -> Constitution:
    """The top-k CCAI comments by consensus in each opinion group (ties: lower comment id)."""
    if top_k < 1:
        raise BiasscopeError(f"top_k must be at least 1, got {top_k}")
    path = data_path("ccai", "clean_comments.csv", data_dir)
    rows = _read_ccai(path)
    top: dict[str, tuple[str, ...]] = {}
    for group in CCAI_GROUPS:
        ranked = sorted((-score, _id_order(cid), cid) for cid, (_, scores) in rows.items()
                        if (score := scores[group]) is not None)
        if not ranked:
            raise DataError(f"{path}: no comment has a {group}_consensus value")
        top[group] = tuple(f"ccai:{cid}" for _, _, cid in ranked[:top_k])
    principles = []
    for pid in Constitution((), "", top).union:
        text, scores = rows[pid.removeprefix("ccai:")]
        groups = [g for g in CCAI_GROUPS if pid in top[g]]
        # a shared principle keeps the agreement both groups reach: the lower consensus
        consensus = min(s for g in groups if (s := scores[g]) is not None)
        principles.append(Principle(pid, text, groups[0] if len(groups) == 1 else BOTH, consensus))
    return Constitution(tuple(principles), str(path), top)


def _id_order(cid: str) -> tuple[int, int, str]:
    return (0, int(cid), "") if cid.isdigit() else (1, 0, cid)


def _read_ccai(path: Path) -> dict[str, tuple[str, dict[str, float | None]]]:
    """comment-id -> (comment-body, group -> consensus or None where missing)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None:
                raise DataError(f"{path}: empty file; expected the CCAI clean_comments.csv, "
                                "replace it with a fresh copy")
            missing = [c for c in CCAI_COLUMNS if c not in reader.fieldnames]
            if missing:
                raise DataError(f"{path}: missing column {missing[0]!r}; expected the CCAI "
                                f"clean_comments.csv with columns {', '.join(CCAI_COLUMNS)}")
            rows: dict[str, tuple[str, dict[str, float | None]]] = {}
            for record in reader:
                where = f"{path}:{reader.line_num}"
                cid, text = (record["comment-id"] or "").strip(), (record["comment-body"] or "")
                if not cid or not text.strip():
                    raise DataError(f"{where}: empty comment-id or comment-body")
                if cid in rows:
                    raise DataError(f"{where}: comment-id {cid} appears twice")
                scores = {g: _consensus(record[f"{g}_consensus"], where) for g in CCAI_GROUPS}
                rows[cid] = (text.strip(), scores)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: cannot read as CSV ({exc})") from None
    return rows


def _consensus(value: str | None, where: str) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise DataError(f"{where}: consensus {value!r} is not a number") from None
    return None if math.isnan(number) else number


def load_constitution(path: PathLike) -> Constitution:
    """The user's constitution: YAML or JSON (a list of strings or {id, text, group}), JSONL
    (one such entry per line), or text. CSV and TSV are refused: read as text, their header
    and columns became principles.

    Plain text has one principle per non-empty line; lines starting with ``#`` are comments.
    Ids default to ``p1..pN``. ``top`` maps each named group to its principles' ids.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BiasscopeError(f"{path}: cannot read constitution ({exc})") from None
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):  # read as lines, its header and columns became principles
        raise BiasscopeError(f"{path}: a constitution is YAML, JSON, JSONL or text (one "
                             f"principle per line), not {suffix[1:].upper()}; write one of those")
    if suffix == ".jsonl":
        entries = [_entry(path, f"line {n}", item) for n, item in read_jsonl(path)]
    elif suffix in (".yaml", ".yml", ".json"):
        entries = _structured_entries(path, raw, suffix)
    else:
        entries = [(f"line {n}", None, line.strip(), None)
                   for n, line in enumerate(raw.splitlines(), start=1)
                   if line.strip() and not line.lstrip().startswith("#")]
    if not entries:
        raise BiasscopeError(f"{path}: no principles found; write one principle per line")
    principles: list[Principle] = []
    by_text: dict[str, str] = {}
    by_id: dict[str, str] = {}
    for n, (where, pid, text, group) in enumerate(entries, start=1):
        if len(text) > MAX_TEMPLATE:  # asked once per conversation: bounded like a template
            raise BiasscopeError(f"{path}: {where}: the principle has {len(text):,} characters, "
                                 f"more than the {MAX_TEMPLATE:,} biasscope takes; shorten it")
        pid = pid or f"p{n}"
        key = " ".join(text.split()).casefold()
        for seen, value, what in ((by_text, key, "principle"), (by_id, pid, f"id {pid!r}")):
            if value in seen:
                raise BiasscopeError(f"{path}: {seen[value]} and {where} repeat the same {what}; "
                                     "remove one")
            seen[value] = where
        principles.append(Principle(pid, text.strip(), group))
    top: dict[str, tuple[str, ...]] = {}
    for p in principles:
        if p.group is not None:
            top[p.group] = (*top.get(p.group, ()), p.id)
    return Constitution(tuple(principles), str(path), top)


def _structured_entries(
    path: Path, raw: str, suffix: str
) -> list[tuple[str, str | None, str, str | None]]:
    if suffix == ".json":
        try:
            data: Any = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            line = getattr(exc, "lineno", 1)
            raise BiasscopeError(f"{path}:{line}: not valid JSON ({_why(exc)})") from None
    else:
        import yaml  # lazily: only YAML constitutions need PyYAML

        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise BiasscopeError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise BiasscopeError(f"{path}: expected a list of principles (strings or "
                             f"{{id, text, group}}), got {type(data).__name__}")
    return [_entry(path, f"entry {n}", item) for n, item in enumerate(data, start=1)]


def _entry(path: Path, where: str, item: Any) -> tuple[str, str | None, str, str | None]:
    """One principle of a structured constitution: a string, or a mapping {id, text, group}."""
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        raise BiasscopeError(f"{path}: {where} needs a principle text (a string, or a "
                             "mapping with a 'text' string)")
    unknown = sorted(set(map(str, item)) - _ENTRY_KEYS)
    if unknown:
        raise BiasscopeError(f"{path}: {where} has unknown key {unknown[0]!r}; "
                             "use id, text, group")
    pid, group = item.get("id"), item.get("group")
    if not (pid is None or isinstance(pid, str | int)) or str(pid).strip() == "":
        raise BiasscopeError(f"{path}: {where} has an id that is not a non-empty string")
    if group is not None and not isinstance(group, str):
        raise BiasscopeError(f"{path}: {where} has a group that is not a string")
    if not item["text"].strip():
        raise BiasscopeError(f"{path}: {where} has an empty text")
    return where, None if pid is None else str(pid).strip(), item["text"], group


__all__ = ["BOTH", "CCAI_GROUPS", "Constitution", "Principle", "load_ccai", "load_constitution",
           "load_principles"]
