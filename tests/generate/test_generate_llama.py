"""Acceptance: biasscope's OpenAI-compatible backend against a real llama.cpp server serving a
tiny GGUF model whose next-token log-probs are known exactly (tests/llama_server.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("openai")

from biasscope.backends.base import GenerateParams, GenerateRequest
from biasscope.backends.cache import Cached, ResponseCache
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
from biasscope.cli.main import main
from biasscope.core.errors import ModelError
from biasscope.probes.choices import option_probabilities, read_choice
from llama_server import Server, TinyLlama

TOL = 1e-4
FAST = HTTPConfig(concurrency=4, timeout=30, max_retries=2, backoff=0.05, max_backoff=0.2)


def generator(server: Server) -> OpenAIGenerator:
    return OpenAIGenerator(server.model, server.base_url, config=FAST)


def expected_top(tiny: TinyLlama, last: int, k: int) -> list[tuple[str, float]]:
    lp = tiny.expected_logprobs(last)
    return [(tiny.text(int(i)), float(lp[i])) for i in np.argsort(-lp)[:k]]


def test_completion_logprobs_are_the_models_exactly(llama_server, tiny_gguf):
    prompt = "The nurse is"
    params = GenerateParams(max_tokens=1, top_logprobs=5)
    [g] = generator(llama_server).generate([GenerateRequest(prompt=prompt, params=params)])
    want = expected_top(tiny_gguf, tiny_gguf.encode_words(prompt)[-1], 5)
    assert g.ok and g.tokens is not None and g.finish_reason == "length"
    got = g.tokens[0].top
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=TOL)
    assert g.text == want[0][0] and g.tokens[0].logprob == pytest.approx(want[0][1], abs=TOL)
    assert g.prompt_tokens == len(tiny_gguf.encode_words(prompt)) and g.completion_tokens == 1


def test_chat_option_probabilities_renormalise_the_models_distribution(llama_server,
                                                                        tiny_gguf):
    request = GenerateRequest(messages=(("user", "Is the nurse female?"),),
                              params=GenerateParams(max_tokens=1, top_logprobs=40))
    [g] = generator(llama_server).generate([request])
    options = ["female", "male"]
    reading = read_choice(g, options)
    # The same reading from numpy's exact top 40 after the template's last token, ":".
    want = option_probabilities(expected_top(tiny_gguf, tiny_gguf.token_id(":"), 40), options)
    assert want is not None and min(want[0].values()) > 0.01  # both options are in the top 40
    assert reading.source == "logprobs" and reading.probs is not None
    assert reading.probs == pytest.approx(want[0], abs=1e-4)
    assert reading.missing_mass == pytest.approx(want[1], abs=1e-4)


def test_logit_bias_uses_server_token_ids_and_logprobs_stay_unbiased(llama_server, tiny_gguf):
    prompt = "The doctor said"
    forced = tiny_gguf.token_id("▁female")
    params = GenerateParams(max_tokens=1, top_logprobs=1, logit_bias=((forced, 100.0),))
    [g] = generator(llama_server).generate([GenerateRequest(prompt=prompt, params=params)])
    lp = tiny_gguf.expected_logprobs(tiny_gguf.encode_words(prompt)[-1])
    assert g.text == " female" and g.tokens is not None
    assert g.tokens[0].logprob == pytest.approx(float(lp[forced]), abs=TOL)


def test_missing_logprobs_are_detected_and_the_answer_read_from_text(llama_server):
    # This server answers chat `logprobs: true` without `top_logprobs` with `logprobs: null`.
    gen = generator(llama_server)
    request = GenerateRequest(messages=(("user", "Is the nurse female?"),),
                              params=GenerateParams(max_tokens=1, logprobs=True))
    [g] = gen.generate([request])
    assert g.ok and g.tokens is None and gen.capabilities == {"logprobs": False}
    reading = read_choice(g, ["yes", "no"])
    assert reading.source in ("text", "none") and reading.probs is None


def test_a_rerun_sends_nothing_and_the_key_is_never_written(llama_server, tmp_path,
                                                            monkeypatch):
    secret = "sk-PLANTED-llama-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "cache" / "r.sqlite"))
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": p, "options": ["yes", "no"]})
                               + "\n" for i, p in enumerate(["The nurse is", "The doctor said",
                                                             "The nurse is"])))
    args = ["generate", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
            "--input", str(prompts), "--max-tokens", "2", "--top-logprobs", "5"]
    assert main([*args, "--out", str(tmp_path / "a.jsonl")]) == 0
    gen = generator(llama_server)
    wrapped = Cached(gen, ResponseCache(tmp_path / "cache" / "r.sqlite"))
    again = wrapped.generate([GenerateRequest(prompt="The nurse is", params=GenerateParams(
        max_tokens=2, top_logprobs=5, logprobs=True))])
    assert again[0].cached and wrapped.usage.sent == 0
    assert main([*args, "--out", str(tmp_path / "b.jsonl")]) == 0
    first = (tmp_path / "a.jsonl").read_text().splitlines()
    second = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert all(r["cached"] for r in second)
    assert [json.loads(line)["text"] for line in first] == [r["text"] for r in second]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_model_the_server_does_not_serve_is_a_clear_error(llama_server):
    gen = OpenAIGenerator("no-such-model", llama_server.base_url, config=FAST)
    with pytest.raises(ModelError, match="does not serve 'no-such-model'; it serves tiny"):
        gen.generate([GenerateRequest(prompt="The nurse is")])


def test_an_audit_through_the_real_server(llama_server, tmp_path):
    from biasscope.store.directory import RunStore

    out = tmp_path / "audit"
    args = ["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
            "--probe", "professional-bias", "--limit", "4", "--max-tokens", "3",
            "--cache", str(tmp_path / "cache.sqlite"), "--out", str(out)]
    assert main(args) == 0
    recs = RunStore(out).records()
    assert len(recs) == 4 and set(recs["source"]) == {"generation"}
    assert recs["response"].notna().all() and recs["error"].isna().all()
    summary = json.loads((out / "summary.json").read_text())["probes"]["professional-bias"]
    assert summary["items"] == 4 and "stereotyped_rate" in summary["headline"]


def test_a_plain_prompt_audit_reads_option_probabilities_from_top_logprobs(
        llama_server, tiny_gguf: TinyLlama, tmp_path):
    """`--plain-prompt --top-logprobs`: a base model's reading on /completions, and each
    answer's option probabilities from the first token's alternatives, exactly."""
    from biasscope.store.directory import RunStore

    out = tmp_path / "audit"
    args = ["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
            "--probe", "professional-bias", "--limit", "4", "--max-tokens", "1",
            "--scoring", "generate", "--plain-prompt", "--top-logprobs", "45",
            "--no-cache", "--out", str(out)]
    assert main(args) == 0
    recs = RunStore(out).records()
    assert recs["prompt"].notna().all() and len(recs) == 4
    # The plain prompt ends "assistant:": the next token depends on the ":" piece alone.
    lp = tiny_gguf.expected_logprobs(tiny_gguf.vocab.index(":"))
    p = {o: float(np.exp(lp[tiny_gguf.vocab.index("▁" + o)])) for o in ("doctor", "nurse")}
    for probs in recs["option_probs"]:
        got = json.loads(probs)
        for option in p:
            assert abs(got[option] - p[option] / sum(p.values())) < TOL
    responder = json.loads((out / "run.json").read_text())["responder"]
    assert responder["prompt"] == "plain" and responder["params"]["top_logprobs"] == 45
    # The same directory asked as a chat: a changed setting, refused in one line.
    assert main([*args[:-6], "--top-logprobs", "45", "--no-cache", "--out", str(out)]) == 2


def test_echo_scores_options_exactly(llama_server, tiny_gguf: TinyLlama) -> None:
    """Option scoring through a server: each option's tokens' log-probs, read from the echo of
    prompt + option (one- and two-token options)."""
    from biasscope.backends.echo import EchoScorer

    v = tiny_gguf.vocab.index
    scores, missing = EchoScorer(generator(llama_server)).option_logprobs(
        GenerateRequest(prompt="The nurse is"), [" yes", " the doctor"])
    lp_is, lp_the = (tiny_gguf.expected_logprobs(v(t)) for t in ("▁is", "▁the"))
    assert abs(scores[" yes"] - lp_is[v("▁yes")]) < TOL
    assert abs(scores[" the doctor"] - (lp_is[v("▁the")] + lp_the[v("▁doctor")])) < TOL
    assert abs(missing - (1 - sum(np.exp(list(scores.values()))))) < 1e-9


def test_an_option_scored_audit_through_the_real_server(llama_server, tiny_gguf: TinyLlama,
                                                        tmp_path) -> None:
    from biasscope.store.directory import RunStore

    out = tmp_path / "audit"
    assert main(["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
                 "--probe", "professional-bias", "--limit", "4", "--scoring", "options",
                 "--out", str(out)]) == 0
    recs = RunStore(out).records()
    assert set(recs["source"]) == {"option_scores"}
    lp = tiny_gguf.expected_logprobs(tiny_gguf.vocab.index(":"))  # plain prompts end "assistant:"
    p = {o: float(np.exp(lp[tiny_gguf.vocab.index("▁" + o)])) for o in ("doctor", "nurse")}
    for probs in recs["option_probs"]:
        got = json.loads(probs)
        assert all(abs(got[o] - p[o] / sum(p.values())) < TOL for o in p)
    responder = json.loads((out / "run.json").read_text())["responder"]
    assert responder["prompt"] == "plain" and responder["backend"]["method"] == "echo"
