"""A catch-up costs what the new events touch: the projections none of them is dispatched to are
neither decoded nor written again (their checkpoint moves on, their state left as it was), and what
is then served still equals a full fold, as of any seq, and a hand edit of a state left in place is
still caught when it is next read."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import threading
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
from memtape.projections.folds.state import PROJECTIONS, MemoryState, digests, fold
from memtape.projections.parameters import Thresholds
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact
from tests.test_projections_determinism import _populated, _write, memory_events


def _stored(path: Path) -> dict[str, tuple[int, int, bytes]]:
    """projection -> (seq of its stored state row, its checkpoint's seq, the stored state)."""
    conn = sqlite3.connect(path)
    try:
        return {
            name: (state_seq, cp_seq, state)
            for name, state_seq, cp_seq, state in conn.execute(
                "SELECT s.projection, s.seq, c.seq, s.state FROM _states s JOIN _checkpoints c USING (projection)"
            )
        }
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
        state_seq, cp_seq, stored = after[name]
        assert cp_seq == head
        if name == "knowledge":
            assert state_seq == head and stored != before[name][2]
        else:  # left in place, its checkpoint moved on to the new head
            assert state_seq == old_head and stored == before[name][2]
    full = digests(fold(MemoryState.empty(), fresh_ledger.read(), Thresholds()))
    assert MemoryView.open(fresh_ledger, path).digests() == full


def test_the_state_a_catch_up_returns_loads_the_others_when_used(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    MemoryView.open(fresh_ledger, path)
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    state = materialize.Catchup(fresh_ledger, path, Thresholds()).run()
    assert object.__getattribute__(state, "runs") is None and object.__getattribute__(state, "knowledge") is not None
    assert digests(state) == digests(fold(MemoryState.empty(), fresh_ledger.read(), Thresholds()))


def test_an_edited_state_left_in_place_is_caught_when_next_read(fresh_ledger, memory_path, caplog):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    good_runs = MemoryView.open(fresh_ledger, path).digests()["runs"]
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    materialize.caught_up(fresh_ledger, path)  # runs: not loaded, its checkpoint moved on
    conn = sqlite3.connect(path)
    raw = orjson.loads(
        zstandard.decompress(conn.execute("SELECT state FROM _states WHERE projection = 'runs'").fetchone()[0])
    )
    for run in raw["runs"].values():
        run["summary"] = "FORGED"
    conn.execute(
        "UPDATE _states SET state = ? WHERE projection = 'runs'",
        (zstandard.compress(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)),),
    )
    conn.commit()
    conn.close()
    view = MemoryView.open(fresh_ledger, path)  # current: nothing to catch up, runs read when used
    assert all(r.summary != "FORGED" for r in view.state.runs.runs.values())
    assert digests(view.state, ["runs"])["runs"] == good_runs
    assert any("_states rows are not the ones its checkpoint seals" in r.getMessage() for r in caplog.records)
    assert b"FORGED" not in zstandard.decompress(
        sqlite3.connect(path).execute("SELECT state FROM _states WHERE projection = 'runs'").fetchone()[0]
    )


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
        snaps = {r[0] for r in sqlite3.connect(path).execute("SELECT projection FROM _snapshots WHERE seq = ?", (due,))}
        assert "context" in snaps
        view = MemoryView.open(fresh_ledger, path)
        assert view.as_of(due).digests() == digests(fold(MemoryState.empty(), fresh_ledger.read(1, due), Thresholds()))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    items=st.lists(memory_events(), min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 6), max_size=8),
    points=st.lists(st.integers(0, 60), min_size=1, max_size=4),
)
def test_catch_ups_of_few_events_equal_the_fold_now_and_as_of(
    items: list[Any], cuts: list[int], points: list[int]
) -> None:
    """Small chunks (most touch a few projections), snapshots due every 3 events, forgets among
    the events: after every catch-up each projection equals the fold of the log so far, and so
    does memory as of any seq."""
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(materialize, "SNAPSHOT_EVERY", 3):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)  # any log, as `append --raw` may hold
        path = Path(tmp) / "projections.db"
        i = 0
        for n in [*cuts, len(items)]:
            _write(store, writer, items[i : i + n])
            i += n
            view = MemoryView.open(store, path)
            assert view.head == store.head()
            assert view.digests() == digests(fold(MemoryState.empty(), store.read(), Thresholds()))
        events = list(store.read())
        for n in points:
            n = min(n, store.head())
            assert view.as_of(n).digests() == digests(fold(MemoryState.empty(), events[:n], Thresholds()))
        store.close()


HOLDER = """
import sys
from pathlib import Path
from memtape.projections.cache.db import stamp_of
with stamp_of(Path(sys.argv[1])).locked():
    print("holding", flush=True)
    sys.stdin.read()
"""


def test_a_catch_up_waits_for_another_process_writing_then_builds_on_it(fresh_ledger, memory_path, caplog):
    """projections.db has one writer at a time (its lock, held by another process here): a catch-up
    waits for it instead of folding the same events beside it, then catches up, with no warning."""
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    MemoryView.open(fresh_ledger, path)
    fresh_ledger.append([fact("v9", "google.com", key="k_b")])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        catching_up = threading.Thread(target=materialize.caught_up, args=(fresh_ledger, path))
        catching_up.start()
        catching_up.join(0.5)
        assert catching_up.is_alive()  # waiting for the other writer
    finally:
        holder.communicate("")
    catching_up.join(60)
    assert not catching_up.is_alive()
    assert {cp_seq for _, cp_seq, _ in _stored(path).values()} == {fresh_ledger.head()}
    assert MemoryView.open(fresh_ledger, path).digests() == digests(
        fold(MemoryState.empty(), fresh_ledger.read(), Thresholds())
    )
    assert not [r for r in caplog.records if "discarded" in r.getMessage()]


def test_a_small_state_is_snapshotted_at_every_multiple_a_larger_one_less_often(fresh_ledger, memory_path):
    """Snapshots of a small state fall on every multiple of SNAPSHOT_EVERY (as of a seq then folds
    at most that many events after one); a state over SMALL_STATE_BYTES waits LARGE_EVERY times as
    long. Either way, memory as of any seq equals the fold."""
    _populated(fresh_ledger)
    head = fresh_ledger.head()
    events = list(fresh_ledger.read())
    for small, spaced in ((10**9, 10), (0, 10 * materialize.LARGE_EVERY)):
        path = memory_path / f"projections-{small}.db"
        with (
            mock.patch.object(materialize, "SNAPSHOT_EVERY", 10),
            mock.patch.object(materialize, "SMALL_STATE_BYTES", small),
        ):
            view = MemoryView.open(fresh_ledger, path)
            seqs = [
                r[0] for r in sqlite3.connect(path).execute("SELECT seq FROM _snapshots WHERE projection = 'context'")
            ]
            assert seqs == list(range(10, head + 1, spaced))
            for n in (9, 10, 11, 25, 49, 51, head):
                assert view.as_of(n).digests() == digests(fold(MemoryState.empty(), events[:n], Thresholds()))
