"""Keys out of error texts: every error an HTTP backend stores or prints passes through here.

Servers echo what they were sent: a proxy's 400 quotes the request headers, a 422 the rejected
body, a 5xx page the whole request, OpenAI's 401 a masked key (``sk-abc***xyz``). An error text
lands in output files, unit records, judge verdicts and on stderr, so the configured key is
removed from it, in whole or in any run of 8 or more of its characters, and so is every
``Authorization``/``Bearer``/``api_key`` value whatever key it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[redacted]"
_WINDOW = 8  # a shorter run of a key's characters identifies nothing
_LABELLED = re.compile(
    r"""(?ix)
    ( (?:proxy-)?authorization ["']? \s* [:=] \s* ["']? (?:bearer\s+|basic\s+|token\s+)?
    | \bbearer \s+
    | \b(?:x-)?api[-_]?key ["']? \s* [:=] \s* ["']?
    )
    [^\s"',;}\]]+
    """)


def _covered(text: str, secret: str) -> list[bool]:
    """Which characters of ``text`` belong to a run of the secret's characters."""
    hit = [False] * len(text)
    width = min(_WINDOW, len(secret))
    for start in range(len(secret) - width + 1):
        piece = secret[start:start + width]
        at = text.find(piece)
        while at != -1:
            hit[at:at + width] = [True] * width
            at = text.find(piece, at + 1)
    return hit


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any of ``secrets`` (or a piece of one) and without labelled
    credentials. Secrets shorter than 4 characters are no secrets and are left alone."""
    text = _LABELLED.sub(lambda m: m.group(1) + MASK, text)
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        hit = _covered(text, secret)
        if not any(hit):
            continue
        out, i = [], 0
        while i < len(text):
            if hit[i]:
                while i < len(text) and hit[i]:
                    i += 1
                out.append(MASK)
            else:
                out.append(text[i])
                i += 1
        text = "".join(out)
    return text


def error_line(exc: BaseException, secrets: Iterable[str | None] = (), limit: int = 300) -> str:
    """The first line of an exception's text, redacted before it is cut to ``limit``
    characters (cutting first could leave half a key behind)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    # Bounded work on a megabyte one-line body; what survives the cut lies far before 20k.
    return redact(text.splitlines()[0][:20_000], secrets)[:limit]


__all__ = ["MASK", "error_line", "redact"]
