"""The tests' shared fake models: small, deterministic stand-ins for a generator (text) and a
reward model (a number per conversation), so that a job runs end to end in milliseconds.

A generator that answers from a fixed list needs no fake: it is the library's own ``canned``
backend (``CannedGenerator`` here, ``--model canned:TEXT`` on the command line).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.backends.canned import CannedGenerator

__all__ = ["CannedGenerator", "Length", "PromptEcho", "Reviser", "Reward"]


class PromptEcho:
    """A generator that answers every request with its prompt."""

    label = "echo"

    def identity(self) -> dict[str, str]:
        return {"backend": "echo"}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        return [Generation(r.prompt or "") for r in requests]


class Reviser:
    """A sensitivity perturber: a critique says "Not <principle>", a revision "I will
    <principle>", so each principle's revisions differ (and so do their rewards). It keeps what
    it was asked."""

    label = "echo"

    def __init__(self, model: str = "echo-1") -> None:
        self.model = model
        self.asked: list[str] = []

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": self.model}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = r.messages[-1][1] if r.messages else ""
            self.asked.append(text)
            principle = text.split("Principle: ", 1)[-1].split("\n", 1)[0]
            out.append(Generation(f"Not {principle}" if "Critique request" in text
                                  else f"I will {principle}"))
        return out


class Length:
    """A reward model: the response's length, scaled."""

    def __init__(self, label: str = "len", scale: float = 1.0) -> None:
        self.label, self.scale = label, scale

    def identity(self) -> dict[str, str]:
        return {"backend": "arithmetic", "scale": str(self.scale)}

    def score(self, conversations: Any) -> list[float]:
        return [self.scale * len(response) for _, response in conversations]


class Reward:
    """An arithmetic reward model: a deterministic per-text jitter, plus ``bonus`` for every
    female pronoun in the response (the planted preference)."""

    def __init__(self, label: str, bonus: float = 0.0) -> None:
        self.label, self.bonus = label, bonus

    def identity(self) -> dict[str, str]:
        return {"backend": "arithmetic", "bonus": str(self.bonus)}

    def score(self, conversations: Any) -> list[float]:
        return [zlib.crc32(r.replace("she", "he").replace("her", "him").encode()) % 100 / 100
                + self.bonus * len(re.findall(r"\b(she|her)\b", r, re.I))
                + ("can't" in r) for _, r in conversations]
