"""Each headline measure of a run as per-item values, so two runs can be compared item by item.

A linear measure is a contrast of group means, Σ wₖ·mean(group k), over per-item values keyed
by a stable item key (a WinoBias prompt without its seed, an Adult pair, an item id); two runs
that saw the same items are then paired on those keys. A non-linear one (BBQ's bias scores,
ratios) carries per-item codes and its statistic, and is bootstrapped.

The measures are the probes' own (``PROBES[name].compare``: what each is, its default margin δ
in its own units, and its per-item values); docs/claims.md gives the reasons for the margins.
"""

from __future__ import annotations

from biasscope.probes import PROBES
from biasscope.probes.facets import Absent, Compare
from biasscope.probes.facets import Measure as Measure  # the probes' types, re-exported
from biasscope.probes.facets import Values as Values


def comparable() -> dict[str, Compare]:
    """The registered probes that have measures to compare, in the registry's order."""
    return {name: info.compare for name, info in PROBES.items()
            if not isinstance(info.compare, Absent)}


def why_not(probe: str) -> str | None:
    """Why ``probe`` is not compared, in words; None when it has measures to compare."""
    info = PROBES.get(probe)
    if info is None:
        return f"{probe} is not a registered probe, so it has no measures to compare"
    return info.absent("compare")


#: Every compared measure by its name, from every probe (``--margin MEASURE=X`` names them).
MEASURES: dict[str, Measure] = {m.name: m for c in comparable().values() for m in c.measures}
