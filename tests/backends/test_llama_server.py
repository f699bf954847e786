"""The real OpenAI-compatible server (llama-cpp-python) against the tiny GGUF's exact numpy
reference: these pin the server behaviours documented in tests/llama_server.py."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from conftest import SERVER_INSTALL
from llama_server import (
    BOS,
    JUDGE_ALIAS,
    JUDGE_PREFER,
    KEYS,
    Server,
    TinyLlama,
    judge_server,
    write_tiny_gguf,
)
from require import missing_modules, require

require(missing_modules("openai"), "BIASSCOPE_REQUIRE_SERVER", SERVER_INSTALL)
import openai  # noqa: E402

TOL = 1e-4
PROMPTS = ["The doctor said", "The nurse is", "Answer: yes, the engineer was"]


@pytest.fixture(scope="module")
def client(llama_server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=llama_server.base_url, api_key="none", max_retries=0,
                       timeout=30) as c:
        yield c


def top_k(tiny: TinyLlama, last_token: int, k: int) -> dict[str, float]:
    """Expected top-k as the server keys them: surface text -> log-prob."""
    lp = tiny.expected_logprobs(last_token)
    return {tiny.text(int(i)): float(lp[i]) for i in np.argsort(-lp)[:k]}


def assert_close(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=TOL), key


def test_models_and_tokenize(llama_server: Server, tiny_gguf: TinyLlama,
                             client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["tiny"]
    for prompt in PROMPTS:
        assert llama_server.tokenize(prompt) == tiny_gguf.encode_words(prompt)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_completion_top_logprobs_are_exact(client: openai.OpenAI, tiny_gguf: TinyLlama,
                                           prompt: str) -> None:
    last = tiny_gguf.encode_words(prompt)[-1]
    want = top_k(tiny_gguf, last, 20)  # more than OpenAI's cap of 5: the server has none
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0,
                                  logprobs=20)
    lp = r.choices[0].logprobs
    assert lp is not None and lp.top_logprobs is not None and lp.token_logprobs is not None
    assert_close(lp.top_logprobs[0], want)
    assert lp.token_logprobs[0] == pytest.approx(max(want.values()), abs=TOL)


def test_greedy_follows_argmax_chain(client: openai.OpenAI, tiny_gguf: TinyLlama) -> None:
    prompt = "The doctor said"
    last, chain = tiny_gguf.encode_words(prompt)[-1], []
    for _ in range(5):
        last = int(np.argmax(tiny_gguf.expected_logprobs(last)))
        chain.append(last)
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=5, temperature=0,
                                  extra_body={"repeat_penalty": 1.0})
    assert r.choices[0].text == "".join(tiny_gguf.text(t) for t in chain)
    # with the server's default repeat_penalty (1.1) the first token is still the argmax
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0)
    assert r.choices[0].text == tiny_gguf.text(chain[0])


def test_echo_scores_every_prompt_token(client: openai.OpenAI, tiny_gguf: TinyLlama) -> None:
    prompt = "The nurse said she was not male"
    ids = tiny_gguf.encode_words(prompt)
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0,
                                  logprobs=1, echo=True)
    lp = r.choices[0].logprobs
    assert lp is not None and lp.token_logprobs is not None and lp.tokens is not None
    assert lp.tokens[: len(ids) - 1] == [tiny_gguf.text(t) for t in ids[1:]]  # BOS dropped
    assert lp.token_logprobs[0] is None
    for pos in range(2, len(ids)):
        want = tiny_gguf.expected_logprobs(ids[pos - 1])[ids[pos]]
        assert lp.token_logprobs[pos - 1] == pytest.approx(want, abs=TOL)


def test_chat_completion_logprobs(client: openai.OpenAI, tiny_gguf: TinyLlama) -> None:
    # the GGUF's chat template ends the prompt with "assistant:" -> last token ":"
    want = top_k(tiny_gguf, tiny_gguf.token_id(":"), 5)
    messages = [{"role": "user", "content": "Is the nurse male?"}]
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=1,
                                       temperature=0, logprobs=True, top_logprobs=5)
    choice = r.choices[0]
    assert choice.message.content == next(iter(want))
    assert choice.logprobs is not None and choice.logprobs.content is not None
    first = choice.logprobs.content[0]
    assert first.token == next(iter(want))
    assert_close({t.token: t.logprob for t in first.top_logprobs}, want)
    # logprobs=True alone returns no logprobs (top_logprobs is what switches them on)
    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=1,
                                       temperature=0, logprobs=True)
    assert r.choices[0].logprobs is None


def test_logit_bias_moves_argmax_but_not_reported_logprobs(client: openai.OpenAI,
                                                           tiny_gguf: TinyLlama) -> None:
    prompt = "The doctor said"
    last = tiny_gguf.encode_words(prompt)[-1]
    lp = tiny_gguf.expected_logprobs(last)
    best, runner_up = (int(i) for i in np.argsort(-lp)[:2])
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0,
                                  logprobs=2, logit_bias={str(runner_up): 10.0})
    got = r.choices[0]
    assert got.text == tiny_gguf.text(runner_up) != tiny_gguf.text(best)
    assert got.logprobs is not None and got.logprobs.token_logprobs is not None
    assert got.logprobs.token_logprobs[0] == pytest.approx(lp[runner_up], abs=TOL)  # unbiased
    assert got.logprobs.top_logprobs is not None
    assert_close(got.logprobs.top_logprobs[0], top_k(tiny_gguf, last, 2))


def test_seed_and_unknown_model_name(client: openai.OpenAI) -> None:
    def sample(seed: int, model: str = "tiny") -> tuple[str, str]:
        r = client.completions.create(model=model, prompt="The doctor said", max_tokens=8,
                                      temperature=1.5, seed=seed)
        return r.choices[0].text, r.model

    assert sample(1) == sample(1)
    assert len({sample(s)[0] for s in range(2, 6)}) > 1
    text, model = sample(1, model="gpt-4o")  # unknown names are served by the default model
    assert (text, model) == (sample(1)[0], "gpt-4o")


# --- the tiny model as an LLM judge (write_tiny_gguf(prefer=...), judge_server) ----------------

def test_prefer_forces_the_next_token_exactly_and_nothing_else(tiny_gguf: TinyLlama,
                                                               tmp_path) -> None:
    prefer = {":": "▁A", " ": "B", "▁B": "</s>"}  # " " is the "▁" piece
    judge = write_tiny_gguf(tmp_path / "judge.gguf", prefer=prefer, margin=5.0)
    assert judge.vocab == tiny_gguf.vocab
    assert judge.prefer == {tiny_gguf.token_id(s): tiny_gguf.token_id(t)
                            for s, t in {":": "▁A", "▁": "B", "▁B": "</s>"}.items()}
    for src, dst in judge.prefer.items():
        lp = judge.expected_logprobs(src)
        assert int(np.argmax(lp)) == dst and lp[dst] - np.delete(lp, dst).max() >= 5.0
    # after every other token the distribution is the prefer=None model's (to float64 rounding)
    for i in set(range(judge.n_vocab)) - set(judge.prefer):
        np.testing.assert_allclose(judge.expected_logprobs(i), tiny_gguf.expected_logprobs(i),
                                   rtol=0, atol=1e-12)
    # the keys are single pieces in both forms, dead in the default model
    keys = [*tiny_gguf.key_ids().values(), *tiny_gguf.key_ids(space=False).values()]
    assert len(set(keys)) == 2 * len(KEYS)
    assert [tiny_gguf.text(i).strip() for i in keys] == [*KEYS, *KEYS]
    assert not set(keys) & set(tiny_gguf.word_ids())
    with pytest.raises(ValueError, match="not a piece"):
        write_tiny_gguf(tmp_path / "bad.gguf", prefer={":": "▁Z"})
    with pytest.raises(ValueError, match="margin"):
        write_tiny_gguf(tmp_path / "bad.gguf", prefer={":": "▁A"}, margin=0.0)


@pytest.fixture(scope="module")
def judge(llama_server: Server, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[Server, TinyLlama, openai.OpenAI]]:
    """judge_server + a client. (`llama_server` only for its skip/require check of modules.)"""
    with judge_server(tmp_path_factory.mktemp("judge")) as (server, tiny), \
            openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0,
                          timeout=30) as c:
        yield server, tiny, c


JUDGE_MESSAGES = [
    [{"role": "user", "content": "Is the nurse male?"}],
    [{"role": "user", "content": "Which is right? A: yes B: no C: not specified. Answer: B"}],
    [{"role": "user", "content": ""}],
    [{"role": "system", "content": "Answer with B."}, {"role": "user", "content": "B or A?"},
     {"role": "assistant", "content": "B"}, {"role": "user", "content": "Sure? Answer:"}],
]


def test_judge_always_answers_the_first_key(judge) -> None:
    server, _, client = judge
    assert [m.id for m in client.models.list()] == [JUDGE_ALIAS] == [server.model]
    assert JUDGE_PREFER[":"] == "▁A"
    for messages in JUDGE_MESSAGES:
        r = client.chat.completions.create(model=JUDGE_ALIAS, messages=messages, max_tokens=1,
                                           temperature=0)
        assert r.choices[0].message.content == " A"  # the "▁A" piece, leading space kept
        assert r.choices[0].message.content.strip() == "A"
    # more room: still just " A", then end of sequence
    r = client.chat.completions.create(model=JUDGE_ALIAS, messages=JUDGE_MESSAGES[0],
                                       max_tokens=8, temperature=0)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == (" A", "stop")
    assert r.usage is not None and r.usage.completion_tokens == 1
    # completions: "...Answer:" ends in ":" -> " A"; "...Answer: " ends in "▁" -> bare "A"
    for prompt, text in [("Is the nurse male? Answer:", " A"), ("Question: who? Answer: ", "A")]:
        c = client.completions.create(model=JUDGE_ALIAS, prompt=prompt, max_tokens=8,
                                      temperature=0)
        assert (c.choices[0].text, c.choices[0].finish_reason) == (text, "stop")


def test_judge_top_logprobs_are_exact(judge) -> None:
    _, tiny, client = judge
    colon, a = tiny.token_id(":"), tiny.key_ids()["A"]
    want = top_k(tiny, colon, 5)
    assert next(iter(want)) == " A"
    assert want[" A"] == pytest.approx(float(tiny.expected_logprobs(colon)[a]), abs=1e-12)
    assert want[" A"] - sorted(want.values())[-2] >= 8.0  # the default margin
    r = client.chat.completions.create(model=JUDGE_ALIAS, messages=JUDGE_MESSAGES[0],
                                       max_tokens=1, temperature=0, logprobs=True,
                                       top_logprobs=5)
    lp = r.choices[0].logprobs
    assert lp is not None and lp.content is not None
    first = lp.content[0]
    assert first.token == " A" and first.logprob == pytest.approx(want[" A"], abs=TOL)
    assert first.top_logprobs[0].token == " A"  # first, as in numpy's ranking
    assert_close({t.token: t.logprob for t in first.top_logprobs}, want)


def test_judge_logit_bias_picks_another_key(judge) -> None:
    _, tiny, client = judge
    b = tiny.key_ids()["B"]
    r = client.chat.completions.create(model=JUDGE_ALIAS, messages=JUDGE_MESSAGES[0],
                                       max_tokens=1, temperature=0, logit_bias={str(b): 100},
                                       logprobs=True, top_logprobs=1)
    choice = r.choices[0]
    assert choice.message.content is not None and choice.message.content.strip() == "B"
    assert choice.logprobs is not None and choice.logprobs.content is not None
    first = choice.logprobs.content[0]  # the reported log-prob is the unbiased one
    assert first.token == " B"
    assert first.logprob == pytest.approx(tiny.expected_logprobs(tiny.token_id(":"))[b], abs=TOL)


def test_keys_tokenize_to_single_ids(judge, llama_server: Server, tiny_gguf: TinyLlama) -> None:
    server, tiny, _ = judge
    answer = tiny.encode_words("Answer:")  # [<s>, ▁Answer, :]
    for srv in (server, llama_server):  # same vocabulary in both models
        for k in KEYS:
            spaced, bare = tiny.key_ids()[k], tiny.key_ids(space=False)[k]
            assert srv.tokenize(k) == [BOS, spaced]  # the space prefix: "▁A"
            assert srv.tokenize(f"Answer: {k}") == [*answer, spaced]
            assert srv.tokenize(f"Answer:{k}") == [*answer, bare]
            assert srv.post("/extras/detokenize", {"tokens": [bare]})["text"] == k
            assert srv.post("/extras/detokenize", {"tokens": [spaced]})["text"] == f" {k}"
        assert srv.tokenize("Answer: ") == [*answer, tiny.token_id("▁")]
        assert srv.tokenize(" A") == [BOS, tiny.token_id("▁"), tiny.key_ids()["A"]]
    assert tiny.key_ids() == tiny_gguf.key_ids()


def test_restart_keeps_the_url(llama_server: Server, client: openai.OpenAI,
                               tiny_gguf: TinyLlama) -> None:
    """Last on purpose: restarts the session's server (what the fault tests build on)."""
    port, pid = llama_server.port, llama_server.pid
    llama_server.restart()
    assert (llama_server.port, llama_server.running()) == (port, True)
    assert llama_server.pid != pid
    r = client.completions.create(model="tiny", prompt="The doctor said", max_tokens=1,
                                  temperature=0)  # the same client works across the restart
    last = tiny_gguf.encode_words("The doctor said")[-1]
    assert r.choices[0].text == tiny_gguf.text(int(np.argmax(tiny_gguf.expected_logprobs(last))))
