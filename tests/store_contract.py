"""The store contract, written once as a class that each store's test module subclasses
(tests/test_store_sqlite.py, tests/test_store_postgres.py), as eventsourcing's recorder tests do.

Nothing above `ledger` may know which store it talks to, so every behaviour
the layers above rely on is checked here for each: round trip, atomic
batches, optimistic concurrency, gapless seq, the hash chain (the same hashes
as the rule in Python, for any text) and its tamper-evidence, append-only
triggers, filters, subscribe, monotonic recorded time, several processes
appending at once, where projections.db lives, and one truth per run (a run's
state read inside the write transaction, whichever connection wrote it).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.commands.ledger import append_observations
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent, event
from memtape.ledger.errors import ConcurrencyConflict, InvalidEvent, LedgerError, RunConflict
from memtape.ledger.events import FactObserved, LessonSeeded, RunProgress, StepGraded
from memtape.ledger.location import PROJECTIONS_FILE, cache_home, open_store, projections_path
from memtape.ledger.store import Store, chain_hash
from memtape.projections.cache.materialize import ProjectionsHead
from memtape.projections.recording.memory import RecordingMemory


class Raw:
    """A connection that bypasses the store: what an attacker (or a careless admin) would use."""

    def __init__(self, kind: str, url: str):
        self.kind = kind
        if kind == "sqlite":
            self.conn: Any = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        else:
            self.conn = psycopg.connect(url, autocommit=True)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.kind == "postgresql":
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, params)
        return cur.fetchall() if cur.description else []

    def tamper(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run an UPDATE/DELETE behind the triggers' back (drop them / disable them as superuser)."""
        if self.kind == "sqlite":
            self.conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            self.conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        else:
            self.conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        self.execute(sql, params)

    def close(self) -> None:
        self.conn.close()


def progress(turn: int, run: str = "r1", **env: Any) -> NewEvent:
    return event(RunProgress(turn=turn, current_url=f"http://site.test/{turn}"), run_id=run, **env)


def lesson(n: int, domain: str | None = None) -> NewEvent:
    return event(LessonSeeded(lesson_id=f"l{n}", lesson=f"lesson {n}", category="best_practice"), domain=domain)


def mixed() -> list[NewEvent]:
    return [
        lesson(1, "a.example.com"),
        progress(1, "r1", domain="a.example.com", step=0),
        event(FactObserved(fact_type="quirk", key="k", value="v"), domain="b.example.com"),
        event(
            StepGraded(outcome="failure", reason="no button", correction="scroll"),
            run_id="r2",
            step=3,
            domain="b.example.com",
            occurred_at="2025-12-31T23:00:00Z",
        ),
        progress(2, "r1", domain="a.example.com", step=1),
        lesson(2),
    ]


def _writer(url: str, name: str, count: int, start: Any) -> None:
    start.wait()
    with open_store(url=url) as s:
        i = 0
        while i < count:
            n = min(1 + i % 3, count - i)
            s.append([progress(i + k, run=name) for k in range(n)])
            i += n


def _finisher(url: str, run_id: str, start: Any, won: Any) -> None:
    """One of several processes finishing the same run at once: exactly one may."""
    with open_store(url=url) as s:
        start.wait()
        try:
            RecordingMemory(s).run(run_id).finish(success=True, outcome="mine")
        except RunConflict:  # finished by another, before this one opened it or while it finished
            return
        with won.get_lock():
            won.value += 1


class StoreContract:
    """Every test a store must pass. A subclass sets `kind` and provides the `store_url` fixture
    (an empty ledger's URL) and `home` (the memory directory its store is opened with)."""

    kind: str

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        raise NotImplementedError("a store's test class provides the URL of an empty ledger")

    @pytest.fixture
    def home(self, tmp_path: Path) -> Path:
        return tmp_path / "memory"

    @pytest.fixture
    def store(self, store_url: str, home: Path, clock: SteppingClock) -> Iterator[Store]:
        s = open_store(home, store_url, clock=clock)
        yield s
        s.close()

    @pytest.fixture
    def raw(self, store: Store, store_url: str) -> Iterator[Raw]:
        r = Raw(self.kind, store_url)
        yield r
        r.close()

    def test_kind_and_url(self, store: Store, store_url: str) -> None:
        assert store.kind == self.kind
        assert store.url == store_url

    def test_append_read_round_trip(self, store: Store) -> None:
        batch = mixed()
        recorded = store.append(batch)
        assert [e.seq for e in recorded] == [1, 2, 3, 4, 5, 6]
        back = list(store.read())
        assert [e.as_dict() for e in back] == [e.as_dict() for e in recorded]
        assert [e.payload for e in back] == [ev.payload for ev in batch]
        assert back[3].occurred_at == "2025-12-31T23:00:00.000000Z"
        assert back[3].recorded_at == "2026-01-01T00:00:00.000000Z"
        assert [(e.stream, e.stream_version) for e in back[:2]] == [("memory", 1), ("run-r1", 1)]
        assert back[4].stream_version == 2
        assert store.head() == 6
        assert store.get(back[2].id) == back[2]
        assert store.get("nope") is None
        assert store.verify().ok and store.verify().count == 6
        st = store.stats()
        assert st.count == 6 and st.by_type["lesson_seeded"] == 2 and st.by_run == {"r1": 2, "r2": 1}
        assert st.by_domain == {"a.example.com": 3, "b.example.com": 2} and st.file_bytes > 0

    def test_same_events_hash_identically_in_both_stores(self, store: Store, tmp_path: Path) -> None:
        """The chain is the store-independent part: same input and clock, same hashes."""
        batch = [lesson(1), progress(1), lesson(2)]
        batch = [NewEvent(ev.payload, run_id=ev.run_id, id=f"e{i}") for i, ev in enumerate(batch)]
        mine = store.append(batch)
        with open_store(url=f"sqlite:///{tmp_path / 'ref' / 'ledger.db'}", clock=SteppingClock()) as ref:
            theirs = ref.append(batch)
        assert [e.hash for e in mine] == [e.hash for e in theirs]

    def test_a_bad_event_writes_nothing_of_its_batch(self, store: Store) -> None:
        store.append([lesson(1)])
        with pytest.raises(InvalidEvent, match="event 3"):
            store.append([lesson(2), progress(1), {"type": "lesson_seeded"}])  # type: ignore[list-item]
        dup = NewEvent(LessonSeeded(lesson_id="x", lesson="x", category="best_practice"), id="same-id")
        with pytest.raises(LedgerError):
            store.append([lesson(3), dup, dup])
        with pytest.raises(RuntimeError), store.atomic() as tx:
            tx.append([lesson(4)])
            raise RuntimeError("caller failed after appending")
        assert store.head() == 1
        assert [e.seq for e in store.append([lesson(5)])] == [2]
        assert store.verify().ok

    def test_stale_expected_version_is_refused(self, store: Store, store_url: str) -> None:
        store.append([progress(1), progress(2)], expected_version=0)
        with pytest.raises(ConcurrencyConflict, match="run-r1"):
            store.append([progress(3)], expected_version=1)
        other = open_store(url=store_url)
        try:
            other.append([progress(3)], expected_version=2)
            with pytest.raises(ConcurrencyConflict):
                store.append([progress(4)], expected_version=2)  # a second writer moved the stream on
        finally:
            other.close()
        store.append([progress(4)], expected_version=3)
        assert [e.stream_version for e in store.read(stream="run-r1")] == [1, 2, 3, 4]

    def test_seq_stays_gapless_across_connections_and_failures(self, store: Store, store_url: str) -> None:
        other = open_store(url=store_url)
        try:
            for i in range(10):
                (store if i % 2 else other).append([lesson(i)])
                with pytest.raises(ConcurrencyConflict):
                    store.append([progress(i)], expected_version=99)
                with pytest.raises(InvalidEvent):
                    other.append([lesson(i), "junk"])  # type: ignore[list-item]
        finally:
            other.close()
        assert [e.seq for e in store.read()] == list(range(1, 11))
        assert store.verify().ok

    def test_update_and_delete_are_refused(self, store: Store, raw: Raw) -> None:
        store.append([lesson(1), lesson(2)])
        for sql in (
            "UPDATE events SET payload = '{}' WHERE seq = 1",
            "DELETE FROM events WHERE seq = 2",
            "DELETE FROM events",
        ):
            with pytest.raises(Exception, match="ledger is append-only"):
                raw.execute(sql)
        assert store.head() == 2 and store.verify().ok

    def test_verify_names_an_edited_payload(self, store: Store, raw: Raw) -> None:
        store.append([lesson(i) for i in range(5)])
        raw.tamper("UPDATE events SET payload = replace(payload, 'lesson 2', 'lesson X') WHERE seq = 3")
        result = store.verify()
        assert (result.ok, result.first_bad_seq, result.count) == (False, 3, 2)
        assert "hash" in (result.reason or "")

    def test_verify_names_a_removed_row(self, store: Store, raw: Raw) -> None:
        store.append([lesson(i) for i in range(5)])
        raw.tamper("DELETE FROM events WHERE seq = 3")
        result = store.verify()
        assert (result.ok, result.first_bad_seq) == (False, 3)
        assert "missing" in (result.reason or "")

    def test_read_filters(self, store: Store, clock: SteppingClock) -> None:
        store.append(mixed()[:3])
        clock.advance(timedelta(hours=1))
        store.append(mixed()[3:])
        assert [e.seq for e in store.read(from_seq=2, to_seq=4)] == [2, 3, 4]
        assert [e.seq for e in store.read(types=["lesson_seeded"])] == [1, 6]
        assert [e.seq for e in store.read(types=["lesson_seeded", "step_graded"])] == [1, 4, 6]
        assert [e.seq for e in store.read(stream="run-r1")] == [2, 5]
        assert [e.seq for e in store.read(run_id="r2")] == [4]
        assert [e.seq for e in store.read(domain="a.example.com")] == [1, 2, 5]
        assert [e.seq for e in store.read(domain="a.example.com", from_seq=3)] == [5]
        assert [e.seq for e in store.read(since="2026-01-01T00:30:00Z")] == [4, 5, 6]
        assert [e.seq for e in store.read(until="2026-01-01T00:30:00+00:00")] == [1, 2, 3]
        assert [e.seq for e in store.read(batch=2)] == [1, 2, 3, 4, 5, 6]
        assert store.seq_at_time("2026-01-01T00:30:00Z") == 3
        assert store.seq_at_time("2025-01-01") == 0

    def test_recorded_at_never_goes_backwards(self, store_url: str) -> None:
        times = iter(
            [
                datetime(2026, 1, 1, 12, tzinfo=UTC),
                datetime(2026, 1, 1, 11, tzinfo=UTC),
                datetime(2025, 6, 1, tzinfo=UTC),
                datetime(2026, 1, 1, 13, tzinfo=UTC),
            ]
        )
        with open_store(url=store_url, clock=lambda: next(times)) as s:
            for i in range(4):
                s.append([lesson(i)])
            rec = [e.recorded_at for e in s.read()]
        assert rec == sorted(rec)
        assert rec[1] == rec[2] == "2026-01-01T12:00:00.000000Z" and rec[3] == "2026-01-01T13:00:00.000000Z"

    def test_subscribe_delivers_new_events(self, store: Store, store_url: str) -> None:
        store.append([lesson(1), lesson(2)])
        seen: list[int] = []
        stop = threading.Event()
        follower = open_store(url=store_url)

        def follow() -> None:
            for ev in follower.subscribe(2, stop):
                seen.append(ev.seq)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        writer = open_store(url=store_url)
        try:
            for i in range(3):
                writer.append([lesson(10 + i), progress(i)])
            deadline = time.monotonic() + 10
            while len(seen) < 7 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            stop.set()
            thread.join(timeout=10)
            writer.close()
            follower.close()
        assert seen == [2, 3, 4, 5, 6, 7, 8]

    def test_four_processes_lose_nothing(self, store: Store, store_url: str) -> None:
        ctx = multiprocessing.get_context("fork")
        start = ctx.Event()
        procs = [ctx.Process(target=_writer, args=(store_url, f"w{n}", 30, start)) for n in range(4)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(timeout=60)
        assert [p.exitcode for p in procs] == [0, 0, 0, 0]
        events = list(store.read())
        assert [e.seq for e in events] == list(range(1, 121))
        for n in range(4):
            mine = [e for e in events if e.run_id == f"w{n}"]
            assert [e.data["turn"] for e in mine] == list(range(30))
            assert [e.stream_version for e in mine] == list(range(1, 31))
        assert len({e.id for e in events}) == 120
        result = store.verify()
        assert result.ok and result.count == 120

    def test_a_transaction_reads_its_own_appends(self, store: Store) -> None:
        store.append([lesson(1)])
        with store.atomic() as tx:
            tx.append([lesson(2), progress(1)])
            assert tx.head() == 3
            assert [e.seq for e in tx.read(1)] == [1, 2, 3]
            assert tx.stream_version("memory") == 2
            tx.append([lesson(3)], expected_version=2)
        assert [e.stream_version for e in store.read(stream="memory")] == [1, 2, 3]
        assert store.verify().ok

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
    )
    @given(
        texts=st.lists(
            st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=40),
            min_size=1,
            max_size=4,
        ),
        step=st.none() | st.integers(0, 2**63 - 1),
        occurred=st.booleans(),
    )
    def test_any_text_is_hashed_by_the_chain_rule(
        self, store: Store, texts: list[str], step: int | None, occurred: bool
    ) -> None:
        """Quotes, backslashes, control characters, NUL, astral planes: each row's hash is
        `chain_hash` over the row as stored (PostgreSQL hashes in the server)."""
        batch = [
            event(
                LessonSeeded(lesson_id=f"l{i}", lesson=text, category="best_practice"),
                run_id="r1",
                step=step,
                occurred_at="2025-06-01T12:00:00Z" if occurred else None,
            )
            for i, text in enumerate(texts)
        ]
        recorded = store.append(batch)
        assert len(recorded) == len(texts)
        for e in recorded:
            row = (
                e.seq,
                e.id,
                e.stream,
                e.stream_version,
                e.type,
                e.schema_version,
                e.recorded_at,
                e.occurred_at,
                e.run_id,
                e.step,
                e.domain,
                e.payload_json,
                e.prev_hash,
            )
            assert e.hash == chain_hash(e.prev_hash, row)
            assert store.get(e.id) == e
        assert list(store.read(from_seq=recorded[0].seq)) == recorded

    def test_projections_db_lives_in_the_store_home(self, store: Store, home: Path, store_url: str) -> None:
        """One rule for every store and every caller (the commands, `append`'s policy writer, `audit`)."""
        assert projections_path(store) == cache_home(store) / PROJECTIONS_FILE
        assert cache_home(store) == home if store.path is not None else cache_home(store).parent == home
        with open_store(home, store_url, verify_reads=False) as forensic:
            assert projections_path(forensic) is None  # nothing an unverified read returns is materialized

    def test_append_observations_catches_projections_db_up(self, store: Store, home: Path) -> None:
        """`memtape append` folds into projections.db (on PostgreSQL too: no refold of the whole log each time)."""
        append_observations(
            store, [event(FactObserved(fact_type="quirk", key="banner", value="blocks clicks"), domain="a.test")]
        )
        first = store.head()
        append_observations(
            store, [event(FactObserved(fact_type="quirk", key="banner", value="gone"), domain="a.test")]
        )
        remembered = ProjectionsHead(
            cache_home(store) / PROJECTIONS_FILE
        ).load()  # the second call caught it up to the first's head
        assert (
            remembered is not None and remembered.seq >= first > 0 and remembered.hash == store.hash_at(remembered.seq)
        )

    def test_a_transaction_selects_a_run_or_a_stream_with_its_own_appends(self, store: Store) -> None:
        store.append([progress(0, run="r1"), progress(0, run="r2")])
        with store.atomic() as tx:
            tx.append([progress(1, run="r1"), lesson(1)])
            assert [(e.run_id, e.data["turn"]) for e in tx.select(run_id="r1")] == [("r1", 0), ("r1", 1)]
            assert [e.seq for e in tx.select(2, run_id="r1")] == [3]
            assert [e.type for e in tx.select(stream="memory")] == ["lesson_seeded"]

    def test_one_truth_per_run_across_connections(self, store: Store, store_url: str) -> None:
        """Two memories on their own connections record into one run; the finish learns from both,
        a finished run refuses the other, a step recorded again is one step."""
        here = RecordingMemory(store)
        with open_store(url=store_url) as other:
            there_memory = RecordingMemory(other)
            run = here.start_run(goal="Open the socks page", start_url="https://shop.example/")
            first = run.record_step(
                step=1, action="click", target='link "Socks"', ok=False, error="element <div> intercepts pointer events"
            )
            there = there_memory.run(run.run_id)
            assert (
                there.record_step(
                    step=1,
                    action="click",
                    target='link "Socks"',
                    ok=False,
                    error="element <div> intercepts pointer events",
                )
                == first
            )
            there.record_step(step=2, action="press", args={"key": "Escape"})
            run.record_step(step=3, action="click", target='link "Socks"')  # the obstacle cleared: a recovery
            learned = run.finish(success=True, outcome="done")
            assert [l.failed_command for l in learned.lessons] == ["click"]
            with pytest.raises(RunConflict, match=f"^run {run.run_id} is finished; it takes no more steps$"):
                there.record_step(step=4, action="press", args={"key": "Enter"})
            with pytest.raises(RunConflict, match=f"^run {run.run_id} is already finished$"):
                there.finish(success=False)
        mine = [e.type for e in store.read(run_id=run.run_id)]
        assert mine.count("step_recorded") == 3 and mine.count("run_completed") == 1

    def test_processes_finishing_one_run_at_once_finish_it_once(self, store: Store, store_url: str) -> None:
        run = RecordingMemory(store).start_run(goal="Open the socks page", start_url="https://shop.example/")
        ctx = multiprocessing.get_context("fork")
        start, won = ctx.Event(), ctx.Value("i", 0)
        procs = [ctx.Process(target=_finisher, args=(store_url, run.run_id, start, won)) for _ in range(3)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(timeout=60)
        assert [p.exitcode for p in procs] == [0, 0, 0] and won.value == 1
        assert [e.type for e in store.read(run_id=run.run_id)].count("run_completed") == 1
