"""A probe's bias measures across wordings (``--wordings``): each measure the probe gives
(``PROBES[name].across_wordings``: BBQ's s_DIS and s_AMB, Adult's pair flip rate and signed
parity gap, professional bias's pronoun effect and stereotyped share, ...) over the records of
all wordings, resampled by the cluster its rows belong to (`biasscope.core.wordings`), with
its verdict.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from biasscope.core.wordings import verdict, wording_uncertainty
from biasscope.probes import PROBES
from biasscope.probes.facets import Absent


def absent(probe: str) -> str | None:
    """Why ``probe`` has no measures across wordings (a sentence), or None when it has."""
    info = PROBES.get(probe)
    if info is None:
        return f"{probe} is not a registered probe: it has no measures across wordings"
    return info.absent("across_wordings")


def across_wordings(probe: str, records: pd.DataFrame, **options: Any) -> dict[str, Any]:
    """Each headline measure of ``probe`` across the wordings of ``records`` (column
    ``template``), with its verdict; empty for a probe without measures across wordings
    (`absent` says why)."""
    facet = PROBES[probe].across_wordings if probe in PROBES else None
    if facet is None or isinstance(facet, Absent) or records.empty:
        return {}
    measures, wordings, clusters = facet.rows(records)
    out = {}
    for m in measures:
        result = wording_uncertainty(m, wordings, clusters, **options)
        label = facet.labels[m.name]
        out[m.name] = {**result, "label": label, "verdict": verdict(result, label)}
    return out
