"""The collector paused around a fold (`materialize.collector_paused`): what a long fold left young
goes to the oldest generation unless another keeps objects frozen, and a short one (a catch-up of a
few events in `memtape serve`, whose warm-up froze millions of objects) never counts the frozen
ones: counting walks them all (0.33 s of a first `/ui/` at 1,000,000 events)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from memtape.projections.cache.materialize import MANY_YOUNG, collector_paused


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    real = gc.get_freeze_count

    def count() -> int:
        counts.append(real())
        return counts[-1]

    monkeypatch.setattr(gc, "get_freeze_count", count)
    return counts


def test_a_short_pause_counts_no_frozen_object(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = counting(monkeypatch)
    with collector_paused():
        assert not gc.isenabled()
        kept: list[Any] = [[i] for i in range(100)]
    assert counts == [] and gc.isenabled() and len(kept) == 100


def test_a_long_pause_asks_and_moves_what_it_made_to_the_oldest_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = counting(monkeypatch)
    with collector_paused():
        kept: list[Any] = [[i] for i in range(MANY_YOUNG + 10_000)]
    assert len(counts) == 1 and gc.isenabled()
    if counts == [0]:  # nothing else frozen: what the pause made is old now, not young
        assert gc.get_count()[0] < MANY_YOUNG
    assert len(kept) == MANY_YOUNG + 10_000


def test_objects_another_froze_stay_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        for size in (10, MANY_YOUNG + 10_000):
            with collector_paused():
                kept: list[Any] = [[i] for i in range(size)]
            assert gc.get_freeze_count() == frozen and len(kept) == size
    finally:
        gc.unfreeze()
