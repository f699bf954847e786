"""Probes: named item sources, all in one registry (``PROBES``) with one loader (``load_probe``).

A probe is one file that defines ``NAME``, ``REQUESTS`` (the request kinds it can be asked, the
one a checkpoint sweep uses first), ``DATA`` (the source it reads, or None), ``METRICS`` (what
it measures) and ``from_data``; registering it is one line below. The request kinds:

* ``next_token``: each option's log-prob at the next token over the full vocabulary, and the
  answer's rank (WinoBias in ``biasscope dynamics``);
* ``continuation``: the summed log-prob of the answer's continuation and whether greedy
  decoding gives it (LAMBADA);
* ``options``: each option's full log-prob as the continuation of the probe's chat, the most
  probable option being the answer (``biasscope probe --scoring options``, and audit probes in
  ``biasscope dynamics``);
* ``generate``: text the probe's detector reads (``biasscope probe``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.probes import adult, bbq, lambada, perplexity, professional, winobias

#: What each request kind asks a backend for.
REQUEST_KINDS = {
    "next_token": "next-token log-probs of each option over the full vocabulary, and the "
                  "answer's rank (biasscope dynamics)",
    "continuation": "summed log-prob of the answer's continuation, and whether greedy "
                    "decoding gives it (biasscope dynamics)",
    "options": "each option's full log-prob after the probe's chat; the likeliest is the answer "
               "(biasscope dynamics, biasscope probe)",
    "generate": "text, read by the probe's detector (biasscope probe)",
}


class Probe(Protocol):
    """Something that yields the items of one seed, and says what makes it comparable.

    Optional attributes: ``requests`` (the request kinds it can be asked, default
    ``("next_token",)``) and ``seeded`` (False when items do not depend on the seed; default
    True). Probes that take ``options`` or ``generate`` requests also have ``messages(item)``
    (the chat turns), ``detector`` and ``metrics(records)`` (``biasscope.probes.base``).
    """

    name: str

    def items(self, seed: int) -> list[Item]: ...

    def config(self) -> dict[str, object]: ...


ProbeFactory = Callable[..., Probe]


@dataclass(frozen=True)
class ProbeInfo:
    """One registered probe: how to load it (``load``) and what it can be asked, needs and
    measures."""

    name: str
    load: ProbeFactory
    requests: tuple[str, ...]
    data: str | None
    metrics: tuple[str, ...]
    about: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "requests": list(self.requests), "data": self.data,
                "metrics": list(self.metrics), "about": self.about}

    def describe(self) -> str:
        """What ``biasscope probes`` says of it: what it is, asks, needs and measures."""
        data = (f"{self.data} (`biasscope data fetch {self.data}`, or --data-dir)"
                if self.data else "none (ships with biasscope)")
        return (f"{self.name}: {self.about}\n  requests: {', '.join(self.requests)}\n"
                f"  data:     {data}\n  metrics:  {', '.join(self.metrics)}")


def _info(module: ModuleType) -> ProbeInfo:
    """A probe file's registry entry, from its constants and its docstring's first line."""
    requests = tuple(module.REQUESTS)
    if unknown := [r for r in requests if r not in REQUEST_KINDS]:
        raise ValueError(f"probe {module.NAME}: unknown request kinds {unknown}")
    about = (module.__doc__ or "").strip().splitlines()[0].rstrip(".")
    return ProbeInfo(module.NAME, module.from_data, requests, module.DATA,
                     tuple(module.METRICS), about)


#: Every probe, one line each.
PROBES: dict[str, ProbeInfo] = {
    winobias.NAME: _info(winobias),
    lambada.NAME: _info(lambada),
    adult.NAME: _info(adult),
    professional.NAME: _info(professional),
    bbq.NAME: _info(bbq),
    perplexity.NAME: _info(perplexity),
}


def load_probe(name: str, data_dir: str | Path | None = None, **options: Any) -> Probe:
    """Build a registered probe from its data (``data_dir`` or the cache)."""
    try:
        info = PROBES[name]
    except KeyError:
        raise BiasscopeError(f"unknown probe {name!r}; available: {', '.join(sorted(PROBES))} "
                             "(`biasscope probes` lists them)") from None
    return info.load(data_dir=data_dir, **options)


def requests_of(probe: Any) -> tuple[str, ...]:
    """The request kinds a probe can be asked: its ``requests``, else ``("next_token",)``."""
    kinds = getattr(probe, "requests", None)
    return tuple(kinds) if kinds else ("next_token",)


def require(probe: Any, kinds: tuple[str, ...], what: str) -> None:
    """A one-line error when ``probe`` takes none of ``kinds`` (``what``: the command)."""
    if not set(requests_of(probe)) & set(kinds):
        raise BiasscopeError(
            f"probe {probe.name} takes {', '.join(requests_of(probe))} requests, not "
            f"{' or '.join(kinds)}: {what} cannot ask it (`biasscope probes` says which can)")


__all__ = ["PROBES", "REQUEST_KINDS", "Probe", "ProbeInfo", "load_probe", "requests_of"]
