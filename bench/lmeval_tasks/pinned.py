"""Helpers of the local lm-evaluation-harness tasks in this folder (run in lm-eval's own
environment). CrowS-Pairs takes the harness's own choice and result functions unchanged;
Winogender's docs are built from the upstream ids (``occupation.participant.answer.gender.txt``)."""

from __future__ import annotations

import re
from typing import Any

from lm_eval.tasks.crows_pairs.utils import doc_to_choice, process_results

crows_choices = doc_to_choice
crows_results = process_results

PRONOUNS = {"male": ("he", "him", "his"), "female": ("she", "her", "hers"),
            "neutral": ("they", "them", "their", "theirs")}
ID = re.compile(r"^(?P<occupation>[^.]+)\.(?P<participant>[^.]+)\.(?P<answer>[01])\."
                r"(?P<gender>male|female|neutral)\.txt$")


def _fields(doc: dict[str, Any]) -> dict[str, Any]:
    m = ID.match(doc["sentid"])
    if m is None:
        raise ValueError(f"unexpected Winogender id {doc['sentid']!r}")
    words = re.findall(r"[A-Za-z]+", doc["sentence"])
    pronoun = next(w for w in words if w.lower() in PRONOUNS[m["gender"]])
    return {"sentence": doc["sentence"].strip(), "occupation": m["occupation"],
            "participant": m["participant"], "label": int(m["answer"]),
            "gender": m["gender"], "pronoun": pronoun}


def winogender_docs(dataset: Any) -> Any:
    return dataset.map(_fields)
