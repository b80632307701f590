"""The folds: what a projection module is (a typed contract), and every projection in fold order.

A fold module is checked against `Fold` by mypy where it is registered below, so a fold that
loses `decode` or changes `apply`'s arguments fails the type check, not a catch-up at run time.
The projections filed as validity intervals (`projections.cache.intervals`) also meet
`IndexedFold`: the layout of their state and the paths an event may touch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.folds import (
    context,
    credit,
    knowledge,
    lessons,
    page_maps,
    patterns,
    runs,
    scratch,
    selectors,
    sessions,
    short_term,
    sitemap,
    snapshots,
    steps,
    trajectories,
)

#: a path into a state: (field,), (field, key) or (field, key, inner key)
Path = tuple[str, ...]


class Fold(Protocol):
    """A projection: the event types it folds, its empty state, the fold of one event (in place,
    deterministic: no clock, no randomness, insertion-ordered dicts), the state from its canonical
    JSON, and its readable tables (`__name__`: the module, whose sources fingerprint the fold)."""

    __name__: str

    @property
    def TYPES(self) -> tuple[str, ...]: ...  # noqa: N802 - the modules' constant

    def empty(self) -> Any: ...

    def apply(self, state: Any, ev: RecordedEvent, policy: Any) -> Any: ...

    def decode(self, raw: dict[str, Any]) -> Any: ...

    def tables(self, state: Any) -> dict[str, list[dict[str, Any]]]: ...


class IndexedFold(Fold, Protocol):
    """A projection filed as validity intervals: its state's fields with their depth (0 a value,
    1 key -> item, 2 key -> key -> item), and the paths an event may change, found before it is
    folded (None: any of them, e.g. a forget)."""

    @property
    def LAYOUT(self) -> dict[str, int]: ...  # noqa: N802 - the modules' constant

    def touched(self, state: Any, ev: RecordedEvent) -> list[Path] | None: ...


#: the projections in fold order
FOLDS: dict[str, Fold] = {
    "lessons": lessons,
    "knowledge": knowledge,
    "sessions": sessions,
    "selectors": selectors,
    "trajectories": trajectories,
    "runs": runs,
    "step_memories": steps,
    "short_term": short_term,
    "patterns": patterns,
    "context": context,
    "snapshots": snapshots,
    "sitemap": sitemap,
    "scratch": scratch,
    "page_maps": page_maps,
    "credit": credit,
}
#: the projections filed as validity intervals (the others are small: periodic snapshots and a short fold)
INDEXED: dict[str, IndexedFold] = {
    "lessons": lessons,
    "knowledge": knowledge,
    "sessions": sessions,
    "selectors": selectors,
    "trajectories": trajectories,
    "runs": runs,
    "step_memories": steps,
    "short_term": short_term,
}
#: an indexed projection's facet of an item (a subset read by itself: Tier 1 among the lessons)
FACETS: dict[str, Callable[[str, Any], str | None]] = {"lessons": lessons.facet}
