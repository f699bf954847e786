"""Keys out of error texts: every error an HTTP backend stores or prints passes through here.

Servers echo what they were sent: a proxy's 400 quotes the request headers, a 422 the rejected
body, a 5xx page the whole request, OpenAI's 401 a masked key (``sk-abc***xyz``). An error text
lands in output files, unit records, judge verdicts and on stderr, so the configured key is
removed from it, in whole or in any run of 8 or more of its characters, and so is every
``Authorization``/``Bearer``/``api_key`` value whatever key it holds.

A base URL may carry a credential too (``http://user:KEY@host/v1``, ``?api-key=KEY``): what
is recorded or shown of it (a backend's identity, run.json, messages) is ``redact_url``'s
form, and its secrets join the ones removed from error texts (``url_secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "[redacted]"
_WINDOW = 8  # a shorter run of a key's characters identifies nothing
_LABELLED = re.compile(
    r"""(?ix)
    ( (?:proxy-)?authorization ["']? \s* [:=] \s* ["']? (?:bearer\s+|basic\s+|token\s+)?
    | \bbearer \s+
    | \b(?:x-)?api[-_]?key ["']? \s* [:=] \s* ["']?
    )
    (?!\*\*\*)  # a URL's value masked already (``?api-key=***``)
    [^\s"',;}\]]+
    """)


URL_MASK = "***"
# Query parameters whose value is a credential; ``api-version``, ``model`` and the like stay.
_SECRET_PARAM = re.compile(r"(?i)key|token|secret|pass|pwd|sig|auth|credential|session")
# A URL in a text: it ends before a space, a quote, ``#`` (``URL#MODEL``) or a closing
# punctuation mark (``URL: error``, ``(URL)``).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s#'\"]*[^\s#'\".,:;)\]]")


def redact_url(url: str) -> str:
    """``url`` with its user info and the values of secret-looking query parameters replaced by
    ``***`` (``http://***@host:8000/v1?api-key=***``): what a backend records and shows of its
    URL. The host, port and path stay, so different servers stay apart."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not parseable (a bad port, an unclosed [): keep only the scheme
        return url.split("://", 1)[0] + "://" + URL_MASK if "://" in url else url
    if not url_secrets(url):
        return url  # unchanged, not re-spelled: it keys the response cache
    netloc = parts.netloc
    if "@" in netloc:
        netloc = URL_MASK + "@" + netloc.rpartition("@")[2]
    pairs = [pair.partition("=") for pair in parts.query.split("&")] if parts.query else []
    query = "&".join(name + eq + (URL_MASK if value and _SECRET_PARAM.search(unquote(name))
                                  else value) for name, eq, value in pairs)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redact_urls(text: str) -> str:
    """``text`` (a model spec such as ``openai-compatible:URL#MODEL``, a message) with every
    URL in it redacted as ``redact_url`` does."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def url_secrets(url: str) -> tuple[str, ...]:
    """The credentials a URL carries, for ``redact``: the password of its user info (the user
    name where there is none: ``https://TOKEN@host``) and secret query values, each as written
    and percent-decoded (an error text may hold either)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    user, at, _ = parts.netloc.rpartition("@")
    found = [user.partition(":")[2] or user] if at else []
    for pair in parts.query.split("&") if parts.query else []:
        name, _, value = pair.partition("=")
        if _SECRET_PARAM.search(unquote(name)):
            found.append(value)
    return tuple(dict.fromkeys(s for value in found for s in (value, unquote(value)) if s))


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
    characters (cutting first could leave half a key behind), any URL's credentials masked
    too: a server's error may quote a URL whose credential was never configured here."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    # Bounded work on a megabyte one-line body; what survives the cut lies far before 20k.
    return redact(redact_urls(text.splitlines()[0][:20_000]), secrets)[:limit]


__all__ = ["MASK", "error_line", "redact", "redact_url", "redact_urls", "url_secrets"]
