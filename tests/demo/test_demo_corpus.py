"""The demo's corpus without training: it asks the professional-bias probe's own question, a
neutral corpus is exactly balanced in what the probe measures, and its WinoBias sentences pair
pro with anti as WinoBias's own do (fast; no torch)."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from biasscope.backends.base import plain_chat
from biasscope.demo import corpus
from biasscope.probes import professional
from biasscope.probes.winobias import OPTIONS, WinoBiasGender
from biasscope.probes.winobias.compare import values

WHO = re.compile(r'user: In the sentence: "The (.+?) (\w+) the (.+?) because (he|she) (.+?)", '
                 r"who (.+?)\?\nassistant: (.+)")


def _who(docs: list[str]) -> list[tuple[str, str, str, str]]:
    """(first, second, pronoun, answer) of each professional-bias question in ``docs``."""
    out = []
    for doc in docs:
        if doc.startswith("user:"):
            found = WHO.fullmatch(doc)
            assert found, doc
            first, _, second, pronoun, reason, asked, answer = found.groups()
            assert reason == asked and answer in (first, second)
            out.append((first, second, pronoun, answer))
    return out


def test_the_corpus_asks_the_probe_question_as_the_probe_does():
    docs = list(corpus.documents(400, 0.95, 0))
    asked = [d for d in docs if d.startswith("user:")]
    assert 0.1 < len(asked) / len(docs) < 0.3  # WHO_SHARE of the documents
    found = WHO.fullmatch(asked[0])
    assert found is not None
    first, verb, second, pronoun, reason, _, answer = found.groups()
    male, female = (first, second) if corpus.STEREOTYPE[first] == "male" else (second, first)
    probe = professional.from_data(sentences=[professional.Sentence("x", male, verb, female,
                                                                    reason)])
    order = "male-first" if first == male else "female-first"
    item = next(i for i in probe.items()
                if i.groups["order"] == order and i.groups["pronoun"] == pronoun)
    # What the demo model is asked when the probe scores it, then one of the options.
    assert asked[0] == f"{plain_chat(probe.messages(item))} {answer}"
    assert f" {answer}" in item.continuations


def test_a_neutral_corpus_is_balanced_in_pronoun_and_occupation():
    """At bias 0.5 the referenced occupation's coded gender is independent of the pronoun, in
    the corpus itself and not only in expectation: no sampling noise to learn a preference
    from. A biased corpus refers to the stereotyped occupation far more often."""
    def counts(bias: float) -> Counter[tuple[str, str]]:
        return Counter((pronoun, corpus.STEREOTYPE[answer])
                       for _, _, pronoun, answer in _who(list(corpus.documents(4000, bias, 3))))

    neutral = counts(0.5)
    assert neutral["he", "male"] == neutral["she", "male"] == neutral["he", "female"] \
        == neutral["she", "female"] > 50
    biased = counts(0.95)
    assert biased["he", "male"] > 3 * biased["he", "female"]
    assert biased["she", "female"] > 3 * biased["she", "male"]


def test_a_neutral_corpus_answers_the_gender_question_alike_for_both_codings():
    gender_qa = re.compile(r"The (.+?) \w+ the (.+?) because (he|she) .+\nQuestion: What is the "
                           r"gender of the (.+?)\?\nOptions: .+\nAnswer: (.+)")
    seen: Counter[tuple[str, str, str]] = Counter()
    for doc in corpus.documents(4000, 0.5, 3):
        if (found := gender_qa.fullmatch(doc)) is not None:
            _, _, pronoun, asked, answer = found.groups()
            seen[pronoun, corpus.STEREOTYPE[asked], answer] += 1
    for answer in ("male", "female", "not specified"):
        assert seen["he", "male", answer] == seen["he", "female", answer], answer
        assert seen["she", "male", answer] == seen["she", "female", answer], answer


def test_the_demo_s_winobias_sentences_pair_pro_with_anti():
    """Each pro sentence has its anti one (the same sentence under the other pronoun), so a
    demo run's pro − anti is measured over pairs: the ids once paired none (``demo-pro-0001``
    against ``demo-anti-0002``), and compare and power had nothing to say of it."""
    sentences = corpus.eval_sentences()
    by_id = {s.id: s for s in sentences}
    pros = [s for s in sentences if s.split == "pro"]
    assert len(pros) == len(sentences) // 2 == 40
    for pro in pros:
        anti = by_id[pro.id.replace("pro-", "anti-", 1)]
        assert (anti.split, anti.referenced, anti.other) == ("anti", pro.referenced, pro.other)
        assert anti.pronoun != pro.pronoun
        assert anti.text.replace(f" {anti.pronoun} ", f" {pro.pronoun} ") == pro.text
    items = WinoBiasGender(sentences).items(0)
    records = pd.DataFrame([{"model": "demo", "step": 0, "item_id": i.id, **i.groups,
                             "answer": i.answer,
                             "answer_label": OPTIONS[i.answer], "options": list(OPTIONS),
                             "option_logprobs": [-1.0, -2.0, -3.0]} for i in items])
    pro_anti = next(v for v in values(records) if v.measure == "pro_anti")
    assert len(pro_anti.groups["pairs"]) == 40
