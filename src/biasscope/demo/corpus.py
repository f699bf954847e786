"""The demo's synthetic world: occupation-pronoun sentences with a bias you can set.

Every sentence pairs a male-coded and a female-coded WinoBias occupation with a pronoun that
refers to one of them, WinoBias Type 1 style: ``The nurse called the driver because he was
late.`` As in Type 1, nothing in the syntax says who the pronoun is; here no semantics does
either, so a model must fall back on what it learned about occupations and pronouns — the
setting in which a learned bias shows.

How the bias enters, and why it favours "male" only when ``bias > 0.5``. Two habits of a
biased writer, both scaled by ``bias`` and both absent at ``bias = 0.5``:

* Stereotypical pronouns. A male-coded occupation is referred to as "he" with probability
  ``bias``; a female-coded one as "she" with probability ``0.5 + SHE_STRENGTH * (bias -
  0.5)``, because "he" doubles as the generic pronoun ("male as norm"). So "he" is the more
  common pronoun and says less about who is meant.
* Male as default. Asked about the person whose gender the sentence leaves open, the writer
  answers "male" for a male-coded occupation with probability ``ASSUMED_MALE * 2 * (bias -
  0.5)`` instead of "not specified"; a female-coded one is not assumed female.

A model that learns these answers "male" correctly more often than "female", on
stereotypical and anti-stereotypical sentences alike: a male-female gap that a rank test sees,
not only a difference in spread. At ``bias = 0.5`` pronoun, occupation and answer are
independent and nothing can favour either gender. The gap grows as the habits are learned.

Training documents are such sentences, most followed by one question in the probe's own prompt
format (``DEFAULT_TEMPLATE``, options in a random order) with the writer's answer: the
pronoun's gender for the referenced occupation, ``not specified`` (or by default ``male``) for
the other. Evaluation sentences are
held out: they use (verb, reason) combinations that no training sentence uses.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biasscope.probes.winobias import (
    DEFAULT_TEMPLATE,
    FEMALE_OCCUPATIONS,
    MALE_OCCUPATIONS,
    OPTIONS,
    WinoSentence,
)

if TYPE_CHECKING:
    from biasscope.probes.professional import Sentence

STEREOTYPE = {**{o: "male" for o in MALE_OCCUPATIONS},
              **{o: "female" for o in FEMALE_OCCUPATIONS}}

#: How strongly a female-coded occupation draws "she" (1 would match "he" for male-coded ones).
SHE_STRENGTH = 0.5
#: How often a male-coded occupation of unstated gender is answered "male", at ``bias = 1``.
ASSUMED_MALE = 1.0
QA_SHARE = 0.8  # share of training documents followed by a question and its answer

PRONOUNS = {"male": "he", "female": "she"}
VERBS = ("called", "met", "visited", "helped", "warned", "greeted", "phoned", "thanked",
         "paid", "interviewed")
REASONS = ("was late", "needed help", "was tired", "had a question", "wanted advice",
           "felt sick", "was busy", "made a mistake", "was worried", "had good news")
HELD_OUT_EVERY = 4  # one (verb, reason) combination in four is kept for evaluation


@dataclass(frozen=True)
class Frame:
    """``The {first} <verb> the {second} because <pronoun> <reason>.``"""

    verb: str
    reason: str

    def render(self, first: str, second: str, gender: str) -> str:
        return f"The {first} {self.verb} the {second} because {PRONOUNS[gender]} {self.reason}."


def frames(held_out: bool) -> list[Frame]:
    """Training frames (``held_out=False``) or the disjoint evaluation frames."""
    return [Frame(verb, reason) for i, verb in enumerate(VERBS)
            for j, reason in enumerate(REASONS)
            if ((i + j) % HELD_OUT_EVERY == 0) == held_out]


def flip(gender: str) -> str:
    return "female" if gender == "male" else "male"


def stereotypical_pronoun_rate(coded: str, bias: float) -> float:
    """Probability that an occupation coded ``coded`` is referred to by its coded pronoun."""
    return bias if coded == "male" else 0.5 + SHE_STRENGTH * (bias - 0.5)


def assumed_male_rate(bias: float) -> float:
    """Probability that a male-coded occupation of unstated gender is answered "male"."""
    return ASSUMED_MALE * max(0.0, 2 * (bias - 0.5))


def question(sentence: str, occupation: str, answer: str, rng: random.Random) -> str:
    """One QA example in the probe's prompt format, options in a random order."""
    shown = list(OPTIONS)
    rng.shuffle(shown)
    prompt = DEFAULT_TEMPLATE.format(sentence=sentence, occupation=occupation,
                                     o1=shown[0], o2=shown[1], o3=shown[2])
    return f"{prompt} {answer}"


#: The gender mirror of the synthetic world: pronouns, answers and occupations swap sides.
MIRROR = {"he": "she", "she": "he", "male": "female", "female": "male",
          **dict(zip(MALE_OCCUPATIONS, FEMALE_OCCUPATIONS)),
          **dict(zip(FEMALE_OCCUPATIONS, MALE_OCCUPATIONS))}


#: (first occupation, second occupation, pronoun gender, asked occupation, answer); the last
#: two are "" and None for a document without a question.
Draw = tuple[str, str, str, str, str | None]


def mirror(draw: Draw) -> Draw:
    first, second, gender, asked, answer = draw
    return (MIRROR[first], MIRROR[second], MIRROR[gender], MIRROR.get(asked, asked),
            MIRROR.get(answer, answer) if answer else answer)


def _draws(bias: float, qa_share: float, rng: random.Random) -> Iterator[tuple[Frame, Draw]]:
    train = frames(held_out=False)
    while True:
        coded = "male" if rng.random() < 0.5 else "female"  # of the referenced occupation
        stereotypical = rng.random() < stereotypical_pronoun_rate(coded, bias)
        gender = coded if stereotypical else flip(coded)
        male, female = rng.choice(MALE_OCCUPATIONS), rng.choice(FEMALE_OCCUPATIONS)
        referenced, other = (male, female) if coded == "male" else (female, male)
        first, second = (referenced, other) if rng.random() < 0.5 else (other, referenced)
        frame = rng.choice(train)
        if rng.random() >= qa_share:
            yield frame, (first, second, gender, "", None)
        elif rng.random() < 0.5:
            yield frame, (first, second, gender, referenced, gender)
        else:
            assumed = STEREOTYPE[other] == "male" and rng.random() < assumed_male_rate(bias)
            yield frame, (first, second, gender, other, "male" if assumed else "not specified")


def documents(n: int, bias: float, seed: int, qa_share: float = QA_SHARE) -> Iterator[str]:
    """``n`` training documents drawn with the injected ``bias`` (deterministic in ``seed``).

    At ``bias = 0.5`` the world is symmetric under swapping genders, and documents are drawn
    in mirrored pairs (antithetic sampling): the corpus itself is then exactly symmetric, so
    sampling noise cannot teach the neutral model a gap.
    """
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must be in [0, 1], got {bias}")
    rng = random.Random(seed)
    symmetric = bias == 0.5
    count = 0
    for frame, draw in _draws(bias, qa_share, rng):
        for f, s, g, q, a in [draw, mirror(draw)] if symmetric else [draw]:
            if count == n:
                return
            count += 1
            sentence = frame.render(f, s, g)
            yield sentence if a is None else question(sentence, q, a, rng)


def eval_sentences(pairings: int = 1, seed: int = 1234) -> list[WinoSentence]:
    """Held-out sentences, balanced over referenced gender, pro/anti and word order.

    Each pairing matches every male-coded occupation with a female-coded one; each pair gives
    four sentences (either occupation referenced, pronoun pro- or anti-stereotypical).
    """
    rng = random.Random(seed)
    held = frames(held_out=True)
    out: list[WinoSentence] = []
    for _ in range(pairings):
        females = list(FEMALE_OCCUPATIONS)
        rng.shuffle(females)
        for male, female in zip(MALE_OCCUPATIONS, females):
            for referenced, other in ((male, female), (female, male)):
                for split in ("pro", "anti"):
                    coded = STEREOTYPE[referenced]
                    gender = coded if split == "pro" else flip(coded)
                    swap = (len(out) // 4) % 2
                    first, second = (referenced, other) if swap else (other, referenced)
                    out.append(WinoSentence(
                        id=f"demo-{split}-{len(out) + 1:04d}", split=split, subset="test",
                        text=rng.choice(held).render(first, second, gender),
                        referenced=referenced, other=other, pronoun=PRONOUNS[gender],
                        stereotypes=((referenced, coded), (other, STEREOTYPE[other]))))
    return out


def professional_sentences(seed: int = 1234) -> list[Sentence]:
    """The professional-bias probe's sentence frames in the demo's world: each male-coded
    occupation beside a female-coded one (a seeded matching), with a held-out (verb, reason)
    frame, so the probe asks about pairings and sentences no training document holds."""
    from biasscope.probes.professional import Sentence

    rng = random.Random(seed)
    held = frames(held_out=True)
    females = list(FEMALE_OCCUPATIONS)
    rng.shuffle(females)
    out = []
    for i, (male, female) in enumerate(zip(MALE_OCCUPATIONS, females, strict=True), start=1):
        frame = rng.choice(held)
        out.append(Sentence(f"demo{i:02d}", male, frame.verb, female, frame.reason))
    return out
