"""StereoSet intrasentence (Nadeem et al., 2021), its dev set: for each context with a blank
about a target group, a stereotypical, an anti-stereotypical and an unrelated fill.

``dev.json`` (moinnadeem/StereoSet at a fixed commit; its checksum could not be pinned here,
so it is trusted on first use: the hash seen on first download is kept beside the file and
checked from then on) holds ``{"version", "data": {"intrasentence": [...], ...}}``; each
example has ``id``, ``bias_type`` (gender, profession, race, religion), ``target``,
``context`` (with ``BLANK``) and three ``sentences`` (``id``, ``sentence``, ``gold_label``:
stereotype, anti-stereotype or unrelated). Each sentence is one ``continuation`` item with an
empty prompt, scored as the repository's generative evaluation scores it: the whole sentence
after the start token, read per token (its score is the geometric mean of the token
probabilities, which orders sentences as the mean log-prob per token does).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.core.errors import DataError
from biasscope.core.items import Item, stratified_sample
from biasscope.core.jsonl import read_text
from biasscope.data.sources import data_path

NAME = "stereoset"
REQUESTS = ("continuation",)
DATA = "stereoset"
METRICS = ("ss", "lms", "icat")
LABELS = ("stereotype", "anti-stereotype", "unrelated")
DOMAINS = ("gender", "profession", "race", "religion")


@dataclass(frozen=True)
class Example:
    """One intrasentence example: its three sentences by gold label."""

    id: str
    bias_type: str
    target: str
    sentences: dict[str, tuple[str, str]]  # gold label -> (sentence id, text)


def _example(raw: Any, where: str) -> Example:
    try:
        sentences = {s["gold_label"]: (str(s["id"]), str(s["sentence"]))
                     for s in raw["sentences"]}
        example = Example(str(raw["id"]), str(raw["bias_type"]), str(raw["target"]), sentences)
    except (KeyError, TypeError):
        raise DataError(f"{where}: expected id, bias_type, target and sentences with id, "
                        "sentence and gold_label") from None
    if sorted(sentences) != sorted(LABELS) or "BLANK" not in str(raw.get("context", "")):
        raise DataError(f"{where}: expected a context with BLANK and one sentence per gold "
                        f"label ({', '.join(LABELS)})")
    return example


def load_examples(path: Path) -> list[Example]:
    """The intrasentence examples of ``dev.json``; a bad one is named by its place."""
    try:
        data = json.loads(read_text(path, error=DataError))
        raw = data["data"]["intrasentence"]
    except (json.JSONDecodeError, RecursionError, KeyError, TypeError):
        raise DataError(f"{path}: expected StereoSet JSON with data.intrasentence") from None
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{path}: no intrasentence examples")
    return [_example(r, f"{path}: data.intrasentence[{i}]") for i, r in enumerate(raw)]


class StereoSet:
    """The probe: three items per example."""

    name = NAME
    requests = REQUESTS
    seeded = False
    limit_sample = "whole examples, stratified by domain, seed 0"

    def __init__(self, examples: Sequence[Example]) -> None:
        if not examples:
            raise DataError(f"{NAME}: no examples to build items from")
        self.examples = list(examples)

    def config(self) -> dict[str, object]:
        return {"probe": NAME, "examples": len(self.examples),
                "scoring": "whole sentence after the start token, per token"}

    def items(self, seed: int = 0) -> list[Item]:
        out = []
        for e in self.examples:
            for label in LABELS:
                sid, text = e.sentences[label]
                out.append(Item(id=f"{NAME}:{e.id}:{label}", prompt="", options=(label,),
                                continuations=(text,), answer=0,
                                groups={"example": e.id, "bias_type": e.bias_type,
                                        "target": e.target, "gold_label": label,
                                        "sentence_id": sid}))
        return out

    def limited(self, items: Sequence[Item], limit: int) -> list[Item]:
        def key(item: Item) -> tuple[str, str]:
            return str(item.groups["bias_type"]), str(item.groups["example"])

        return stratified_sample(items, limit, key, DOMAINS, len(LABELS), 0, NAME)


def from_data(data_dir: str | Path | None = None) -> StereoSet:
    """The probe on StereoSet's dev.json; it takes no other option (`load_probe` refuses
    one, a typo among them)."""
    return StereoSet(load_examples(data_path(DATA, "dev.json", data_dir)))
