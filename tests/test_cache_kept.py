"""States kept decoded between catch-ups (projections/cache/kept.py) and large states written
again only when due: a catch-up of a few events decodes nothing this process kept, yet what it
serves equals the fold of the log whoever else wrote projections.db meanwhile, a state a reader
still holds is never folded into, and a state left at an older seq is brought forward by whoever
reads it (and written again past a forget)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import compression, kept, materialize
from memtape.projections.folds.state import MemoryState, digests, fold
from memtape.projections.parameters import Thresholds
from memtape.projections.state_rows import open_state
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import fact
from tests.test_projections_determinism import _populated, _write, memory_events


def _full(store: SqliteStore) -> dict[str, str]:
    return digests(fold(MemoryState.empty(), store.read(), Thresholds()))


def _decoded_during(fn: Any) -> list[str]:
    seen: list[str] = []
    real = materialize.decode

    def counting(name: str, raw: bytes) -> Any:
        seen.append(name)
        return real(name, raw)

    with mock.patch.object(materialize, "decode", counting):
        fn()
    return seen


def _rows(path: Path) -> dict[str, tuple[int, int]]:
    """projection -> (seq of its stored state row, its checkpoint's seq)."""
    conn = sqlite3.connect(path)
    try:
        return {
            n: (s, c)
            for n, s, c in conn.execute(
                "SELECT s.projection, s.seq, c.seq FROM _states s JOIN _checkpoints c USING (projection)"
            )
        }
    finally:
        conn.close()


def test_a_catch_up_after_a_read_decodes_nothing_it_kept(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    open_state(fresh_ledger, path, "facts")  # knowledge decoded once, and kept
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    assert _decoded_during(lambda: materialize.caught_up(fresh_ledger, path)) == []
    fresh_ledger.append([fact("v8", "bing.com", key="k_newer")])
    assert _decoded_during(lambda: materialize.caught_up(fresh_ledger, path)) == []  # the folded one stays kept
    assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)
    facts = open_state(fresh_ledger, path, "facts", domain="bing.com").rows
    assert any(f.key == "k_newer" and f.value == "v8" for f in facts)


def test_a_state_a_reader_still_holds_is_not_folded_into(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    held = MemoryView.open(fresh_ledger, path, lend=True)
    before = digests(held.state)["knowledge"]
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    assert _decoded_during(lambda: materialize.caught_up(fresh_ledger, path)) == ["knowledge"]
    assert digests(held.state)["knowledge"] == before  # what the reader holds is still memory at its head
    assert held.refresh().head < fresh_ledger.head()  # a lent view is pinned: it folds nothing in place
    assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)


def test_states_the_caller_alone_holds_are_not_kept(fresh_ledger, memory_path):
    """A view that folds later events into its states in place (a recording memory's) is handed
    them: the next catch-up decodes its own."""
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    open_state(fresh_ledger, path, "facts")
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    owner = MemoryView.open(fresh_ledger, path)
    owner.projections_path = None  # as RecordingMemory.current does: refreshed in memory
    fresh_ledger.append([fact("v8", "google.com", key="k_newer")])
    owner.refresh()
    assert owner.digests() == _full(fresh_ledger)
    del owner  # gone: what it folded into must not be taken for memory at the last catch-up's head
    fresh_ledger.append([fact("v7", "google.com", key="k_newest")])
    assert _decoded_during(lambda: materialize.caught_up(fresh_ledger, path)) == ["knowledge"]
    assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)


CATCH_UP = """
import sys
from pathlib import Path
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import materialize
from tests.projections_support import fact
store = SqliteStore.open(Path(sys.argv[1]) / "ledger.db")
store.append([fact("v7", "yahoo.com", key="k_other")])
materialize.caught_up(store, Path(sys.argv[1]) / "projections.db")
store.close()
"""


def test_states_kept_are_not_used_once_another_process_caught_the_file_up(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    open_state(fresh_ledger, path, "facts")  # kept: knowledge at this head
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", CATCH_UP, str(memory_path)], check=True, cwd=root, timeout=120)
    fresh_ledger.append([fact("v9", "google.com", key="k_new")])
    assert "knowledge" in _decoded_during(lambda: materialize.caught_up(fresh_ledger, path))
    assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)
    facts = open_state(fresh_ledger, path, "facts", domain="yahoo.com").rows
    assert any(f.key == "k_other" for f in facts)


def test_a_large_state_is_left_at_its_seq_and_read_forward(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    old = fresh_ledger.head()
    with mock.patch.object(materialize, "DEFERRED_STATE_BYTES", 0):
        fresh_ledger.append([fact("v9", "google.com", key="k_new")])
        materialize.caught_up(fresh_ledger, path)
        assert _rows(path)["knowledge"] == (old, fresh_ledger.head())  # not written again: not due
        kept.drop(path)  # a reader in another process: nothing kept
        assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)
        kept.drop(path)
        facts = open_state(fresh_ledger, path, "facts", domain="google.com").rows
        assert any(f.key == "k_new" for f in facts)
        with mock.patch.object(materialize, "SNAPSHOT_EVERY", 1):  # due after one event
            fresh_ledger.append([fact("v5", "google.com", key="k_due")])
            materialize.caught_up(fresh_ledger, path)
        assert _rows(path)["knowledge"] == (fresh_ledger.head(), fresh_ledger.head())


def test_a_state_left_before_a_forget_is_written_again(fresh_ledger, memory_path):
    path = memory_path / "projections.db"
    _populated(fresh_ledger)
    materialize.caught_up(fresh_ledger, path)
    with mock.patch.object(materialize, "DEFERRED_STATE_BYTES", 0):
        fresh_ledger.append([fact("v9", "google.com", key="k_new")])
        materialize.caught_up(fresh_ledger, path)
        fresh_ledger.append([NewEvent(SubjectForgotten(subject_kind="domain", subject="google.com"))])
        materialize.caught_up(fresh_ledger, path)
    head = fresh_ledger.head()
    rows = _rows(path)
    assert rows["knowledge"] == (head, head)
    conn = sqlite3.connect(path)
    try:
        blobs = [b for (b,) in conn.execute("SELECT state FROM _states WHERE seq < ?", (head,))]
    finally:
        conn.close()
    assert not any(b"google.com" in compression.unpacker()(b) for b in blobs)
    kept.drop(path)
    assert MemoryView.open(fresh_ledger, path).digests() == _full(fresh_ledger)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    items=st.lists(memory_events(), min_size=1, max_size=40),
    cuts=st.lists(st.tuples(st.integers(1, 6), st.sampled_from(["lend", "own", "none", "other"])), max_size=8),
)
def test_kept_and_deferred_states_equal_the_fold_after_every_catch_up(
    items: list[Any], cuts: list[tuple[int, str]]
) -> None:
    """Small chunks, every state deferred, snapshots due every 3 events, forgets among the events,
    each catch-up by a lending reader, an owning one, nobody, or as another process would (nothing
    kept): after each, every projection equals the fold of the log so far."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(materialize, "SNAPSHOT_EVERY", 3),
        mock.patch.object(materialize, "DEFERRED_STATE_BYTES", 0),
    ):
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)
        path = Path(tmp) / "projections.db"
        i = 0
        for n, how in [*cuts, (len(items), "lend")]:
            _write(store, writer, items[i : i + n])
            i += n
            if how == "other":
                kept.drop(path)
            if how in ("none", "other"):
                materialize.caught_up(store, path)
                view = MemoryView.open(store, path, lend=True)
            else:
                view = MemoryView.open(store, path, lend=how == "lend")
            assert view.head == store.head()
            assert view.digests() == digests(fold(MemoryState.empty(), store.read(), Thresholds()))
        store.close()
