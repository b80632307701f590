"""A catch-up costs what the new events touch: the projections none of them is dispatched to are
neither decoded nor written again (their checkpoint moves on with the same digest), and what is
then served still equals a full fold, as of any seq, and a hand edit of a state left in place is
still caught when it is next read."""
from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import materialize
from memtape.projections.parameters import Policy
from memtape.projections.state import PROJECTIONS, MemoryState, digests, fold
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact
from tests.test_projections_determinism import _populated, _write, memory_events


def _stored(path: Path) -> dict[str, tuple[int, int, str]]:
    """projection -> (seq of its stored state row, its checkpoint's seq, its checkpoint's digest)."""
    conn = sqlite3.connect(path)
    try:
        return {name: (state_seq, cp_seq, digest) for name, state_seq, cp_seq, digest in conn.execute(
            "SELECT s.projection, s.seq, c.seq, c.digest FROM _states s JOIN _checkpoints c USING (projection)")}
    finally:
        conn.close()


def _decoded_during(store: SqliteStore, path: Path) -> list[str]:
    """The projections whose stored state one catch-up decodes."""
    seen: list[str] = []
    real = materialize.decode

    def counting(name: str, raw: bytes) -> Any:
        seen.append(name)
        return real(name, raw)

    with mock.patch.object(materialize, "decode", counting):
        materialize.caught_up(store, path)
    return seen


def test_one_fact_decodes_and_rewrites_only_knowledge(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    MemoryView.open(fresh_ledger, path)
    before = _stored(path)
    old_head = fresh_ledger.head()
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    assert _decoded_during(fresh_ledger, path) == ["knowledge"]
    after = _stored(path)
    head = fresh_ledger.head()
    assert head == old_head + 1
    for name in PROJECTIONS:
        state_seq, cp_seq, digest = after[name]
        assert cp_seq == head
        if name == "knowledge":
            assert state_seq == head and digest != before[name][2]
        else:  # left in place, its checkpoint sealed at the new head with the same digest
            assert state_seq == old_head and digest == before[name][2]
    full = digests(fold(MemoryState.empty(), fresh_ledger.read(), Policy()))
    assert MemoryView.open(fresh_ledger, path).digests() == full


def test_the_state_a_catch_up_returns_loads_the_others_when_used(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    MemoryView.open(fresh_ledger, path)
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    state = materialize.Catchup(fresh_ledger, path, Policy()).run()
    assert object.__getattribute__(state, "runs") is None and object.__getattribute__(state, "knowledge") is not None
    assert digests(state) == digests(fold(MemoryState.empty(), fresh_ledger.read(), Policy()))


def test_an_edited_state_left_in_place_is_caught_when_next_read(fresh_ledger, memory_path, caplog):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    good_runs = MemoryView.open(fresh_ledger, path).digests()["runs"]
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    materialize.caught_up(fresh_ledger, path)  # runs: not loaded, its checkpoint moved on
    conn = sqlite3.connect(path)
    raw = orjson.loads(zstandard.decompress(conn.execute("SELECT state FROM _states WHERE projection = 'runs'").fetchone()[0]))
    for run in raw["runs"].values():
        run["summary"] = "FORGED"
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER [{name}]")  # no alarm left: only the sealed digest can tell
    conn.execute("UPDATE _states SET state = ? WHERE projection = 'runs'",
                 (zstandard.compress(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)),))
    conn.commit()
    conn.close()
    view = MemoryView.open(fresh_ledger, path)  # current: nothing to catch up, runs read when used
    assert all(r.summary != "FORGED" for r in view.state.runs.runs.values())
    assert digests(view.state, ["runs"])["runs"] == good_runs
    assert any("does not match its sealed digest" in r.getMessage() for r in caplog.records)
    assert "FORGED".encode() not in zstandard.decompress(sqlite3.connect(path).execute(
        "SELECT state FROM _states WHERE projection = 'runs'").fetchone()[0])


def test_a_snapshot_due_in_the_range_is_taken_of_an_untouched_projection(fresh_ledger, memory_path):
    """`context` folds none of the facts appended, but a snapshot falls due among them: it is
    taken (at the state it holds) and as-of there equals the fold."""
    path = memory_path / "projections.db"
    with mock.patch.object(materialize, "SNAPSHOT_EVERY", 10):
        _populated(fresh_ledger)
        MemoryView.open(fresh_ledger, path)
        start = fresh_ledger.head()
        fresh_ledger.append([fact(f"v{i}", "google.com", key=f"k{i}") for i in range(12)])
        due = (start // 10 + 1) * 10
        materialize.caught_up(fresh_ledger, path)
        snaps = {r[0] for r in sqlite3.connect(path).execute(
            "SELECT projection FROM _snapshots WHERE seq = ?", (due,))}
        assert "context" in snaps
        view = MemoryView.open(fresh_ledger, path)
        assert view.as_of(due).digests() == digests(fold(MemoryState.empty(), fresh_ledger.read(1, due), Policy()))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items=st.lists(memory_events(), min_size=1, max_size=40), cuts=st.lists(st.integers(1, 6), max_size=8),
       points=st.lists(st.integers(0, 60), min_size=1, max_size=4))
def test_catch_ups_of_few_events_equal_the_fold_now_and_as_of(items: list[Any], cuts: list[int],
                                                              points: list[int]) -> None:
    """Small chunks (most touch a few projections), snapshots due every 3 events, forgets among
    the events: after every catch-up each projection equals the fold of the log so far, and so
    does memory as of any seq."""
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(materialize, "SNAPSHOT_EVERY", 3):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)  # any log, as `append --raw` may hold
        path = Path(tmp) / "projections.db"
        i = 0
        for n in [*cuts, len(items)]:
            _write(store, writer, items[i:i + n])
            i += n
            view = MemoryView.open(store, path)
            assert view.head == store.head()
            assert view.digests() == digests(fold(MemoryState.empty(), store.read(), Policy()))
        events = list(store.read())
        for n in points:
            n = min(n, store.head())
            assert view.as_of(n).digests() == digests(fold(MemoryState.empty(), events[:n], Policy()))
        store.close()


def test_a_checkpoint_another_process_moved_meanwhile_is_left_to_it(fresh_ledger, memory_path, tmp_path, caplog):
    """While this catch-up folds, another process (another policy, on a ledger then shorter)
    rewrites projections.db: a projection this one did not load is not sealed at the new head over
    the other's state (that would read as an edit); the next read rebuilds it, with no warning."""
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    MemoryView.open(fresh_ledger, path)
    fresh_ledger.append([fact("v8", "google.com", key="k_a")])
    fork = SqliteStore.open(tmp_path / "fork.db")  # the ledger as the other process saw it
    src = sqlite3.connect(fresh_ledger.path)
    rows = src.execute("SELECT * FROM events ORDER BY seq").fetchall()
    src.close()
    fork.conn.execute("BEGIN IMMEDIATE")
    fork.conn.executemany(f"INSERT INTO events VALUES ({', '.join('?' * len(rows[0]))})", rows)
    fork.conn.execute("COMMIT")
    fresh_ledger.append([fact("v9", "google.com", key="k_b")])
    save = materialize.Catchup._save

    def other_process_first(self: materialize.Catchup, *args: Any) -> None:
        if self.store is fork:  # the other process saving its own
            return save(self, *args)
        other = materialize.Catchup(fork, path, Policy(session_history=2))
        with materialize.opened(path) as (conn, cps):  # its own connection; the lock is per process
            other._run(conn, cps)
        return save(self, *args)

    with mock.patch.object(materialize.Catchup, "_save", other_process_first):
        materialize.caught_up(fresh_ledger, path)
    cps = {name: cp_seq for name, (_, cp_seq, _) in _stored(path).items()}
    assert cps["knowledge"] == fresh_ledger.head() and cps["runs"] == fork.head() < fresh_ledger.head()
    assert MemoryView.open(fresh_ledger, path).digests() == digests(
        fold(MemoryState.empty(), fresh_ledger.read(), Policy()))
    assert not [r for r in caplog.records if "discarded" in r.getMessage()]
    fork.close()
