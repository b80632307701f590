"""`Memory.diff` reads only what changed between its two points (`changed_between`): for random
logs (lessons, recalls, pins, promotions, facts and their contradictions, decay and pruning on
open, selectors, trajectories under several hosts, runs, forgets) and random points (seqs, ISO
times, run ids), its changes are exactly those of today's whole memory at both points — as
the fold of the log gives it (in its order), and as projections.db builds it whole."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import LessonDemoted, LessonPinned, LessonPromoted, LessonUnpinned, SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import intervals, materialize
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.state_rows import DIFFED, Change, diff_between, diff_point, memory_diff
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact, lesson, run_completed, run_started, trajectory
from tests.test_projections_determinism import _lesson_ids, _write, memory_events

RUN_IDS = ["r1", "r2", "r3", "r9"]


@st.composite
def tier_moves(draw: Any) -> NewEvent:
    """A person's pin or unpin, or the policy's promotion or demotion, of a lesson of the universe."""
    lid = draw(st.sampled_from(_lesson_ids()))
    kind = draw(st.sampled_from(["pin", "unpin", "promote", "demote"]))
    if kind == "pin":
        return NewEvent(LessonPinned(lesson_id=lid, pinned_by="ann", reason="r", from_category="error_recovery"))
    if kind == "unpin":
        return NewEvent(LessonUnpinned(lesson_id=lid, unpinned_by="ann", reason="r", from_category="best_practice"))
    if kind == "promote":
        return NewEvent(LessonPromoted(lesson_id=lid, lesson="press escape", use_count=3, triggered_domains=["a.com"]))
    return NewEvent(LessonDemoted(lesson_id=lid, lesson="press escape", turns_saved=-2))


events = st.one_of(memory_events(), memory_events(), tier_moves())
#: a point as a person names it: a seq (spread over the log, or past its head), a run id, or the
#: recorded time of an event
points = st.one_of(
    st.tuples(st.just("seq"), st.integers(0, 1000)),
    st.tuples(st.just("seq"), st.integers(0, 1000)),
    st.integers(0, 10**6),
    st.sampled_from(RUN_IDS),
    st.tuples(st.just("time"), st.integers(0, 1000)),
)

# the same trajectory id kept under two hosts, one copy changed between the points: a diff that
# looked at the changed host alone would call the id gained
SAME_ID_TWO_HOSTS = [
    trajectory("t1", "buy shoes", "a.com"),
    trajectory("t1", "find", "b.org"),
    trajectory("t1", "buy red shoes", "b.org"),
]
# a run started, taught, completed; then a forget of another run: a diff from 0 reads versions
# the forget left (nothing held at seq 0), one from a seq below it builds both points whole
# a fact confirmed, then contradicted (its confidence halved), each at exactly the diff's end
FACT_CHANGED_AT_THE_END = [fact("x", "a.com"), fact("x", "a.com"), fact("y", "a.com")]
RUN_THEN_FORGET = [
    run_started("r1", domain="a.com"),
    lesson("press escape", "a.com"),
    run_completed("r1", domain="a.com"),
    run_started("r2", domain="b.org", session_id="s1"),
    trajectory("t2", "find", "b.org", run_id="r2"),
    NewEvent(SubjectForgotten(subject_kind="run", subject="r2")),
]


def _point(store: SqliteStore, drawn: Any) -> int | str:
    """A drawn point in this log: ("seq", n) and ("time", n) fall anywhere in it, whatever its length."""
    if not isinstance(drawn, tuple):
        return drawn
    kind, n = drawn
    head = store.head()
    if kind == "seq" or head == 0:
        return n % (head + 2)
    return next(iter(store.read(n % head + 1, n % head + 1))).recorded_at


def whole(store: SqliteStore, path: Path, start: int, end: int) -> tuple[list[Change], list[Change]]:
    """Today's diff of both points built whole: from projections.db's versions, and by the fold."""
    view = MemoryView.open(store, path, lend=True)
    by_versions = memory_diff(view.as_of(start), view.as_of(end))
    by_fold = memory_diff(MemoryView.open(store, None, as_of=start), MemoryView.open(store, None, as_of=end))
    return by_versions, by_fold


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(
    items=SAME_ID_TWO_HOSTS,
    cuts=[2],
    pairs=[(("seq", 2), ("seq", 3)), (0, ("seq", 3)), (("seq", 1), ("seq", 2))],
    flush_rows=20_000,
)
@example(
    items=FACT_CHANGED_AT_THE_END, cuts=[1], pairs=[(("seq", 1), ("seq", 2)), (("seq", 2), ("seq", 4))], flush_rows=3
)
@example(
    items=RUN_THEN_FORGET,
    cuts=[],
    pairs=[(0, "r1"), (("seq", 2), 9), ("r1", "r1"), (("seq", 4), ("seq", 1))],
    flush_rows=1,
)
@given(
    items=st.lists(events, min_size=6, max_size=40),
    cuts=st.lists(st.integers(1, 12), max_size=3),
    pairs=st.lists(st.tuples(points, points), min_size=2, max_size=8),
    flush_rows=st.sampled_from([1, 3, 20_000]),
)
def test_the_diff_of_what_changed_is_the_diff_of_the_whole_memory(
    items: list[Any], cuts: list[int], pairs: list[tuple[Any, Any]], flush_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(intervals, "FLUSH_ROWS", flush_rows):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)
        path = Path(tmp) / "projections.db"
        i = 0
        for n in cuts:  # catch-ups in chunks: versions opened by one are closed by a later one
            _write(store, writer, items[i : i + n])
            i += n
            MemoryView.open(store, path)
        _write(store, writer, items[i:])
        head = store.head()
        floor = materialize.forget_floor(store, head)
        for a, b in pairs:
            a, b = _point(store, a), _point(store, b)
            try:
                start, end = diff_point(store, a), diff_point(store, b)
            except LedgerError:  # a run id no event names and no time: refused on both ways alike
                with pytest.raises(LedgerError):
                    diff_between(store, path, a, b)
                continue
            if start > end:
                with pytest.raises(LedgerError, match="a diff runs forward"):
                    diff_between(store, path, a, b)
                continue
            got = diff_between(store, path, a, b)
            by_versions, by_fold = whole(store, path, start, end)
            assert Counter(got) == Counter(by_fold) == Counter(by_versions), (a, b, start, end)
            answered = materialize.changed_between(store, path, DEFAULT_POLICY, start, end, DIFFED)
            # built whole only where a forget dropped the versions: a point below it (seq 0 held nothing)
            assert (answered is not None) == (end >= floor and (start == 0 or start >= floor))
            # in order too: a state decoded from a stored row (the head's, a snapshot's) holds its
            # items in another order than the fold's, and the diff reads the same either way
            assert got == by_fold == by_versions, (a, b, start, end)
            if start == end:
                assert got == []
        store.close()
