"""Canned answers: a generate backend that replies from a fixed list (dry runs, tests)."""

from __future__ import annotations

from collections.abc import Sequence

from biasscope.backends.base import GenerateRequest, Generation, Generator
from biasscope.backends.specs import GeneratorConfig, ModelSpec


class CannedGenerator:
    """Answers ``generate`` requests with ``replies`` in turn, starting over after the last:
    one reply answers every request the same way."""

    def __init__(self, replies: Sequence[str], label: str | None = None) -> None:
        self.replies, self.turn = tuple(replies) or ("",), 0
        self.label = label or "canned:" + "|".join(self.replies)

    def identity(self) -> dict[str, str]:
        return {"backend": "canned", "model": "|".join(self.replies)}

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        out = []
        for _ in requests:
            out.append(Generation(self.replies[self.turn], finish_reason="stop"))
            self.turn = (self.turn + 1) % len(self.replies)
        return out


def from_spec(spec: ModelSpec, config: GeneratorConfig) -> Generator:
    """``canned:TEXT`` (every answer TEXT) or ``canned:A|B|C`` (A, B, C, A, ...); keys, URLs
    and devices do not apply (it is in ``NO_SERVER``, so ``load_generator`` refuses a
    server's URL or key given with it rather than ignore them)."""
    return CannedGenerator(spec.target.split("|"))
