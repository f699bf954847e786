"""The unit of a probe: one prompt, its answer options and the groups it belongs to."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

GroupValue = str | int | float | bool


@dataclass(frozen=True)
class Item:
    """One prompt with its options and the correct one.

    ``options`` are the answer labels in a fixed, canonical order (what metrics group by);
    ``continuations`` are the strings whose next-token probability stands for each option
    (``" male"`` for ``male``). The order the prompt *shows* the options in lives in the
    prompt text and in ``groups["option_order"]``.
    """

    id: str
    prompt: str
    options: tuple[str, ...]
    continuations: tuple[str, ...]
    answer: int
    groups: Mapping[str, GroupValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.options) != len(self.continuations):
            raise ValueError(f"item {self.id}: options and continuations differ in length")
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"item {self.id}: answer index {self.answer} out of range")


def check_template(template: str, fields: Sequence[str], what: str) -> None:
    """Fail early, in one line, on a prompt template that names a field it will not get or
    leaves out one it needs (``str.format`` would raise deep inside item building)."""
    from biasscope.core.errors import DataError

    missing = [f for f in fields if "{" + f + "}" not in template]
    if missing:
        raise DataError(f"{what}: the prompt template lacks "
                        f"{', '.join('{' + f + '}' for f in missing)}")
    try:
        template.format(**dict.fromkeys(fields, ""))
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise DataError(f"{what}: the prompt template has a field other than "
                        f"{', '.join('{' + f + '}' for f in fields)} ({exc!r}); double literal "
                        "braces as {{ }}") from None


def stratified_sample(items: Sequence[Item], limit: int,
                      key: Callable[[Item], tuple[str, Hashable]], strata: Sequence[str],
                      group_size: int, seed: int = 0, what: str = "limit") -> list[Item]:
    """At most ``limit`` items (at least one group), drawn by group so that the items asked
    together (a BBQ example's four variants, a WinoBias pro/anti pair) stay together.

    ``key`` gives an item's (stratum, group); ``limit // group_size`` groups are shared out
    across strata in proportion to their size (largest remainders) and drawn within each
    with a generator seeded by ``seed`` and the stratum's place in ``strata``, so a smaller
    ``--limit`` never describes one stratum only. Items keep their order."""
    import numpy as np

    from biasscope.core.errors import DataError

    if limit < 1:
        raise DataError(f"{what}: limit must be at least 1, got {limit}")
    groups: dict[str, dict[Hashable, None]] = {}
    for item in items:
        stratum, group = key(item)
        groups.setdefault(stratum, {})[group] = None
    total = sum(len(g) for g in groups.values())
    wanted = min(total, max(1, limit // group_size))
    shares = {s: wanted * len(g) / total for s, g in groups.items()}
    counts = {s: int(share) for s, share in shares.items()}
    for s in sorted(shares, key=lambda s: counts[s] - shares[s])[:wanted - sum(counts.values())]:
        counts[s] += 1
    keep: set[Hashable] = set()
    for stratum, found in groups.items():
        rng = np.random.default_rng([seed, strata.index(stratum) if stratum in strata
                                     else len(strata)])
        keys = list(found)
        keep.update(keys[i] for i in rng.choice(len(keys), counts[stratum], replace=False))
    return [i for i in items if key(i)[1] in keep]
