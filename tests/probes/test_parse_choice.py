"""parse_choice: options whose stored text carries stray whitespace, the same answers as the
direct (quadratic) definition, and time linear in the answer's length."""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest

from biasscope.probes.choices import normalise, parse_choice

OPTIONS = ["male", "female", "not specified", "specified"]


def reference(text: str, options: Sequence[str]) -> str | None:
    """parse_choice by its definition: every mention of every option, then for each mention
    a look at every other mention (quadratic in the number of mentions)."""
    answer = text.strip().strip(".!\"'`*").strip()
    keyed = [(normalise(o), o) for o in options if normalise(o)]
    by_norm = {k.lower(): o for k, o in keyed}
    if normalise(answer).lower() in by_norm:
        return by_norm[normalise(answer).lower()]
    for key, option in sorted(keyed, key=lambda k: len(k[0]), reverse=True):
        if re.match(rf"\W*{re.escape(key)}\s*[.,;:!?)\n]", answer, flags=re.IGNORECASE):
            return option
    spans = [(o, m.span()) for k, o in keyed
             for m in re.finditer(rf"\b{re.escape(k)}\b", answer, flags=re.IGNORECASE)]
    named = {o for o, (a, b) in spans
             if not any(p != o and c <= a and b <= d for p, (c, d) in spans)}
    return named.pop() if len(named) == 1 else None


@pytest.mark.parametrize(("text", "expected"), [
    ("The friend", "The friend "), ("the friend.", "The friend "),
    ("the  Haitian   friend", "the Haitian friend "),
    ("The friend, because the other one was late", "The friend "),
    ("I think it was the friend here", "The friend "),
    ("Can't answer", "Can't answer"), ("the friend or the one who is deaf", None)])
def test_options_with_trailing_whitespace_are_named(text: str, expected: str | None):
    # The shapes of the real BBQ files: one option of an item ends in a space
    # (Disability_status "The friend ", Nationality "the Haitian friend ").
    options = ["The friend ", "Can't answer", "The one who is deaf"]
    if "Haitian" in text:
        options = ["the Haitian friend ", "Can't answer", "the Iranian friend"]
    assert parse_choice(text, options) == expected


def test_same_answers_as_the_direct_definition():
    rng = random.Random(0)
    words = ["male", "female", "not", "specified", "not specified", "the", "friend", ",",
             ".", "or", "Male", "NOT SPECIFIED", "(a)", "unknown"]
    option_sets = [OPTIONS, ["The friend ", "friend", "Unknown"], ["a b", "b c", "b"],
                   ["Male", "male", "female"]]
    for _ in range(3000):
        options = rng.choice(option_sets)
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        assert parse_choice(text, options) == reference(text, options), (text, options)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a quadratic parser takes hours on megabytes)."""
    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"parse_choice ran past {seconds} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _seconds(call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def _mentions(mib: float, unit: str = "not specified, ") -> str:
    return "So: " + unit * int(mib * 2**20 / len(unit))


def test_five_megabytes_of_mentions_parse_in_seconds():
    # Before: 64 KiB of such mentions took 1.7 s and the time grew with the square.
    text = _mentions(5)
    with deadline(60):
        start = time.perf_counter()
        assert parse_choice(text, OPTIONS) == "not specified"
        assert parse_choice(_mentions(5, "male and female; "), OPTIONS) is None
        assert time.perf_counter() - start < 10


def test_time_grows_linearly_with_the_answer():
    small, large = _mentions(0.5), _mentions(2)
    with deadline(60):
        ratio = _seconds(lambda: parse_choice(large, OPTIONS)) / _seconds(
            lambda: parse_choice(small, OPTIONS))
    assert ratio < 8, f"4x the text took {ratio:.1f}x the time (linear: ~4, quadratic: ~16)"
