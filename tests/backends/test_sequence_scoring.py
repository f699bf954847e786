"""Whole continuations through shared-prefix trie rows (backends/sequences.py) equal the plain
path, and an empty prompt scores a text after the model's start token."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends.prefix import build_trie  # noqa: E402
from biasscope.backends.sequences import parents, paths  # noqa: E402
from biasscope.core.items import Item  # noqa: E402
from test_prefix_scoring import MODELS, scorer_for  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["The nurse notified the patient that her shift would be ending in an hour.",
         "The nurse notified the patient that his shift would be ending in an hour.",
         "The mechanic gave the clerk a present.", "The mechanic gave the clerk a present",
         "The"]


def items() -> list[Item]:
    out = [Item(f"t{i}", "", ("text",), (t,), 0) for i, t in enumerate(TEXTS)]
    out.append(Item("prompted", "The nurse notified", ("rest",), (" the patient",), 0))
    out.append(Item("again", "", ("text",), (TEXTS[0],), 0))  # the same text twice
    return out


def test_parents_and_paths_walk_the_trie() -> None:
    seqs = [(1, 2, 3, 4), (1, 2, 3, 5, 6), (1, 2, 7), (1, 2, 3)]
    trie = build_trie(sorted(range(4), key=lambda i: seqs[i]), seqs)
    assert parents(trie) == [-1, 0, 1, 2, 2, 4, 1]
    assert [[trie.tokens[n] for n in p] for p in paths(trie)] == [list(seqs[m])
                                                                   for m in trie.members]


@pytest.mark.parametrize("name", ["gpt-neox", "gemma3", "gemma2"])
def test_shared_continuations_score_as_the_plain_path(name: str, tiny_tokenizer: Any,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    scorer = scorer_for(MODELS[name](len(tiny_tokenizer)), tiny_tokenizer, batch_size=3)
    asked = items()
    plain = scorer.score_continuation(asked)
    done: list[int] = []
    shared = scorer.score_continuation_shared(asked, [True] * len(asked), done.append)
    assert sum(done) == len(asked)
    for a, b in zip(shared, plain):
        assert a is not None and a.tokens == b.tokens
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4 * b.tokens)
        uniform = abs(a.logprob / a.tokens + math.log(scorer.vocab)) < 1e-4  # all tied
        assert a.greedy == b.greedy or uniform  # a tie ranks first; argmax picks one
    assert "no prefix reuse" not in capsys.readouterr().err


def test_an_empty_prompt_is_the_start_token(tiny_tokenizer: Any) -> None:
    """The text's log-prob after BOS, from a plain forward and log-softmax."""
    scorer = scorer_for(MODELS["llama"](len(tiny_tokenizer)), tiny_tokenizer, batch_size=2)
    text = TEXTS[0]
    ids = [tiny_tokenizer.bos_token_id] + tiny_tokenizer(text, add_special_tokens=False)[
        "input_ids"]
    with torch.inference_mode():
        logits = scorer.model(torch.tensor([ids])).logits[0].double()
    expected = float(torch.log_softmax(logits, -1)[:-1].gather(
        1, torch.tensor(ids[1:])[:, None]).sum())
    (score,) = scorer.score_continuation([items()[0]])
    assert score.tokens == len(ids) - 1
    assert score.logprob == pytest.approx(expected, abs=1e-4)
