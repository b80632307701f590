"""The one seal of projections.db holds for every file memtape writes, and only for those.

Every write keeps each table's digest as it goes (rows in, rows out, versions closed, versions
dropped below a forget, a projection rebuilt alone, the head moved, the forget's scrub): a file
checked whole after any of them matches the checkpoint it seals, so a file memtape wrote is
never taken for an edit. A file touched by someone who changed nothing is checked whole once,
kept and sealed again.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.anchor import Anchor
from memtape.ledger.clock import SteppingClock
from memtape.ledger.seal import Digest, Key
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import db, intervals, materialize
from memtape.projections.folds.state import PROJECTIONS
from memtape.projections.forgetting import forget
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact
from tests.test_projections_determinism import _populated, _write, memory_events


def _checked_whole(path: Path) -> None:
    """projections.db hashed table by table against its sealed checkpoint (raises Tampered when it differs)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        db._load(path, conn, Key.beside(path), whole=True)
    finally:
        conn.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    items=st.lists(memory_events(), min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 10), max_size=5),
    alone=st.sampled_from(PROJECTIONS),
    flush_rows=st.sampled_from([1, 20_000]),
)
def test_every_write_keeps_the_digest_the_checkpoint_seals(
    items: list[Any], cuts: list[int], alone: str, flush_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(intervals, "FLUSH_ROWS", flush_rows):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)
        path = Path(tmp) / "projections.db"
        i = 0
        for n in [*cuts, len(items)]:  # catch-ups in chunks: versions closed, dropped below forgets
            _write(store, writer, items[i : i + n])
            i += n
            materialize.caught_up(store, path)
            _checked_whole(path)
        materialize.rebuild(store, path, projections=[alone])  # one projection's rows out, then in again
        _checked_whole(path)
        head = store.head()
        materialize.ProjectionsHead(path).save(Anchor(head + 1, "f" * 64))  # the head moved on alone
        _checked_whole(path)
        assert materialize.ProjectionsHead(path).load() == Anchor(head + 1, "f" * 64, db.SOURCE)
        store.close()


def test_a_forget_and_its_scrub_keep_the_digest(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    _populated(store)
    path = tmp_path / "projections.db"
    MemoryView.open(store, path)
    forget(store, "domain", "google.com", projections_path=path)
    _checked_whole(path)
    MemoryWriter(store).append([fact("v9", "bing.com", key="k9")])
    MemoryView.open(store, path)
    _checked_whole(path)
    store.close()


def test_a_touched_file_is_checked_whole_once_kept_and_sealed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    _populated(store)
    path = tmp_path / "projections.db"
    want = MemoryView.open(store, path).digests()
    stamp = db.stamp_of(path)
    assert stamp.holds()
    inode = path.stat().st_ino
    os.utime(path)  # its times moved, not a byte of it
    assert not stamp.holds()
    checked = []
    load = db._load

    def counting(path: Path, conn: sqlite3.Connection, key: Key, whole: bool) -> db.Cache:
        checked.append(whole)
        return load(path, conn, key, whole)

    with caplog.at_level(logging.WARNING, logger="memtape"), mock.patch.object(db, "_load", counting):
        assert MemoryView.open(store, path).digests() == want
        assert MemoryView.open(store, path).digests() == want
    assert checked[0] and not any(checked[1:])  # checked whole once, then trusted again
    assert not caplog.records and path.stat().st_ino == inode and stamp.holds()
    store.close()


def test_a_digest_not_ours_matches_no_file() -> None:
    assert Digest(db.TABLES, "not a digest") != Digest(db.TABLES)
    assert Digest(db.TABLES, str(Digest(db.TABLES))) == Digest(db.TABLES)


def test_a_rebuild_makes_the_seq_indexes_again_and_one_that_fails_keeps_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebuild drops the seq indexes of `_intervals` while it inserts: it makes them again
    before its commit, and one that fails before that (here, just before) rolls back to the file
    as it was, indexes and seal included."""
    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    _populated(store)
    path = tmp_path / "projections.db"
    want = MemoryView.open(store, path).digests()
    materialize.rebuild(store, path)
    _checked_whole(path)  # every table, index and digest as this code makes them

    def indexes(conn: sqlite3.Connection) -> set[str]:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}

    during: list[set[str]] = []

    def killed(tracker: intervals.Tracker) -> None:
        tracker.flush()
        during.append(indexes(tracker.conn))
        raise RuntimeError("killed")

    with mock.patch.object(intervals.Tracker, "finish", killed), pytest.raises(RuntimeError, match="killed"):
        materialize.rebuild(store, path)
    assert during and not set(intervals.INDEXES) & during[0]  # every version in, the indexes not yet
    conn = sqlite3.connect(path)
    try:
        assert set(intervals.INDEXES) <= indexes(conn)
    finally:
        conn.close()
    _checked_whole(path)
    with caplog.at_level(logging.WARNING, logger="memtape"):
        view = MemoryView.open(store, path)
        assert view.digests() == want
        assert (
            view.as_of(store.head() // 2).digests() == MemoryView.open(store, None).as_of(store.head() // 2).digests()
        )
    assert not caplog.records
    store.close()
