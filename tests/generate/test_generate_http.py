"""The OpenAI-compatible backend against a scripted real HTTP server: parsing, retries,
failure records, concurrency, the cache, secrets, capability detection and bad input."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from biasscope.backends.base import GenerateParams, GenerateRequest, Generation, TokenLogprob
from biasscope.backends.cache import Cached, ResponseCache
from biasscope.backends.generators import GeneratorConfig, load_generator
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
from biasscope.cli.main import main
from biasscope.core.errors import ModelError
from biasscope.probes.choices import (
    OptionReading,
    option_probabilities,
    parse_choice,
    read_choice,
)
from scripted_server import Reply, chat, completion, serve

FAST = HTTPConfig(concurrency=4, timeout=5, max_retries=2, backoff=0.01, max_backoff=0.05)
TOP = {" yes": -0.2, " no": -2.0, " maybe": -3.0}


def ok(path: str, body: dict[str, Any], n: int) -> Reply:
    if path.endswith("/chat/completions"):
        return Reply(body=chat("Yes.", [("Yes", -0.1, {"Yes": -0.1, "No": -2.5})]))
    return Reply(body=completion(" yes", [(" yes", -0.2, TOP)]))


def test_completion_and_chat_are_parsed_with_logprobs_and_usage():
    with serve(ok) as server:
        gen = OpenAIGenerator("m", server.base_url, config=FAST)
        params = GenerateParams(max_tokens=3, top_logprobs=3, stop=("\n",), seed=1,
                                logit_bias=((42, -100.0),))
        plain, talk = gen.generate([GenerateRequest(prompt="Q?", params=params),
                                    GenerateRequest(messages=(("user", "Q?"),), params=params)])
    assert plain.text == " yes" and plain.tokens is not None
    assert plain.tokens[0].top[0] == (" yes", -0.2)  # most probable first
    assert (plain.prompt_tokens, plain.completion_tokens) == (5, 2)
    assert talk.text == "Yes." and talk.tokens == (TokenLogprob("Yes", -0.1, (
        ("Yes", -0.1), ("No", -2.5))),)
    sent = {("messages" in b): b for b in server.generation_calls()}
    assert sent[False]["logprobs"] == 3 and sent[False]["logit_bias"] == {"42": -100.0}
    assert sent[True]["logprobs"] is True and sent[True]["top_logprobs"] == 3
    assert sent[True]["max_tokens"] == 3 and sent[True]["stop"] == ["\n"]
    assert gen.capabilities == {"logprobs": True}


def test_429_waits_for_retry_after_then_succeeds():
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if n == 1:
            return Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.3"})
        return ok(path, body, n)

    with serve(script) as server:
        start = time.monotonic()
        [g] = OpenAIGenerator("m", server.base_url, config=FAST).generate(
            [GenerateRequest(prompt="Q?")])
        assert time.monotonic() - start >= 0.3
    assert g.ok and g.attempts == 2


@pytest.mark.parametrize("reply", [Reply(503, {"error": {"message": "overloaded"}}),
                                   Reply(200, b"{not json")])
def test_spent_retries_become_a_failure_record_not_a_crash(reply):
    with serve(lambda p, b, n: reply if n <= 3 else ok(p, b, n)) as server:
        gen = OpenAIGenerator("m", server.base_url, config=FAST)
        failed, = gen.generate([GenerateRequest(prompt="Q?")])
        assert len(server.generation_calls()) == 3  # 1 + max_retries
        assert not failed.ok and failed.attempts == 3 and failed.text == ""
        assert "gave up after 3 attempts" in (failed.error or "")
        later, = gen.generate([GenerateRequest(prompt="Q?")])
    assert later.ok


def test_the_cli_exits_non_zero_and_says_how_to_retry_when_requests_fail(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Q?"}\n')
    with serve(lambda p, b, n: Reply(500, {"error": {"message": "boom"}})) as server:
        code = main(["generate", "--model", f"openai-compatible:{server.base_url}#m",
                     "--input", str(prompts), "--out", str(tmp_path / "o.jsonl"),
                     "--retries", "0", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1 and "1 requests failed" in err and "run the same command again" in err
    [row] = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert row["id"] == "a" and "HTTP 500" in row["error"] and row["text"] == ""


def test_concurrency_is_bounded():
    with serve(lambda p, b, n: Reply(body=completion("x"), delay=0.05)) as server:
        gen = OpenAIGenerator("m", server.base_url, config=FAST)
        out = gen.generate([GenerateRequest(prompt=f"{i}") for i in range(20)])
    assert all(g.ok for g in out) and server.max_in_flight == 4


def test_unreachable_server_and_wrong_model_stop_with_a_clear_message():
    with serve(ok) as server:
        url = server.base_url
        with pytest.raises(ModelError, match=r"does not serve 'nope'; it serves m"):
            OpenAIGenerator("nope", url, config=FAST).generate([GenerateRequest(prompt="Q")])
    with pytest.raises(ModelError, match=r"cannot reach .* start the server"):
        OpenAIGenerator("m", url, config=FAST).generate([GenerateRequest(prompt="Q")])


def test_a_server_without_logprobs_is_detected_and_the_answer_parsed_from_text():
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if "logprobs" in body:
            return Reply(400, {"error": {"message": "logprobs is not supported"}})
        return Reply(body=chat("Answer: no, I think"))

    with serve(script) as server:
        gen = OpenAIGenerator("m", server.base_url, config=FAST)
        request = GenerateRequest(messages=(("user", "Q?"),),
                                  params=GenerateParams(top_logprobs=5))
        first, second = gen.generate([request]), gen.generate([request])
        assert gen.capabilities == {"logprobs": False}
        assert [b.get("logprobs") for b in server.generation_calls()] == [True, None, None]
    assert first[0].tokens is None and first[0].attempts == 1 and second[0].ok
    assert read_choice(first[0], ["yes", "no"]) == OptionReading("no", "text")
    assert read_choice(Generation("yes or no?"), ["yes", "no"]) == OptionReading(None, "none")


def test_option_probabilities_are_renormalised_with_the_missing_mass():
    probs, missing = option_probabilities(list(TOP.items()), ["yes", "no"])
    p_yes, p_no = math.exp(-0.2), math.exp(-2.0)
    assert probs["yes"] == pytest.approx(p_yes / (p_yes + p_no))
    assert missing == pytest.approx(1 - p_yes - p_no)
    # "▁fe" begins only "female"; "m" would begin two options and counts as missing.
    probs, _ = option_probabilities([("▁fe", -1.0), ("m", -1.0), (" male", -1.0)],
                                    ["male", "female", "maybe"])
    assert probs == {"male": 0.5, "female": 0.5, "maybe": 0.0}
    reading = read_choice(Generation(" yes", tokens=(TokenLogprob(" ", -0.01),
                                                     TokenLogprob("yes", -0.2, tuple(
                                                         TOP.items())))), ["yes", "no"])
    assert reading.source == "logprobs" and reading.answer == "yes"


@pytest.mark.parametrize(("text", "answer"), [
    ("Female", "female"), ("female.", "female"), ("not specified", "not specified"),
    ("Male, because the pronoun ...", "male"), ("It is not specified here", "not specified"),
    ("male or female", None), ("I cannot tell", None)])
def test_parse_choice(text, answer):
    assert parse_choice(text, ["male", "female", "not specified"]) == answer


def test_cache_makes_a_rerun_free_and_never_holds_the_key(tmp_path, monkeypatch):
    secret = "sk-PLANTED-test-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    requests = tmp_path / "in.jsonl"
    requests.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "prompt": "Is it?", "options": ["yes", "no"]},
        {"id": "b", "messages": [{"role": "user", "content": "Is it?"}]},
        {"id": "c", "prompt": "Is it?", "options": ["yes", "no"]}]) + "\n")
    with serve(ok) as server:
        spec = f"openai-compatible:{server.base_url}#m"
        args = ["generate", "--model", spec, "--input", str(requests), "--top-logprobs", "3",
                "--cache", str(tmp_path / "cache.sqlite")]
        assert main([*args, "--out", str(tmp_path / "out1.jsonl")]) == 0
        sent = len(server.generation_calls())
        assert sent == 2  # "a" and "c" are the same request
        assert main([*args, "--out", str(tmp_path / "out2.jsonl")]) == 0
        assert len(server.generation_calls()) == sent  # the rerun sent nothing
        assert all(h.get("authorization") == f"Bearer {secret}" for _, _, h in server.calls)
    first = [json.loads(line) for line in (tmp_path / "out1.jsonl").read_text().splitlines()]
    again = [json.loads(line) for line in (tmp_path / "out2.jsonl").read_text().splitlines()]
    assert [r.get("answer") for r in first] == ["yes", None, "yes"]
    assert first[0]["option_probs"]["yes"] > 0.8 and first[0]["answer_source"] == "logprobs"
    assert all(r["cached"] for r in again) and [r["text"] for r in again] == [
        r["text"] for r in first]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_cached_wrapper_counts_usage_and_skips_failures(tmp_path):
    class Flaky:
        label = "flaky"
        calls = 0

        def identity(self) -> dict[str, str]:
            return {"backend": "flaky"}

        def generate(self, requests):
            Flaky.calls += len(requests)
            return [Generation("", error="down") if r.prompt == "bad" else
                    Generation("ok", prompt_tokens=2, completion_tokens=1) for r in requests]

    cache = ResponseCache(tmp_path / "c.sqlite")
    wrapped = Cached(Flaky(), cache)
    wrapped.generate([GenerateRequest(prompt="good"), GenerateRequest(prompt="bad")])
    wrapped.generate([GenerateRequest(prompt="good"), GenerateRequest(prompt="bad")])
    assert Flaky.calls == 3 and len(cache) == 1  # the failure is retried, not cached
    assert (wrapped.usage.sent, wrapped.usage.cached, wrapped.usage.failed) == (3, 1, 2)
    assert wrapped.usage.prompt_tokens == 2


@pytest.mark.parametrize(("spec", "message"), [
    ("gpt-4o", "write BACKEND:MODEL"),
    ("openai-compatible:http://127.0.0.1:1/v1", "openai-compatible:URL#MODEL"),
    ("openai-compatible:my-model", "give the server's URL")])
def test_bad_specs_say_how_to_write_them(spec, message, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match=message):
        load_generator(spec, GeneratorConfig())


def test_openai_without_a_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="set OPENAI_API_KEY"):
        load_generator("openai:gpt-4o-mini")


def test_an_empty_api_key_env_is_refused_not_read_as_the_default(monkeypatch):
    """``--api-key-env "$VAR"`` with VAR unset gave "": the key came from OPENAI_API_KEY
    unsaid, perhaps another account's."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    with pytest.raises(ModelError, match=r"^--api-key-env is empty: name the environment "
                       r"variable that holds the key, or drop the flag to read \$OPENAI_API_KEY$"):
        load_generator("openai:gpt-4o-mini", GeneratorConfig(api_key_env=" "))


def test_bad_input_lines_name_file_and_line(tmp_path, capsys):
    bad = tmp_path / "in.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": 3}\n')
    code = main(["generate", "--model", "openai-compatible:http://127.0.0.1:9/v1#m",
                 "--input", str(bad), "--out", str(tmp_path / "o.jsonl"), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}:2: needs a 'prompt'" in err and "Traceback" not in err
    assert not Path(tmp_path / "o.jsonl").exists()


def test_a_run_stopped_midway_keeps_the_answers_it_paid_for(tmp_path, monkeypatch):
    """Answers reached the cache only when their chunk of 256 was done: a run killed (or
    stopped by a revoked key) after 137 answers had cached none, and the rerun paid for all
    300 again. Each answer is cached as it arrives; the rerun sends only the rest."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"p{i}"}) + "\n"
                               for i in range(5)))
    revoked = True

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if revoked and body.get("prompt") == "p3":  # the key is revoked mid-run
            return Reply(401, {"error": {"message": "revoked"}})
        return Reply(body=completion(" yes"))

    with serve(script) as server:
        args = ["generate", "--model", f"openai-compatible:{server.base_url}#m", "--input",
                str(prompts), "--out", str(tmp_path / "out.jsonl"), "--concurrency", "1",
                "--cache", str(tmp_path / "cache.sqlite")]
        assert main(args) == 2 and not (tmp_path / "out.jsonl").exists()
        assert len(ResponseCache(tmp_path / "cache.sqlite")) == 3  # p0, p1, p2
        revoked, sent = False, len(server.generation_calls())
        assert main(args) == 0
        assert len(server.generation_calls()) - sent == 2  # p3 and p4 only


def _choice(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "finish_reason": "stop", **fields}


SAID = {"role": "assistant", "content": "Yes."}


@pytest.mark.parametrize(("body", "said"), [
    ({**chat("x"), "choices": [_choice(message=None)]}, "without its message"),
    ({**chat("x"), "choices": [_choice()]}, "without its message"),
    ({**chat("x"), "choices": [_choice(message={"role": "assistant", "content": 5})]},
     "not text"),
    ({**chat("x"), "choices": ["Yes."]}, "without its message"),
    ({**chat("x"), "choices": "Yes."}, "no choices"),
    ({**chat("x"), "choices": []}, "no choices"),
    ({k: v for k, v in chat("x").items() if k != "choices"}, "no choices"),
    ({**chat("x"), "choices": [_choice(message=SAID, logprobs=[-0.1])]}, "logprobs"),
    ({**chat("x"), "choices": [_choice(message=SAID, logprobs={"content": "Yes"})]},
     "logprobs"),
    ({**chat("x"), "choices": [_choice(message=SAID, logprobs={"content": [
        {"token": "Yes", "logprob": "high", "top_logprobs": []}]})]}, "logprobs"),
    ([1, 2], "no choices"),
    (b"<html>Bad gateway</html>", "not JSON"),
])
def test_a_malformed_chat_answer_is_a_retried_failure_never_an_answer(body, said, tmp_path):
    params = GenerateParams(max_tokens=3, top_logprobs=2)
    request = GenerateRequest(messages=(("user", "Q?"),), params=params)
    with serve(lambda p, b, n: Reply(body=body)) as server:
        gen = OpenAIGenerator("m", server.base_url, config=FAST)
        cached = Cached(gen, ResponseCache(tmp_path / "c.sqlite"))
        failed, = cached.generate([request])
        assert len(server.generation_calls()) == 3  # retried like any failure
    assert not failed.ok and failed.text == "" and failed.tokens is None
    assert "malformed response" in (failed.error or "") and said in (failed.error or "")
    assert "logprobs" not in gen.capabilities  # a broken body proves nothing about them
    with serve(ok) as server:  # not cached: asked again
        again, = Cached(OpenAIGenerator("m", server.base_url, config=FAST),
                        ResponseCache(tmp_path / "c.sqlite")).generate([request])
    assert again.ok and again.text == "Yes." and not again.cached


@pytest.mark.parametrize(("choice", "said"), [
    (_choice(), "without its text"),
    (_choice(text="x", logprobs="x"), "logprobs"),
    (_choice(text="x", logprobs={"tokens": 5}), "logprobs"),
    (_choice(text="x", logprobs={"tokens": ["x"], "token_logprobs": [-1.0],
                                 "top_logprobs": [[-1.0]]}), "logprobs"),
    (_choice(text="x", logprobs={"tokens": ["x", "y"], "token_logprobs": [-1.0]}),
     "logprobs"),
])
def test_a_malformed_completion_answer_is_a_failure(choice, said):
    body = {**completion("x"), "choices": [choice]}
    with serve(lambda p, b, n: Reply(body=body)) as server:
        failed, = OpenAIGenerator("m", server.base_url, config=FAST).generate(
            [GenerateRequest(prompt="Q?", params=GenerateParams(top_logprobs=2))])
    assert not failed.ok and failed.text == "" and said in (failed.error or "")


def test_when_every_answer_is_malformed_the_run_ends_with_one_line(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "messages": [{"role": "user", "content": "Q?"}]}\n')
    body = {**chat("x"), "choices": [_choice(message=None)]}
    with serve(lambda p, b, n: Reply(body=body)) as server:
        code = main(["generate", "--model", f"openai-compatible:{server.base_url}#m",
                     "--input", str(prompts), "--out", str(tmp_path / "o.jsonl"),
                     "--retries", "0", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "1 requests failed" in err
    [row] = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert row["text"] == "" and "without its message" in row["error"]


def test_a_long_wait_the_server_asks_for_is_said_and_capped(monkeypatch, capsys):
    """Before: a Retry-After of an hour was waited 300 s per retry without a word, so a
    rate-limited run read as a hung one; and one attempt was "1 attempts"."""
    from biasscope.backends import openai_http

    monkeypatch.setattr(openai_http, "LONGEST_WAIT_S", 0.3)
    monkeypatch.setattr(openai_http, "SAID_WAIT_S", 0.2)

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if n == 1:
            return Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "3600"})
        return ok(path, body, n)

    with serve(script) as server:
        start = time.monotonic()
        [g] = OpenAIGenerator("m", server.base_url, config=FAST).generate(
            [GenerateRequest(prompt="Q?")])
        assert 0.3 <= time.monotonic() - start < 5
    assert g.ok and g.attempts == 2
    said = capsys.readouterr().err
    assert "waiting 0 s before retry 1, as the server asked (it asked 3600 s; waits are " \
        "capped there)" in said
    with serve(lambda p, b, n: Reply(503, {"error": {"message": "overloaded"}})) as server:
        once = HTTPConfig(concurrency=1, timeout=5, max_retries=0)
        [failed] = OpenAIGenerator("m", server.base_url, config=once).generate(
            [GenerateRequest(prompt="Q?")])
    assert "gave up after 1 attempt (" in (failed.error or "")
