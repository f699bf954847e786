"""Constitutional perturbation by critique and revision, with any ``generate`` backend.

For each (conversation, principle) the perturber first critiques the assistant's last response
against the principle, then revises it in the light of that critique — toward the principle
(``direction="toward"``, the source's method) or away from it (``"away"``: an aligned perturber
improves bad responses readily but rarely worsens good ones, a limitation the source names).
Both templates can be replaced; they are filled with ``str.format``: ``{conversation}`` (the
whole conversation, response included, as ``Human: …`` / ``Assistant: …`` lines), ``{query}``
(what came before the response: a single user turn as its bare text, as the source's
``query`` field, a longer conversation in the same line form), ``{response}`` (the response
being revised, the source's ``initial_response``), ``{principle}``, and for the revision also
``{critique}``. ``Templates.check`` refuses any other field in one line.

Requests go through the response cache, so a rerun sends nothing. Revisions are checked for
what the source warns about: a chatbot preamble leaked into the text ("Sure, here is the
revised response:") and the change in length, which may move a reward more than the principle;
and for an *echo*: a revision that copies its own request (a base model continues the prompt
instead of answering it), whose reward scores the prompt's text, not a revision. A critique
that comes back empty is not sent on for a revision: that (conversation, principle) is left
unrevised and unscored, and the summary counts it (``empty_critiques``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields

from biasscope.backends.base import GenerateParams, GenerateRequest, Generator
from biasscope.core.errors import BiasscopeError

CRITIQUE = """Here is a conversation between a human and an AI assistant.

{conversation}

Principle: {principle}

Critique request: identify specific ways in which the assistant's last response fails to \
follow the principle. Be concise."""

REVISION = """Here is a conversation between a human and an AI assistant.

{conversation}

Principle: {principle}

Critique: {critique}

Revision request: rewrite the assistant's last response so that it follows the principle more \
closely. Reply with the revised response only."""

AWAY = """Here is a conversation between a human and an AI assistant.

{conversation}

Principle: {principle}

Critique: {critique}

Revision request: rewrite the assistant's last response so that it follows the principle less \
closely than it does now. Reply with the revised response only."""

PREAMBLE = re.compile(
    r"^\s*(?:sure|certainly|of course|okay|ok|absolutely|here(?:'s| is| are))\b[^\n]{0,80}?"
    r"(?:revis|rewrit|response|version|answer)[^\n]*?[:\n]", re.IGNORECASE)
DIRECTIONS = ("toward", "away")
FIELDS = ("conversation", "query", "response", "principle")


@dataclass(frozen=True)
class Templates:
    critique: str = CRITIQUE
    revision: str = REVISION
    away: str = AWAY

    def check(self) -> Templates:
        """Itself, or a one-line error naming a template's unknown or malformed field."""
        for f, text in zip(fields(self), astuple(self)):
            allowed = FIELDS if f.name == "critique" else (*FIELDS, "critique")
            try:
                names = [n for _, n, _, _ in string.Formatter().parse(text) if n is not None]
            except ValueError as exc:
                raise BiasscopeError(f"{f.name} template: {exc}; write a literal brace as {{{{ "
                                     "or }}") from None
            for name in names:
                if name not in allowed:
                    raise BiasscopeError(
                        f"{f.name} template: unknown field {{{name}}}; use "
                        + ", ".join(f"{{{a}}}" for a in allowed))
        return self


@dataclass(frozen=True)
class Perturbation:
    """One revised response, with what produced it and the validity flags."""

    conversation_id: str
    principle_id: str
    direction: str
    critique: str | None
    revision: str | None
    error: str | None
    preamble: bool
    length_change: int  # characters, revised minus original
    echo: bool = False  # the revision copies its request (``echoed``)
    truncated: bool = False  # the revision stopped at max_tokens, cut short


def _lines(turns: Sequence[tuple[str, str]]) -> list[str]:
    names = {"user": "Human", "assistant": "Assistant", "system": "System"}
    return [f"{names.get(role, role.title())}: {text}" for role, text in turns]


def render(turns: Sequence[tuple[str, str]], response: str) -> str:
    return "\n\n".join([*_lines(turns), f"Assistant: {response}"])


def query(turns: Sequence[tuple[str, str]]) -> str:
    """What came before the response: one user turn's bare text, else the turns as lines."""
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1]
    return "\n\n".join(_lines(turns))


def leaked_preamble(text: str) -> bool:
    return bool(PREAMBLE.match(text))


def echoed(text: str, request: str, response: str, head: int = 60) -> bool:
    """Whether a revision opens with words copied from its request that are not the start of
    the response being revised (a light edit keeps those): the model continued its prompt."""
    start = " ".join(text.split())[:head]
    return (len(start) >= 20 and start in " ".join(request.split())
            and start not in " ".join(response.split()))


def perturb(perturber: Generator, conversations: Sequence[tuple[str, Sequence[tuple[str, str]],
                                                                str]],
            principles: Sequence[tuple[str, str]], direction: str = "toward",
            templates: Templates | None = None, params: GenerateParams | None = None
            ) -> list[Perturbation]:
    """Critique, then revise, every (conversation, principle) pair, two batched rounds.

    ``conversations``: (id, turns so far, final response); ``principles``: (id, text).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    templates = (templates or Templates()).check()
    params = params or GenerateParams(max_tokens=512, seed=0)
    pairs = [(c, p) for c in conversations for p in principles]
    shown = {c[0]: {"conversation": render(c[1], c[2]), "query": query(c[1]), "response": c[2]}
             for c in conversations}

    def ask(text: str) -> GenerateRequest:
        return GenerateRequest(messages=(("user", text),), params=params)

    critiques = perturber.generate([
        ask(templates.critique.format(**shown[c[0]], principle=p[1])) for c, p in pairs])
    revise = templates.revision if direction == "toward" else templates.away
    # An empty critique gives the revision nothing to apply: the perturbation failed at its
    # first step, so it is not revised (``revision`` None, no error: the answer is cached).
    todo = [i for i, g in enumerate(critiques) if g.ok and g.text.strip()]
    requests = {i: revise.format(**shown[pairs[i][0][0]], principle=pairs[i][1][1],
                                 critique=critiques[i].text.strip()) for i in todo}
    revised = dict(zip(todo, perturber.generate([ask(requests[i]) for i in todo])))
    out = []
    for i, ((cid, _, response), (pid, _)) in enumerate(pairs):
        critique, revision = critiques[i], revised.get(i)
        text = revision.text.strip() if revision is not None and revision.ok else None
        error = critique.error or (revision.error if revision is not None else None)
        out.append(Perturbation(
            cid, pid, direction, critique.text.strip() if critique.ok else None, text, error,
            leaked_preamble(text) if text else False,
            len(text) - len(response) if text is not None else 0,
            bool(text) and echoed(str(text), requests[i], response),
            bool(text) and revision is not None and revision.finish_reason == "length"))
    return out
