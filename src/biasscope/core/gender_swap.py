"""Swap gendered English words (he ↔ she, king ↔ queen …) for counterfactual text.

Counterfactual data augmentation trains on text whose gendered words are swapped, and a
counterfactual pair for a judge or reward model differs only in them; both need one list
that is written down, so that a result can say exactly what was swapped. The list below is
the project's own: pronouns, kinship and role nouns, titles. Names are not swapped (give
``extra`` pairs for them).

Rules:

- Whole words only (``\\b`` boundaries, ASCII letters): ``manager`` and ``Hermes`` stay.
  A possessive or contraction keeps its tail: ``man's`` → ``woman's``, ``she's`` → ``he's``.
- Case is kept per word: ``he`` → ``she``, ``He`` → ``She``, ``HE`` → ``SHE``.
- ``her`` is either an object (``saw her``) or a possessive determiner (``her book``); English
  has ``him`` and ``his`` for these. Without a part-of-speech tagger the word after decides
  (see ``possessive``): a following word that is not a function word (``the``, ``to``,
  ``and``, ``is``, ``again`` … in ``FUNCTION_WORDS``) makes ``her`` a determiner → ``his``;
  punctuation, the end of the text or a function word makes it an object → ``him``. The same
  rule sends ``his`` to ``her`` (before a noun) or ``hers`` (``the book is his.``).

Round trip: swapping twice restores every word in ``PAIRS`` except in two documented cases:
``him`` followed by a content word (``gave him flowers`` → ``gave her flowers`` →
``gave his flowers``), and ``her``/``his`` where the rule guesses wrong (an adjective after
an object ``her``: ``call her tomorrow`` is right but ``found her asleep`` becomes
``found his asleep``). The words in ``ONE_WAY`` (``ms`` → ``mr``, ``mum`` → ``dad`` …) have
no unique way back, so they do not round-trip either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# (male, female) pairs, each word in exactly one pair: the bijection that makes swapping an
# involution. Plurals are listed because English plurals are irregular (man/men).
PAIRS: tuple[tuple[str, str], ...] = (
    ("he", "she"), ("himself", "herself"),
    ("man", "woman"), ("men", "women"), ("boy", "girl"), ("boys", "girls"),
    ("male", "female"), ("males", "females"), ("masculine", "feminine"),
    ("gentleman", "lady"), ("gentlemen", "ladies"), ("guy", "gal"), ("guys", "gals"),
    ("father", "mother"), ("fathers", "mothers"), ("dad", "mom"), ("dads", "moms"),
    ("daddy", "mommy"), ("papa", "mama"), ("grandfather", "grandmother"),
    ("grandfathers", "grandmothers"), ("grandpa", "grandma"),
    ("stepfather", "stepmother"), ("son", "daughter"), ("sons", "daughters"),
    ("grandson", "granddaughter"), ("grandsons", "granddaughters"),
    ("stepson", "stepdaughter"), ("brother", "sister"), ("brothers", "sisters"),
    ("husband", "wife"), ("husbands", "wives"), ("boyfriend", "girlfriend"),
    ("boyfriends", "girlfriends"), ("fiance", "fiancee"), ("groom", "bride"),
    ("uncle", "aunt"), ("uncles", "aunts"), ("nephew", "niece"), ("nephews", "nieces"),
    ("king", "queen"), ("kings", "queens"), ("prince", "princess"), ("princes", "princesses"),
    ("lord", "dame"), ("sir", "madam"), ("mr", "mrs"), ("monk", "nun"), ("monks", "nuns"),
    ("actor", "actress"), ("actors", "actresses"), ("waiter", "waitress"),
    ("waiters", "waitresses"), ("hero", "heroine"), ("heroes", "heroines"),
    ("businessman", "businesswoman"), ("businessmen", "businesswomen"),
    ("chairman", "chairwoman"), ("spokesman", "spokeswoman"),
    ("policeman", "policewoman"), ("policemen", "policewomen"),
    ("schoolboy", "schoolgirl"), ("manhood", "womanhood"), ("paternal", "maternal"),
    ("fatherhood", "motherhood"), ("brotherhood", "sisterhood"), ("bachelor", "spinster"),
    ("lad", "lass"), ("lads", "lasses"),
)
# The pronouns that need the next word (``her`` ↔ him/his, ``hers`` ↔ his).
PRONOUNS: tuple[str, ...] = ("him", "his", "her", "hers")
# Words with no unique partner: swapped one way only (never produced by a swap).
ONE_WAY: Mapping[str, str] = {"ms": "mr", "mum": "dad", "mums": "dads", "mummy": "daddy"}

# A word after ``her``/``his`` that marks it as an object/standalone pronoun, not a determiner.
_FUNCTION_TEXT = """
a an the this that these those my your his her its our their some any every each no
to in on at for with about from by of into onto over under up down out off away back around
through after before as like than across against along among behind beside between beyond
near toward towards upon within without during
and or but nor so because if when while until since though although whether unless
again too also very not now then there here yesterday today tomorrow tonight already still
just once twice anymore enough either neither all both alone well much more less home
i you he she it we they me him us them what who whom which how why where
is was were are be been am has have had do does did will would can could should might must
may shall
"""
FUNCTION_WORDS: frozenset[str] = frozenset(_FUNCTION_TEXT.split())

_WORD = re.compile(r"[A-Za-z]+")
_NEXT = re.compile(r"\s*([A-Za-z]+)")


def _table(extra: Iterable[tuple[str, str]]) -> dict[str, str]:
    table = dict(ONE_WAY)
    for male, female in (*PAIRS, *extra):
        table[male.lower()] = female.lower()
        table[female.lower()] = male.lower()
    return table


_TABLE = _table(())


def _cased(word: str, like: str) -> str:
    """``word`` with the case pattern of ``like`` (all caps, capitalised or as is)."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[0].isupper():
        return word[0].upper() + word[1:]
    return word


def possessive(next_word: str | None) -> bool:
    """Whether ``her``/``his`` before ``next_word`` is a determiner (``her book``): a next word
    that is not a function word. ``None`` (punctuation or the end follows) means no."""
    return next_word is not None and next_word.lower() not in FUNCTION_WORDS


def _pronoun(word: str, next_word: str | None) -> str:
    if word == "her":
        return "his" if possessive(next_word) else "him"
    if word == "his":
        return "her" if possessive(next_word) else "hers"
    return {"him": "her", "hers": "his"}[word]


def swap_gender(text: str, extra: Iterable[tuple[str, str]] = ()) -> str:
    """``text`` with every gendered word of ``PAIRS`` (and ``extra`` (male, female) pairs,
    e.g. names) replaced by its counterpart; everything else, spacing included, unchanged."""
    table = _table(extra) if extra else _TABLE

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        low = word.lower()
        if low in PRONOUNS:
            after = _NEXT.match(text, match.end())
            # an apostrophe tail (``his'``) or a hyphen is not a next word
            return _cased(_pronoun(low, after.group(1) if after else None), word)
        new = table.get(low)
        return word if new is None else _cased(new, word)

    return _WORD.sub(swap, text)


def gendered_words(text: str) -> list[str]:
    """The words of ``text`` that ``swap_gender`` would change, in order (as written)."""
    known = set(_TABLE) | set(PRONOUNS)
    return [w for w in _WORD.findall(text) if w.lower() in known]


def has_gendered(text: str) -> bool:
    """Whether ``swap_gender`` would change anything in ``text``."""
    return bool(gendered_words(text))
