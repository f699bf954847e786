"""``probe --responses`` and model folders tell the truth (issue 23, items 6, 9, 12 and 14): a
rerun reports no valid id as unknown, a malformed responses line is one line naming it, the
options --responses makes meaningless are refused, and an empty model folder is said to hold
no model rather than a damaged tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import user_error
from biasscope.cli.main import main
from biasscope.store.directory import RunStore

PROBE = "professional-bias"
NOWHERE = "openai-compatible:http://127.0.0.1:9/v1#m"  # nothing listens: never reached


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_error.own_caches(tmp_path, monkeypatch)


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    return user_error.one_line(capsys, argv, 2)


def _item_ids(tmp_path: Path, limit: int = 8) -> list[str]:
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", PROBE, "--out", str(exported), "--limit", str(limit)]) == 0
    return [json.loads(row)["item_id"] for row in exported.read_text().splitlines()]


def _responses(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


# ------------------------------------------------- item 6: an identical rerun is the same run


def test_an_identical_rerun_lists_only_the_truly_unknown_ids(tmp_path, capsys):
    """Before: the rerun found its unit stored, answered nothing from the file, and called
    every id of it unknown (summary, report and stderr)."""
    ids = _item_ids(tmp_path)
    rows = [json.dumps({"item_id": i, "response": "The doctor."}) for i in ids]
    responses = _responses(tmp_path, [*rows, json.dumps({"item_id": "nope", "response": "x"})])
    out = tmp_path / "run"
    argv = ["audit", "--responses", str(responses), "--probe", PROBE, "--out", str(out),
            "--limit", str(len(ids))]
    summaries, errs = [], []
    for _ in range(2):
        assert main(argv) == 0
        errs.append(capsys.readouterr().err)
        summary = json.loads((out / "summary.json").read_text())
        summary.pop("requests")  # what this call asked: all, then none (the unit is stored)
        summaries.append(summary)
    assert summaries[0]["unknown_response_ids"] == ["nope"]
    assert summaries[1] == summaries[0]
    assert "1 response ids match no item" in errs[1] and errs[1] == errs[0]
    assert "1 response ids match no item: nope</p>" in (out / "report.html").read_text()
    assert len(RunStore(out).records()) == len(ids)


def test_a_responses_file_saved_with_a_byte_order_mark_is_read(tmp_path, capsys):
    """Before: a file saved by Notepad or PowerShell (a UTF-8 BOM, CRLF line ends) stopped at
    "r.jsonl:1: not valid JSON (Unexpected UTF-8 BOM ...)"."""
    ids = _item_ids(tmp_path, limit=4)
    responses = tmp_path / "r.jsonl"
    responses.write_bytes(b"\xef\xbb\xbf" + "".join(
        json.dumps({"item_id": i, "response": "The doctor."}) + "\r\n" for i in ids).encode())
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", PROBE, "--out", str(out),
                 "--limit", "4"]) == 0, capsys.readouterr().err
    recs = RunStore(out).records()
    assert sorted(recs["item_id"]) == sorted(ids) and recs["response"].notna().all()


# ------------------------------------------ item 9: a malformed line is one line, file:line


@pytest.mark.parametrize(("line", "said"), [
    ('{"item_id": "ID"}', ":2: no 'response' field; each line is {\"item_id\": ..."),
    ('{"response": "x"}', ":2: no 'item_id' field"),
    ("{not json", ":2: not valid JSON"),
    ('["ID", "x"]', ":2: expected a JSON object"),
    ('"just text"', ":2: expected a JSON object"),
    ('{"item_id": 7, "response": "x"}', ":2: 'item_id' must be a string"),
    ('{"item_id": "ID", "response": 42}', ":2: 'response' must be a string (the model's text) "
     "or null"),
    ('{"item_id": "ID", "response": ["x"]}', ":2: 'response' must be a string"),
])
def test_a_malformed_responses_line_is_one_line_naming_it(line, said, tmp_path, capsys):
    ids = _item_ids(tmp_path, 4)
    responses = _responses(tmp_path, [json.dumps({"item_id": ids[0], "response": "x"}),
                                      line.replace("ID", ids[1])])
    out = tmp_path / "run"
    error = one_line(capsys, ["audit", "--responses", str(responses), "--probe", PROBE,
                              "--out", str(out)])
    assert f"{responses}{said}" in error
    assert not (out / "run.json").exists()


def test_a_duplicate_id_names_its_lines(tmp_path, capsys):
    ids = _item_ids(tmp_path, 4)
    rows = [{"item_id": ids[0], "response": "a"}, {"item_id": ids[1], "response": "b"},
            {"item_id": ids[0], "response": "c"}, {"item_id": ids[1], "response": None}]
    responses = _responses(tmp_path, [json.dumps(r) for r in rows])
    error = one_line(capsys, ["audit", "--responses", str(responses), "--probe", PROBE,
                              "--out", str(tmp_path / "run")])
    assert f"{responses}:3: item ids appear more than once: {ids[0]} (lines 1, 3), " \
           f"{ids[1]} (lines 2, 4); keep one response per item id" in error


# ------------------------------------- item 12: options --responses would silently ignore


@pytest.mark.parametrize("extra", [
    ["--scoring", "options"], ["--scoring", "generate"], ["--temperature", "0.7"],
    ["--max-tokens", "5"], ["--top-logprobs", "3"], ["--plain-prompt"], ["--seed", "1"],
    ["--device", "cpu"], ["--allow-pickle"], ["--concurrency", "2"], ["--no-cache"],
    ["--base-url", "http://127.0.0.1:9/v1"], ["--cache", "c.sqlite"]])
def test_model_only_options_are_refused_with_responses(extra, tmp_path, capsys):
    ids = _item_ids(tmp_path, 4)
    responses = _responses(tmp_path, [json.dumps({"item_id": i, "response": "x"}) for i in ids])
    out = tmp_path / "run"
    error = one_line(capsys, ["audit", "--responses", str(responses), "--probe", PROBE,
                              "--out", str(out), *extra])
    assert error.startswith(f"biasscope: error: {' '.join(extra)}: only for --model; "
                            "--responses holds text already written")
    assert not (out / "run.json").exists()


def test_the_defaults_written_out_and_a_name_are_fine_with_responses(tmp_path, capsys):
    ids = _item_ids(tmp_path, 4)
    responses = _responses(tmp_path, [json.dumps({"item_id": i, "response": "x"}) for i in ids])
    assert main(["audit", "--responses", str(responses), "--probe", PROBE, "--limit", "4",
                 "--out", str(tmp_path / "run"), "--scoring", "auto", "--name", "m"]) == 0


def test_a_name_is_refused_with_a_model(tmp_path, capsys):
    error = one_line(capsys, ["audit", "--model", NOWHERE, "--name", "mine", "--probe", PROBE,
                              "--out", str(tmp_path / "run")])
    assert "--name is for --responses" in error


# ------------------------------------------------ item 14: an empty folder holds no model


def _empty(tmp_path: Path) -> Path:
    folder = tmp_path / "empty_model"
    folder.mkdir()
    return folder


def _judge_input(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": 1, "prompt": "Which?", "a": "one", "b": "two"}) + "\n")
    return path


@pytest.mark.parametrize("command", ["dynamics", "dynamics-hf", "probe", "judge", "generate"])
def test_an_empty_model_folder_holds_no_model(command, winobias_dir, tmp_path, capsys):
    folder = _empty(tmp_path)
    out = tmp_path / "run"
    argv = {
        "dynamics": ["dynamics", "--model", str(folder), "--data-dir", str(winobias_dir),
                     "--out", str(out), "--seeds", "0", "--limit", "2", "--device", "cpu"],
        "dynamics-hf": ["dynamics", "--checkpoint-glob", f"{folder}*", "--data-dir",
                        str(winobias_dir), "--out", str(out), "--seeds", "0", "--device", "cpu"],
        "probe": ["audit", "--model", f"hf:{folder}", "--probe", PROBE, "--out", str(out)],
        "judge": ["judge", "--model", f"hf:{folder}", "--input", str(_judge_input(tmp_path)),
                  "--out", str(out)],
        "generate": ["generate", "--model", f"hf:{folder}", "--input",
                     str(_responses(tmp_path, ['{"id": 1, "prompt": "hi"}'])),
                     "--out", str(tmp_path / "g.jsonl")],
    }[command]
    error = one_line(capsys, argv)
    assert f"{folder} holds no model (no config.json, weights or tokenizer files; the folder " \
           "is empty)" in error
    assert "look damaged" not in error and "save_pretrained" in error
    assert not list(out.glob("records/*"))


def test_a_folder_of_checkpoints_names_them(winobias_dir, tmp_path, capsys):
    folder = _empty(tmp_path)
    for step in (10, 20, 30, 40):
        (folder / f"checkpoint-{step}").mkdir()
    error = one_line(capsys, ["audit", "--model", f"hf:{folder}", "--probe", PROBE,
                              "--out", str(tmp_path / "run")])
    assert "it holds the folders checkpoint-10, checkpoint-20, checkpoint-30, ...)" in error
