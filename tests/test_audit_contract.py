"""Contract tests over every registered audit probe: it loads from fixture data in the upstream
format, yields stable items, and runs end to end on a tiny local model (option scoring and
generation) and on a stored-responses file, through the CLI, into a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from bbq_fixture import write_bbq
from biasscope.audit import AUDIT_PROBES, load_audit_probe
from biasscope.audit.run import (
    GenerationResponder,
    OptionScorer,
    export_items,
    probe_items,
    run_audit,
)
from biasscope.backends.base import GenerateParams
from biasscope.cli import main
from biasscope.runs.store import RunStore

NAMES = sorted(AUDIT_PROBES)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit-data")
    write_adult(root, ROWS)
    write_bbq(root)
    return root


@pytest.mark.parametrize("name", NAMES)
def test_items_are_stable_unique_and_askable(name, data_dir):
    probe = load_audit_probe(name, data_dir=data_dir)
    items = probe.items(0)
    assert items and items == probe.items(0)
    ids = [i.id for i in items]
    assert len(set(ids)) == len(ids) and all(i.startswith(f"{name}:") for i in ids)
    for item in items:
        turns = probe.messages(item)
        assert turns[-1] == ("user", item.prompt) and item.options
        assert 0 <= item.answer < len(item.options)
    json.dumps(probe.config())


@pytest.fixture(scope="module")
def tiny_local(data_dir):
    """A random-init GPT-NeoX with a tokenizer trained on every probe's prompts and options."""
    pytest.importorskip("torch")
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.demo.tiny import tiny_gpt_neox, train_tokenizer
    from biasscope.runs.checkpoints import Checkpoint

    texts = [f"user: {i.prompt} assistant: {' '.join(i.options)}"
             for n in NAMES for i in load_audit_probe(n, data_dir=data_dir).items(0)]
    tokenizer = train_tokenizer(texts, vocab_size=400)
    model = tiny_gpt_neox(len(tokenizer), max_positions=1024, seed=3)
    return HFGenerator.from_loaded(model, tokenizer, Checkpoint("tiny", "<in-memory>"))


@pytest.mark.parametrize("name", NAMES)
def test_end_to_end_on_a_tiny_local_model(name, data_dir, tiny_local, tmp_path):
    probe = load_audit_probe(name, data_dir=data_dir)
    scored = run_audit([probe], OptionScorer(tiny_local), tmp_path / "scored", limit=12)
    recs = scored.records()
    assert len(recs) == min(12, len(probe.items(0))) and set(recs["source"]) == {"option_scores"}
    assert recs["label"].isin(recs["response"]).all()  # the top option, read back as itself
    probs = [json.loads(p) for p in recs["option_probs"]]
    assert all(abs(sum(p.values()) - 1) < 1e-6 for p in probs)
    summary = json.loads(scored.summary_json.read_text())["probes"][name]
    assert summary["items"] == len(recs) and summary["headline"]

    written = run_audit([probe], GenerationResponder(tiny_local, GenerateParams(max_tokens=3)),
                        tmp_path / "generated", limit=6)
    recs = written.records()
    assert set(recs["source"]) == {"generation"} and recs["response"].notna().all()
    # Gibberish is counted as unparsed (label None), never dropped. The limit keeps whole
    # examples or pairs where the probe has them (BBQ: 4 of 6).
    asked = len(probe_items(probe, 6))
    assert len(recs) == asked and 4 <= asked <= 6
    assert json.loads(written.summary_json.read_text())["probes"][name]["items"] == asked


@pytest.mark.parametrize("name", NAMES)
def test_end_to_end_on_stored_responses_through_the_cli(name, data_dir, tmp_path, capsys):
    exported = tmp_path / "items.jsonl"
    assert main(["items", name, "--out", str(exported), "--data-dir", str(data_dir)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    responses = tmp_path / "responses.jsonl"
    rows = [{"item_id": i["item_id"], "response": i["answer"]} for i in items]
    rows.append({"item_id": f"{name}:no-such-item", "response": "yes"})
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    code = main(["probe", "--responses", str(responses), "--probes", name, "--out", str(out),
                 "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert code == 0 and "1 response ids match no item" in err
    recs = RunStore(out).records()
    assert len(recs) == len(items) and set(recs["source"]) == {"stored"}
    assert (recs["label"] == recs["answer_label"]).all()  # each answered with the reference
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unknown_response_ids"] == [f"{name}:no-such-item"]
    assert (out / "report.html").is_file()
    assert main(["report", str(out)]) == 0


def test_duplicate_response_ids_are_rejected_with_the_ids(data_dir, tmp_path, capsys):
    responses = tmp_path / "r.jsonl"
    responses.write_text('{"item_id": "a", "response": "x"}\n{"item_id": "a", "response": "y"}\n'
                         '{"item_id": "b", "response": null}\n')
    code = main(["probe", "--responses", str(responses), "--probes", "professional-bias",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "appear more than once: a" in err and "Traceback" not in err


def test_the_report_escapes_model_text(tmp_path):
    probe = load_audit_probe("professional-bias")
    item = next(i for i in probe.items(0) if i.groups["pronoun"] == "he")
    trigger = item.options[int(item.groups["trigger"])]
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"item_id": item.id,
                                     "response": f"The {trigger} <script>alert(1)</script>"}))
    out = tmp_path / "run"
    assert main(["probe", "--responses", str(responses), "--probes", "professional-bias",
                 "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html


def test_unknown_probe_is_a_one_line_error(tmp_path, capsys):
    code = main(["probe", "--responses", str(tmp_path / "r.jsonl"), "--probes", "nope",
                 "--out", str(tmp_path / "run")])
    assert code == 2 and "unknown audit probe 'nope'" in capsys.readouterr().err


def test_export_items_writes_every_turn(tmp_path):
    probe = load_audit_probe("professional-bias")
    n = export_items(probe, tmp_path / "items.jsonl")
    first = json.loads((tmp_path / "items.jsonl").read_text().splitlines()[0])
    assert n == len(probe.items(0)) and first["messages"][-1]["role"] == "user"
