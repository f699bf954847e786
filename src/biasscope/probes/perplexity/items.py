"""Held-out perplexity on plain text (ETHICS commonsense scenarios, or your own documents).

Performance that needs no hub: a fine-tune is read against how well it still models text it
was not trained on. Each held-out document is one item, scored as a ``continuation`` (its
first word the context, the rest the continuation), so records hold each document's summed
log-prob and token count; perplexity is ``exp(-Σ log-prob / Σ tokens)`` over documents, with
a bootstrap CI over documents.

Text comes from the pinned ETHICS commonsense CSV (``<data-dir>/ethics-commonsense/
cm_test.csv``: column ``input``, multi-line quoted fields; document id ``ethics:<row>``) or a
file of your own: JSONL with a ``text`` field, or plain text with one document per line (id
``<file name>:<line>``). Training and held-out text are split by document id (`split`), so
they are disjoint by construction, and the same ids give the same split everywhere.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from biasscope.core.bootstrap import index_blocks
from biasscope.core.errors import DataError
from biasscope.core.intervals import Interval, percentile_interval
from biasscope.core.items import Item
from biasscope.core.jsonl import read_text
from biasscope.data.sources import data_path

NAME = "perplexity"
REQUESTS = ("continuation",)
DATA = "ethics-commonsense"
METRICS = ("perplexity", "tokens")
ETHICS = "ethics-commonsense"


@dataclass(frozen=True)
class Document:
    """One document of a corpus: a stable id (the split is keyed by it) and its text."""

    id: str
    text: str


def _ethics(path: Path) -> list[Document]:
    try:
        rows = list(csv.DictReader(read_text(path, error=DataError).splitlines(keepends=True)))
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from None
    if not rows or "input" not in rows[0]:
        raise DataError(f"{path}: expected a CSV with an 'input' column (ETHICS commonsense)")
    return [Document(f"ethics:{n:04d}", str(r["input"]).strip())
            for n, r in enumerate(rows, start=1) if str(r.get("input") or "").strip()]


def _own(path: Path) -> list[Document]:
    """JSONL with ``text`` (``.jsonl``) or one document per line; blank lines skipped."""
    docs = []
    jsonl = path.suffix == ".jsonl"
    for number, line in enumerate(read_text(path, error=DataError).splitlines(), start=1):
        if not line.strip():
            continue
        text = line
        if jsonl:
            try:
                text = json.loads(line)["text"]
            except (json.JSONDecodeError, RecursionError, KeyError, TypeError):
                raise DataError(f"{path}:{number}: expected a JSON object with a 'text' "
                                "field") from None
            if not isinstance(text, str):
                raise DataError(f"{path}:{number}: 'text' is not a string")
        docs.append(Document(f"{path.name}:{number}", text.strip()))
    return docs


def load_documents(text: str | Path | None = None, data_dir: str | Path | None = None
                   ) -> tuple[list[Document], str]:
    """The documents of ``text`` (None or ``ethics-commonsense``: the pinned ETHICS file; else
    a path), and the name the run records for the corpus."""
    if text is None or str(text) == ETHICS:
        docs, name = _ethics(data_path(ETHICS, "cm_test.csv", data_dir)), ETHICS
    else:
        path = Path(text).expanduser()
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise DataError(f"text file {path} {what}: give a file of documents "
                            f"(one per line, or JSONL with 'text') or {ETHICS}")
        docs, name = _own(path), str(path)
    if len(docs) < 2:
        raise DataError(f"{name}: needs at least 2 documents (a training and a held-out one)")
    return docs, name


def held_out(doc_id: str, fraction: float, seed: int = 0) -> bool:
    """Whether document ``doc_id`` is held out: a hash of the id, so the split depends on
    nothing but the id, the fraction and the seed (never on order or on the other ids)."""
    digest = hashlib.sha256(f"{seed}\0{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def split(docs: Sequence[Document], fraction: float = 0.1, seed: int = 0
          ) -> tuple[list[Document], list[Document]]:
    """(training, held-out) documents, disjoint by id; neither side is left empty."""
    if not 0 < fraction < 1:
        raise DataError(f"held-out fraction {fraction} must lie strictly between 0 and 1")
    ids = [d.id for d in docs]
    if len(set(ids)) != len(ids):
        raise DataError("document ids repeat: the split by id would not be disjoint")
    out = [d for d in docs if held_out(d.id, fraction, seed)]
    train = [d for d in docs if not held_out(d.id, fraction, seed)]
    if not out or not train:
        raise DataError(f"{len(docs)} documents and held-out fraction {fraction} leave one "
                        "side empty: give more documents (--text) or another --held-out")
    return train, out


def clip(text: str, max_words: int | None) -> str:
    """The first ``max_words`` whitespace-separated words (None: all), single-spaced."""
    words = text.split()
    return " ".join(words if max_words is None else words[:max_words])


class Perplexity:
    """Items of the held-out documents: context = the first word, continuation = the rest."""

    name = NAME
    requests = REQUESTS
    seeded = False

    def __init__(self, docs: Sequence[Document], corpus: str, max_words: int | None = 64
                 ) -> None:
        self.docs = [d for d in docs if len(clip(d.text, max_words).split()) >= 2]
        if not self.docs:
            raise DataError(f"{corpus}: no held-out document has two words to score")
        self.corpus = corpus
        self.max_words = max_words

    def config(self) -> dict[str, object]:
        ids = hashlib.sha256("\n".join(d.id for d in self.docs).encode()).hexdigest()
        return {"probe": NAME, "corpus": self.corpus, "documents": len(self.docs),
                "max_words": self.max_words, "document_ids_sha256": ids}

    def items(self, seed: int = 0) -> list[Item]:
        out = []
        for doc in self.docs:
            first, rest = clip(doc.text, self.max_words).split(" ", 1)
            out.append(Item(id=f"{NAME}:{doc.id}", prompt=first, options=(rest,),
                            continuations=(" " + rest,), answer=0,
                            groups={"document": doc.id}))
        return out


def from_data(data_dir: str | Path | None = None, text: str | Path | None = None,
              fraction: float | None = None, split_seed: int = 0, max_words: int | None = 64
              ) -> Perplexity:
    """The probe on ``text``: all its documents, or with ``fraction`` only the held-out ones.
    The pinned ETHICS text defaults to its 10% held-out split (what ``intervene`` never
    trains on); a file of your own is held-out text as given. It takes no other option
    (`load_probe` refuses one, a typo among them)."""
    docs, corpus = load_documents(text, data_dir)
    if fraction is None and corpus == ETHICS:
        fraction = 0.1
    if fraction is not None:
        docs = split(docs, fraction, split_seed)[1]
    return Perplexity(docs, corpus, max_words)


def perplexity(logprob: Sequence[float] | np.ndarray, tokens: Sequence[int] | np.ndarray
               ) -> float:
    """Token-weighted perplexity of documents: ``exp(-Σ log-prob / Σ tokens)``."""
    lp, n = np.asarray(logprob, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    total = float(n.sum())
    return math.exp(-float(lp.sum()) / total) if total > 0 else math.nan


def perplexity_interval(logprob: Sequence[float] | np.ndarray,
                        tokens: Sequence[int] | np.ndarray, confidence: float = 0.95,
                        n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Perplexity with a percentile bootstrap CI over documents (documents resampled whole)."""
    lp, n = np.asarray(logprob, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    estimate = perplexity(lp, n)
    if lp.size < 2:
        return Interval(estimate, math.nan, math.nan, confidence)
    samples = np.concatenate([np.exp(-lp[pick].sum(axis=1) / n[pick].sum(axis=1)) for pick in
                              index_blocks(lp.size, n_resamples, np.random.default_rng(seed))])
    return percentile_interval(estimate, samples, confidence)
