"""The multiple-comparison corrections an analysis may choose, and the tests a row of
`biasscope.core.stats`' tables names, by name: here, apart from `biasscope.core.stats`, so
that a command's flags (and a report that reuses its analysis) know them without importing the
statistics' numpy and pandas."""

from __future__ import annotations

from typing import Literal

Correction = Literal["holm", "bh"]
#: Each correction ``stats.adjust_pvalues`` knows, by the name a report gives it.
CORRECTIONS: dict[str, str] = {"holm": "Holm", "bh": "Benjamini-Hochberg"}

#: The ``test`` a row of ``stats.group_test_row`` and of ``stats.paired_test_row`` names.
MANN_WHITNEY, SIGNED_RANK = "Mann-Whitney U", "Wilcoxon signed-rank over pairs"
