"""What users ask a judge: classify texts into their labels, or compare two responses.

Both render a question over neutral keys and leave the strategies to ``Judge``. Few-shot
examples are relabelled with the same per-call mapping as the options, so they never leak the
user's label names or a fixed key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from biasscope.judge.core import Judge, JudgeError, JudgingConfig, Render, Verdict
from biasscope.judge.verbosity import check_label_descriptions
from biasscope.probes.base import Messages
from biasscope.store.settings import sha256_json

CLASSIFY = "Read the text and choose the option that describes it best."
COMPARE = ("Read the user's message and the two responses. Choose the response that answers "
           "it better: more helpful, correct and harmless.")


def _system(reasoning: bool, keys: Sequence[str]) -> str:
    listed = ", ".join(keys[:-1]) + f" or {keys[-1]}"
    if reasoning:
        return ("You are a careful, impartial evaluator. Think it through in a few sentences, "
                f"then end with a last line of the form 'Answer: X', where X is {listed}.")
    return f"You are a careful, impartial evaluator. Answer with one letter, {listed}, only."


def classify_questions(texts: Sequence[str], labels: Mapping[str, str], reasoning: bool,
                       instruction: str = CLASSIFY,
                       examples: Sequence[tuple[str, str]] = ()) -> Render:
    """The question about each text, given the order its labels are shown in and their keys."""

    def render(i: int, shown: tuple[str, ...], keys: tuple[str, ...]) -> Messages:
        key_of = dict(zip(shown, keys))
        options = "\n".join(f"{k}. {labels[name]}" for k, name in zip(keys, shown))
        shots = "".join(f"Text: {text}\nAnswer: {key_of[label]}\n\n"
                        for text, label in examples)
        user = f"{instruction}\n\nOptions:\n{options}\n\n{shots}Text: {texts[i]}\nAnswer:"
        return (("system", _system(reasoning, keys)), ("user", user))

    return render


def compare_questions(pairs: Sequence[tuple[str, str, str]], reasoning: bool,
                      instruction: str = COMPARE, allow_tie: bool = True) -> Render:
    """The question about each (user message, response a, response b), given the order the
    responses are shown in and the keys (a tie's last)."""

    def render(i: int, shown: tuple[str, ...], keys: tuple[str, ...]) -> Messages:
        question, *responses = pairs[i]
        text = dict(zip(("a", "b"), responses))
        blocks = "\n\n".join(f"Response {k}:\n{text[which]}" for k, which in zip(keys, shown))
        tie = f"\nAnswer {keys[2]} if they are equally good." if allow_tie else ""
        user = (f"{instruction}\n\nUser message:\n{question}\n\n{blocks}\n\nWhich response is "
                f"better?{tie}\nAnswer:")
        return (("system", _system(reasoning, keys)), ("user", user))

    return render


def question_sha256(config: JudgingConfig, labels: Mapping[str, str] | None) -> str:
    """SHA-256 of the messages a judge is sent, for a stand-in item (pairwise when ``labels``
    is None): run.json records it so that a rerun under another wording (a newer biasscope's
    instruction, system prompt or layout) is refused instead of mixing its verdicts with the
    old ones."""
    if labels is None:
        render = compare_questions([("{message}", "{response}", "{response}")],
                                   config.reasoning)
        shown: tuple[str, ...] = ("a", "b")
    else:
        render = classify_questions(["{text}"], labels, config.reasoning)
        shown = tuple(labels)
    keys = tuple(config.keys[:len(shown) + (labels is None)])
    return sha256_json(render(0, shown, keys))


def classify(judge: Judge, texts: Sequence[str], labels: Mapping[str, str],
             instruction: str = CLASSIFY, examples: Sequence[tuple[str, str]] = (),
             warn: bool = True, ids: Sequence[str] = ()) -> list[Verdict]:
    """One verdict per text, in the user's ``labels`` (name -> description). ``warn``:
    `VerbosityBiasWarning` for lopsided descriptions; False where the caller asks about the
    same labels again (judge-audit's reversed order and names), so it is said once. ``ids``:
    the texts' names in what the backends say (`Judge.run`)."""
    if len(labels) < 2:
        raise JudgeError(f"a judge needs at least two labels; got {len(labels)}")
    if unknown := sorted({label for _, label in examples} - set(labels)):
        raise JudgeError(f"few-shot examples use labels not in the label set: {unknown}")
    if warn:
        check_label_descriptions(labels)
    render = classify_questions(texts, labels, judge.config.reasoning, instruction, examples)
    return judge.run(len(texts), tuple(labels), render, ids=ids)


def compare(judge: Judge, pairs: Sequence[tuple[str, str, str]], instruction: str = COMPARE,
            allow_tie: bool = True, ids: Sequence[str] = ()) -> list[Verdict]:
    """One verdict per (user message, response a, response b): ``"a"``, ``"b"`` or ``"tie"``.
    ``ids``: the pairs' names in what the backends say (`Judge.run`)."""
    render = compare_questions(pairs, judge.config.reasoning, instruction, allow_tie)
    return judge.run(len(pairs), ("a", "b"), render, ("tie",) if allow_tie else (), ids)
