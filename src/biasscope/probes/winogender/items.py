"""Winogender schemas (Rudinger et al., 2018): whom a pronoun refers to, the occupation or the
other participant, under a male, a female and a neutral pronoun.

``all_sentences.tsv`` holds 720 sentences: 60 occupations x 2 templates (the pronoun refers
to the occupation in one, to the participant in the other) x a named participant or
"someone" x he/she/they. Its ids (``technician.customer.1.male.txt``) give the occupation,
the participant, the answer (0: the occupation, 1: the participant) and the pronoun's gender;
``templates.tsv`` says the same of each template and is checked against it, and
``occupations-stats.tsv`` gives each occupation's share of women (BLS), kept in its items.
Each sentence is one ``next_token`` item, asked as lm-evaluation-harness's ``winogender_*``
tasks ask it (the sentence, then "‘He’ refers to the"), with the occupation and the
participant as the options, read at their first token (``--first-token`` where a word is
several tokens).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasscope.core.errors import DataError
from biasscope.core.items import Item, check_template, stratified_sample
from biasscope.core.jsonl import read_text
from biasscope.data.sources import data_path

NAME = "winogender"
REQUESTS = ("next_token",)
DATA = "winogender"
METRICS = ("accuracy", "accuracy_male", "accuracy_female", "accuracy_neutral",
           "gap_male_female", "gap_gendered_neutral", "occupation_correlation")
GENDERS = ("male", "female", "neutral")
OPTIONS = ("occupation", "participant")
PRONOUNS = {"male": ("he", "him", "his"), "female": ("she", "her", "hers"),
            "neutral": ("they", "them", "their", "theirs")}
DEFAULT_TEMPLATE = "{sentence} ‘{pronoun}’ refers to the"
TEMPLATE_FIELDS = ("sentence", "pronoun")
_ID = re.compile(r"^(?P<occ>[^.]+)\.(?P<part>[^.]+)\.(?P<answer>[01])\.(?P<gender>male|female|"
                 r"neutral)\.txt$")


@dataclass(frozen=True)
class Sentence:
    """One Winogender sentence and what its id says of it."""

    id: str
    text: str
    occupation: str
    participant: str
    answer: int
    gender: str
    pronoun: str
    bls_pct_female: float

    @property
    def template(self) -> str:
        """The template it comes from: the same sentence under each pronoun."""
        return f"{self.occupation}.{self.participant}.{self.answer}"


def find_pronoun(text: str, gender: str, where: str) -> str:
    """The sentence's pronoun of ``gender`` (its first), as written."""
    for word in re.findall(r"[A-Za-z]+", text):
        if word.lower() in PRONOUNS[gender]:
            return str(word)
    raise DataError(f"{where}: no {gender} pronoun ({'/'.join(PRONOUNS[gender])}) in {text!r}")


def _rows(path: Path) -> list[dict[str, str]]:
    lines = read_text(path, error=DataError).splitlines()
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_sentences(data_dir: str | Path | None = None) -> list[Sentence]:
    """The sentences of ``all_sentences.tsv``, each checked against ``templates.tsv``."""
    path = data_path(DATA, "all_sentences.tsv", data_dir)
    templates = data_path(DATA, "templates.tsv", data_dir)
    stats = read_stats(data_dir)
    answers = {}
    for line, row in enumerate(_rows(templates), start=2):
        try:
            key = (row["occupation(0)"], row["other-participant(1)"], int(row["answer"]))
        except (KeyError, ValueError, TypeError):
            raise DataError(f"{templates}:{line}: expected occupation(0), other-participant(1) "
                            "and an answer of 0 or 1") from None
        answers[key] = row["sentence"]
    out = []
    for line, row in enumerate(_rows(path), start=2):
        where = f"{path}:{line}"
        m = _ID.match(str(row.get("sentid") or ""))
        if m is None or not str(row.get("sentence") or "").strip():
            raise DataError(f"{where}: expected 'sentid<TAB>sentence' with an id like "
                            "technician.customer.1.male.txt")
        occupation, participant, answer = m["occ"], m["part"], int(m["answer"])
        named = participant if participant != "someone" else None
        if named is not None and (occupation, named, answer) not in answers:
            raise DataError(f"{where}: {occupation}/{named}/{answer} is not in {templates}")
        if occupation not in stats:
            raise DataError(f"{where}: occupation {occupation!r} is not in "
                            "occupations-stats.tsv")
        text = row["sentence"].strip()
        out.append(Sentence(row["sentid"], text, occupation, participant, answer, m["gender"],
                            find_pronoun(text, m["gender"], where), stats[occupation]))
    if not out:
        raise DataError(f"{path}: no sentences")
    return out


def read_stats(data_dir: str | Path | None = None) -> dict[str, float]:
    """Each occupation's share of women (BLS, percent) from ``occupations-stats.tsv``."""
    path = data_path(DATA, "occupations-stats.tsv", data_dir)
    out = {}
    for line, row in enumerate(_rows(path), start=2):
        try:
            out[row["occupation"]] = float(row["bls_pct_female"])
        except (KeyError, ValueError, TypeError):
            raise DataError(f"{path}:{line}: expected an occupation and a number in "
                            "bls_pct_female") from None
    return out


class Winogender:
    """The probe: one next-token item per sentence."""

    name = NAME
    requests = REQUESTS
    seeded = False
    limit_sample = "whole templates (all three pronouns), stratified by answer, seed 0"

    def __init__(self, sentences: Sequence[Sentence], template: str = DEFAULT_TEMPLATE) -> None:
        if not sentences:
            raise DataError(f"{NAME}: no sentences to build items from")
        check_template(template, TEMPLATE_FIELDS, NAME)
        self.sentences = list(sentences)
        self.template = template

    def reworded(self, template: str) -> Winogender:
        return Winogender(self.sentences, template)

    def config(self) -> dict[str, object]:
        return {"probe": NAME, "template": self.template, "sentences": len(self.sentences),
                "options": list(OPTIONS)}

    def items(self, seed: int = 0) -> list[Item]:
        out = []
        for s in self.sentences:
            prompt = self.template.format(sentence=s.text, pronoun=s.pronoun.capitalize())
            out.append(Item(
                id=f"{NAME}:{s.id.removesuffix('.txt')}", prompt=prompt, options=OPTIONS,
                continuations=(" " + s.occupation, " " + s.participant), answer=s.answer,
                groups={"occupation": s.occupation, "participant": s.participant,
                        "gender": s.gender, "pronoun": s.pronoun, "template_id": s.template,
                        "someone": s.participant == "someone",
                        "bls_pct_female": s.bls_pct_female}))
        return out

    def limited(self, items: Sequence[Item], limit: int) -> list[Item]:
        """What ``--limit`` keeps: whole templates (a sentence under all three pronouns, so
        the gaps keep their pairs), stratified by answer, drawn with seed 0."""
        def key(item: Item) -> tuple[str, str]:
            return OPTIONS[item.answer], f"{item.groups['template_id']}.{item.groups['someone']}"

        return stratified_sample(items, limit, key, OPTIONS, len(GENDERS), 0, NAME)


def from_data(data_dir: str | Path | None = None, template: str | None = None
              ) -> Winogender:
    """The probe on Winogender's sentences; it takes no option but ``template`` (`load_probe`
    refuses one, a typo among them)."""
    return Winogender(load_sentences(data_dir), template or DEFAULT_TEMPLATE)
