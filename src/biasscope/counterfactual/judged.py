"""How a run's judges were asked, held for every judge a call gives, the run's or new ones: a
``--labels`` set or a ``--position`` other than theirs is refused before any judge or reward
model is made, saying what changed. The merge of the scorers' settings said only "different
settings of scorer 'J' (labels.B: …)" (or "(position: …)") once a served judge was made, and
took a judge new to the run under any, whose scores the summary could then never hold beside
the others' (a call gives one --labels and one --position to all its judges).

A run's judges answer one question, asked one way: where its judges recorded one label set
(or all judged pairwise) and one position, a call's judges are given the same; a run whose
judges recorded several (made so before this check) is compared per judge named in the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.judge import labels_sha256, refuse_other_label_set
from biasscope.store.directory import RunStore
from biasscope.store.run_json import readable_settings


def refuse_other_judging(out: str | Path, names: Iterable[str | None], given: str | None,
                         labels: Mapping[str, str] | None, position: str) -> None:
    """One line where ``labels`` (read from ``given``, None to judge pairwise) is not the set
    the judges of the counterfactual run in ``out`` answered, or ``position`` not the one
    they were asked with; ``names``: the judges' names as given (None where the name comes
    from the model, known only once it is made). A run.json that cannot be read, or of
    another kind, is left to the checks that say so."""
    store = RunStore(Path(out))
    if (settings := readable_settings(store, "counterfactual")) is not None:
        _refuse_other(store.root, settings.get("scorers"), names, given, labels)
        _refuse_other_position(store.root, settings.get("scorers"), names, position)


def _refuse_other(where: object, scorers: Any, names: Iterable[str | None], given: str | None,
                  labels: Mapping[str, str] | None) -> None:
    """`refuse_other_judging`'s label set, of run.json's ``scorers``."""
    judges = _judges(scorers, "labels")
    sets = {labels_sha256(s) if isinstance(s, Mapping) else "": s for s in judges.values()}
    named = [judges[n] for n in names if n is not None and n in judges]
    for then in list(sets.values()) if len(sets) == 1 else named:
        refuse_other_label_set(where, then, given, labels)


def _refuse_other_position(where: object, scorers: Any, names: Iterable[str | None],
                           position: str) -> None:
    """The same for ``--position``: a verdict is one order's answer (``shuffle``,
    ``fixed``), both orders' where they agree (``consensus``: an order-dependent answer is
    none) or the orders' mean (``permute``), so judges asked otherwise count other answers
    as their verdicts and flips."""
    judges = {n: p for n, p in _judges(scorers, "position").items() if isinstance(p, str)}
    named = [judges[n] for n in names if n is not None and n in judges]
    for then in set(judges.values()) if len(set(judges.values())) == 1 else named:
        if then != position:
            raise BiasscopeError(f"{where} was judged with --position {then} ({position} "
                                 f"now): give --position {then}, or use another --out for "
                                 "this one")


def _judges(scorers: Any, key: str) -> dict[str, Any]:
    """Each judge's ``key`` in run.json's ``scorers`` (a judge's entry holds
    ``question_sha256``; a reward model's does not)."""
    if not isinstance(scorers, Mapping):
        return {}
    return {str(n): e.get(key) for n, e in scorers.items()
            if isinstance(e, Mapping) and "question_sha256" in e}
