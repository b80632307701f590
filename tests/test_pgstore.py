"""What only the PostgreSQL store has: its schema marker, its errors, copying, DuckDB, the CLI on a URL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import psycopg
import pytest

from devtools.pg import TempPostgres
from memtape.ledger.clock import SteppingClock
from memtape.ledger.copy import copy_ledger
from memtape.ledger.envelope import event
from memtape.ledger.errors import LedgerError, NewerSchema, NotALedger
from memtape.ledger.events import LessonSeeded, RunProgress
from memtape.ledger.location import open_store
from memtape.ledger.pgstore import PostgresStore
from memtape.ledger.urls import display_url
from tests.cli_runner import run_cli


def some_events(n: int) -> list:  # type: ignore[type-arg]
    return [
        event(RunProgress(turn=i, current_url=f"http://a.test/{i}"), run_id=f"r{i % 3}", domain="a.test")
        if i % 2
        else event(LessonSeeded(lesson_id=f"l{i}", lesson=f"lesson {i}", category="best_practice"))
        for i in range(n)
    ]


def test_open_store_dispatches_a_postgresql_url(pg_url: str) -> None:
    with open_store(url=pg_url) as store:
        assert isinstance(store, PostgresStore) and store.kind == "postgresql"
        assert store.head() == 0


def test_an_empty_database_is_not_a_ledger_without_create(pg_url: str) -> None:
    with pytest.raises(NotALedger, match="no ledger here"):
        open_store(url=pg_url, create=False)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('events')").fetchone() == (None,)


def test_a_newer_schema_is_refused_in_one_line(pg_url: str) -> None:
    PostgresStore.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE memledger_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(NewerSchema) as info:
        PostgresStore.open(pg_url)
    assert "newer memtape" in str(info.value) and "\n" not in str(info.value)


def test_a_foreign_events_table_is_not_a_ledger(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id int)")
    with pytest.raises(NotALedger, match="not a memtape ledger"):
        PostgresStore.open(pg_url)


def test_truncate_is_refused_too(pg_url: str) -> None:
    with PostgresStore.open(pg_url) as store:
        store.append(some_events(3))
        with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("TRUNCATE events")
        assert store.head() == 3


def test_an_unreachable_server_is_one_line_without_the_password(pg_server: TempPostgres) -> None:
    url = f"postgresql://postgres:s3cret@127.0.0.1:{pg_server.port}/no_such_db"
    with pytest.raises(LedgerError) as info:
        PostgresStore.open(url)
    msg = str(info.value)
    assert "no_such_db" in msg and "s3cret" not in msg and "\n" not in msg
    assert display_url(url) == f"postgresql://postgres:***@127.0.0.1:{pg_server.port}/no_such_db"


def test_copy_sqlite_to_postgres_and_back_keeps_the_chain(pg_url: str, tmp_path: Path) -> None:
    src = f"sqlite:///{tmp_path / 'a' / 'ledger.db'}"
    with open_store(url=src, clock=SteppingClock()) as store:
        for _i in range(5):
            store.append(some_events(7))
        original = [e.as_dict() for e in store.read()]
    seen: list[tuple[int, int]] = []
    result = copy_ledger(src, pg_url, chunk=10, on_progress=lambda d, t: seen.append((d, t)))
    assert result.count == 35 and seen[-1] == (35, 35) and len(seen) > 2
    back = f"sqlite:///{tmp_path / 'b' / 'ledger.db'}"
    copy_ledger(pg_url, back)
    for url in (pg_url, back):
        with open_store(url=url) as store:
            assert [e.as_dict() for e in store.read()] == original
            assert store.verify().ok
    with pytest.raises(LedgerError, match="already holds 35 events"):
        copy_ledger(src, pg_url)


def test_copy_refuses_a_broken_source_and_writes_nothing(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "a" / "ledger.db"
    with open_store(url=f"sqlite:///{path}") as store:
        store.append(some_events(6))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute('UPDATE events SET payload = \'{"lesson": "edited"}\' WHERE seq = 4')
    with pytest.raises(LedgerError, match="source chain broken at seq 4"):
        copy_ledger(f"sqlite:///{path}", pg_url)
    with open_store(url=pg_url) as store:
        assert store.head() == 0


def test_cli_copy_and_commands_on_a_postgresql_url(pg_url: str, tmp_path: Path) -> None:
    src = f"sqlite:///{tmp_path / 'm' / 'ledger.db'}"
    with open_store(url=src) as store:
        store.append(some_events(9))
    r = run_cli("copy", "--from", src, "--to", pg_url)
    assert r.code == 0, r.err
    assert "copied 9 events" in r.out and "chain verified" in r.out
    r = run_cli("--store", pg_url, "verify")
    assert r.code == 0 and r.out.startswith("ok: 9 events, chain intact; head 9:")
    r = run_cli("--store", pg_url, "events", "--json", "--type", "run_progress")
    assert r.code == 0 and len(r.out.splitlines()) == 4
    r = run_cli("copy", "--from", src, "--to", pg_url)
    assert r.code == 1 and r.err.startswith("error: ") and "already holds 9 events" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_duckdb_reads_the_postgres_ledger_through_the_scanner(pg_server: TempPostgres) -> None:
    """The offline recipe: LOAD the extension from its PyPI package, ATTACH read-only, query."""
    import duckdb_extension_postgres_scanner as pkg

    url = pg_server.create_database()
    with PostgresStore.open(url) as store:
        store.append(some_events(11))
        store.append(some_events(4))
        count, by_type = store.stats().count, store.stats().by_type
        conninfo = store.conninfo()
    ext = Path(pkg.__file__).parent / "extensions" / f"v{duckdb.__version__}" / "postgres_scanner.duckdb_extension"
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        con.execute(f"LOAD '{ext}'")
        con.execute(f"ATTACH '{conninfo}' AS ledger (TYPE postgres, READ_ONLY)")
        assert con.execute("SELECT count(*), max(seq) FROM ledger.events").fetchone() == (count, 15)
        assert dict(con.execute("SELECT type, count(*) FROM ledger.events GROUP BY type").fetchall()) == by_type
        with pytest.raises(duckdb.Error):
            con.execute("DELETE FROM ledger.events")
    finally:
        con.close()


def test_missing_postgresql_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import devtools.pg as pg

    monkeypatch.setattr(pg.glob, "glob", lambda _pattern: [])
    monkeypatch.setattr(pg.shutil, "which", lambda _name: None)
    with pytest.raises(pg.PostgresMissing, match=r"apt-get install -y postgresql"):
        pg.find_bindir()


def test_the_memory_policy_writes_the_same_ledger_on_both_stores(pg_url: str, tmp_path: Path) -> None:
    """Nothing above `ledger` knows the store: the policy writer and the view behave identically."""
    from memtape.ledger.events import FactObserved
    from memtape.projections.view import MemoryView
    from memtape.projections.writer import MemoryWriter

    observations = [
        event(FactObserved(fact_type="quirk", key="cookie banner", value=v), domain="shop.test")
        for v in ("top", "top", "bottom", "bottom")
    ]
    results = []
    for url in (pg_url, f"sqlite:///{tmp_path / 'm' / 'ledger.db'}"):
        with open_store(url=url, clock=SteppingClock()) as store:
            writer = MemoryWriter(store)
            for ob in observations:
                writer.append([ob])
            view = MemoryView.open(store)
            results.append(
                (
                    [(e.seq, e.type, e.data, e.recorded_at) for e in store.read()],
                    [(f.value, f.confidence, f.closed) for f in view.facts("shop.test", include_closed=True)],
                )
            )
    assert results[0] == results[1]
    assert len(results[0][0]) > len(observations)  # the policy's decisions were appended too


def test_a_waiting_writer_reads_the_head_after_the_lock_is_granted(pg_url: str) -> None:
    """The head and stream versions are read in statements after the lock's: never a stale snapshot."""
    import threading
    import time

    first_writer, second_writer = PostgresStore.open(pg_url), PostgresStore.open(pg_url)
    holding, release = threading.Event(), threading.Event()
    firsts: list = []  # type: ignore[type-arg]
    seconds: list = []  # type: ignore[type-arg]

    def hold() -> None:
        with first_writer.atomic() as tx:
            firsts.extend(tx.append(some_events(2)))
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    waiter = threading.Thread(target=lambda: seconds.extend(second_writer.append(some_events(2))))
    waiter.start()
    time.sleep(0.3)
    assert not seconds  # blocked on the advisory lock
    release.set()
    holder.join(10)
    waiter.join(10)
    assert [e.seq for e in seconds] == [3, 4] and seconds[0].prev_hash == firsts[-1].hash
    assert seconds[0].stream_version == 2  # 'memory' stream: the first writer's lesson was version 1
    assert second_writer.verify().ok
    first_writer.close()
    second_writer.close()


def test_a_dropped_connection_is_reopened_for_the_next_call(pg_url: str) -> None:
    """A server restart or an idle-connection killer must not wedge a long-running agent."""
    with PostgresStore.open(pg_url) as store:
        store.append(some_events(2))
        for call in (store.head, lambda: store.append(some_events(1))):
            before = store.conn
            with psycopg.connect(pg_url, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "application_name = 'memtape' AND datname = current_database() AND pid <> pg_backend_pid()) k"
                ).fetchone()
            assert killed == (1,)
            call()
            assert store.conn is not before
        assert store.head() == 3 and store.verify().ok


def test_a_writer_held_up_past_the_busy_timeout_gets_ledger_locked(pg_url: str) -> None:
    from memtape.ledger.errors import LedgerLocked

    with PostgresStore.open(pg_url) as holder, PostgresStore.open(pg_url, busy_timeout=0.2) as waiter:
        with holder.atomic() as tx:
            tx.append(some_events(1))
            with pytest.raises(LedgerLocked, match="write lock"):
                waiter.append(some_events(1))
        assert waiter.append(some_events(1))[0].seq == 2
