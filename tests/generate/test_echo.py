"""A base model that repeats the prompt's instruction before answering ("... Answer yes or no.
Yes") has its answer read from what follows the echo, not from the options the echo names."""

from __future__ import annotations

import json

import pytest

from biasscope.backends.base import Generation, TokenLogprob
from biasscope.cli.main import main
from biasscope.probes.choices import echo_end, read_choice

YES_NO = ["yes", "no"]
ASKED = "Is the sky green? Answer yes or no."
FEW_SHOT = "Q: Is snow white?\nA: Yes.\nQ: Is coal white?\nA:"
LISTED = "Who was tired?\nOptions: female, male.\nAnswer:"


@pytest.mark.parametrize(("prompt", "text", "options", "answer"), [
    (ASKED, " Answer yes or no. No", YES_NO, "no"),  # was none: both options named
    (ASKED, "Is the sky green? Answer yes or no.\nNo, it is blue.", YES_NO, "no"),
    (ASKED, "answer YES or NO? yes", YES_NO, "yes"),  # case and punctuation aside
    (ASKED, "Answer yes or no. Answer yes or no. No.", YES_NO, "no"),
    (LISTED, "female, male. Answer: male", ["female", "male"], "male"),  # was female
    (FEW_SHOT, " No.", YES_NO, "no"),
    # An answer that starts with an option, or is the prompt's own "Yes.", is no echo.
    (FEW_SHOT, " Yes.", YES_NO, "yes"),
    (ASKED, "Yes, it is.", YES_NO, "yes"),
    ("Is it? Yes or no?", "Yes.", YES_NO, "yes"),
    ("Is it? Yes or no?", "Yes or no? No.", YES_NO, "no"),
    # Only the echo, no answer of its own: none, not an option the echo names.
    (ASKED, "Answer yes or no.", YES_NO, None),
    (LISTED, "Options: female, male.", ["female", "male"], None)])
def test_an_echo_of_the_prompt_is_not_the_answer(prompt, text, options, answer):
    assert read_choice(Generation(text), options, prompt).answer == answer


def test_without_the_prompt_the_text_is_read_as_before():
    assert read_choice(Generation("female, male. Answer: male"), ["female", "male"]).answer == (
        "female")
    assert echo_end("Answer yes or no. No", "", YES_NO) == 0


def test_logprobs_are_read_at_the_first_token_after_the_echo():
    """The first token's alternatives were those of the echo's "Answer", not of the answer."""
    top_echo = (("Answer", -0.1), ("Yes", -3.0))
    top_answer = ((" No", -0.2), (" Yes", -1.9))
    tokens = (TokenLogprob("Answer", -0.1, top_echo), TokenLogprob(" yes", -0.1),
              TokenLogprob(" or", -0.1), TokenLogprob(" no", -0.1), TokenLogprob(".", -0.1),
              TokenLogprob(" No", -0.2, top_answer))
    reading = read_choice(Generation("Answer yes or no. No", tokens=tokens), YES_NO, ASKED)
    assert reading.source == "logprobs" and reading.answer == "no"
    assert reading.probs is not None and reading.probs["no"] > 0.8
    # Tokens that do not spell the text up to the echo's end: the text is read instead.
    odd = (TokenLogprob("Answer yes", -0.1, top_echo), TokenLogprob(" or no. No", -0.1))
    reading = read_choice(Generation("Answer yes or no. No", tokens=odd), YES_NO, ASKED)
    assert (reading.source, reading.answer) == ("text", "no")


def test_a_long_echo_is_read_in_bounded_time():
    prompt = "\n".join(f"Line {i} says something." for i in range(200)) + "\nAnswer yes or no."
    text = "Answer yes or no. " * 100_000 + "No"
    assert read_choice(Generation(text), YES_NO, prompt).answer is None  # cut short: hedges
    assert read_choice(Generation("Answer yes or no. " * 3 + "No"), YES_NO, prompt
                       ).answer == "no"


def test_generate_reads_a_canned_echo_after_the_instruction(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": ASKED, "options": YES_NO}) + "\n"
                       + json.dumps({"id": "b", "messages": [{"role": "user", "content": ASKED}],
                                     "options": YES_NO}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["generate", "--model", "canned: Answer yes or no. No", "--input", str(prompts),
                 "--out", str(out), "--no-cache"]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["answer"], r["answer_source"]) for r in rows] == [("no", "text")] * 2
    assert rows[0]["text"] == " Answer yes or no. No"  # the text itself is kept whole
