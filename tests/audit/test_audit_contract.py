"""Contract tests over every registered probe, for every request kind it claims: it loads from
fixture data in the upstream format, yields stable items that `biasscope items` exports, and
answers each of its request kinds on a tiny local model (next-token and continuation scores,
option scoring and generation); probes asked by chat also run on a stored-responses file,
through the CLI, into a report."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from biasscope.audit.harness import (
    GenerationResponder,
    OptionScorer,
    export_items,
    probe_items,
    run_audit,
)
from biasscope.backends.base import GenerateParams
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.probes import PROBES, REQUEST_KINDS, load_probe, requests_of
from biasscope.store.directory import RunStore
from every_probe_data import write_every_probe

NAMES = list(PROBES)
CLAIMS = [(name, kind) for name in NAMES for kind in PROBES[name].requests]
ASKED = [name for name in NAMES if "generate" in PROBES[name].requests]  # asked by chat


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_every_probe(tmp_path_factory.mktemp("probe-data"))


def test_every_probe_file_registers_what_it_claims():
    assert set(NAMES) >= {"winobias-gender", "lambada", "adult-counterfactual",
                          "professional-bias", "bbq"}
    for name, info in PROBES.items():
        assert info.name == name and info.requests and set(info.requests) <= set(REQUEST_KINDS)
        assert info.metrics and info.about


@pytest.mark.parametrize("name", NAMES)
def test_items_are_stable_unique_and_askable(name, data_dir):
    probe = load_probe(name, data_dir=data_dir)
    assert requests_of(probe) == PROBES[name].requests
    items = probe.items(0)
    assert items and items == probe.items(0)
    ids = [i.id for i in items]
    assert len(set(ids)) == len(ids) and all(i.startswith(f"{name}:") for i in ids)
    for item in items:
        assert item.options and 0 <= item.answer < len(item.options)
        if name in ASKED:
            turns = probe.messages(item)
            assert turns[-1] == ("user", item.prompt)
    json.dumps(probe.config())


@pytest.mark.parametrize("name", NAMES)
def test_biasscope_items_exports_every_probe(name, data_dir, tmp_path, capsys):
    out = tmp_path / "items.jsonl"
    assert main(["items", "--probe", name, "--out", str(out), "--data-dir", str(data_dir)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    items = load_probe(name, data_dir=data_dir).items(0)
    assert [r["item_id"] for r in rows] == [i.id for i in items]
    assert f"{len(items)} items of {name}" in capsys.readouterr().out
    first = rows[0]
    assert first["options"] == list(items[0].options) and first["continuations"]
    assert ("messages" in first) == (name in ASKED)


def test_items_of_another_seed_show_winobias_options_in_another_order(data_dir, tmp_path):
    orders = []
    for seed in ("0", "1"):
        out = tmp_path / f"seed{seed}.jsonl"
        assert main(["items", "--probe", "winobias-gender", "--seed", seed, "--out", str(out),
                     "--data-dir", str(data_dir)]) == 0
        orders.append([json.loads(r)["groups"]["option_order"]
                       for r in out.read_text().splitlines()])
    assert orders[0] != orders[1] and len(orders[0]) == len(orders[1])


@pytest.fixture(scope="module")
def tiny_local(data_dir):
    """A random-init GPT-NeoX with a tokenizer trained on every probe's prompts and options."""
    pytest.importorskip("torch")
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.demo.tiny import tiny_gpt_neox, train_tokenizer

    texts = [f"user: {i.prompt} assistant: {' '.join(i.options)}{''.join(i.continuations)}"
             for n in NAMES for i in load_probe(n, data_dir=data_dir).items(0)]
    tokenizer = train_tokenizer(texts, vocab_size=400)
    model = tiny_gpt_neox(len(tokenizer), max_positions=1024, seed=3)
    return HFGenerator.from_loaded(model, tokenizer, Checkpoint("tiny", "<in-memory>"))


@pytest.mark.parametrize(("name", "kind"), CLAIMS)
def test_every_request_kind_a_probe_claims(name, kind, data_dir, tiny_local, tmp_path):
    probe = load_probe(name, data_dir=data_dir)
    if kind in ("next_token", "continuation"):
        from biasscope.backends.hf import HFScorer
        from biasscope.backends.hf_model import HFConfig

        scorer = HFScorer(tiny_local.ckpt, tiny_local.model, tiny_local.tokenizer,
                          HFConfig(first_token=True))
        items = probe.items(0)[:8]
        scores = getattr(scorer, f"score_{kind}")(items)
        assert len(scores) == len(items)
        for item, score in zip(items, scores):
            if kind == "next_token":
                assert len(score.option_logprobs) == len(item.options)
                assert all(v <= 0 for v in score.option_logprobs) and score.target_rank >= 1
            else:
                assert math.isfinite(score.logprob) and score.tokens >= 1
    elif kind == "options":
        options_end_to_end(name, probe, tiny_local, tmp_path)
    else:
        generate_end_to_end(name, probe, tiny_local, tmp_path)


def options_end_to_end(name, probe, tiny_local, tmp_path):
    scored = run_audit([probe], OptionScorer(tiny_local), tmp_path / "scored", limit=12)
    recs = scored.records()
    assert len(recs) == min(12, len(probe.items(0))) and set(recs["source"]) == {"option_scores"}
    assert recs["label"].isin(recs["response"]).all()  # the top option, read back as itself
    probs = [json.loads(p) for p in recs["option_probs"]]
    assert all(abs(sum(p.values()) - 1) < 1e-6 for p in probs)
    summary = json.loads(scored.summary_json.read_text())["probes"][name]
    assert summary["items"] == len(recs) and summary["headline"]


def generate_end_to_end(name, probe, tiny_local, tmp_path):
    written = run_audit([probe], GenerationResponder(tiny_local, GenerateParams(max_tokens=3)),
                        tmp_path / "generated", limit=6)
    recs = written.records()
    assert set(recs["source"]) == {"generation"} and recs["response"].notna().all()
    # Gibberish is counted as unparsed (label None), never dropped. The limit keeps whole
    # examples or pairs where the probe has them (BBQ: 4 of 6).
    asked = len(probe_items(probe, 6))
    assert len(recs) == asked and 4 <= asked <= 6
    assert json.loads(written.summary_json.read_text())["probes"][name]["items"] == asked


@pytest.mark.parametrize("name", ASKED)
def test_end_to_end_on_stored_responses_through_the_cli(name, data_dir, tmp_path, capsys):
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", name, "--out", str(exported),
                 "--data-dir", str(data_dir)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    responses = tmp_path / "responses.jsonl"
    rows = [{"item_id": i["item_id"], "response": i["answer"]} for i in items]
    rows.append({"item_id": f"{name}:no-such-item", "response": "yes"})
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    code = main(["audit", "--responses", str(responses), "--probe", name, "--out", str(out),
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
    code = main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "appear more than once: a" in err and "Traceback" not in err


def test_the_report_escapes_model_text(tmp_path):
    probe = load_probe("professional-bias")
    item = next(i for i in probe.items(0) if i.groups["pronoun"] == "he")
    trigger = item.options[int(item.groups["trigger"])]
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"item_id": item.id,
                                     "response": f"The {trigger} <script>alert(1)</script>"}))
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html


def test_unknown_probe_is_a_one_line_error(tmp_path, capsys):
    code = main(["audit", "--responses", str(tmp_path / "r.jsonl"), "--probe", "nope",
                 "--out", str(tmp_path / "run")])
    assert code == 2 and "unknown probe 'nope'" in capsys.readouterr().err


def test_the_probe_help_gives_examples_the_audit_takes(capsys):
    """`audit --help` said "e.g. --probe winobias-gender --probe bbq:Age,Religion", and the
    audit refuses winobias-gender."""
    from biasscope.audit.scored import require_statistics

    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    named = re.findall(r"--probe ([a-z][\w-]*)", text)
    assert named
    for name in named:
        require_statistics(name)  # raises for a probe the audit refuses


@pytest.mark.parametrize("model", [["--responses", "r.jsonl"],
                                   ["--model", "openai-compatible:http://127.0.0.1:9/v1#m"]])
def test_audit_says_why_it_cannot_score_winobias(tmp_path, capsys, monkeypatch, model):
    """WinoBias takes next-token requests like Winogender, but its measures are the dynamics
    analysis (and its Average Rank a rank a server's echo does not give): one line that says
    so and names the command that scores it, before any data is read; nothing written.
    (Winogender is scored by the audit: tests/audit/test_audit_next_token.py.)"""
    monkeypatch.chdir(tmp_path)
    code = main(["audit", *model, "--probe", "winobias-gender", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "probe winobias-gender cannot be audited" in err and "Average Rank" in err
    assert "biasscope dynamics --model DIR --probe winobias-gender" in err
    assert not (tmp_path / "run").exists()


def test_biasscope_probes_lists_every_probe(capsys):
    assert main(["probes"]) == 0
    out = capsys.readouterr().out
    for name, info in PROBES.items():
        assert f"{name}: " in out and ", ".join(info.requests) in out
    assert "none (ships with biasscope)" in out and "bbq (`biasscope data fetch bbq`" in out
    assert main(["probes", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listed] == NAMES
    assert listed[NAMES.index("bbq")]["requests"] == ["options", "generate"]


def test_one_registry_one_loader_and_the_old_names_are_gone(data_dir):
    import biasscope.audit as audit
    import biasscope.probes as probes

    # The one registry and its loader do what the removed second ones did.
    assert sorted(n for n, i in PROBES.items() if "generate" in i.requests) == sorted(ASKED)
    assert load_probe("professional-bias").name == "professional-bias"
    assert PROBES["lambada"].load(data_dir=data_dir).name == "lambada"
    with pytest.raises(BiasscopeError, match="unknown probe 'no-such-probe'"):
        load_probe("no-such-probe")
    for old in ("AUDIT_PROBES", "load_audit_probe"):
        assert not hasattr(audit, old)
    with pytest.raises(ImportError):
        from biasscope.audit import load_audit_probe  # noqa: F401
    assert not hasattr(probes, "deprecated")
    with pytest.raises(TypeError, match="not callable"):
        PROBES["lambada"](data_dir=data_dir)  # type: ignore[operator]


def test_requests_of_reads_requests_only():
    class Plain:
        name = "plain"

    class Old(Plain):
        request = "generate"  # the old single attribute no longer counts

    class Asked(Plain):
        requests = ("options", "generate")

    assert requests_of(Plain()) == ("next_token",) == requests_of(Old())
    assert requests_of(Asked()) == ("options", "generate")


def test_export_items_writes_every_turn(tmp_path):
    probe = load_probe("professional-bias")
    n = export_items(probe, tmp_path / "items.jsonl")
    first = json.loads((tmp_path / "items.jsonl").read_text().splitlines()[0])
    assert n == len(probe.items(0)) and first["messages"][-1]["role"] == "user"


@pytest.mark.parametrize("probe", ["lambada", "perplexity"])
def test_audit_says_why_it_cannot_score_a_performance_probe(tmp_path, capsys, monkeypatch, probe):
    """LAMBADA and perplexity measure performance (a sweep's curve beside its bias
    measures), not a bias with CIs: one line naming the command that scores them, before any
    request (through a server they ended in a traceback)."""
    monkeypatch.chdir(tmp_path)
    code = main(["audit", "--model", "openai-compatible:http://127.0.0.1:9/v1#m", "--probe",
                 probe, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"probe {probe} cannot be audited" in err and "performance" in err
    assert f"biasscope dynamics --model DIR --probe {probe}" in err
    assert not (tmp_path / "run").exists()
