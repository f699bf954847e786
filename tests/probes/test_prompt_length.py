"""Prompts longer than a model's context are refused in one line, before any scoring (#23.8).

A tiny GPT-NeoX whose context is 64 tokens, and a WinoBias data directory with one line padded
far past that: rotary models score such a line without complaint, so without the check the
numbers are silently wrong. Also: a huge line is refused without tokenizing it whole, and the
trie planner never sizes a 4-D mask past its budget.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends import prefix  # noqa: E402
from biasscope.backends.base import GenerateParams, GenerateRequest  # noqa: E402
from biasscope.backends.checkpoints import Checkpoint  # noqa: E402
from biasscope.backends.context import context_limit  # noqa: E402
from biasscope.backends.hf import Encodings, HFConfig, HFScorer  # noqa: E402
from biasscope.backends.hf_generate import HFGenerator  # noqa: E402
from biasscope.cli.main import main  # noqa: E402
from biasscope.core.errors import ModelError  # noqa: E402
from biasscope.core.items import Item  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from winobias_fixture import SENTENCES, write_winobias  # noqa: E402

CONTEXT = 128
LONG = ("developer", "designer", "The developer argued with [the designer] and slapped [{p}] in "
        "the face" + " again and again" * 60 + ".")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def short_model(tiny_tokenizer) -> Any:
    from biasscope.demo.tiny import tiny_gpt_neox

    return tiny_gpt_neox(len(tiny_tokenizer), max_positions=CONTEXT, seed=5)


@pytest.fixture(scope="module")
def short_dir(tmp_path_factory, short_model, tiny_tokenizer) -> Path:
    from biasscope.demo.tiny import save

    return save(short_model, tiny_tokenizer, tmp_path_factory.mktemp("short") / "checkpoint-1")


@pytest.fixture(scope="module")
def long_data(tmp_path_factory) -> Path:
    return write_winobias(tmp_path_factory.mktemp("long"), [*SENTENCES, LONG])


def scorer(model: Any, tokenizer: Any) -> HFScorer:
    return HFScorer(Checkpoint("short", "short"), model, tokenizer, HFConfig(batch_size=4))


def test_a_sweep_refuses_a_line_past_the_context_in_one_line_and_writes_nothing(
        tmp_path, short_dir, long_data, capsys):
    run = tmp_path / "run"
    code = main(["dynamics", "--model", str(short_dir), "--data-dir", str(long_data),
                 "--out", str(run), "--seeds", "0", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    # The first long item, its size, the limit, where the limit comes from, what to do.
    assert "item winobias-gender:pro-dev-007:referenced:seed0 (and 7 more)" in err
    assert "tokens (its prompt), past the 128 the model takes" in err
    assert "max_position_embeddings" in err and "shorten or remove it" in err
    assert not list((run / "records").glob("*.parquet"))  # nothing scored, nothing written


def test_a_huge_line_is_refused_without_tokenizing_it_whole(
        short_model, tiny_tokenizer, monkeypatch):
    huge = Item("huge", "word " * 600_000, ("a", "b"), (" male", " female"), 0)
    real = Encodings.prompt_ids

    def guarded(self: Encodings, tokenizer: Any, fingerprint: str, prompts: Any) -> Any:
        assert max(len(p) for p in prompts) < 100_000, "tokenized a 3 MB prompt whole"
        return real(self, tokenizer, fingerprint, prompts)

    monkeypatch.setattr(Encodings, "prompt_ids", guarded)
    with pytest.raises(ModelError, match=r"item huge is more than 128 tokens \(its first 2,048 "
                       r"of 3,000,000 characters alone are [\d,]+\), past the 128"):
        scorer(short_model, tiny_tokenizer).score_next_token_shared([huge], [True])


def test_option_scoring_refuses_a_chat_past_the_context(short_model, tiny_tokenizer):
    item = Item("chatty", "q", ("yes", "no"), (" yes", " no"), 0)
    long_turns = ((("user", "Is it so?" + " Really" * 120),),)
    with pytest.raises(ModelError, match=r"item chatty is \d+ tokens \(chat and longest "
                       "option\\), past the 128"):
        scorer(short_model, tiny_tokenizer).score_options([item], long_turns)


def test_hf_generation_counts_the_prompt_and_max_tokens(short_model, tiny_tokenizer):
    gen = HFGenerator.from_loaded(short_model, tiny_tokenizer, Checkpoint("short", "<mem>", "s1"))
    prompt = "The developer argued with the designer"
    fits = len(tiny_tokenizer(prompt)["input_ids"])
    ok = GenerateRequest(prompt=prompt, params=GenerateParams(max_tokens=CONTEXT - fits), id="ok")
    assert len(gen.generate([ok])) == 1
    over = GenerateRequest(prompt=prompt, params=GenerateParams(max_tokens=CONTEXT - fits + 1),
                           id="over")
    with pytest.raises(ModelError, match=r"item 'over' is 129 tokens \(prompt and max_tokens\)"
                       r".*lower max_tokens"):
        gen.generate([ok, over])
    long = GenerateRequest(prompt=prompt + " again" * 120, id="long")
    with pytest.raises(ModelError, match=r"item 'long' is \d+ tokens") as refused:
        gen.generate([long])  # the prompt alone is past it: fewer new tokens cannot help
    assert "max_tokens, or" not in str(refused.value)
    with pytest.raises(ModelError, match="prompt and longest option"):
        gen.option_logprobs(long, [" male", " female"])


def test_live_evaluation_refuses_before_writing_any_unit(tmp_path, short_model, tiny_tokenizer,
                                                         long_data):
    from biasscope.dynamics.live.evaluate import LiveConfig, evaluate_now

    probe = load_probe("winobias-gender", data_dir=long_data)
    with pytest.raises(ModelError, match="past the 128 the model takes"):
        evaluate_now(short_model, tiny_tokenizer, [probe], tmp_path / "live", step=1,
                     config=LiveConfig(seeds=(0, 1)))
    assert not list((tmp_path / "live" / "records").glob("*.parquet"))


def test_the_limit_comes_from_the_config_and_a_sane_tokenizer_limit():
    def model(**config: Any) -> Any:
        return SimpleNamespace(config=SimpleNamespace(**config))

    unlimited = SimpleNamespace(model_max_length=int(1e30))
    assert context_limit(model(max_position_embeddings=2048), unlimited) == (
        2048, "its config's max_position_embeddings")
    assert context_limit(model(n_positions=1024), unlimited)[0] == 1024  # GPT-2's name
    assert context_limit(model(max_position_embeddings=4096),
                         SimpleNamespace(model_max_length=2048)) == (
        2048, "its tokenizer's model_max_length")
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert context_limit(model(max_position_embeddings=32768, rope_scaling=yarn),
                         unlimited)[0] == 131072
    assert context_limit(model(), unlimited) is None


def test_rows_too_long_for_the_mask_budget_are_scored_whole(winobias_dir, tiny_tokenizer,
                                                            monkeypatch):
    from biasscope.demo.tiny import tiny_gpt_neox

    model = tiny_gpt_neox(len(tiny_tokenizer), seed=6)
    items = load_probe("winobias-gender", data_dir=winobias_dir).items(0)
    work = scorer(model, tiny_tokenizer)
    plain = work.score_next_token(items)
    longest = max(len(s) for s in work.encode_next_token(items)[0])
    monkeypatch.setattr(prefix, "MASK_ELEMENTS", (longest - 1) ** 2)
    sizes: list[int] = []
    real = prefix.tree_masks

    def counted(tries: Any, *args: Any) -> Any:
        sizes.append(len(tries) * max(len(t.tokens) for t in tries) ** 2)
        return real(tries, *args)

    monkeypatch.setattr(prefix, "tree_masks", counted)
    shared = work.score_next_token_shared(items, [True] * len(items))
    assert sizes and max(sizes) <= (longest - 1) ** 2  # no mask past the budget
    for a, b in zip(shared, plain, strict=True):
        assert a is not None and a.option_logprobs == pytest.approx(b.option_logprobs, abs=1e-4)
    trie = prefix.build_trie([0], [list(range(longest))])
    with pytest.raises(ValueError, match="a mask past MASK_ELEMENTS"):
        prefix.tree_masks([trie], None, False, torch.float32)
