"""The store's promises: append-only, tamper-evident, gapless under concurrency, private files, clear errors."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
from pathlib import Path

import orjson
import pytest

from memtape.ledger.errors import AppendOnlyViolation, ConcurrencyConflict, LedgerError, NewerSchema, NotALedger
from memtape.ledger.events import LessonRecorded
from memtape.ledger.location import memory_dir, open_store
from memtape.ledger.store import SqliteStore, chain_hash
from tests.ledger_samples import SAMPLES, sample_event


def _fill(store: SqliteStore, n: int = 5) -> None:
    store.append([sample_event("lesson_seeded", text=f"lesson {i}", domain="example.com") for i in range(n)])


# ---- append-only and tamper evidence -------------------------------------------------


@pytest.mark.parametrize(
    "sql", ["UPDATE events SET payload = '{}' WHERE seq = 2", "DELETE FROM events WHERE seq = 2", "DELETE FROM events"]
)
def test_update_and_delete_are_refused(fresh_ledger: SqliteStore, ledger_path: Path, sql: str) -> None:
    _fill(fresh_ledger)
    with sqlite3.connect(ledger_path) as raw, pytest.raises(sqlite3.IntegrityError, match="ledger is append-only"):
        raw.execute(sql)
    from memtape.ledger.errors import translated

    with pytest.raises(AppendOnlyViolation, match="ledger is append-only"), translated(str(ledger_path)):
        fresh_ledger.conn.execute(sql)
    assert fresh_ledger.head() == 5 and fresh_ledger.verify().ok


def _behind_the_back(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("DROP TRIGGER events_no_delete")
    for s in sql:
        conn.execute(s)
    conn.commit()
    conn.close()


def test_edited_payload_is_named_by_verify(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 6)
    assert fresh_ledger.verify().ok
    _behind_the_back(ledger_path, "UPDATE events SET payload = replace(payload, 'lesson 3', 'lesson X') WHERE seq = 4")
    result = fresh_ledger.verify()
    assert (result.ok, result.first_bad_seq, result.count) == (False, 4, 3)
    assert "content" in result.reason


def test_edited_envelope_is_named_by_verify(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 6)
    _behind_the_back(ledger_path, "UPDATE events SET domain = 'evil.com' WHERE seq = 2")
    assert fresh_ledger.verify().first_bad_seq == 2


def test_rehashed_row_is_named_itself(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 4)
    conn = sqlite3.connect(ledger_path)
    row = list(conn.execute("SELECT * FROM events WHERE seq = 2").fetchone())
    row[11] = orjson.dumps({**orjson.loads(row[11]), "lesson": "forged"}, option=orjson.OPT_SORT_KEYS).decode()
    new_hash = chain_hash(row[12], row[:13])
    conn.close()
    _behind_the_back(ledger_path, f"UPDATE events SET payload = '{row[11]}', hash = '{new_hash}' WHERE seq = 2")
    result = fresh_ledger.verify()
    assert (result.ok, result.first_bad_seq) == (False, 2)
    assert "re-hashed" in result.reason


def test_removed_row_is_named_by_verify(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 6)
    _behind_the_back(ledger_path, "DELETE FROM events WHERE seq = 3")
    result = fresh_ledger.verify()
    assert (result.ok, result.first_bad_seq) == (False, 3)
    assert "missing" in result.reason


def test_payload_that_is_not_json_is_named(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 3)
    _behind_the_back(ledger_path, "UPDATE events SET payload = '{not json' WHERE seq = 3")
    assert fresh_ledger.verify().first_bad_seq == 3


# ---- upcasting ---------------------------------------------------------------------------


def test_lesson_recorded_v1_is_upcast_on_read(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    _fill(fresh_ledger, 1)
    head = next(fresh_ledger.read())
    v1 = {
        "lesson_id": "old-1",
        "lesson": "use wait_for before click",
        "category": "error_recovery",
        "failed_command": "click",
        "error_pattern": "timeout",
        "domain": "shop.example.com",
        "use_count": 2,
    }
    body = (
        2,
        "v1-event",
        "memory",
        2,
        "lesson_recorded",
        1,
        "2025-06-01T00:00:00.000000Z",
        "2025-06-01T00:00:00.000000Z",
        None,
        None,
        None,
        orjson.dumps(v1, option=orjson.OPT_SORT_KEYS).decode(),
        head.hash,
    )
    with sqlite3.connect(ledger_path) as raw:
        raw.execute(f"INSERT INTO events VALUES ({', '.join('?' * 14)})", (*body, chain_hash(head.hash, body)))
    ev = fresh_ledger.get("v1-event")
    assert ev is not None and ev.schema_version == 1
    assert ev.data["scope_domain"] == "shop.example.com" and "domain" not in ev.data
    assert "schema_version" not in ev.data  # data has the same shape as a v2 row's
    model = ev.payload
    assert isinstance(model, LessonRecorded) and model.schema_version == 2
    assert (model.scope_domain, model.use_count, model.lesson_id) == ("shop.example.com", 2, "old-1")
    assert fresh_ledger.verify().ok  # upcasting never touches the stored bytes
    assert [e.type for e in fresh_ledger.read(types=["lesson_recorded"])] == ["lesson_recorded"]


# ---- optimistic concurrency and reads ------------------------------------------------------


def test_stale_expected_version_is_refused(fresh_ledger: SqliteStore) -> None:
    fresh_ledger.append([sample_event("run_started", run_id="r1")], expected_version=0)
    fresh_ledger.append([sample_event("run_progress", run_id="r1")], expected_version=1)
    with pytest.raises(ConcurrencyConflict, match="version 2, expected 1"):
        fresh_ledger.append([sample_event("run_progress", run_id="r1")], expected_version=1)
    assert fresh_ledger.head() == 2


def test_read_filters(fresh_ledger: SqliteStore, clock) -> None:  # type: ignore[no-untyped-def]
    fresh_ledger.append(
        [sample_event("run_started", run_id="r1", domain="a.com"), sample_event("lesson_seeded", domain="b.com")]
    )
    fresh_ledger.append([sample_event("run_progress", run_id="r2", domain="a.com", step=1)])
    fresh_ledger.append([sample_event(t, run_id="r2") for t in ("step_recorded", "run_completed")])
    assert [e.seq for e in fresh_ledger.read(types=["run_started", "run_completed"])] == [1, 5]
    assert [e.seq for e in fresh_ledger.read(run_id="r2")] == [3, 4, 5]
    assert [e.seq for e in fresh_ledger.read(domain="a.com")] == [1, 3]
    assert [e.seq for e in fresh_ledger.read(2, 4)] == [2, 3, 4]
    assert [e.seq for e in fresh_ledger.read(stream="run-r2")] == [3, 4, 5]
    times = [e.recorded_at for e in fresh_ledger.read()]
    assert [e.seq for e in fresh_ledger.read(since=times[2], until=times[2])] == [3]
    assert fresh_ledger.seq_at_time(times[2]) == 3
    assert fresh_ledger.seq_at_time(times[3]) == 5  # one append = one recorded time
    assert [e.seq for e in fresh_ledger.read(batch=2)] == [1, 2, 3, 4, 5]
    st = fresh_ledger.stats()
    assert st.count == 5 and st.by_run == {"r1": 1, "r2": 3} and st.by_domain == {"a.com": 2, "b.com": 1}


# ---- several processes ---------------------------------------------------------------------


def _writer(path: str, name: str, batches: int) -> None:
    with SqliteStore.open(path, busy_timeout=30) as store:
        for b in range(batches):
            store.append(
                [sample_event("run_progress", run_id=name, step=b * 3 + i, text=f"{name}-{b}-{i}") for i in range(3)]
            )


def test_four_processes_append_concurrently(ledger_path: Path) -> None:
    SqliteStore.open(ledger_path).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(ledger_path), f"w{n}", 40)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with SqliteStore.open(ledger_path) as store:
        events = list(store.read())
        assert [e.seq for e in events] == list(range(1, 4 * 40 * 3 + 1))
        assert len({e.id for e in events}) == len(events)
        for n in range(4):
            mine = [e for e in events if e.run_id == f"w{n}"]
            assert [e.step for e in mine] == list(range(120))  # each writer's order kept, nothing lost
            assert [e.stream_version for e in mine] == list(range(1, 121))
            for b in range(40):  # each batch is contiguous in seq
                seqs = [e.seq for e in mine[b * 3 : b * 3 + 3]]
                assert seqs == list(range(seqs[0], seqs[0] + 3))
        result = store.verify()
        assert result.ok and result.count == 480


# ---- files on disk -------------------------------------------------------------------------------


def test_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        d = memory_dir(tmp_path / "mem")
        store = open_store(d)
        _fill(store, 2)
        wal, shm = Path(f"{store.path}-wal"), Path(f"{store.path}-shm")
        assert wal.exists() and shm.exists()
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (store.path, wal, shm)}
        store.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert modes == {"ledger.db": 0o600, "ledger.db-wal": 0o600, "ledger.db-shm": 0o600}


def _damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "ledger.db"
    if kind == "random":
        path.write_bytes(os.urandom(9000))
    elif kind == "text":
        path.write_text("just some notes\n" * 100)
    elif kind == "other-sqlite":
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE notes (x)")
    else:
        with SqliteStore.open(path) as store:
            for i in range(40):
                store.append([sample_event("step_recorded", text="x" * 500 + str(i)) for _ in range(5)])
        if kind == "truncated":
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 3])
        elif kind == "newer":
            with sqlite3.connect(path) as c:
                c.execute("PRAGMA user_version = 99")
    return path


@pytest.mark.parametrize(
    "kind,error",
    [
        ("random", NotALedger),
        ("text", NotALedger),
        ("other-sqlite", NotALedger),
        ("truncated", NotALedger),
        ("newer", NewerSchema),
    ],
)
def test_damaged_files_give_one_line_errors(tmp_path: Path, kind: str, error: type[LedgerError]) -> None:
    path = _damaged(tmp_path, kind)
    before = path.read_bytes()
    with (
        pytest.raises(error) as info,
        SqliteStore.open(path) as store,
    ):  # a truncated file may open; reading it must fail cleanly
        list(store.read())
        store.verify()
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert path.read_bytes() == before


def test_every_sample_type_is_storable(fresh_ledger: SqliteStore) -> None:
    recorded = fresh_ledger.append([sample_event(t) for t in sorted(SAMPLES)])
    assert sorted(e.type for e in fresh_ledger.read()) == sorted(SAMPLES)
    assert all(e.payload.type == e.type for e in recorded)
