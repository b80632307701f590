"""Projections are deterministic folds: rebuild == incremental catch-up over any chunking,
as_of(n) == a rebuild of the first n events, digests independent of PYTHONHASHSEED,
and projections.db is disposable (tampering, garbage, a new policy or ledger rebuild it)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import InvalidEvent, LedgerTampered
from memtape.ledger.events import SelectorFailed, SelectorSucceeded, SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import db, intervals, materialize
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.folds.state import MemoryState, digests, fold
from memtape.projections.parameters import Thresholds
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.ledger_samples import new_events
from tests.projections_support import (
    at,
    fact,
    graded,
    lesson,
    recall,
    run_completed,
    run_started,
    session,
    step,
    trajectory,
)

DOMAINS = ["a.com", "www.a.com", "b.org", "c.net"]
COMMANDS = ["click", "fill", None]
PATTERNS = ["timeout", "too many arguments", None]
TEXTS = ["press escape", "wait for load", "scroll first"]


def _lesson_ids() -> list[str]:
    return [lesson_id_for(c, p, None, t) for c in COMMANDS for p in PATTERNS for t in TEXTS]


@st.composite
def memory_events(draw: Any) -> Any:
    """One observation (or ('open', day) for MemoryWriter.open_for_run) from a small universe."""
    kind = draw(
        st.sampled_from(
            [
                "lesson",
                "lesson",
                "recall",
                "fact",
                "session",
                "selector",
                "trajectory",
                "run",
                "step",
                "forget",
                "open",
                "raw",
            ]
        )
    )
    dom = draw(st.sampled_from(DOMAINS))
    day = draw(st.integers(0, 200))
    if kind == "lesson":
        scope = draw(st.sampled_from([None, None, "a.com"]))
        return lesson(
            draw(st.sampled_from(TEXTS)),
            dom,
            fc=draw(st.sampled_from(COMMANDS)),
            ep=draw(st.sampled_from(PATTERNS)),
            scope=scope,
            when=at(day),
            category=draw(st.sampled_from(["error_recovery", "site_specific", "best_practice"])),
        )
    if kind == "recall":
        return recall(draw(st.lists(st.sampled_from(_lesson_ids()), max_size=3)), dom, when=at(day))
    if kind == "fact":
        return fact(
            draw(st.sampled_from(["x", "y", "z"])),
            dom,
            key=draw(st.sampled_from(["k1", "k2"])),
            confidence=draw(st.sampled_from([None, 0.15, 0.9])),
            when=at(day),
        )
    if kind == "session":
        return session(draw(st.integers(0, 9)), dom, success=draw(st.booleans()))
    if kind == "selector":
        cls = draw(st.sampled_from([SelectorSucceeded, SelectorFailed]))
        return NewEvent(cls(role="button", name="Go", selector=draw(st.sampled_from(["#a", "#b"]))), domain=dom)
    if kind == "trajectory":
        return trajectory(
            f"t{draw(st.integers(0, 5))}",
            draw(st.sampled_from(["buy shoes", "buy red shoes", "find"])),
            dom,
            when=at(day),
            run_id=draw(st.sampled_from(["r1", "r2", None])),
        )
    if kind == "run":
        rid = draw(st.sampled_from(["r1", "r2", "r3"]))
        if draw(st.booleans()):
            return run_started(rid, domain=dom, session_id=draw(st.sampled_from(["s1", None])), when=at(day))
        return run_completed(rid, success=draw(st.booleans()), domain=dom)
    if kind == "step":
        rid = draw(st.sampled_from(["r1", "r2", "r3"]))
        n = draw(st.integers(0, 3))
        if draw(st.booleans()):
            return graded(rid, n, draw(st.sampled_from(["success", "failure"])))
        return step(
            rid,
            n,
            args={"ref": draw(st.sampled_from(["e1", "e2"]))},
            ok=draw(st.booleans()),
            elements=draw(st.lists(st.sampled_from(["b:1", "b:2", "b:3", "l:4"]), max_size=4)),
            domain=dom,
        )
    if kind == "forget":
        k = draw(st.sampled_from(["domain", "run", "session", "lesson"]))
        subject = {"domain": dom, "run": "r1", "session": "s1", "lesson": draw(st.sampled_from(_lesson_ids()))}[k]
        return NewEvent(SubjectForgotten(subject_kind=k, subject=subject))  # type: ignore[arg-type]
    if kind == "open":
        return ("open", day)
    return draw(new_events())  # any valid event at all, appended raw


def _write(store: SqliteStore, writer: MemoryWriter, items: list[Any]) -> None:
    for item in items:
        if isinstance(item, tuple):
            writer.open_for_run("r9", at(item[1]))
        elif item.type in ("lesson_seeded",) or not hasattr(item, "payload"):
            store.append([item])
        else:
            try:
                writer.append([item])
            except InvalidEvent:
                pass  # refused at the door (a drawn lesson id naming another lesson): nothing was written


def _versions(path: Path) -> list[tuple[Any, ...]]:
    """Every interval version projections.db holds, its value read from its block (block ids left
    out: they depend on how the writes were batched)."""
    with db.readable(path) as cache:
        rows = intervals.resolved(
            intervals.Blocks(cache.conn),
            cache.conn.execute(f"SELECT {intervals._COLS}, projection, facet FROM _intervals").fetchall(),
        )
    return sorted(
        (
            (projection, field, k1, k2, valid_from, valid_to, o1, o2, facet, value)
            for field, k1, k2, o1, o2, value, valid_from, valid_to, projection, facet in rows
        ),
        key=repr,
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(memory_events(), min_size=1, max_size=40), cuts=st.lists(st.integers(1, 12), max_size=6))
def test_rebuild_equals_incremental_catch_up_over_any_chunking(items: list[Any], cuts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)  # any log, as old ledgers hold them
        path = Path(tmp) / "projections.db"
        i = 0
        for n in cuts:
            _write(store, writer, items[i : i + n])
            i += n
            MemoryView.open(store, path)  # incremental catch-up, written back to projections.db
        _write(store, writer, items[i:])
        incremental = MemoryView.open(store, path)
        full = fold(MemoryState.empty(), store.read(), Thresholds())
        assert incremental.head == full.head == store.head()
        assert incremental.digests() == digests(full)
        fresh = Path(tmp) / "rebuilt.db"
        rebuilt = materialize.rebuild(store, fresh)
        assert digests(rebuilt) == digests(full)
        assert _versions(path) == _versions(fresh)  # the same versions however the catch-ups were chunked
        store.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    items=st.lists(memory_events(), min_size=1, max_size=40),
    points=st.lists(st.integers(0, 60), min_size=1, max_size=4),
)
def test_as_of_n_equals_a_rebuild_of_the_first_n_events(items: list[Any], points: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(materialize, "SNAPSHOT_EVERY", 4):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        _write(store, MemoryWriter(store, check_runs=False), items)
        path = Path(tmp) / "projections.db"
        view = MemoryView.open(store, path)
        events = list(store.read())
        for n in points:
            n = min(n, store.head())
            expected = digests(fold(MemoryState.empty(), events[:n], Thresholds()))
            assert view.as_of(n).digests() == expected
            assert view.as_of(n).head == n
            if n:
                seq = store.seq_at_time(events[n - 1].recorded_at)
                by_time = view.as_of(events[n - 1].recorded_at)
                assert by_time.head == seq
                assert by_time.digests() == digests(fold(MemoryState.empty(), events[:seq], Thresholds()))
        store.close()


SCRIPT = """
import json, sys
from memtape.ledger.store import SqliteStore
from memtape.projections.view import MemoryView
store = SqliteStore.open(sys.argv[1])
print(json.dumps(MemoryView.open(store).digests(), sort_keys=True))
"""


def _populated(store: SqliteStore) -> None:
    w = MemoryWriter(store)
    w.open_for_run("r0", at(0))
    for i, d in enumerate(["google.com", "bing.com", "amazon.com", "yahoo.com", "reddit.com", "x.io", "y.io"]):
        w.append(
            [
                run_started(f"r{i}", domain=d, session_id=f"s{i % 2}"),
                lesson(domain=d),
                lesson(f"tip {i}", d, fc=None, ep=None, scope=d),
                fact(f"v{i % 3}", d),
                fact("v0", "a.com"),
                session(i, d),
                trajectory(f"t{i}", f"buy thing {i}", d, run_id=f"r{i}"),
                step(f"r{i}", 1, elements=["b:1", "b:2"], intent="buy"),
                graded(f"r{i}", 1, "success"),
                recall([lesson_id_for("click", "intercepts pointer events", None, "")], d),
            ]
        )
        if i % 2:
            w.append([run_completed(f"r{i}", domain=d)])


def test_two_processes_with_different_hash_seeds_give_the_same_digests(fresh_ledger, ledger_path):
    _populated(fresh_ledger)
    outs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(ledger_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1] == MemoryView.open(fresh_ledger).digests()


# ---- projections.db is disposable ------------------------------------------------------


def test_a_hand_edit_is_detected_and_rebuilt(fresh_ledger, memory_path):
    _populated(fresh_ledger)
    path = memory_path / "projections.db"
    good = MemoryView.open(fresh_ledger, path).digests()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE _intervals SET o1 = 999 WHERE projection = 'lessons'")
    conn.commit()
    conn.close()
    again = MemoryView.open(fresh_ledger, path)
    assert again.digests() == good
    assert 999 not in [r[0] for r in sqlite3.connect(path).execute("SELECT o1 FROM _intervals")]


def test_a_tampered_state_blob_or_checkpoint_is_rebuilt(fresh_ledger, memory_path):
    _populated(fresh_ledger)
    path = memory_path / "projections.db"
    good = MemoryView.open(fresh_ledger, path).digests()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE _checkpoints SET fingerprint = 'x' WHERE projection = 'lessons'")
    conn.commit()
    conn.close()
    assert MemoryView.open(fresh_ledger, path).digests() == good
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT fingerprint FROM _checkpoints WHERE projection = 'lessons'").fetchone()[0] != "x"
    conn.execute("UPDATE _states SET state = x'00' WHERE projection = 'runs'")
    conn.commit()
    conn.close()
    assert MemoryView.open(fresh_ledger, path).digests() == good


def test_a_garbage_file_is_replaced(fresh_ledger, memory_path):
    _populated(fresh_ledger)
    path = memory_path / "projections.db"
    good = MemoryView.open(fresh_ledger, path).digests()
    path.write_bytes(b"\x00garbage" * 4096)
    for p in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        if p.exists():
            p.unlink()
    assert MemoryView.open(fresh_ledger, path).digests() == good


ZSTD_FRAME = b"\x28\xb5\x2f\xfd"  # how every Zstandard frame begins


def _stored_blobs(path: Path) -> list[bytes]:
    conn = sqlite3.connect(path)
    try:
        return [
            r[0]
            for r in conn.execute(
                "SELECT state FROM _states UNION ALL SELECT state FROM _snapshots WHERE state IS NOT NULL"
            )
        ]
    finally:
        conn.close()


def test_a_projections_db_of_the_zlib_format_is_rebuilt_without_a_word(fresh_ledger, memory_path, caplog):
    """Schema 11 stored each state and snapshot as a zlib stream. Such a file, written here as that
    code wrote it, is an older format: removed and rebuilt silently, never read as forged, and what
    it then serves equals the fold."""
    path = memory_path / "projections.db"
    with mock.patch.object(materialize, "SNAPSHOT_EVERY", 10):  # snapshots too, not only states
        _populated(fresh_ledger)
        good = MemoryView.open(fresh_ledger, path).digests()
    conn = sqlite3.connect(path, isolation_level=None)
    for table, key in (("_states", "projection"), ("_snapshots", "projection, seq")):
        rows = conn.execute(f"SELECT {key}, state FROM {table} WHERE state IS NOT NULL").fetchall()
        assert rows
        for *where, blob in rows:
            conn.execute(
                f"UPDATE {table} SET state = ? WHERE ({key}) = ({', '.join('?' * len(where))})",
                (zlib.compress(zstandard.decompress(blob), 1), *where),
            )
    conn.execute("PRAGMA user_version = 11")
    conn.close()
    assert not any(blob.startswith(ZSTD_FRAME) for blob in _stored_blobs(path))
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    assert (
        MemoryView.open(fresh_ledger, path).digests()
        == digests(fold(MemoryState.empty(), fresh_ledger.read(), Thresholds()))
        != good
    )
    assert not caplog.records
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert all(blob.startswith(ZSTD_FRAME) for blob in _stored_blobs(path))


def test_a_new_policy_rebuilds_by_itself(fresh_ledger, memory_path):
    w = MemoryWriter(fresh_ledger)
    w.append([session(i) for i in range(6)])
    path = memory_path / "projections.db"
    assert len(MemoryView.open(fresh_ledger, path).sessions("example.com")) == 5
    assert len(MemoryView.open(fresh_ledger, path, Thresholds(session_history=2)).sessions("example.com")) == 2
    head = fresh_ledger.head()
    with db.readable(path) as cache:  # what projections.db now holds: the new policy's memory
        stored = intervals.state_at(intervals.Blocks(cache.conn), "sessions", head)
    assert len(stored.by_domain["example.com"]) == 2
    assert len(MemoryView.open(fresh_ledger, path).sessions("example.com")) == 5


def test_another_ledger_behind_the_same_projections_db_is_refused_not_rebuilt_around(tmp_path):
    """projections.db remembers the ledger it saw: another ledger behind it is named, not served."""
    path = tmp_path / "projections.db"
    one = SqliteStore.open(tmp_path / "one.db", clock=SteppingClock())
    MemoryWriter(one).append([fact("x"), fact("y", key="k")])
    MemoryView.open(one, path)
    two = SqliteStore.open(tmp_path / "two.db", clock=SteppingClock("2027-01-01T00:00:00Z"))
    MemoryWriter(two).append([fact("z"), fact("w", key="k"), fact("v", key="k3")])
    with pytest.raises(LedgerTampered, match="seq 2 holds hash"):
        MemoryView.open(two, path)
    path.unlink()  # a new projections.db for the other ledger
    assert sorted(f.value for f in MemoryView.open(two, path).facts("example.com")) == ["v", "w", "z"]


def test_incremental_catch_up_writes_only_new_state_and_keeps_snapshots(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    with mock.patch.object(materialize, "SNAPSHOT_EVERY", 10):
        _populated(fresh_ledger)
        v = MemoryView.open(fresh_ledger, path)
        n = sqlite3.connect(path).execute("SELECT COUNT(DISTINCT seq) FROM _snapshots").fetchone()[0]
        assert n == v.head // 10
        assert v.as_of(15).digests() == digests(fold(MemoryState.empty(), fresh_ledger.read(1, 15), Thresholds()))


def test_the_writer_can_start_from_projections_db(fresh_ledger, memory_path):
    _populated(fresh_ledger)
    path = memory_path / "projections.db"
    w = MemoryWriter(fresh_ledger, projections_path=path)
    types = [e.type for e in w.append([lesson(domain="new.com")])]
    assert types == ["lesson_recorded", "lesson_deduplicated"]
    assert MemoryView.open(fresh_ledger, path).digests() == MemoryView.open(fresh_ledger).digests()
