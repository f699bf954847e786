"""A ``--labels`` set other than the one a run's judges answered, said in one line before any
judge is made (a local one loads then, minutes): which labels changed, or the label set's
SHA-256 where only a description did, or that the run was judged pairwise or with labels.
`biasscope judge`, `judge-audit` and `counterfactual` say it alike; a settings merge said
only "different 'labels_sha256'" or "different settings of scorer 'J' (labels.B: …)"."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.data.sources import refuse_other_data
from biasscope.store.settings import sha256_json

_AGAIN = "or use another --out for this one"


def labels_sha256(labels: Mapping[str, str]) -> str:
    """The label set as run.json records it: names and descriptions, in order."""
    return sha256_json(list(labels.items()))


def refuse_other_label_set(where: object, then: Any, given: str | None,
                           labels: Mapping[str, str] | None) -> None:
    """One line where ``labels`` (read from the file ``given``; None: judged pairwise) is not
    ``then``, the label set the run in ``where`` recorded (not a mapping: judged pairwise).
    The set is compared, not the file: the same labels written otherwise are the same."""
    if not isinstance(then, Mapping):
        if labels is not None:
            raise BiasscopeError(f"{where} was judged pairwise, without --labels: drop "
                                 f"--labels {given}, {_AGAIN}")
        return
    if labels is None:
        raise BiasscopeError(f"{where} was judged with --labels (labels {', '.join(then)}): "
                             f"give that file again, {_AGAIN}")
    if list(then) != list(labels):  # asked in order (a counterfactual's verdict: the first)
        raise BiasscopeError(f"{where} was made from another --labels ({given}: labels "
                             f"{', '.join(then)} then, {', '.join(labels)} now): put back the "
                             f"file it was made from, {_AGAIN}")
    refuse_other_data(where, {"--labels": labels_sha256(then)}, {"--labels": Path(str(given))},
                      {"--labels": labels_sha256(labels)}, of="its label set")
