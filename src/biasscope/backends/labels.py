"""Readable, distinct labels for several models given on one command line.

Judges, judge-audit judges and reward models are keyed by their label in verdicts, agreement
tables and units, so two models whose default labels coincide (``hf:a/checkpoint-600`` and
``hf:b/checkpoint-600`` are both ``checkpoint-600``) would merge into one. Each value may be
``NAME=SPEC`` (the user's label); otherwise a model keeps its backend's label where that is
unique, and models that share one get the shortest ``/``-suffix of their spec that tells them
apart (``a/checkpoint-600``, ``b/checkpoint-600``), else the whole spec. The same model given
twice is an error: it would only agree with itself.

Labels and errors are made from each spec with its URL's credentials masked
(``redact_urls``): a label lands in verdicts, units and reports. Two URLs that differ only in
their credentials are one server and so one model, given twice: the response cache keys
both by the masked URL, so the second would only repeat the first's answers.

A label holds no ``,``: run.json lists a run's models joined by ``", "``, so ``a,b`` would
read as two models; nor a control character (a label is shown on one line). A caller that
joins labels otherwise says so (``joiner``: a counterfactual run names its panel of judges
by their labels joined by ``+``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasscope.backends.redact import redact_urls
from biasscope.core.errors import BiasscopeError

Named = tuple[str | None, str]


def split_named(value: str) -> Named:
    """``NAME=SPEC`` or ``SPEC``. A name holds no ``/``, ``*`` or ``:``, so a spec whose URL or
    path carries ``=`` is never cut (the rule of ``--checkpoint-glob NAME=GLOB``, plus ``:``)."""
    name, eq, rest = value.partition("=")
    if eq and name and rest and not any(c in name for c in "/*:"):
        return name, rest
    return None, value


#: Why a label cannot hold each character that it cannot hold (others: control characters).
_JOINED = {",": "run.json lists the models joined by ', '",
           "+": "the panel of judges is named by their names joined by '+'"}


def _unfit(label: str, joiner: str) -> str | None:
    """Why ``label`` cannot be a label (`_JOINED`, or a control character), None if it can."""
    bad = next((c for c in label if c == "," or c in joiner or not c.isprintable()), None)
    if bad is None:
        return None
    return f"holds {bad!r} ({_JOINED.get(bad, 'a label is shown on one line')})"


def _identity(spec: str) -> str:
    """What decides which model a spec loads: a local directory by its resolved path, a
    server by its masked URL (a credential picks no other model)."""
    kind, colon, rest = spec.partition(":")
    prefix, body = (f"{kind}:", rest) if colon and kind == "hf" else ("", spec)
    source, at, revision = body.partition("@")
    try:
        path = Path(source).expanduser()
        if source and path.exists():
            return f"{prefix}{path.resolve()}{at}{revision}"
    except OSError:
        pass
    return redact_urls(spec)


def parse_models(values: Sequence[str], option: str, joiner: str = "") -> list[Named]:
    """``(name or None, spec)`` per value; one-line errors for a model or name given twice,
    and for a name holding ``=`` (``a=b=canned:A`` reads as the name ``a``, and its model
    ``b=canned:A`` was refused as a spec without a word of the name) or what no label may
    hold (`_unfit`: ``,``, a control character, ``joiner``'s), and for an empty
    model, name or spec (``''``, an unset ``$VARIABLE``, read as the folder ``.``; ``=rm`` or
    ``A=``, which reached the hub loader and failed with its message)."""
    for value in values:
        before, eq, after = value.partition("=")
        if not value.strip():
            raise BiasscopeError(f"{option} is empty: give a model (SPEC or NAME=SPEC)")
        if eq and not before.strip():
            raise BiasscopeError(f"{option} {redact_urls(value)!r}: the name before '=' is "
                                 "empty; write NAME=SPEC, or the SPEC alone")
        if eq and not after.strip() and not any(c in before for c in "/*:"):
            raise BiasscopeError(f"{option} {redact_urls(value)!r}: the model after '=' is "
                                 "empty; write NAME=SPEC")
    named = [split_named(v) for v in values]
    for value, (name, spec) in zip(values, named):
        again, rest = split_named(spec)
        if name is not None and again is not None and ":" in rest:
            raise BiasscopeError(f"{option} {redact_urls(value)!r}: a name cannot hold '=' "
                                 f"(this reads as the name {name!r} for the model "
                                 f"{redact_urls(spec)!r}); name it without '='")
        if name is not None and (why := _unfit(name, joiner)):
            raise BiasscopeError(f"{option} {redact_urls(value)!r}: the name {name!r} {why}; "
                                 "name it without that character")
    seen: dict[str, str] = {}
    for _, spec in named:
        identity, shown = _identity(spec), redact_urls(spec)
        if identity in seen:
            first = seen[identity]
            same = "" if first == spec else (
                " (with other URL credentials: one server)" if redact_urls(first) == shown
                else f" (as {redact_urls(first)!r})")
            raise BiasscopeError(f"{option} {shown!r} is given twice{same}: give each model "
                                 "once")
        seen[identity] = spec
    names = Counter(name for name, _ in named if name is not None)
    if twice := [n for n, count in names.items() if count > 1]:
        raise BiasscopeError(f"{option}: the name {twice[0]!r} is given to two models")
    return named


def _suffixes(spec: str) -> list[str]:
    """The spec's ``/``-suffixes, shortest first, without the backend prefix; then the spec:
    all with the URL's credentials masked."""
    spec = redact_urls(spec)
    kind, colon, rest = spec.partition(":")
    body = rest if colon and "/" not in kind else spec
    parts = body.rstrip("/").split("/")
    return ["/".join(parts[-k:]) for k in range(1, len(parts) + 1)] + [spec]


def model_labels(named: Sequence[Named], defaults: Sequence[str], option: str,
                 joiner: str = "") -> list[str]:
    """One distinct label per model: the user's name, else ``defaults`` (the backends' own
    labels) where unique, else the shortest spec suffix that no other model shares. A label
    made from a spec that no label may hold (`_unfit`: ``./rm,v2``) is refused: name it."""
    counts = Counter(d for (name, _), d in zip(named, defaults) if name is None)
    names = {name for name, _ in named}
    labels = [name if name is not None else
              default if counts[default] == 1 and default not in names else None
              for (name, _), default in zip(named, defaults)]
    for i, (_, spec) in enumerate(named):
        if labels[i] is not None:
            continue
        others = [s for j, (_, s) in enumerate(named) if j != i]
        taken = {x for x in labels if x is not None}
        labels[i] = next((s for s in _suffixes(spec) if s not in taken
                          and all(s not in _suffixes(o) for o in others)), redact_urls(spec))
    final = [str(x) for x in labels]
    for label, (_, spec) in zip(final, named):
        if why := _unfit(label, joiner):
            raise BiasscopeError(f"{option} {redact_urls(spec)!r} is labelled {label!r}, which "
                                 f"{why}: name it with NAME=SPEC")
    if clash := [x for x, count in Counter(final).items() if count > 1]:
        raise BiasscopeError(f"{option}: two models would both be labelled {clash[0]!r}; "
                             "name them with NAME=SPEC")
    return final


def label_models(models: Sequence[Any], named: Sequence[Named], option: str,
                 joiner: str = "") -> None:
    """Give each loaded model (anything with a ``label``) its distinct label, in place."""
    labels = model_labels(named, [m.label for m in models], option, joiner)
    for model, label in zip(models, labels):
        model.label = label
