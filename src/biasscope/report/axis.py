"""The x axis of the report's line figures: training steps, with any checkpoint without a step
(a Trainer's ``best`` and ``final`` beside ``checkpoint-30``) set apart at the right edge.

Such a checkpoint cannot be placed on the curve, and a categorical axis of all of them
(``checkpoint-30``, ``best``, ``final``) would both lose the spacing of the steps and join
them in stored order, as if ``best`` came after step 30. So the steps keep their numeric axis,
and each checkpoint set aside gets a slot of its own past the last step, labelled with its
name under a dotted separator, where it is drawn as a marker with its CI, joined to nothing.
Where no checkpoint has a step, the axis is their names, and nothing is joined either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.report.plotfig import as_text

#: A JSON object as read from a run's files, such as a checkpoint's entry in ``summary.json``.
Json = Mapping[str, Any]

#: How far past the last step the first checkpoint set aside sits, and each next one after
#: it, as a share of the steps' span: apart from the curve, yet not squeezing it.
GAP = 0.12


def checkpoint_label(ckpt: Json) -> str:
    """Escaped short label: the revision, else the step, else ``main``."""
    if ckpt.get("revision"):
        return as_text(str(ckpt["revision"]))
    if ckpt.get("snapshot"):
        return "checkpoint"
    return f"step {ckpt['step']}" if ckpt.get("step") is not None else "main"


def revision_label(revision: Any) -> str:
    """``revision best``: a checkpoint without a training step as the summary's sentences name
    it (plain text: escape it where it goes)."""
    return f"revision {revision or 'main'}"


@dataclass(frozen=True)
class Axis:
    """How checkpoints map to x: the training step, or their order (labelled) when none has
    one. ``aside``: (label, x) of the checkpoints without a step beside stepped ones, past
    ``steps`` (the stepped span, low and high)."""

    by_step: bool
    categories: tuple[str, ...] = ()
    aside: tuple[tuple[str, float], ...] = ()
    steps: tuple[float, float] = (0.0, 0.0)

    @property
    def title(self) -> str:
        return "training step" if self.by_step else "checkpoint"

    def x(self, ckpt: Json) -> float | int | str:
        if not self.by_step:
            return checkpoint_label(ckpt)
        if ckpt.get("step") is None:
            return dict(self.aside)[checkpoint_label(ckpt)]
        return int(ckpt["step"])

    def joined(self, ckpt: Json) -> bool:
        """Whether this checkpoint is on a line: it has a step, on an axis of steps."""
        return self.by_step and ckpt.get("step") is not None

    def layout(self, fig: Any) -> None:
        """Each slot set aside labelled with its name among the steps' ticks, and a dotted
        line between the curve and them."""
        if not self.aside:
            return
        ticks = nice_ticks(*self.steps)
        fig.update_xaxes(tickmode="array", tickvals=[*ticks, *(x for _, x in self.aside)],
                         ticktext=[*(f"{t:g}" for t in ticks), *(n for n, _ in self.aside)])
        between = (self.steps[1] + self.aside[0][1]) / 2
        fig.add_shape(type="line", xref="x", yref="paper", x0=between, x1=between, y0=0, y1=1,
                      line={"color": "#bbb", "width": 1, "dash": "dot"}, layer="below")


def slots(low: float, high: float, labels: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """Where each checkpoint set aside goes: past ``high``, one `GAP` of the span apart."""
    gap = GAP * ((high - low) or abs(high) or 1.0)
    return tuple((label, high + gap * (i + 1)) for i, label in enumerate(labels))


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """About ``count`` round ticks from ``low`` to ``high`` (1, 2 or 5 times a power of ten
    apart), as plotly picks them: its own cannot be kept beside named ones."""
    if not high > low:
        return [low]
    raw = (high - low) / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def make_axis(checkpoints: Sequence[Json]) -> Axis:
    """Steps where any checkpoint has one, the others set aside past them; the checkpoints'
    names where none has."""
    steps = [float(c["step"]) for c in checkpoints if c.get("step") is not None]
    labels = tuple(dict.fromkeys(checkpoint_label(c) for c in checkpoints
                                 if c.get("step") is None))
    if not steps:
        return Axis(by_step=False, categories=labels)
    span = (min(steps), max(steps))
    return Axis(by_step=True, aside=slots(*span, labels) if labels else (), steps=span)
