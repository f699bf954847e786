"""Interventions: what the intervention arm does to the training text (the control arm trains
on the text as it is).

An intervention is a small protocol: a ``name`` (the arm's model name in the run), a
``config()`` recorded in run.json, and ``apply(texts)`` returning the arm's training texts. A
second intervention is one class here (or anywhere: `run` takes any object of this shape).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from biasscope.core.errors import BiasscopeError
from biasscope.core.gender_swap import has_gendered, swap_gender


class Intervention(Protocol):
    """What the intervention arm trains on instead of the text as it is."""

    @property
    def name(self) -> str: ...

    def config(self) -> dict[str, object]: ...

    def apply(self, texts: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class CDA:
    """Counterfactual data augmentation with `biasscope.core.gender_swap`'s word list.

    Two-sided (default): every text, plus the gender-swapped copy of each text that has
    gendered words (the corpus then holds both versions). One-sided: each gendered text
    replaced by its swapped copy.
    """

    two_sided: bool = True
    name: str = "cda"

    def config(self) -> dict[str, object]:
        return {"method": "cda", "sides": 2 if self.two_sided else 1,
                "word_list": "biasscope.core.gender_swap"}

    def apply(self, texts: Sequence[str]) -> list[str]:
        swapped = [swap_gender(t) if has_gendered(t) else None for t in texts]
        if not self.two_sided:
            return [s if s is not None else t for t, s in zip(texts, swapped)]
        return [*texts, *(s for s in swapped if s is not None)]


@dataclass(frozen=True)
class DropGendered:
    """Drop every text that has a gendered word (the crude alternative to CDA)."""

    name: str = "drop-gendered"

    def config(self) -> dict[str, object]:
        return {"method": "drop-gendered", "word_list": "biasscope.core.gender_swap"}

    def apply(self, texts: Sequence[str]) -> list[str]:
        kept = [t for t in texts if not has_gendered(t)]
        if not kept:
            raise BiasscopeError("drop-gendered leaves no training text: every document has "
                                 "a gendered word")
        return kept


#: The interventions ``biasscope intervene --method`` knows, by name.
METHODS: dict[str, Callable[[], Intervention]] = {
    "cda": lambda: CDA(True), "cda-one-sided": lambda: CDA(False),
    "drop-gendered": DropGendered}


def make(method: str) -> Intervention:
    try:
        made: Intervention = METHODS[method]()
    except KeyError:
        raise BiasscopeError(f"unknown intervention {method!r}; known: "
                             f"{', '.join(sorted(METHODS))}") from None
    return made
