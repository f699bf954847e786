"""WinoBias's measures for ``biasscope compare`` and ``power``: the JSD-P gap and the accuracy
gap (male − female prompts, seeds averaged) and accuracy pro − anti over WinoBias pairs.

Default margins: a JSD-P gap's is `JSDP_MARGIN` (docs/claims.md); the difference of two gaps
lies in [−ln 2, ln 2], but a margin beyond the largest gap itself (½ ln 2) says nothing.
Proportions: 5 percentage points. Bounds: a prompt's JSD-P lies in [0, ½ ln 2], a pair's
pro − anti in [−1, 1].
"""

from __future__ import annotations

import pandas as pd

from biasscope.probes.facets import Compare, Measure, Values, per_item
from biasscope.probes.next_token import MAX_GAP
from biasscope.probes.winobias.values import breakdown_values, prompt_means, prompt_values

#: The default equivalence margin of a JSD-P gap (docs/claims.md): a fifth of the gap the
#: dynamics analysis flags as material (``FLAG_GAP``, 0.1) and about half the systematic gap
#: of a random model (0.041).
JSDP_MARGIN = 0.02

MEASURES = (
    Measure("jsdp_gap", "JSD-P gap (male − female)", JSDP_MARGIN, MAX_GAP, (0.0, MAX_GAP),
            design="two-groups"),
    Measure("accuracy_gap", "accuracy gap (male − female)", 0.05, 1.0, design="two-groups"),
    Measure("pro_anti", "accuracy pro − anti (paired sentences)", 0.05, 1.0, (-1.0, 1.0),
            items="pro/anti pairs"),
)


def values(records: pd.DataFrame) -> list[Values]:
    """JSD-P gap and accuracy gap (male − female prompts, seeds averaged) and accuracy pro −
    anti over WinoBias pairs (referenced prompts), of one checkpoint's records."""
    out = []
    for name, value in (("jsdp_gap", "jsdp_correct"), ("accuracy_gap", "correct")):
        pv = prompt_values(records, value)
        out.append(Values(name, {g: per_item(pv[pv["answer_label"] == g], "prompt", "value")
                                 for g in ("male", "female")}, {"male": 1.0, "female": -1.0}))
    means = prompt_means(breakdown_values(records))
    ref = means[means["kind"] == "referenced"]
    wide = ref.pivot_table(index="pair", columns="split", values="correct", observed=True)
    if {"pro", "anti"} <= set(wide.columns):
        diff = (wide["pro"] - wide["anti"]).dropna()
        out.append(Values("pro_anti", {"pairs": diff}, {"pairs": 1.0}))
    return out


COMPARE = Compare(MEASURES, values)
