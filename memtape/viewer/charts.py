"""Charts drawn on the server as SVG geometry: numbers only, the labels left to the autoescaping
templates, so a chart needs no script, no library and nothing from another origin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    y: int
    width: float


@dataclass(frozen=True)
class Funnel:
    """Horizontal bars, one per stage, as wide as its share of the widest."""

    bars: tuple[Bar, ...]
    width: int
    height: int
    label_width: int
    bar_height: int


def funnel(stages: Sequence[tuple[str, int]], width: int = 520, label_width: int = 130, bar_height: int = 22) -> Funnel:
    most = max((count for _label, count in stages), default=0) or 1
    room = width - label_width - 50
    bars = tuple(
        Bar(label, count, 8 + i * (bar_height + 8), round(room * count / most, 1))
        for i, (label, count) in enumerate(stages)
    )
    return Funnel(bars, width, 16 + len(stages) * (bar_height + 8), label_width, bar_height)


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    seq: int
    value: float


@dataclass(frozen=True)
class Line:
    """A value (0 to 1) over the log's seq: the polyline, its dots, the axes' extremes."""

    dots: tuple[Dot, ...]
    path: str
    width: int
    height: int
    left: int
    bottom: int
    first_seq: int
    last_seq: int
    floor_y: float | None


def line(
    points: Sequence[tuple[int, float]], floor: float | None = None, width: int = 520, height: int = 200
) -> Line | None:
    """The chart of `points` ((seq, value in [0, 1]), in seq order) with a dashed `floor`; None
    when there is nothing to draw."""
    if not points:
        return None
    left, top, right, bottom = 40, 10, width - 10, height - 30
    first, last = points[0][0], points[-1][0]
    span = max(last - first, 1)

    def x(seq: int) -> float:
        return round(left + (right - left) * ((seq - first) / span if last > first else 0.5), 1)

    def y(value: float) -> float:
        return round(bottom - (bottom - top) * min(max(value, 0.0), 1.0), 1)

    dots = tuple(Dot(x(s), y(v), s, v) for s, v in points)
    path = " ".join(f"{d.x},{d.y}" for d in dots)
    return Line(dots, path, width, height, left, bottom, first, last, y(floor) if floor is not None else None)
