"""Canned answers: a generate backend that replies from a fixed list (dry runs, tests)."""

from __future__ import annotations

from collections.abc import Sequence

from biasscope.backends.base import GenerateRequest, Generation, Generator
from biasscope.backends.specs import GeneratorConfig, ModelSpec
from biasscope.core.errors import ModelError


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
    and devices do not apply: a server's URL or key given with it is refused, not ignored
    (the run would look as if it had asked that server)."""
    given = [flag for flag, value in (("--base-url", config.base_url),
                                      ("--api-key-env", config.api_key_env)) if value]
    if given:
        raise ModelError(f"--model {spec.text or 'canned:' + spec.rest} answers from a fixed "
                         f"list and asks no server, so {' and '.join(given)} would be ignored: "
                         f"drop {'it' if len(given) == 1 else 'them'}, or give a server's "
                         "model (e.g. openai-compatible:MODEL)")
    return CannedGenerator(spec.target.split("|"))
