"""The multiple-comparison corrections an analysis may choose, by name: here, apart from
`biasscope.core.stats`, so that a command's flags (and a report that reuses its analysis)
know them without importing the statistics' numpy and pandas."""

from __future__ import annotations

from typing import Literal

Correction = Literal["holm", "bh"]
#: Each correction ``stats.adjust_pvalues`` knows, by the name a report gives it.
CORRECTIONS: dict[str, str] = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
