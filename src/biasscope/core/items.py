"""The unit of a probe: one prompt, its answer options and the groups it belongs to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
