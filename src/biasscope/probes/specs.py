"""Which probes a command asks, from one string: ``--probes``, ``biasscope items`` and
``biasscope dynamics --probe`` (repeated, joined with commas).

``adult-counterfactual,bbq:Age,Religion`` is the Adult probe, then BBQ over two categories:
a name after ``probe:`` starts that probe's selection, and the names that follow and are no
probe continue it. A probe's registry entry says whether it takes one (``ProbeInfo.selection``:
BBQ its categories, CrowS-Pairs its version, ``crows-pairs:revised``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.probe_settings import BASE_RATE_HELP as BASE_RATE_HELP
from biasscope.core.probe_settings import LIMIT_HELP as LIMIT_HELP
from biasscope.core.probe_settings import PROBE_HELP as PROBE_HELP
from biasscope.core.probe_settings import WORDINGS_HELP as WORDINGS_HELP
from biasscope.probes import PROBES, Probe, adult, bbq, load_probe, registered, require, winobias


def parse_probe_specs(text: str, flag: str = "--probes") -> list[tuple[str, list[str]]]:
    """(probe name, selection) pairs in the order given; one-line errors for an empty list, an
    empty entry between commas, an empty selection, a selection on a probe that takes none,
    or a probe or choice named twice (naming ``flag``, the option the text came from)."""
    specs: list[tuple[str, list[str]]] = []
    parts = [p.strip() for p in text.split(",")]
    if any(parts) and not all(parts):  # ``bbq:Age,,Religion``: a name left out, or a typo
        raise BiasscopeError(f"{flag} {text.strip()}: an empty entry between commas; remove "
                             f"the extra comma (e.g. {bbq.NAME}:Age,Religion)")
    for part in parts:
        if not part:
            continue
        name, colon, first = (s.strip() for s in part.partition(":"))
        if colon:
            if not first:
                raise BiasscopeError(f"{flag} {part}: name what to select after ':' "
                                     f"(e.g. {bbq.NAME}:Age,Religion) or drop the ':'")
            specs.append((name, [first]))
        elif part in PROBES or not specs or not specs[-1][1]:
            specs.append((part, []))
        else:
            specs[-1][1].append(part)
    if not specs:
        raise BiasscopeError(f"{flag}: name at least one probe")
    takers = [n for n, info in PROBES.items() if info.selection]
    for name, selection in specs:
        if selection and (name not in PROBES or not PROBES[name].selection):
            raise BiasscopeError(f"{flag} {name}:{','.join(selection)}: only "
                                 f"{' and '.join(takers)} take a selection "
                                 f"({bbq.NAME}:Age,Religion; crows-pairs:revised)")
    names = [n for n, _ in specs]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise BiasscopeError(f"{flag} names {', '.join(twice)} more than once: name each probe "
                             f"once, its selection after it ({bbq.NAME}:Age,Religion)")
    for name, selection in specs:  # as a probe named twice: refused, not silently merged
        chosen = [s.lower() for s in selection]  # BBQ's categories are named in any case
        if twice := [s for k, s in enumerate(selection)
                     if chosen.count(chosen[k]) > 1 and chosen.index(chosen[k]) == k]:
            raise BiasscopeError(f"{flag} {name}:{','.join(selection)} selects "
                                 f"{', '.join(twice)} more than once: name each once")
    return specs


def load_probes(text: str, data_dir: str | Path | None = None, base_rate: str = "0.5",
                kinds: tuple[str, ...] = (), what: str = "", template: str | None = None,
                flag: str = "--probe", wordings: str | None = None) -> list[Probe]:
    """The probes ``text`` names (see ``parse_probe_specs``); ``base_rate`` picks the Adult
    file, ``template`` is WinoBias's prompt template, ``wordings`` the wordings every probe
    is asked under (``--wordings builtin|N|FILE``, `biasscope.probes.wordings`). With
    ``kinds``, each must take one of these request kinds (``what`` asks them)."""
    from biasscope.probes.wordings import worded, wordings_of

    if wordings is not None and not wordings.strip():
        raise BiasscopeError("--wordings is empty: give builtin, a number of built-in "
                             "wordings or a wordings file (or leave it out for one wording)")
    if template and wordings:
        raise BiasscopeError("--prompt-template is one wording; with --wordings, put it in "
                             "the wordings file instead")
    specs, probes = parse_probe_specs(text, flag), []
    for name, _ in specs:  # every name known, and asked as it can be, before data is read
        info = registered(name)
        if kinds:
            require(info, kinds, what)
    for name, selection in specs:
        options: dict[str, Any] = {}
        if selection:
            options[str(PROBES[name].selection)] = selection
        if name == adult.NAME:
            options["base_rate"] = base_rate
        if name == winobias.NAME and template:
            options["template"] = template
        if wordings and wordings_of(name) is not None:
            probes.append(worded(name, wordings,
                                 partial(load_probe, name, data_dir=data_dir, **options)))
        else:
            probes.append(load_probe(name, data_dir=data_dir, **options))
    return probes
