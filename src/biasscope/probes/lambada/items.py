"""LAMBADA last-word accuracy (OpenAI's detokenised test set), the source's performance series.

Each line of ``lambada_test.jsonl`` is ``{"text": ...}``; the context is the text up to its
last word and the model is right when greedy decoding produces exactly `` <last word>``.
"""

from __future__ import annotations

import json
from pathlib import Path

from biasscope.core.errors import DataError
from biasscope.core.items import Item
from biasscope.core.jsonl import read_text
from biasscope.data.sources import data_path

NAME = "lambada"
REQUESTS = ("continuation",)
DATA = "lambada"
METRICS = ("accuracy", "perplexity")


def load_passages(path: Path) -> list[tuple[int, str, str]]:
    """(line number, context, last word) per passage; malformed lines name file and line."""
    out = []
    for number, line in enumerate(read_text(path, error=DataError).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)["text"]
        except (json.JSONDecodeError, RecursionError, KeyError, TypeError):
            raise DataError(
                f"{path}:{number}: expected a JSON object with a 'text' field") from None
        if not isinstance(text, str) or " " not in text.strip():
            raise DataError(f"{path}:{number}: 'text' needs a context and a last word")
        context, word = text.strip().rsplit(" ", 1)
        out.append((number, context, word))
    if not out:
        raise DataError(f"{path}: no passages")
    return out


class Lambada:
    """Items whose single option is the passage's last word, scored as a continuation."""

    name = NAME
    requests = REQUESTS
    seeded = False

    def __init__(self, passages: list[tuple[int, str, str]]) -> None:
        self.passages = passages

    def config(self) -> dict[str, object]:
        return {"probe": NAME, "passages": len(self.passages)}

    def items(self, seed: int = 0) -> list[Item]:
        return [Item(id=f"{NAME}:{number:04d}", prompt=context, options=(word,),
                     continuations=(" " + word,), answer=0, groups={"line": number})
                for number, context, word in self.passages]


def from_data(data_dir: str | Path | None = None) -> Lambada:
    """The probe on OpenAI's LAMBADA test file; it takes no other option (`load_probe`
    refuses one, a typo among them)."""
    return Lambada(load_passages(data_path("lambada", "lambada_test.jsonl", data_dir)))
