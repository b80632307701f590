"""The store contract (tests/store_contract.py) on the PostgreSQL store (a real, throw-away
server: devtools/pg.py), and what only PostgreSQL does: the group commit of threads appending at once."""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memtape.ledger.clock import SteppingClock
from memtape.ledger.errors import ChainBroken, ConcurrencyConflict
from memtape.ledger.location import open_store, projections_path
from memtape.ledger.pgstore import PostgresStore
from memtape.ledger.store import Store, chain_hash
from tests.store_contract import StoreContract, lesson, progress


class TestPostgresStore(StoreContract):
    kind = "postgresql"

    @pytest.fixture
    def store_url(self, pg_url: str) -> str:
        return pg_url

    def test_threads_appending_at_once_are_committed_together_and_lose_nothing(self, store: Store) -> None:
        """While one append is in flight the others queue; the next writes them all in one statement.
        A batch with a stale expected version fails alone: the rest of its group is written."""
        results: dict[int, list[int]] = {}
        conflicts: list[int] = []
        start = threading.Barrier(8)

        def writer(n: int) -> None:
            start.wait()
            mine = []
            for i in range(20):
                if i == 10 and n % 2:
                    try:
                        store.append([progress(99, run=f"t{n}")], expected_version=0)  # stale: refused
                    except ConcurrencyConflict:
                        conflicts.append(n)
                mine += [e.seq for e in store.append([progress(i, run=f"t{n}"), lesson(n * 100 + i)])]
            results[n] = mine

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert sorted(conflicts) == [1, 3, 5, 7]
        events = list(store.read())
        assert [e.seq for e in events] == list(range(1, 8 * 40 + 1))
        for n in range(8):
            mine = [e for e in events if e.run_id == f"t{n}"]
            assert [e.data["turn"] for e in mine] == list(range(20))
            assert [e.stream_version for e in mine] == list(range(1, 21))
            assert len(results[n]) == 40 and {e.seq for e in mine} <= set(results[n])
        assert [e.stream_version for e in events if e.stream == "memory"] == list(range(1, 8 * 20 + 1))
        assert store.verify().ok and store.verify().count == 8 * 40

    def test_a_follower_checks_each_new_event_against_the_last_it_served(self, store: Store, store_url: str) -> None:
        """The follower's chain check goes on across wakes: a row slipped in behind the store's back,
        whose own hash holds but whose link to the last event served does not, stops it."""
        store.append([lesson(1), lesson(2)])
        seen: list[int] = []
        errors: list[Exception] = []
        stop = threading.Event()
        follower = open_store(url=store_url)

        def follow() -> None:
            try:
                for ev in follower.subscribe(1, stop):
                    seen.append(ev.seq)
            except ChainBroken as exc:
                errors.append(exc)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while len(seen) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert seen == [1, 2]
            with psycopg.connect(store_url, autocommit=True) as raw:
                last = raw.execute("SELECT * FROM events WHERE seq = 2").fetchone()
                assert last is not None
                body = (
                    3,
                    "forged",
                    "forged",
                    1,
                    last[4],
                    last[5],
                    last[6],
                    last[7],
                    None,
                    None,
                    None,
                    last[11],
                    "0" * 64,
                )
                raw.execute(
                    "INSERT INTO events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (*body, chain_hash("0" * 64, body)),
                )
            deadline = time.monotonic() + 10
            while not errors and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            stop.set()
            thread.join(timeout=10)
            follower.close()
        assert seen[:2] == [1, 2] and len(errors) == 1 and not thread.is_alive()

    def test_a_busy_follower_reads_on_a_timer_then_listens_again(self, store: Store, store_url: str) -> None:
        """A follower slower than the writers stops listening (commits piled up while it handled
        the first events), reads every event in order on its timer, and once caught up is woken
        by a notification again: an event appended after it went idle arrives too."""
        seen: list[int] = []
        stop = threading.Event()
        follower = open_store(url=store_url)
        assert isinstance(follower, PostgresStore)

        def follow() -> None:
            for ev in follower.subscribe(1, stop, poll_s=30):  # a missed wake-up would stall the test
                seen.append(ev.seq)
                if ev.seq <= 3:
                    time.sleep(0.1)  # slow at first: the writer's commits pile up meanwhile

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        try:
            store.append([lesson(0)])
            for i in range(1, 60):
                store.append([progress(i, run="busy")])
            deadline = time.monotonic() + 20
            while len(seen) < 60 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert seen == list(range(1, 61))
            time.sleep(0.2)  # idle: it listens again
            store.append([progress(60, run="busy")])
            deadline = time.monotonic() + 10
            while len(seen) < 61 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert seen == list(range(1, 62))
        finally:
            stop.set()
            store.append([progress(61, run="busy")])  # wakes it to see `stop`
            thread.join(timeout=35)
            follower.close()

    def test_a_ledger_opened_without_a_memory_directory_has_no_projections_db(self, store_url: str) -> None:
        with open_store(url=store_url) as bare:
            assert bare.home is None and projections_path(bare) is None

    def test_an_ordinary_role_appends_and_verifies(self, store: Store, store_url: str) -> None:
        """No superuser needed: the session's sequencing function lives in pg_temp, and the flush
        after the lock is an ordinary transaction."""
        role = f"writer_{store_url.rsplit('/', 1)[1]}"
        with psycopg.connect(store_url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN")
            admin.execute(f"GRANT SELECT, INSERT ON events TO {role}")
            admin.execute(f"GRANT SELECT ON memledger_meta TO {role}")
        with open_store(url=store_url.replace("postgres@", f"{role}@", 1)) as writer:
            assert [e.seq for e in writer.append([lesson(1), progress(1)])] == [1, 2]
            with writer.atomic() as tx:
                tx.append([lesson(2)])
            assert writer.verify().ok and writer.head() == 3


class TestPostgresStoreDurable(TestPostgresStore):
    """The whole contract again with synchronous_commit on: each append then commits and waits for
    its flush in one message to the server (BEGIN, the append, COMMIT, the flush), values quoted
    by libpq (the hash-chain property test sends it any text)."""

    @pytest.fixture
    def store(self, store_url: str, home: Path, clock: SteppingClock) -> Iterator[Store]:
        s = open_store(home, store_url, clock=clock, synchronous_commit="on")
        yield s
        s.close()

    def test_a_refused_append_leaves_the_connection_usable(self, store: Store) -> None:
        """A conflict aborts the transaction the message began; the store rolls it back, so the
        next append commits (and the refused one wrote nothing)."""
        assert isinstance(store, PostgresStore) and store._durable
        store.append([progress(0, run="d")])
        with pytest.raises(ConcurrencyConflict):
            store.append([progress(1, run="d")], expected_version=0)
        assert store.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert [e.seq for e in store.append([progress(1, run="d")], expected_version=1)] == [2]
        assert [e.data["turn"] for e in store.read()] == [0, 1] and store.verify().ok

    def test_an_append_interrupted_while_it_waits_closes_its_connection(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A Ctrl-C while the message's answer is awaited closes the connection rather than leave it
        half read; the next append reconnects. (The interrupted append was sent: it may commit.)"""
        assert isinstance(store, PostgresStore)
        store.append([progress(0, run="i")])
        real = select.select
        interrupted: list[bool] = []

        def select_once_interrupted(*args: object) -> object:
            if not interrupted:
                interrupted.append(True)
                raise KeyboardInterrupt
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(select, "select", select_once_interrupted)
        with pytest.raises(KeyboardInterrupt):
            store.append([progress(1, run="i")])
        assert store.conn.closed
        monkeypatch.undo()
        store.append([progress(2, run="i")])
        turns = {e.data["turn"] for e in store.read()}
        assert {0, 2} <= turns <= {0, 1, 2} and store.verify().ok
