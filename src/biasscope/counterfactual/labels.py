"""A ``--labels`` set other than the one the run's judges answered, refused before any judge
or reward model is made, saying what changed: the merge of the scorers' settings said only
"different settings of scorer 'J' (labels.B: …)", naming neither the flag nor its file.

A run's judges answer one question: where its judges recorded one label set (or all judged
pairwise), a call's judges, the run's or new ones, are given the same; a run whose judges
recorded several (made so before this check) is compared per judge named in the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.judge import labels_sha256, refuse_other_label_set
from biasscope.store.directory import RunStore


def refuse_other_labels(out: str | Path, names: Iterable[str | None], given: str | None,
                        labels: Mapping[str, str] | None) -> None:
    """One line where ``labels`` (read from ``given``, None to judge pairwise) is not the set
    the judges of the counterfactual run in ``out`` answered; ``names``: the judges' names as
    given (None where the name comes from the model, known only once it is made). A run.json
    that cannot be read, or of another kind, is left to the checks that say so."""
    store = RunStore(Path(out))
    store.pull("run.json")
    if not store.run_json.is_file():
        return
    try:
        previous = store.read_json("run.json")
    except BiasscopeError:
        return
    settings = previous.get("settings")
    if previous.get("kind") == "counterfactual" and isinstance(settings, Mapping):
        _refuse_other(store.root, settings.get("scorers"), names, given, labels)


def _refuse_other(where: object, scorers: Any, names: Iterable[str | None], given: str | None,
                  labels: Mapping[str, str] | None) -> None:
    """`refuse_other_labels` of run.json's ``scorers`` (a judge's entry holds
    ``question_sha256``)."""
    judges = {str(n): e.get("labels") for n, e in (scorers or {}).items()
              if isinstance(e, Mapping) and "question_sha256" in e} \
        if isinstance(scorers, Mapping) else {}
    sets = {labels_sha256(s) if isinstance(s, Mapping) else "": s for s in judges.values()}
    named = [judges[n] for n in names if n is not None and n in judges]
    for then in list(sets.values()) if len(sets) == 1 else named:
        refuse_other_label_set(where, then, given, labels)
