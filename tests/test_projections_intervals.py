"""As-of by index (invariant 9): the validity intervals in projections.db give, for random logs
and random seqs, exactly the fold of the first seq events — for every projection, in the fold's
order — whatever the chunking of the catch-ups and the size of the write batches."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import LessonRecorded, SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import intervals, materialize
from memtape.projections.cache.db import readable
from memtape.projections.folds import FOLDS, INDEXED
from memtape.projections.folds.state import PROJECTIONS, MemoryState, digest_of, fold
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact, lesson, recall, run_started, session
from tests.test_projections_determinism import _write, memory_events


def _same(name: str, got: Any, want: Any) -> None:
    assert digest_of(got) == digest_of(want), name
    assert FOLDS[name].tables(got) == FOLDS[name].tables(want), name  # same rows, same order


def checked_by_index(store: SqliteStore, path: Path, points: list[int]) -> list[tuple[int, MemoryState]]:
    """At each of `points` (capped at the head): every indexed projection as its versions give it
    equals the fold of the log up to there; then (that point, that fold) for the caller's own checks.
    Below the last forget the versions that held the subject are gone: there `indexed_at` must say
    the projection is folded instead."""
    events = list(store.read())
    head = store.head()
    floor = materialize.forget_floor(store, head)
    folds = []
    for n in sorted({min(p, head) for p in points}):
        want = fold(MemoryState.empty(), events[:n], Thresholds())
        with readable(path) as cache:
            for name in INDEXED:
                assert materialize.indexed_at(cache, store, DEFAULT_POLICY, name, n) == (n >= floor)
                if n >= floor:
                    _same(name, intervals.state_at(intervals.Blocks(cache.conn), name, n), getattr(want, name))
        folds.append((n, want))
    return folds


def _learned(error: str, scope: str | None) -> NewEvent:
    return NewEvent(
        payload=LessonRecorded(
            lesson_id="",
            lesson="press escape",
            category="error_recovery",
            failed_command="click",
            error_pattern=error,
            scope_domain=scope,
        ),
        domain="a.com",
    )


# a forgotten lesson still counted in `recorded` (the next lesson's recorded_order): found by hypothesis
FORGOTTEN_STILL_COUNTED = [
    _learned("timeout", None),
    _learned("timeout", None),
    _learned("too many arguments", "a.com"),
    NewEvent(payload=SubjectForgotten(subject_kind="domain", subject="a.com")),
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(items=FORGOTTEN_STILL_COUNTED, cuts=[], points=[7], flush_rows=1)
@given(
    items=st.lists(memory_events(), min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 12), max_size=4),
    points=st.lists(st.integers(0, 80), min_size=1, max_size=6),
    flush_rows=st.sampled_from([1, 3, 20_000]),
)
def test_indexed_as_of_equals_the_fold_for_every_projection(
    items: list[Any], cuts: list[int], points: list[int], flush_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(intervals, "FLUSH_ROWS", flush_rows):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)  # any log, as `append --raw` may hold
        path = Path(tmp) / "projections.db"
        i = 0
        for n in cuts:  # catch-ups in chunks: versions opened by one are closed by the next
            _write(store, writer, items[i : i + n])
            i += n
            MemoryView.open(store, path)
        _write(store, writer, items[i:])
        materialize.caught_up(store, path)
        for n, want in checked_by_index(store, path, points):
            for name in PROJECTIONS:
                _same(name, materialize.projection_at(store, path, DEFAULT_POLICY, name, n), getattr(want, name))
        store.close()


def test_keyed_lookups_and_history_read_one_item(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    writer = MemoryWriter(store)
    writer.append([fact("x", "a.com"), fact("y", "b.com")])
    writer.append([lesson("press escape", "a.com")])
    (lid,) = MemoryView.open(store).state.lessons.lessons
    writer.append([recall([lid], "a.com"), fact("x", "a.com"), session(1, "a.com")])
    path = tmp_path / "projections.db"
    materialize.caught_up(store, path)
    head = store.head()
    with readable(path) as cache:
        blocks = intervals.Blocks(cache.conn)
        facts_a = intervals.state_from_rows(
            "knowledge", intervals.rows_at(blocks, "knowledge", head, "current", "a.com")
        )
        assert list(facts_a.current) == ["a.com"]
        assert [f.sources for f in facts_a.current["a.com"].values()] == [2]
        before = intervals.state_from_rows("knowledge", intervals.rows_at(blocks, "knowledge", 1, "current", "a.com"))
        assert [f.sources for f in before.current["a.com"].values()] == [1]
        life = intervals.history(blocks, "lessons", "lessons", lid)
        assert [row["use_count"] for _, _, row in life] == [1, 2]
        assert life[0][1] == life[1][0] and life[1][1] is None  # closed by the recall that opened the next
        assert intervals.rows_at(blocks, "lessons", head, facet="tier1") == []
    store.close()


def test_items_come_back_in_the_order_the_fold_inserted_them(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    writer = MemoryWriter(store)
    writer.append(
        [
            run_started("r2", domain="b.com"),
            run_started("r1", domain="a.com"),
            fact("z", "b.com"),
            fact("a", "b.com"),
            fact("m", "a.com"),
        ]
    )
    path = tmp_path / "projections.db"
    materialize.caught_up(store, path)
    head = store.head()
    with readable(path) as cache:
        blocks = intervals.Blocks(cache.conn)
        runs = intervals.state_at(blocks, "runs", head)
        knowledge = intervals.state_at(blocks, "knowledge", head)
    assert list(runs.runs) == ["r2", "r1"]
    assert list(knowledge.current) == ["b.com", "a.com"]
    assert [f.value for f in knowledge.current["b.com"].values()] == ["z", "a"]
    store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(memory_events(), min_size=1, max_size=40), start=st.floats(0, 1), width=st.integers(0, 30))
def test_a_window_answers_every_seq_in_it_as_one_question_a_seq_does(
    items: list[Any], start: float, width: int
) -> None:
    """An audit asks about its steps' seqs through one window: each question's versions selected
    once for the window, a state built from the same versions as the last one reused. At every
    seq of the window, and for every domain, that is what a question at that seq alone gives."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        _write(store, MemoryWriter(store, check_runs=False), items)
        path = Path(tmp) / "projections.db"
        materialize.caught_up(store, path)
        head = store.head()
        lo = int(start * head)
        hi = min(lo + width, head)
        events = list(store.read())
        domains = sorted({e.domain for e in events if e.domain}) + [None]
        lessons = sorted({lid for e in events for lid in e.data.get("lesson_ids") or ()})
        trajectories = sorted({e.data["trajectory_id"] for e in events if e.data.get("trajectory_id")})
        with (
            materialize.indexed_memory(store, path, window=(lo, hi)) as windowed,
            materialize.indexed_memory(store, path) as single,
        ):
            for domain in domains:
                for seq in range(lo, hi + 1):
                    got = windowed.at(seq, domain, lessons, trajectories)
                    want = single.at(seq, domain, lessons, trajectories)
                    for name in ("lessons", "knowledge", "selectors", "trajectories"):
                        _same(name, getattr(got, name), getattr(want, name))
            assert windowed.selected  # the window's questions were selected once each
        store.close()


def _facts_one_a_step(store: SqliteStore, n: int) -> None:
    """A run on a.com whose every step sees one more fact (and keeps the ones before)."""
    MemoryWriter(store).append(
        [run_started("r1", domain="a.com"), *(fact(f"v{i}", "a.com", key=f"k{i}") for i in range(n))]
    )


def test_an_indexed_memory_reads_one_snapshot_and_the_next_reader_catches_an_edit(tmp_path: Path, caplog: Any) -> None:
    """An audit's questions are all read in one read transaction: an edit of projections.db made
    while it asks (here a fact's version pointed at another fact's value) is not seen by it, inside
    or outside its window. The next reader finds the file touched, checks it whole, catches the
    edit, and the answer is folded from the ledger."""
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    _facts_one_a_step(store, 6)
    path = tmp_path / "projections.db"
    materialize.caught_up(store, path)
    head = store.head()

    def folded(seq: int) -> Any:
        return fold(MemoryState.empty(), store.read(1, seq), Thresholds()).knowledge

    with materialize.indexed_memory(store, path, window=(head - 3, head - 1)) as memory:
        for seq in (head - 3, head - 1):
            _same("knowledge", memory.at(seq, "a.com").knowledge, folded(seq))
        conn = sqlite3.connect(path)
        facts = conn.execute(
            f"SELECT k2, block, slot FROM _intervals WHERE projection = 'knowledge' AND k2 <> ? "
            f"AND valid_to = {intervals.OPEN} ORDER BY o2",
            (intervals.NO_KEY,),
        ).fetchall()
        conn.execute(
            "UPDATE _intervals SET block = ?, slot = ? WHERE projection = 'knowledge' AND k2 = ?",
            (facts[-1][1], facts[-1][2], facts[0][0]),
        )  # the first fact shows the last one's value
        conn.commit()
        conn.close()
        _same("knowledge", memory.at(head - 2, "a.com").knowledge, folded(head - 2))
        _same("knowledge", memory.at(head, "a.com").knowledge, folded(head))
        assert not caplog.records
    with materialize.indexed_memory(store, path) as memory:
        _same("knowledge", memory.at(head, "a.com").knowledge, folded(head))
    assert any("not the ones its checkpoint seals" in r.getMessage() for r in caplog.records)
    store.close()
