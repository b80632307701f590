"""`explain ITEM` reads the life of an item by projections.db's index of mentions: for random logs,
the same answer as scanning every event of the item's types, and no such scan is made."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.analytics.explain import explain_item
from memtape.ledger.clock import SteppingClock
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import SqliteStore
from memtape.projections.folds import credit, knowledge, lessons
from memtape.projections.writer import MemoryWriter
from tests.test_projections_determinism import _lesson_ids, _write, memory_events

PATTERN_TYPES = ("pattern_learned", "pattern_used", "patterns_pruned")

ITEMS = [*_lesson_ids(), "k1", "k2", "#a", "#b", *(f"t{i}" for i in range(6))]


def _answer(store: SqliteStore, item: str, path: Path | None) -> Any:
    try:
        return explain_item(store, item, projections_path=path)
    except LedgerError as exc:  # unknown, or a fact key on several domains: the same refusal both ways
        return type(exc).__name__, str(exc)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(memory_events(), min_size=1, max_size=40))
def test_explain_by_index_equals_explain_by_scan(items: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        _write(store, MemoryWriter(store, check_runs=False), items)
        path = Path(tmp) / "projections.db"
        scanned = {item: _answer(store, item, None) for item in ITEMS}
        head = store.head()
        calls: list[tuple[Any, Any, tuple[str, ...]]] = []
        read = store.read

        def spy(from_seq: Any = None, to_seq: Any = None, **kw: Any) -> Any:
            calls.append((from_seq, to_seq, tuple(kw.get("types") or ())))
            return read(from_seq, to_seq, **kw)

        store.read = spy  # type: ignore[method-assign]
        for item in ITEMS:
            assert _answer(store, item, path) == scanned[item], item
        store.read = read  # type: ignore[method-assign]
        # by type, only the forgets (and the runs they take), and nothing past the index's head; what
        # the forgets took from knowledge and lessons (and an item's credit) is asked of their folds, which read no further
        # than the last forget
        forgets = {ev.seq for ev in store.read(types=["subject_forgotten"])}
        typed = {types for from_seq, _, types in calls if types and (from_seq or 1) <= head}
        # a learned pattern's life is read by its types (patterns have no index of mentions)
        allowed = {
            ("subject_forgotten",),
            ("run_started",),
            knowledge.TYPES,
            lessons.TYPES,
            credit.TYPES,
            PATTERN_TYPES,
        }
        assert typed <= allowed, typed
        assert all(to_seq in forgets for _, to_seq, types in calls if types in (knowledge.TYPES, lessons.TYPES))
        store.close()
