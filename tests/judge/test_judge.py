"""The debiased judge against a real llama.cpp server serving a judge that always answers the
first key ("A"): fixed order shows the position bias, shuffle and permute remove it, consensus
refuses to decide, and the judge audit measures it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

pytest.importorskip("openai")

from biasscope.backends.base import Generation, TokenLogprob
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
from biasscope.cli.main import main
from biasscope.judge import (
    Judge,
    JudgeDetector,
    JudgeError,
    JudgingConfig,
    VerbosityBiasWarning,
    classify,
    compare,
)
from biasscope.judge.biases import classifier_biases, pairwise_biases
from biasscope.judge.core import key_token_ids, orders, read_key
from llama_server import Server, TinyLlama, judge_server

LABELS = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad.",
          "NEUTRAL": "The text is neither."}
TEXTS = [f"Review number {i}: it was a day." for i in range(24)]
FAST = HTTPConfig(concurrency=4, timeout=30, max_retries=1, backoff=0.05, max_backoff=0.1)


@pytest.fixture(scope="module")
def served(llama_server: Server, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Server, TinyLlama]]:
    with judge_server(tmp_path_factory.mktemp("judge")) as pair:
        yield pair


@pytest.fixture
def model(served) -> OpenAIGenerator:
    server, _ = served
    return OpenAIGenerator(server.model, server.base_url, config=FAST)


def test_keys_are_single_server_tokens_and_restrict_the_answer(served, model):
    _, tiny = served
    ids = key_token_ids(model, ["A", "B", "C"])
    assert ids == {k: [v] for k, v in tiny.key_ids().items() if k in "ABC"}


def test_fixed_order_shows_the_position_bias(model):
    verdicts = classify(Judge(model, JudgingConfig(position="fixed")), TEXTS[:4], LABELS)
    assert [v.label for v in verdicts] == ["POSITIVE"] * 4  # always the first shown
    assert verdicts[0].probs is not None and verdicts[0].probs["POSITIVE"] > 0.99
    call = verdicts[0].calls[0]
    assert call.key == "A" and call.raw.strip() == "A" and "POSITIVE" not in json.dumps(
        call.order[:0])


def test_shuffle_spreads_a_first_key_judge_over_the_labels(model):
    verdicts = classify(Judge(model), TEXTS, LABELS)  # shuffle is the default
    counts = Counter(v.label for v in verdicts)
    assert set(counts) == set(LABELS) and max(counts.values()) < len(TEXTS)
    assert all(v.label == v.calls[0].order[0] for v in verdicts)  # still the first shown


def test_permute_cancels_the_position_bias_exactly(model):
    verdicts = classify(Judge(model, JudgingConfig(position="permute")), TEXTS[:2], LABELS)
    for v in verdicts:
        assert len(v.calls) == 6 and v.label is None and v.reason == "tie"
        assert v.probs == pytest.approx(dict.fromkeys(LABELS, 1 / 3), abs=1e-6)


def test_consensus_returns_no_verdict_when_the_reversed_order_disagrees(model):
    verdicts = classify(Judge(model, JudgingConfig(position="consensus")), TEXTS[:3], LABELS)
    for v in verdicts:
        assert v.label is None and v.reason == "disagreement" and len(v.calls) == 2
        assert v.calls[1].order == tuple(reversed(v.calls[0].order))


def test_pairwise_and_the_judge_audit(model):
    pairs = [(f"Question {i}?", "Short.", "A much longer answer " * (i % 4 + 1))
             for i in range(16)]
    verdicts = compare(Judge(model, JudgingConfig(position="fixed")), pairs)
    assert {v.label for v in verdicts} == {"a"}
    audit = pairwise_biases(Judge(model), pairs, [("m1", "tiny-judge")] * len(pairs))
    head = audit["headline"]
    assert head["position_consistency"]["estimate"] == 0.0
    first = head["first_slot_rate"]
    assert first["estimate"] == 1.0 and first["p_value"] < 1e-3
    assert head["self_preference:openai-compatible:tiny-judge"]["estimate"] == 0.5
    # Over both orders a judge that always picks the first slot favours neither answer.
    assert head["win_rate_a"]["estimate"] == 0.5
    assert any("first" in s for s in audit["sentences"])


def test_answers_outside_the_keys_are_recorded_not_raised(model):
    # With the label names as keys the judge still says "A": invalid, kept with its text.
    audit = classifier_biases(Judge(model), TEXTS[:4], LABELS)
    assert audit["headline"]["name_sensitivity"]["n"] == 0
    assert any(s.startswith("Name sensitivity could not be measured") and "none of 4" in s
               for s in audit["sentences"])
    named = Judge(model, JudgingConfig(position="fixed", keys=tuple(LABELS), logit_bias=False))
    verdicts = classify(named, TEXTS[:2], LABELS)
    assert all(v.label is None and v.reason == "invalid" for v in verdicts)
    assert verdicts[0].calls[0].raw.strip() == "A"


def test_several_judges_aggregate(served):
    server, _ = served
    models = [OpenAIGenerator(server.model, server.base_url, config=FAST) for _ in range(2)]
    with pytest.raises(JudgeError, match="both labelled 'openai-compatible:tiny-judge'"):
        Judge(models)  # their verdicts would merge under one label
    models[1].label = "second"
    verdicts = classify(Judge(models, JudgingConfig(position="fixed", aggregate="majority")),
                        TEXTS[:2], LABELS)
    assert [v.label for v in verdicts] == ["POSITIVE"] * 2 and len(verdicts[0].calls) == 2


def test_judge_as_a_detector(model):
    from biasscope.core.items import Item

    item = Item("x", "Who was late?", ("doctor", "nurse"), (" doctor", " nurse"), 0)
    detector = JudgeDetector(Judge(model, JudgingConfig(position="fixed")),
                             "Does the response name a doctor?")
    assert detector.detect(item, "The doctor.").hit is True  # "yes" is shown first, key A


def test_cli_judge_and_judge_audit(served, tmp_path):
    server, _ = served
    spec = f"openai-compatible:{server.base_url}#{server.model}"
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                             for i, t in enumerate(TEXTS[:6])))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    out = tmp_path / "run"
    assert main(["judge", "--model", spec, "--input", str(texts), "--labels", str(labels),
                 "--out", str(out), "--no-cache"]) == 0
    rows = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["label"] in LABELS for r in rows)
    assert (out / "report.html").is_file()
    assert main(["judge-audit", "--model", spec, "--input", str(texts), "--labels",
                 str(labels), "--out", str(tmp_path / "audit"), "--no-cache"]) == 0
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert summary["probes"]["judge-audit"]["headline"]["first_slot_rate"]["estimate"] == 1.0


def test_bad_label_sets_and_keys(model):
    judge = Judge(model)
    with pytest.raises(JudgeError, match="at least two labels"):
        classify(judge, TEXTS[:1], {"ONLY": "one"})
    with pytest.raises(JudgeError, match="keys must differ"):
        classify(Judge(model, JudgingConfig(keys=("A", "A", "B"))), TEXTS[:1], LABELS)
    with pytest.raises(JudgeError, match="unknown position strategy"):
        Judge(model, JudgingConfig(position="random"))
    with pytest.warns(VerbosityBiasWarning):
        classify(Judge(model, JudgingConfig(position="fixed")), TEXTS[:1],
                 {"GOOD": "x" * 100, "BAD": "bad"})


def test_read_key_and_orders():
    import random

    gen = Generation(" B", tokens=(TokenLogprob(" B", -0.1, ((" B", -0.1), ("A", -2.4),
                                                              ("Because", -3.0))),))
    key, probs = read_key(gen, ("A", "B"), reasoning=False)
    assert key == "B" and probs is not None and probs["B"] > 0.9 and sum(probs.values()) == 1
    assert read_key(Generation("Because..."), ("A", "B"), False) == (None, None)
    assert read_key(Generation("I think A, no, answer: B"), ("A", "B"), True)[0] == "B"
    assert len(orders(3, JudgingConfig(position="permute"), random.Random(0))) == 6
    assert len(orders(5, JudgingConfig(position="permute", samples=7), random.Random(0))) == 7


def test_name_sensitivity_asks_as_the_lettered_verdicts_were_asked(monkeypatch):
    """Before: the judge asked with label names was built afresh, without --reasoning or
    --top-logprobs, so reasoned verdicts were set against unreasoned ones."""
    import biasscope.judge.biases as biases
    from biasscope.backends.generators import load_generator

    asked: list[JudgingConfig] = []
    real = biases.classify

    def recorded(judge, *args, **kwargs):
        asked.append(judge.config)
        return real(judge, *args, **kwargs)

    monkeypatch.setattr(biases, "classify", recorded)
    config = JudgingConfig(reasoning=True, top_logprobs=5, seed=3, max_reasoning_tokens=64)
    classifier_biases(Judge(load_generator("canned:A"), config), TEXTS[:2], LABELS)
    *lettered, named = asked
    assert named.keys == tuple(LABELS) and not named.logit_bias
    for got in [*lettered, named]:
        assert (got.position, got.reasoning, got.top_logprobs, got.seed,
                got.max_reasoning_tokens) == ("fixed", True, 5, 3, 64)
