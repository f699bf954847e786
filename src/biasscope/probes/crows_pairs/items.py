"""CrowS-Pairs (Nangia et al., 2020): 1,508 minimal pairs, a sentence that stereotypes a group
more (``sent_more``) and one that does so less (``sent_less``), over 9 bias types; or, as
``crows-pairs:revised``, the revised English version of Névéol et al. (2022) that
lm-evaluation-harness's ``crows_pairs_english`` reads (1,677 pairs: 1,467 revised originals and
210 new ones numbered ``LA0``...; one more bias type, ``autre``, "other").

Each sentence is one ``continuation`` item with an empty prompt: its log-prob summed over its
tokens after the model's start token (BOS, else end-of-text), lm-evaluation-harness's
convention for a text with no context. The two items of a pair share the pair's groups
(``pair``, ``bias_type``, ``direction``: ``stereo`` when ``sent_more`` is the stereotype,
``antistereo`` when it violates one) and differ in ``sentence`` (``more``/``less``).
"""

from __future__ import annotations

import csv
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from biasscope.core.errors import DataError
from biasscope.core.items import Item, stratified_sample
from biasscope.core.jsonl import read_text
from biasscope.data.sources import data_path

NAME = "crows-pairs"
REQUESTS = ("continuation",)
DATA = "crows-pairs"
FILE = "crows_pairs_anonymized.csv"
#: What ``crows-pairs:VERSION`` reads: the file and its field delimiter.
VERSIONS = {"original": (FILE, ","), "revised": ("crows_pairs_EN_revised+210.csv", "\t")}
METRICS = ("pct_stereotype", "likelihood_diff", "mean_difference", "token_difference")
BIAS_TYPES = ("race-color", "gender", "socioeconomic", "nationality", "religion", "age",
              "sexual-orientation", "physical-appearance", "disability", "autre")
DIRECTIONS = ("stereo", "antistereo")
COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")


@dataclass(frozen=True)
class Pair:
    """One row of the CSV: its number (the unnamed first column; in a file that also numbers
    pairs ``LA0``..., as the revised version does, every number is text: ``0004``), both
    sentences and labels."""

    number: int | str
    more: str
    less: str
    direction: str
    bias_type: str


def load_pairs(path: Path, delimiter: str = ",") -> list[Pair]:
    """The pairs of ``crows_pairs_anonymized.csv`` (or, tab-separated, of the revised
    version); a bad row names file, line and field."""
    text = read_text(path, error=DataError)
    try:
        rows = list(csv.DictReader(text.splitlines(keepends=True), delimiter=delimiter))
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from None
    if not rows or any(c not in rows[0] for c in COLUMNS):
        raise DataError(f"{path}: expected the CrowS-Pairs columns {', '.join(COLUMNS)}")
    pairs = []
    for line, row in enumerate(rows, start=2):
        for field in COLUMNS:
            if not str(row.get(field) or "").strip():
                raise DataError(f"{path}:{line}: empty {field!r}")
        if row["stereo_antistereo"] not in DIRECTIONS:
            raise DataError(f"{path}:{line}: stereo_antistereo is "
                            f"{row['stereo_antistereo']!r}, not stereo or antistereo")
        first = str(row.get("") or "").strip()
        number: int | str = int(first) if first.isdigit() else first or line - 2
        pairs.append(Pair(number, row["sent_more"], row["sent_less"], row["stereo_antistereo"],
                          row["bias_type"]))
    if any(isinstance(p.number, str) for p in pairs):  # one type per column when stored
        pairs = [replace(p, number=_label(p.number)) for p in pairs]
    return pairs


def _label(number: int | str) -> str:
    return f"{number:04d}" if isinstance(number, int) else number


class CrowsPairs:
    """The probe: two items per pair, scored as whole sentences."""

    name = NAME
    requests = REQUESTS
    seeded = False
    limit_sample = "whole pairs, stratified by bias type, seed 0"

    def __init__(self, pairs: Sequence[Pair], version: str = "original") -> None:
        if not pairs:
            raise DataError(f"{NAME}: no pairs to build items from")
        self.pairs = list(pairs)
        self.version = version

    def config(self) -> dict[str, object]:
        # The original's config is as it was before versions, so its runs resume unchanged.
        version = {} if self.version == "original" else {
            "version": f"{self.version} ({VERSIONS[self.version][0]})"}
        return {"probe": NAME, "pairs": len(self.pairs),
                "scoring": "whole sentence after the start token", **version}

    def items(self, seed: int = 0) -> list[Item]:
        out = []
        for p in self.pairs:
            for which, text in (("more", p.more), ("less", p.less)):
                out.append(Item(
                    id=f"{NAME}:{_label(p.number)}:{which}", prompt="", options=(which,),
                    continuations=(text,), answer=0,
                    groups={"pair": p.number, "bias_type": p.bias_type,
                            "direction": p.direction, "sentence": which}))
        return out

    def limited(self, items: Sequence[Item], limit: int) -> list[Item]:
        """What ``--limit`` keeps: whole pairs, stratified by bias type, drawn with seed 0."""
        def key(item: Item) -> tuple[str, Hashable]:
            return str(item.groups["bias_type"]), item.groups["pair"]

        return stratified_sample(items, limit, key, BIAS_TYPES, 2, 0, NAME)


def from_data(data_dir: str | Path | None = None, version: str | Sequence[str] = "original"
              ) -> CrowsPairs:
    """The probe on the original pairs, or on the revised English ones (``crows-pairs:revised``,
    ``version`` as one word or a selection of one); it takes no other option (`load_probe`
    refuses one, a typo among them)."""
    chosen = [version] if isinstance(version, str) else list(version)
    if len(chosen) != 1 or chosen[0] not in VERSIONS:
        raise DataError(f"{NAME}:{','.join(chosen)}: name one version, "
                        f"{NAME}:original (the default) or {NAME}:revised")
    name, delimiter = VERSIONS[chosen[0]]
    return CrowsPairs(load_pairs(data_path(DATA, name, data_dir), delimiter), chosen[0])
