"""A judge's input file is checked line by line as it is read: a bad line is one line naming
the file, the line and the field, before any judge model loads or anything is written (an
author that was a list once crashed the leaderboard after all the judging)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from test_judge_runs import PAIRS


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(("rows", "said"), [
    ([PAIRS[0], {**PAIRS[1], "model_b": ["z"]}],
     ":2: 'model_b' must be a string (the model that wrote response b) or null, not [\"z\"]"),
    ([{**PAIRS[0], "model_a": 5}], ":1: 'model_a' must be a string"),
    ([PAIRS[0], PAIRS[1], {**PAIRS[2], "id": "p1"}],
     ":3: id 'p1' already used on line 1; give each line a unique 'id'"),
    ([{**PAIRS[0], "id": 1}, {**PAIRS[1], "id": "1"}], ":2: id '1' already used on line 1"),
    ([{k: v for k, v in PAIRS[0].items() if k != "id"}, {**PAIRS[1], "id": "1"}],
     ":2: id '1' already used on line 1"),
    ([PAIRS[0], {k: v for k, v in PAIRS[1].items() if k != "id"}, {**PAIRS[2], "id": 2}],
     ":3: id '2' already used on line 2"),
    ([{**PAIRS[0], "id": None}], ":1: 'id' must be a non-empty string or a whole number, "
                                 "not null"),
    # A text beside a pair: the pair was dropped without a word (or, without --labels, the
    # error asked for a label set).
    ([{**PAIRS[0], "text": "4"}, {**PAIRS[1], "text": "Paris"}],
     ":1: gives both 'text' (classification) and 'prompt', 'a', 'b' (pairwise): keep one"),
    ([{**PAIRS[0], "b": 5}], ":1: 'b' must be a string (response b), not 5"),
    ([{**PAIRS[0], "prompt": ["q"]}], ":1: 'prompt' must be a string (the user's message), "
                                      "not [\"q\"]"),
    ([{"id": "t", "text": 3}], ":1: 'text' must be a string (the text to classify), not 3"),
    # One system spelt two ways ranked as two systems.
    ([{**PAIRS[0], "model_a": "GPT-4", "model_b": "x"}, {**PAIRS[1], "model_b": "gpt-4 "}],
     ":2: 'model_b' 'gpt-4 ' is spelt 'GPT-4' on line 1; write each system's name the same way "
     "on every line"),
    ([{**PAIRS[0], "model_a": "Claude", "model_b": " Claude"}],
     ":1: 'model_b' ' Claude' is spelt 'Claude' on line 1"),
])
def test_bad_input_lines_are_one_line_errors_before_anything_is_written(
        tmp_path, capsys, rows, said):
    data = _jsonl(tmp_path / "bad.jsonl", rows)
    out = tmp_path / "run"
    assert main(["judge", "--model", "canned:A", "--input", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{data}{said}" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("flag", [["--position", "permute"], ["--samples", "3"]])
def test_judge_audit_refuses_the_order_flags_it_would_ignore(tmp_path, flag) -> None:
    """judge-audit asks every item in the fixed order and its reverse: --position and
    --samples were accepted and did nothing."""
    from biasscope.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["judge-audit", "--model", "canned:A", "--input", str(tmp_path / "x.jsonl"),
              "--out", str(tmp_path / "run"), *flag])
    assert stop.value.code == 2 and not (tmp_path / "run").exists()


def test_a_label_named_twice_is_refused_naming_the_file(tmp_path, capsys) -> None:
    """JSON keeps the last of two equal names: a label set of three with one named twice was
    judged as two labels, the first description gone, without a word."""
    texts = _jsonl(tmp_path / "texts.jsonl", [{"id": 1, "text": "I am glad."}])
    labels = tmp_path / "labels.json"
    labels.write_text('{"POS": "Happy.", "NEG": "Sad.", "POS": "Calm."}')
    out = tmp_path / "run"
    assert main(["judge", "--model", "canned:A", "--input", str(texts), "--labels",
                 str(labels), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{labels}: label 'POS' is named twice; give each label once" in err
    assert err.count("\n") == 1 and not out.exists()
