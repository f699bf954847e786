"""Comparing like with like: two runs are compared on the design they share, and the table and
sentences say what was left out.

- **Wordings.** A run asked under several wordings (``--wordings``) and one asked under the
  probe's default are not the same measurement: the wording alone moves a model's bias (see
  docs/wordings.md). A wording is known by its template (and, for chat probes, its system
  turn) as run.json records it, so the default wording of one run and the same text under
  ``--wordings builtin`` of another are one wording. Records are restricted to the wordings
  both runs asked; a probe with none in common is not compared, and says so.
- **Items, not item × wording.** Under several wordings an item is still one item: its values
  are averaged over the wordings before pairing and testing (as WinoBias averages a prompt's
  wordings and seeds), so n counts items.
- **Seeds.** A seed reorders WinoBias' options: records are restricted to the seeds both runs
  asked (a run stopped before its last seed has fewer), and a note says so.
- **Checkpoints** one run has and the other lacks are named, not silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from biasscope.probes.facets import DEFAULT as DEFAULT  # the probes' own, re-exported
from biasscope.probes.facets import WORDING as WORDING
from biasscope.probes.facets import item_keys as item_keys
from biasscope.probes.facets import labels as labels


def signatures(config: Mapping[str, Any] | None) -> dict[str, str]:
    """Wording label -> what the wording is (template and system turn), from a probe's entry
    in run.json's ``settings.probes``; empty without one."""
    if not isinstance(config, Mapping):
        return {}

    def sign(c: Mapping[str, Any]) -> str:
        return json.dumps([c.get("template"), c.get("system")])
    if isinstance(config.get("wordings"), list):
        return {str(w.get("id")): sign(w) for w in config["wordings"] if isinstance(w, Mapping)}
    return {DEFAULT: sign(config)}


def shared(a: pd.DataFrame, b: pd.DataFrame, sig_a: Mapping[str, str],
           sig_b: Mapping[str, str]) -> tuple[pd.DataFrame, pd.DataFrame, str | None, int]:
    """Both record sets restricted to the wordings both asked, a note when anything was left
    out (None otherwise), and how many wordings are shared (0: nothing to compare)."""
    la, lb = labels(a), labels(b)
    names_a, names_b = list(dict.fromkeys(la)), list(dict.fromkeys(lb))
    what_a = {n: sig_a.get(n, f"label:{n}") for n in names_a}
    what_b = {n: sig_b.get(n, f"label:{n}") for n in names_b}
    common = [s for s in dict.fromkeys(what_a.values()) if s in set(what_b.values())]
    keep_a = [n for n in names_a if what_a[n] in common]
    keep_b = [n for n in names_b if what_b[n] in common]
    note = None
    if len(keep_a) < len(names_a) or len(keep_b) < len(names_b):
        def said(names: list[str]) -> str:
            return ", ".join(n or "the default" for n in names) or "none"
        note = (f"A asked {len(names_a)} wording(s) ({said(names_a)}), B {len(names_b)} "
                f"({said(names_b)}); compared on the {len(common)} both asked "
                f"(A: {said(keep_a)}; B: {said(keep_b)})")
    return a[la.isin(keep_a)], b[lb.isin(keep_b)], note, len(common)


def same_seeds(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """Both record sets restricted to the seeds both asked, and a note when any was left out
    (None otherwise): a seed reorders WinoBias' options, so a prompt averaged over other seeds
    is another measurement, and a run stopped before its last seed has fewer."""
    if "seed" not in a or "seed" not in b:
        return a, b, None
    seeds_a, seeds_b = (sorted(set(r["seed"].dropna().astype(int))) for r in (a, b))
    if seeds_a == seeds_b:
        return a, b, None
    common = [s for s in seeds_a if s in seeds_b]
    note = (f"A asked {len(seeds_a)} seed(s) ({', '.join(map(str, seeds_a))}), B "
            f"{len(seeds_b)} ({', '.join(map(str, seeds_b))}); compared on the {len(common)} "
            "both asked")
    return a[a["seed"].isin(common)], b[b["seed"].isin(common)], note


def missing(a: list[Any], b: list[Any], label: Any) -> str | None:
    """The checkpoints only one run has, in words (None when both have the same)."""
    only_a, only_b = [k for k in a if k not in b], [k for k in b if k not in a]
    if not (only_a or only_b) or (len(a) == len(b) == 1):
        return None
    parts = [f"{who} only: {', '.join(map(label, keys))}" for who, keys in
             (("A", only_a), ("B", only_b)) if keys]
    return "checkpoints not compared (" + "; ".join(parts) + ")"


__all__ = ["DEFAULT", "item_keys", "labels", "missing", "same_seeds", "shared", "signatures"]
