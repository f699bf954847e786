"""A record's ``option_probs`` and an items export are strict JSON: a NaN (an option whose
logprob a server did not give) is stored as null, which strict readers (browsers, jq, Go)
accept, and the readers that compute with it read it back as NaN, as before."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from biasscope.audit.harness import export_items
from biasscope.core.items import Item
from biasscope.probes.base import Response, option_metrics, records
from biasscope.probes.professional.items import _occupation_probs


def strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant} in {text}")
    return json.loads(text, parse_constant=refuse)


class Asked:
    name = "professional-bias"
    detector = None  # never asked: the responses hold no text

    def items(self, seed: int) -> list[Item]:
        return [ITEM]


ITEM = Item(id="i", prompt="p", options=("nurse", "surgeon"),
            continuations=(" nurse", " surgeon"), answer=1,
            groups={"male_occupation": "surgeon", "female_occupation": "nurse",
                    "weight": math.nan})


def test_option_probs_are_strict_and_read_back_alike() -> None:
    probs = {"nurse": 0.25, "surgeon": math.nan}
    frame = records(Asked(), [ITEM], [Response(None, "option_scores", probs)])
    assert strict(frame["option_probs"][0]) == {"nurse": 0.25, "surgeon": None}
    assert math.isnan(option_metrics(frame)["answer_probability"])
    male, female = _occupation_probs(frame.iloc[0]) or (0.0, 0.0)
    assert math.isnan(male) and female == 0.25
    frame = records(Asked(), [ITEM], [Response(None, "option_scores", {"nurse": 0.25,
                                                                       "surgeon": 0.5})])
    assert option_metrics(frame)["answer_probability"] == 0.5


def test_an_items_export_is_strict(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    assert export_items(Asked(), path) == 1  # type: ignore[arg-type]
    assert strict(path.read_text())["groups"]["weight"] is None
