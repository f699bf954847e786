"""Probes: named item sources, all in one registry (``PROBES``) with one loader (``load_probe``).

A probe is one folder, ``probes/<name>/``, that holds everything specific to it (items,
wordings, detector, metrics, statistics over steps, compare measures, report panels) and ends
its ``__init__`` with ``PROBE = ProbeInfo(...)`` (`biasscope.probes.facets`); registering it is
one line below. Jobs and the report ask ``PROBES[name].<facet>``. The request kinds:

* ``next_token``: each option's log-prob at the next token over the full vocabulary, and the
  answer's rank (WinoBias in ``biasscope dynamics``);
* ``continuation``: the summed log-prob of the answer's continuation and whether greedy
  decoding gives it (LAMBADA);
* ``options``: each option's full log-prob as the continuation of the probe's chat, the most
  probable option being the answer (``biasscope audit --scoring options``, and audit probes in
  ``biasscope dynamics``);
* ``generate``: text the probe's detector reads (``biasscope audit``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from biasscope.core.config import comma_entries
from biasscope.core.errors import BiasscopeError
from biasscope.probes import (
    adult,
    bbq,
    crows_pairs,
    lambada,
    perplexity,
    professional,
    stereoset,
    winobias,
    winogender,
)
from biasscope.probes.facets import (
    FACETS,
    REQUEST_KINDS,
    Absent,
    Probe,
    ProbeFactory,
    ProbeInfo,
)

#: Every probe, one line each (``biasscope compare`` compares them in this order).
PROBES: dict[str, ProbeInfo] = {p.name: p for p in (
    winobias.PROBE,
    lambada.PROBE,
    professional.PROBE,
    adult.PROBE,
    bbq.PROBE,
    perplexity.PROBE,
    crows_pairs.PROBE,
    winogender.PROBE,
    stereoset.PROBE,
)}


def registered(name: str) -> ProbeInfo:
    """The registry entry of ``name``, or one line naming the probes there are."""
    info = PROBES.get(name)
    if info is None:
        raise BiasscopeError(f"unknown probe {name!r}; available: {', '.join(sorted(PROBES))} "
                             "(`biasscope probes` lists them)")
    return info


def load_probe(name: str, data_dir: str | Path | None = None, **options: Any) -> Probe:
    """Build a registered probe from its data (``data_dir`` or the cache). ``NAME:A,B``
    selects as ``--probe`` does (``bbq:Age,Religion``, ``crows-pairs:revised``), so a name
    copied from a command line loads the same items."""
    if not isinstance(name, str):
        raise BiasscopeError(f"load_probe: give a probe's name as text, e.g. 'bbq', not "
                             f"{type(name).__name__} {name!r}")
    base, colon, chosen = (part.strip() for part in name.partition(":"))
    info = registered(base)
    if colon:
        if info.selection is None:
            raise BiasscopeError(f"probe {name!r}: {base} takes no selection after ':'; "
                                 f"load {base!r}")
        if info.selection in options:
            raise BiasscopeError(f"probe {name!r} and {info.selection}= both select; give one")
        try:
            picked = comma_entries(chosen)
        except ValueError as exc:
            raise BiasscopeError(f"probe {name!r}: {exc}") from None
        if not picked:
            raise BiasscopeError(f"probe {name!r}: name what to select after ':' (e.g. "
                                 "bbq:Age,Religion)")
        options[info.selection] = picked
    taken = inspect.signature(info.load).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in taken.values()):
        unknown = sorted(set(options) - set(taken))
        if unknown:
            known = sorted(set(taken) - {"data_dir"})
            raise BiasscopeError(f"probe {base!r} takes no option {', '.join(unknown)}; it "
                                 f"takes {', '.join(known) if known else 'only data_dir'}")
    return info.load(data_dir=data_dir, **options)


def requests_of(probe: Any) -> tuple[str, ...]:
    """The request kinds a probe can be asked: its ``requests``, else ``("next_token",)``."""
    kinds = getattr(probe, "requests", None)
    return tuple(kinds) if kinds else ("next_token",)


#: What a probe scored from a model's own log-probabilities needs of it, by request kind.
SCORED_FROM = {"next_token": "next-token log-probabilities",
               "continuation": "whole texts' log-likelihoods"}


def require(probe: Any, kinds: tuple[str, ...], what: str) -> None:
    """A one-line error when ``probe`` takes none of ``kinds`` (``what``: the command); for a
    probe scored from log-probabilities, why, and the command that scores it."""
    asked = requests_of(probe)
    if set(asked) & set(kinds):
        return
    why = ""
    if set(asked) <= set(SCORED_FROM) and "dynamics" not in what:
        needs = " and ".join(SCORED_FROM[k] for k in asked)
        why = (f"; {probe.name} is scored from the model's {needs}, which {what} does not "
               f"read: score local weights with `biasscope dynamics --model DIR --probe "
               f"{probe.name}`")
    raise BiasscopeError(
        f"probe {probe.name} takes {', '.join(asked)} requests, not {' or '.join(kinds)}: "
        f"{what} cannot ask it{why} (`biasscope probes` says which can)")


__all__ = ["FACETS", "PROBES", "REQUEST_KINDS", "Absent", "Probe", "ProbeFactory", "ProbeInfo",
           "load_probe", "registered", "requests_of"]
