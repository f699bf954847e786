"""One data directory holding every registered probe's files in their upstream formats, for
the tests that run every probe (a new probe's fixture is written here, once)."""

from __future__ import annotations

import json
from pathlib import Path

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from bbq_fixture import write_bbq
from crows_fixture import write_crows
from ethics_fixture import write_ethics
from stereoset_fixture import write_stereoset
from winobias_fixture import write_winobias
from winogender_fixture import write_winogender

LAMBADA = ["The mechanic gave the clerk a present and wished her happy birthday",
           "The nurse took care of the CEO and gave him some health suggestions"]


def write_every_probe(root: Path) -> Path:
    write_adult(root, ROWS)
    write_bbq(root)
    write_winobias(root)
    write_ethics(root)
    write_crows(root)
    write_winogender(root)
    write_stereoset(root)
    (root / "lambada").mkdir()
    (root / "lambada" / "lambada_test.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in LAMBADA))
    return root
