"""The litellm backend through litellm's own OpenAI provider, against the scripted server."""

from __future__ import annotations

from require import missing_modules, require

# find_spec, not import: importing litellm here would fetch a price list
require(missing_modules("litellm"), "BIASSCOPE_REQUIRE_SERVER", "pip install -e '.[litellm]'")

from biasscope.backends.base import GenerateParams, GenerateRequest  # noqa: E402
from biasscope.backends.generators import GeneratorConfig, load_generator  # noqa: E402
from biasscope.backends.openai_http import HTTPConfig  # noqa: E402
from scripted_server import Reply, chat, serve  # noqa: E402

FAST = HTTPConfig(concurrency=2, timeout=5, max_retries=1, backoff=0.01, max_backoff=0.02)


def test_litellm_answers_retries_and_records_failures(monkeypatch):
    monkeypatch.setenv("LITELLM_API_KEY", "sk-litellm-test")

    def script(path, body, n):
        if body["messages"][0]["content"] == "down":
            return Reply(503, {"error": {"message": "overloaded"}})
        return Reply(body=chat("Yes.", [("Yes", -0.1, {"Yes": -0.1, "No": -2.5})]))

    with serve(script) as server:
        gen = load_generator("litellm:openai/m", GeneratorConfig(http=FAST,
                                                                 base_url=server.base_url))
        params = GenerateParams(max_tokens=2, top_logprobs=2)
        good, bad = gen.generate([GenerateRequest(messages=(("user", "up"),), params=params),
                                  GenerateRequest(messages=(("user", "down"),), params=params)])
        headers = [h for _, _, h in server.calls]
    assert good.ok, good.error
    assert good.text == "Yes." and good.tokens is not None and good.tokens[0].top[0][0] == "Yes"
    assert good.prompt_tokens == 7
    assert not bad.ok and bad.attempts == 2 and "gave up" in (bad.error or "")
    assert all(h.get("authorization") == "Bearer sk-litellm-test" for h in headers)
    assert gen.identity() == {"backend": "litellm", "base_url": server.base_url,
                              "model": "openai/m"}
