"""Several prompt wordings of one probe (``--wordings builtin|N|FILE``), asked as one probe.

A wording is a template (the probe's prompt or user turn, with its fields) and, for chat
probes that have one, a system turn. ``Worded`` asks every item under every wording (or under
one wording other than the probe's own): each item id gains ``@<wording id>`` (before a
``:seed<N>`` suffix) and ``groups["template"]`` names the
wording, so records say which wording they answer, a unit holds all wordings of its seed, and
run.json records each wording's probe config (checked on rerun). One scorer call then sees all
wordings' prompts of a checkpoint: identical prompts are scored once and shared prefixes once
(``backends.prefix``).

The wordings file a user writes: each wording starts with a header line ``### ID`` (for every
probe of the run) or ``### PROBE ID`` (for that probe only), then the template, to the next
header; an optional first line ``system: TEXT`` sets the system turn (adult-counterfactual).
Leading and trailing blank lines of a template are dropped. Lines before the first header
that are blank or start with ``#`` are comments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item, check_template
from biasscope.core.jsonl import MAX_TEMPLATE, check_length, read_text
from biasscope.core.numbers import finite, with_ci
from biasscope.probes import PROBES, Probe, requests_of
from biasscope.probes.facets import Absent, Wordings

_HEADER = re.compile(r"^###[ \t]+(.*?)\s*$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_SEED = re.compile(r"(:seed\d+)$")


@dataclass(frozen=True)
class Wording:
    """One wording of a probe: ``template`` and, where the probe has one, ``system``."""

    id: str
    template: str
    system: str | None = None
    where: str = "built-in"  # for error messages: file:line or "built-in"

    def options(self) -> dict[str, str]:
        """The probe options (``from_data`` keywords) that ask with this wording."""
        return {"template": self.template, **({"system": self.system} if self.system else {})}


def wordings_of(probe: str) -> Wordings | None:
    """The wordings facet of a registered probe (`biasscope.probes.facets.Wordings`), or None
    when it has none."""
    info = PROBES.get(probe)
    return None if info is None or isinstance(info.wordings, Absent) else info.wordings


def with_wordings() -> list[str]:
    """The registered probes that take wordings."""
    return sorted(name for name in PROBES if wordings_of(name) is not None)


def builtin(probe: str, count: int | None = None) -> list[Wording]:
    """The first ``count`` (default all) built-in wordings of ``probe``."""
    if (facet := wordings_of(probe)) is None:
        raise BiasscopeError(f"--wordings: probe {probe} has no wordings (those with: "
                             f"{', '.join(with_wordings())})")
    shipped = facet.builtin
    if count is not None and count > len(shipped):
        raise BiasscopeError(f"--wordings {count}: {probe} has {len(shipped)} built-in "
                             "wordings; give at most that many, or a file")
    return [Wording(i, t, s) for i, s, t in shipped[:count]]


def parse_file(text: str, path: str) -> list[tuple[str | None, Wording]]:
    """(probe or None for every probe, wording) per header of a wordings file; one-line
    errors naming ``path``:line for a bad header, an empty template or a repeated id."""
    blocks: list[tuple[str | None, str, int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        check_length(line, MAX_TEMPLATE, path, number, "the line")  # before any regex
        head = _HEADER.match(line)
        if head:
            words = head.group(1).split()
            if len(words) not in (1, 2) or not _ID.match(words[-1]):
                raise BiasscopeError(f"{path}:{number}: a header is '### ID' or '### PROBE ID' "
                                     f"(ID: letters, digits, _ . -), got {line!r}")
            blocks.append((words[0] if len(words) == 2 else None, words[-1], number, []))
        elif blocks:
            blocks[-1][3].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise BiasscopeError(f"{path}:{number}: text before the first '### ID' header; "
                                 "start each template with one")
    if not blocks:
        raise BiasscopeError(f"{path}: no wordings (start each with a '### ID' line)")
    out: list[tuple[str | None, Wording]] = []
    for probe, wid, number, lines in blocks:
        system = None
        body = "\n".join(lines)
        check_length(body, MAX_TEMPLATE, path, number + 1, f"template {wid}")
        body = body.strip("\n")
        if body.startswith("system:"):
            first, _, body = body.partition("\n")
            system, body = first.removeprefix("system:").strip(), body.strip("\n")
        if not body.strip():
            raise BiasscopeError(f"{path}:{number}: template {wid} is empty")
        out.append((probe, Wording(wid, body, system, f"{path}:{number}")))
    return out


def from_file(path: str, probe: str) -> list[Wording]:
    """The wordings a wordings file gives ``probe`` (None-probe blocks count for all)."""
    entries = parse_file(read_text(path), path)
    unknown = sorted({p for p, _ in entries if p and wordings_of(p) is None})
    if unknown:
        raise BiasscopeError(f"{path}: no probe {unknown[0]!r} takes wordings (those that "
                             f"do: {', '.join(with_wordings())})")
    return [w for p, w in entries if p in (None, probe)]


def check(probe: str, wordings: Sequence[Wording]) -> list[Wording]:
    """The wordings, or a one-line error: a missing or unknown field, a prompt that does not
    end at the answer cue (next-token probes), a repeated id or template, a system turn where
    the probe has none."""
    facet = PROBES[probe].wordings
    if isinstance(facet, Absent):
        raise BiasscopeError(f"--wordings: probe {probe} takes no wordings: {facet.reason}")
    ids: dict[str, str] = {}
    texts: dict[tuple[str, str | None], str] = {}
    for w in wordings:
        where = f"{w.where}: {probe} template {w.id}"
        check_template(w.template, facet.fields, where)
        if facet.cued and (w.template != w.template.rstrip() or w.template.endswith("}")):
            raise BiasscopeError(f"{where}: the answer must come next, so end the template with "
                                 "its cue (e.g. 'Answer:'), not with a field or a space")
        if w.system is not None and not facet.system:
            takes = [n for n in with_wordings() if getattr(wordings_of(n), "system", False)]
            raise BiasscopeError(f"{where}: only {', '.join(takes)} takes a 'system:' line")
        if w.id in ids:
            raise BiasscopeError(f"{where}: the id {w.id} is used twice (also {ids[w.id]})")
        key = (" ".join(w.template.split()), w.system)
        if key in texts:
            raise BiasscopeError(f"{where}: the same template as {texts[key]}; drop one")
        ids[w.id], texts[key] = w.where, f"{w.id} ({w.where})"
    return list(wordings)


def wordings_for(probe: str, spec: str) -> list[Wording]:
    """``builtin`` (the whole set), ``N`` (its first N) or a FILE, checked."""
    spec = spec.strip()
    if spec == "builtin":
        chosen = builtin(probe)
    elif spec.isdigit():
        if int(spec) < 1:
            raise BiasscopeError(f"--wordings {spec}: give 1 or more")
        chosen = builtin(probe, int(spec))
    elif Path(spec).is_file():
        if wordings_of(probe) is None:
            raise BiasscopeError(f"--wordings {spec}: probe {probe} takes no wordings")
        chosen = from_file(spec, probe)
        if not chosen:
            raise BiasscopeError(f"--wordings {spec}: no template for {probe} (each header "
                                 "names another probe); add a '### ID' or "
                                 f"'### {probe} ID' block")
    else:
        raise BiasscopeError(f"--wordings {spec}: give builtin, a number of built-in wordings "
                             "or a wordings file (no such file)")
    return check(probe, chosen)


def boundary_problems(tokenizer: Any, items: Sequence[Item]) -> list[str]:
    """Items whose answer would not be the next token for ``tokenizer`` (a Hugging Face
    tokenizer): the tokens of prompt + continuation must be the prompt's tokens, then the
    continuation's first token alone. Empty when every wording ends at its answer cue."""
    problems = []
    for item in items:
        prompt = tokenizer(item.prompt, add_special_tokens=False)["input_ids"]
        for continuation in item.continuations:
            whole = tokenizer(item.prompt + continuation, add_special_tokens=False)["input_ids"]
            first = tokenizer(continuation, add_special_tokens=False)["input_ids"][:1]
            if list(whole[:len(prompt) + 1]) != [*prompt, *first]:
                problems.append(f"{item.id}: {continuation!r} is not the next token")
    return problems


def tagged(item: Item, wording: str) -> Item:
    """``item`` under ``wording``: ``@wording`` in its id (before ``:seed<N>``), and
    ``groups["template"]``."""
    base, seed = _SEED.split(item.id)[0], (_SEED.search(item.id) or [""])[0]
    return Item(f"{base}@{wording}{seed}", item.prompt, item.options, item.continuations,
                item.answer, {**item.groups, "template": wording})  # replace() takes 2x as long


class Worded:
    """One probe asked under several wordings (``probes`` in the wordings' order)."""

    def __init__(self, wordings: Sequence[Wording], probes: Sequence[Probe]) -> None:
        first = probes[0]
        self.name = first.name
        self.requests = requests_of(first)
        self.seeded = getattr(first, "seeded", True)
        self.wordings = list(wordings)
        self._probes = {w.id: p for w, p in zip(wordings, probes, strict=True)}
        if hasattr(first, "detector"):
            self.detector = first.detector
        # Chat turns only where the probe has them: a next-token probe asks a plain prompt.
        if callable(getattr(first, "messages", None)):
            self.messages = self._messages

    def config(self) -> dict[str, object]:
        return {"probe": self.name, "wordings": [{"id": w.id, **p.config()}
                                                 for w, p in zip(self.wordings,
                                                                 self._probes.values())]}

    def items(self, seed: int) -> list[Item]:
        return [tagged(i, w) for w, p in self._probes.items() for i in p.items(seed)]

    def limited(self, items: Sequence[Item], limit: int) -> list[Item]:
        """``--limit`` per wording: each wording's own selection of its items (the probes
        select by item, not by prompt, so every wording keeps the same items)."""
        by_wording: dict[str, list[Item]] = {w: [] for w in self._probes}
        for item in items:  # one pass: a filter per wording grew with wordings x items
            by_wording[str(item.groups["template"])].append(item)
        out: list[Item] = []
        for w, p in self._probes.items():
            mine = by_wording[w]
            pick = getattr(p, "limited", None)
            out += list(pick(mine, limit)) if callable(pick) else mine[:limit]
        return out

    def _messages(self, item: Item) -> Any:
        return self._probes[str(item.groups["template"])].messages(item)  # type: ignore[attr-defined]

    def metrics(self, records: pd.DataFrame, confidence: float = 0.95,
                n_resamples: int = 2000) -> dict[str, Any]:
        """The probe's own metrics under the first wording, each headline number under every
        wording (table ``headline by wording``), and every bias measure across wordings
        (``wordings``), whose verdicts lead the sentences."""
        from biasscope.probes.wording_measures import absent, across_wordings

        first = self.wordings[0].id
        each = {w: probe.metrics(  # type: ignore[attr-defined]
            records[records["template"] == w], confidence, n_resamples)
            for w, probe in self._probes.items()}
        own: dict[str, Any] = each[first]
        if len(each) == 1:  # one wording (not the probe's own): nothing to compare across
            return own
        across = across_wordings(self.name, records, confidence=confidence,
                                 n_resamples=n_resamples)
        sentences = [r["verdict"] for r in across.values()]
        if (why := absent(self.name)) is not None:
            sentences.append(f"{why[:1].upper()}{why[1:]}.")
        sentences.append(f"The numbers below are for wording {first} (the table 'headline by "
                         f"wording' gives each under all {len(self.wordings)}); the verdicts "
                         "above pool them.")
        tables = {"headline by wording": _by_wording(each), **own.get("tables", {})}
        return {**own, "sentences": sentences + list(own.get("sentences", [])),
                "tables": tables, "wordings": across}


def _by_wording(each: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A row per headline number, a column per wording: its estimate and CI."""
    rows: dict[str, dict[str, Any]] = {}
    for wording, result in each.items():
        for name, value in result.get("headline", {}).items():
            if isinstance(value, Mapping) and "estimate" in value:
                rows.setdefault(name, {"metric": name})[wording] = _cell(value)
    return list(rows.values())


def _cell(value: Mapping[str, Any]) -> str:
    """An estimate and its interval in the reports' number format ("–": none measured)."""
    if not finite(value.get("estimate")):
        return "–"
    return with_ci(value["estimate"], value.get("low"), value.get("high"), None)


def worded(name: str, spec: str, load: Callable[..., Probe]) -> Probe:
    """Probe ``name`` under the wordings ``spec`` gives (``load(**options)`` builds it with
    one). The probe's own wording alone is the plain probe; any other wording, even alone,
    tags the item ids, so answers to one prompt are never read as answers to another."""
    wordings = wordings_for(name, spec)
    first = load(**wordings[0].options())
    if len(wordings) == 1 and first.config() == load().config():
        return first
    return Worded(wordings, [first, *(_reworded(first, w, load) for w in wordings[1:])])


def _reworded(probe: Probe, wording: Wording, load: Callable[..., Probe]) -> Probe:
    """``probe`` asked with ``wording``: from the data it has read (its ``reworded``), not
    read and parsed again per wording, which made 300 wordings take minutes."""
    again = getattr(probe, "reworded", None)
    return again(**wording.options()) if callable(again) else load(**wording.options())


__all__ = ["Worded", "Wording", "builtin", "check", "parse_file", "tagged",
           "with_wordings", "worded", "wordings_for", "wordings_of"]
