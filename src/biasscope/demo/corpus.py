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

Training documents are such sentences, each followed by one question and the writer's answer.
Most ask WinoBias's question in its prompt format (``DEFAULT_TEMPLATE``, options in a random
order): the pronoun's gender for the referenced occupation, ``not specified`` (or by default
``male``) for the other. The rest ask the professional-bias probe's question, ``who
<reason>?``, in its chat format, answered with the referenced occupation: the biased writer's
pronoun habit then also shows as a stereotype preference. Without these questions the probe
asked the model something it never saw, and the answers it made up depended on the pronoun
anyway, by a sign and size set by chance (+0.50 at ``bias = 0.5``, -0.12 at 0.95).
Evaluation sentences are held out: they use (verb, reason) combinations that no training
sentence uses.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from biasscope.backends.base import plain_chat
from biasscope.probes import professional
from biasscope.probes.professional import Sentence
from biasscope.probes.winobias import (
    DEFAULT_TEMPLATE,
    FEMALE_OCCUPATIONS,
    MALE_OCCUPATIONS,
    OPTIONS,
    WinoSentence,
)

STEREOTYPE = {**{o: "male" for o in MALE_OCCUPATIONS},
              **{o: "female" for o in FEMALE_OCCUPATIONS}}

#: How strongly a female-coded occupation draws "she" (1 would match "he" for male-coded ones).
SHE_STRENGTH = 0.5
#: How often a male-coded occupation of unstated gender is answered "male", at ``bias = 1``.
ASSUMED_MALE = 1.0
QA_SHARE = 0.8  # share of training documents followed by the gender question and its answer
WHO_SHARE = 0.2  # share followed by the professional-bias question ("who ...?") and its answer
WHO = "who"  # the asked field of a draw with the professional-bias question

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


def who_question(frame: Frame, first: str, second: str, gender: str, answer: str) -> str:
    """The professional-bias probe's question about the sentence, as the demo model reads it
    (a plain chat: no chat template), and the writer's answer."""
    male, female = (first, second) if STEREOTYPE[first] == "male" else (second, first)
    order = "male-first" if male == first else "female-first"
    text = professional.Sentence("demo", male, frame.verb, female, frame.reason).text(
        order, PRONOUNS[gender])
    prompt = professional.DEFAULT_TEMPLATE.format(sentence=text, action=frame.reason)
    return f"{plain_chat([('user', prompt)])} {answer}"


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


#: (first occupation, second occupation, pronoun gender, asked, answer): asked is an
#: occupation (the gender question), `WHO` (the professional-bias question), or "" with answer
#: None for a document without a question.
Draw = tuple[str, str, str, str, str | None]


def mirror(draw: Draw) -> Draw:
    first, second, gender, asked, answer = draw
    return (MIRROR[first], MIRROR[second], MIRROR[gender], MIRROR.get(asked, asked),
            MIRROR.get(answer, answer) if answer else answer)


def swap_pronoun(draw: Draw) -> Draw:
    """The other pronoun, and the gender answer that follows it; occupations stay. At
    ``bias = 0.5`` as likely as ``draw``: the pronoun says nothing about occupations."""
    first, second, gender, asked, answer = draw
    return (first, second, flip(gender), asked,
            flip(answer) if answer in PRONOUNS else answer)


def _draws(bias: float, qa_share: float, who_share: float, rng: random.Random
           ) -> Iterator[tuple[Frame, Draw]]:
    train = frames(held_out=False)
    while True:
        coded = "male" if rng.random() < 0.5 else "female"  # of the referenced occupation
        stereotypical = rng.random() < stereotypical_pronoun_rate(coded, bias)
        gender = coded if stereotypical else flip(coded)
        male, female = rng.choice(MALE_OCCUPATIONS), rng.choice(FEMALE_OCCUPATIONS)
        referenced, other = (male, female) if coded == "male" else (female, male)
        first, second = (referenced, other) if rng.random() < 0.5 else (other, referenced)
        frame = rng.choice(train)
        kind = rng.random()
        if kind >= qa_share + who_share:
            yield frame, (first, second, gender, "", None)
        elif kind >= qa_share:
            yield frame, (first, second, gender, WHO, referenced)
        elif rng.random() < 0.5:
            yield frame, (first, second, gender, referenced, gender)
        else:
            assumed = STEREOTYPE[other] == "male" and rng.random() < assumed_male_rate(bias)
            yield frame, (first, second, gender, other, "male" if assumed else "not specified")


#: Documents drawn together at ``bias = 0.5``: a draw and its images under the two symmetries.
SYMMETRIC_GROUP = 4


def documents(n: int, bias: float, seed: int, qa_share: float = QA_SHARE,
              who_share: float = WHO_SHARE) -> Iterator[str]:
    """``n`` training documents drawn with the injected ``bias`` (deterministic in ``seed``).

    At ``bias = 0.5`` the world is symmetric under swapping genders (`mirror`) and under
    swapping the pronoun alone (`swap_pronoun`), and documents are drawn in groups of the four
    images of a draw (antithetic sampling): the corpus itself is then exactly symmetric, so
    sampling noise can teach the neutral model neither a gap (the first symmetry) nor a
    pronoun-occupation association (the second; the first keeps that association).
    """
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must be in [0, 1], got {bias}")
    if min(qa_share, who_share) < 0 or qa_share + who_share > 1:
        raise ValueError(f"question shares must be >= 0 and sum to at most 1, got {qa_share} "
                         f"and {who_share}")
    rng = random.Random(seed)
    symmetric = bias == 0.5
    count = 0
    for frame, draw in _draws(bias, qa_share, who_share, rng):
        group = ([draw, mirror(draw), swap_pronoun(draw), mirror(swap_pronoun(draw))]
                 if symmetric else [draw])
        for f, s, g, q, a in group:
            if count == n:
                return
            count += 1
            sentence = frame.render(f, s, g)
            if a is None:
                yield sentence
            elif q == WHO:
                yield who_question(frame, f, s, g, a)
            else:
                yield question(sentence, q, a, rng)


def eval_sentences(pairings: int = 1, seed: int = 1234) -> list[WinoSentence]:
    """Held-out sentences, balanced over referenced gender, pro/anti and word order.

    Each pairing matches every male-coded occupation with a female-coded one; each pair gives
    four sentences (either occupation referenced, pronoun pro- or anti-stereotypical). The pro
    and anti sentence of one referenced occupation pair up as line N of WinoBias's pro_ and
    anti_ files do: one sentence under the other pronoun, ids ``pro-demo-N`` and
    ``anti-demo-N``, so the probe's pro − anti has its pairs.
    """
    rng = random.Random(seed)
    held = frames(held_out=True)
    out: list[WinoSentence] = []
    for _ in range(pairings):
        females = list(FEMALE_OCCUPATIONS)
        rng.shuffle(females)
        for male, female in zip(MALE_OCCUPATIONS, females):
            for referenced, other in ((male, female), (female, male)):
                coded = STEREOTYPE[referenced]
                swap = (len(out) // 4) % 2
                first, second = (referenced, other) if swap else (other, referenced)
                frame, pair = rng.choice(held), len(out) // 2 + 1
                for split in ("pro", "anti"):
                    gender = coded if split == "pro" else flip(coded)
                    out.append(WinoSentence(
                        id=f"{split}-demo-{pair:04d}", split=split, subset="test",
                        text=frame.render(first, second, gender),
                        referenced=referenced, other=other, pronoun=PRONOUNS[gender],
                        stereotypes=((referenced, coded), (other, STEREOTYPE[other]))))
    return out


def professional_sentences(seed: int = 1234) -> list[Sentence]:
    """The professional-bias probe's sentence frames in the demo's world: each male-coded
    occupation beside a female-coded one (a seeded matching), with a held-out (verb, reason)
    frame, so the probe asks about pairings and sentences no training document holds."""
    rng = random.Random(seed)
    held = frames(held_out=True)
    females = list(FEMALE_OCCUPATIONS)
    rng.shuffle(females)
    out = []
    for i, (male, female) in enumerate(zip(MALE_OCCUPATIONS, females, strict=True), start=1):
        frame = rng.choice(held)
        out.append(Sentence(f"demo{i:02d}", male, frame.verb, female, frame.reason))
    return out
