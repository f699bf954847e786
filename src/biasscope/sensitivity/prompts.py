"""Conversations whose final assistant response gets revised: hh-rlhf, or the user's JSONL.

hh-rlhf transcripts read ``\\n\\nHuman: …\\n\\nAssistant: …``. The response to revise is the final
Assistant turn and the prompt is everything before it. Real transcripts are not always strictly
alternating: 5 of the 2312 ``rejected`` transcripts of the pinned ``harmless-base`` test file
(lines 668, 764, 1320, 1850, 1951) have two Assistant turns in a row, where the assistant went
on after a break in the transcript (once at the very end). One such line used to abort the whole
load. Consecutive turns of one speaker are now joined into one turn (blank line between). This is
also what the source study's own parser made of them: it matched each ``Human:`` … ``Assistant:``
exchange and kept everything up to the next ``Human:`` as the response. A transcript that leaves
nothing to revise (no final Assistant turn, no Human turn first, text before the first turn) is
skipped. Both counts are reported, by reason and file line, in ``Prompts.notes()``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError, DataError
from biasscope.core.jsonl import read_jsonl
from biasscope.core.jsonl import why as _why
from biasscope.data.sources import data_path

HH_SPLIT = "harmless-base/test.jsonl.gz"
_HH_TURN = re.compile(r"\n\n(Human|Assistant):[ ]?")
_HH_ROLES = {"Human": "user", "Assistant": "assistant"}

PathLike = str | os.PathLike[str]
Turns = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Conversation:
    """A conversation whose final assistant ``response`` is what gets revised and scored."""

    id: str
    turns: Turns  # (role, content) before the response; user/assistant
    response: str  # the final assistant response


@dataclass(frozen=True)
class Prompts:
    """Conversations and where they came from. ``kind`` (``hh-rlhf:harmless-base:test``,
    ``jsonl``), the file's SHA-256, N and the shuffling seed decide a run's results (a path
    does not: the same file elsewhere gives the same run); ``source`` names it for people;
    ``merged`` and ``skipped`` map a reason to the file lines it applied to, whole file."""

    conversations: tuple[Conversation, ...]
    source: str
    sha256: str
    n: int | None = None
    seed: int | None = None
    in_file: int = 0
    merged: dict[str, tuple[int, ...]] = field(default_factory=dict)
    skipped: dict[str, tuple[int, ...]] = field(default_factory=dict)
    kind: str = ""

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind or self.source, "sha256": self.sha256, "n": self.n,
                "seed": self.seed}

    def notes(self) -> dict[str, Any]:
        return {"source": self.source, "in_file": self.in_file, "used": len(self.conversations),
                "merged": {k: list(v) for k, v in self.merged.items()},
                "skipped": {k: list(v) for k, v in self.skipped.items()}}

    def sentence(self) -> str | None:
        """One line on irregular transcripts, or None when there were none."""
        if not self.merged and not self.skipped:
            return None
        parts = [f"{len(lines)} with {why} (line{'s' * (len(lines) > 1)} "
                 f"{_lines_text(lines)}) joined into one turn"
                 for why, lines in self.merged.items()]
        parts += [f"{len(lines)} skipped: {why} (line{'s' * (len(lines) > 1)} "
                  f"{_lines_text(lines)})" for why, lines in self.skipped.items()]
        return (f"{self.source}: of {self.in_file} conversations, " + "; ".join(parts)
                + f"; {len(self.conversations)} used.")


def _lines_text(lines: tuple[int, ...], shown: int = 8) -> str:
    text = ", ".join(map(str, lines[:shown]))
    return text + (f" and {len(lines) - shown} more" if len(lines) > shown else "")


# -- hh-rlhf ------------------------------------------------------------------------------------


def parse_hh(text: str, where: str = "text") -> tuple[Turns, tuple[str, ...]]:
    """hh-rlhf text as alternating (role, content) turns ending with the assistant, with
    consecutive turns of one speaker joined; also the reasons for each join (one per kind).
    A DataError when there is no response to revise."""
    parts = _HH_TURN.split("\n\n" + text.lstrip("\n"))
    if parts[0].strip():
        raise DataError(f"{where}: text before the first 'Human:' turn")
    turns: list[tuple[str, str]] = []
    joined: list[str] = []
    for speaker, content in zip(parts[1::2], parts[2::2]):
        role, content = _HH_ROLES[speaker], content.strip()
        if turns and turns[-1][0] == role:
            turns[-1] = (role, "\n\n".join(t for t in (turns[-1][1], content) if t))
            joined.append(f"two {speaker} turns in a row")
        else:
            turns.append((role, content))
    if not turns or turns[0][0] != "user":
        raise DataError(f"{where}: the conversation does not start with a Human turn")
    if len(turns) < 2 or turns[-1][0] != "assistant":
        raise DataError(f"{where}: the conversation does not end with an Assistant turn")
    return tuple(turns), tuple(dict.fromkeys(joined))


def split_hh(text: str, where: str = "text") -> Turns:
    """Strictly alternating turns: like ``parse_hh``, but a repeated speaker is an error."""
    turns, joined = parse_hh(text, where)
    if joined:
        raise DataError(f"{where}: {joined[0]} (parse_hh joins them into one turn)")
    return turns


def _reason(exc: DataError, where: str) -> str:
    return str(exc).removeprefix(f"{where}: ")


def hh_count(spec: str, flag: str, what: str) -> int | None:
    """N of ``hh-rlhf:harmless-base:N`` (1 or more), or None for a spec that names no hh-rlhf
    split (a file of the user's); a one-line error for an hh-rlhf spec that is not that."""
    if not spec.startswith("hh-rlhf:"):
        return None
    source, _, count = spec.rpartition(":")
    if source != "hh-rlhf:harmless-base" or not count.isdigit() or int(count) < 1:
        raise BiasscopeError(f"{flag} {spec}: write hh-rlhf:harmless-base:N with N 1 or more, "
                             f"or give a JSONL file of {what}")
    return int(count)


def read_hh_rlhf(data_dir: PathLike | None = None, n: int | None = 200, seed: int = 0,
                 split_file: str = HH_SPLIT) -> Prompts:
    """hh-rlhf ``rejected`` conversations, shuffled by ``seed``, the first ``n`` (None: all);
    irregular transcripts joined or skipped and counted (see the module doc)."""
    if n is not None and n < 0:
        raise BiasscopeError(f"n must be non-negative, got {n}")
    path = data_path("hh-rlhf", split_file, data_dir)
    stem = split_file.removesuffix(".gz").removesuffix(".jsonl").replace("/", ":")
    raw = _read(path)
    conversations: list[Conversation] = []
    merged: dict[str, list[int]] = {}
    skipped: dict[str, list[int]] = {}
    lines = _lines(path, raw)
    for number, line in lines:
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{where}: not valid JSON ({_why(exc)})") from None
        if not isinstance(record, dict) or not isinstance(record.get("rejected"), str):
            raise DataError(f"{where}: no 'rejected' text; expected hh-rlhf lines "
                            '{"chosen": ..., "rejected": ...}')
        try:
            turns, joined = parse_hh(record["rejected"], where)
        except DataError as exc:
            skipped.setdefault(_reason(exc, where), []).append(number)
            continue
        for why in joined:
            merged.setdefault(why, []).append(number)
        conversations.append(Conversation(f"hh-rlhf:{stem}:{number}", turns[:-1], turns[-1][1]))
    if not conversations:
        reasons = "; ".join(f"{len(v)} {k}" for k, v in skipped.items()) or "the file is empty"
        raise DataError(f"{path}: no usable conversation ({reasons})")
    random.Random(seed).shuffle(conversations)
    chosen = conversations if n is None else conversations[:n]
    return Prompts(tuple(chosen), f"hh-rlhf:{stem}", hashlib.sha256(raw).hexdigest(), n, seed,
                   len(lines), {k: tuple(v) for k, v in merged.items()},
                   {k: tuple(v) for k, v in skipped.items()})


def load_hh_rlhf(data_dir: PathLike | None = None, n: int | None = 200, seed: int = 0,
                 split_file: str = HH_SPLIT) -> list[Conversation]:
    """The conversations of ``read_hh_rlhf``, without the notes."""
    return list(read_hh_rlhf(data_dir, n, seed, split_file).conversations)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc}); replace it with a fresh copy") from None


def _lines(path: Path, raw: bytes) -> list[tuple[int, str]]:
    try:
        data = gzip.decompress(raw) if path.suffix == ".gz" else raw
        text = data.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read ({exc}); replace it with a fresh copy") from None
    return [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


# -- the user's conversations -------------------------------------------------------------------


def read_conversations(path: PathLike) -> Prompts:
    """The user's JSONL: ``{"id"?, "messages": [{"role", "content"}, …]}`` whose last message
    is the assistant response to revise, or ``{"id"?, "prompt": …, "response": …}``."""
    path = Path(path)
    conversations: list[Conversation] = []
    lines: dict[str, int] = {}
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected an object with 'messages' or 'prompt'/'response'")
        cid = record.get("id", f"{path.stem}:{number}")
        if not isinstance(cid, str | int) or str(cid) == "":
            raise DataError(f"{where}: 'id' must be a non-empty string")
        if str(cid) in lines:
            raise DataError(f"{where}: id {cid!r} already used on line {lines[str(cid)]}")
        lines[str(cid)] = number
        turns = _messages(record, where)
        conversations.append(Conversation(str(cid), turns[:-1], turns[-1][1]))
    if not conversations:
        raise DataError(f"{path}: no conversations found")
    return Prompts(tuple(conversations), str(path), hashlib.sha256(_read(path)).hexdigest(),
                   in_file=len(conversations), kind="jsonl")


def load_conversations(path: PathLike) -> list[Conversation]:
    """The conversations of ``read_conversations``."""
    return list(read_conversations(path).conversations)


def _messages(record: dict[str, Any], where: str) -> Turns:
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where}: 'messages' must be a non-empty list")
        turns = []
        for i, m in enumerate(messages, start=1):
            ok = isinstance(m, dict) and m.get("role") in ("user", "assistant")
            if not ok or not isinstance(m.get("content"), str):
                raise DataError(f"{where}: message {i} needs role 'user' or 'assistant' and a "
                                "string content")
            turns.append((str(m["role"]), str(m["content"])))
        if len(turns) < 2 or turns[-1][0] != "assistant":
            raise DataError(f"{where}: the last message must be the assistant response to "
                            "revise, after at least one earlier message")
        return tuple(turns)
    prompt, response = record.get("prompt"), record.get("response")
    if isinstance(prompt, str) and isinstance(response, str):
        return (("user", prompt), ("assistant", response))
    raise DataError(f"{where}: expected 'messages' or both 'prompt' and 'response' strings")


__all__ = ["HH_SPLIT", "Conversation", "Prompts", "hh_count", "load_conversations",
           "load_hh_rlhf", "parse_hh", "read_conversations", "read_hh_rlhf", "split_hh"]
