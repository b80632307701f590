"""A projection process SIGKILLed mid-rebuild or mid-catch-up: the next catch-up gives the
same digests as a clean rebuild (projections.db is disposable and self-checking).

The ledger is devtools/synthetic.py's synthetic agent log (MEMTAPE_KILL_EVENTS events,
default 40,000; 200,000 works too, slower). Each kill lands at a random moment
of the fold or of the snapshot/table writes, and the test checks the process really was
cut short (the checkpoints never reached the head)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.synthetic import build_ledger
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.db import readable
from memtape.projections.cache.materialize import Catchup, rebuild
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.view import MemoryView

pytestmark = pytest.mark.stress
EVENTS = int(os.environ.get("MEMTAPE_KILL_EVENTS", "40000"))
ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from pathlib import Path
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import Catchup
from memtape.projections.parameters import DEFAULT_POLICY
store = SqliteStore.open(sys.argv[1])
print("go", flush=True)
Catchup(store, Path(sys.argv[2]), DEFAULT_POLICY, rebuild=sys.argv[3] == "rebuild").run()
print("done", flush=True)
"""


def _checkpoint_seqs(path: Path) -> list[int]:
    with readable(path) as cache:
        return [cp.seq for cp in cache.checkpoints.values()]


def kill_midway(ledger: Path, proj: Path, mode: str, window: float, rng: random.Random) -> float:
    """Run a catch-up ("catchup") or full rebuild ("rebuild") in a child and SIGKILL it at a
    random moment within `window` seconds of its start; returns when it was killed."""
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(ledger), str(proj), mode],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "go"
        delay = rng.uniform(0.05, window)
        time.sleep(delay)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait()
            assert child.returncode == -signal.SIGKILL
            return delay
        window = delay * 0.7  # finished first: aim earlier
    raise AssertionError("the child always finished before the kill")


def test_killed_rebuild_and_catchup_resume_to_the_same_digests(tmp_path: Path) -> None:
    rng = random.Random(os.environ.get("MEMTAPE_KILL_SEED", "6"))
    ledger, proj = tmp_path / "ledger.db", tmp_path / "projections.db"
    store = build_ledger(ledger, EVENTS)
    head = store.head()
    assert head == EVENTS
    half = head // 2
    _rewind(store, proj, half)  # projections.db at the half: the next catch-up folds the rest

    t0 = time.perf_counter()
    clean = rebuild(store, tmp_path / "clean.db")
    fold_seconds = time.perf_counter() - t0
    want = MemoryView(clean).digests()

    # catch-ups from the half; a rebuild of a missing projections.db; a rebuild over a current one
    for mode, fresh in (("catchup", False), ("catchup", False), ("rebuild", True), ("rebuild", False)):
        window = fold_seconds * (0.45 if mode == "catchup" else 0.9)
        for _ in range(5):
            if fresh:
                _remove(proj)
            kill_midway(ledger, proj, mode, window, rng)
            if not (mode == "catchup" or fresh) or all(seq < head for seq in _checkpoint_seqs(proj)):
                break
            window /= 2  # the child had finished its work when the kill landed: aim earlier
            if mode == "catchup":
                _rewind(store, proj, half)
        else:
            raise AssertionError(f"{mode}: the child always got to the end")
        store.close()
        store = SqliteStore.open(ledger)
        view = MemoryView.open(store, proj)
        assert view.head == head and view.digests() == want, mode
        assert _checkpoint_seqs(proj) == [head] * len(want)
        if mode == "catchup":  # put projections.db back behind the head for the next catch-up kill
            _rewind(store, proj, half)
    assert store.verify().ok
    store.close()


def _rewind(store: SqliteStore, proj: Path, seq: int) -> None:
    """projections.db as of `seq`: rebuilt from a ledger fork holding the first `seq` events."""
    fork = proj.with_name("fork.db")
    _remove(fork)
    _remove(proj)
    short = SqliteStore.open(fork)
    src = sqlite3.connect(store.path)
    try:
        rows = src.execute("SELECT * FROM events WHERE seq <= ? ORDER BY seq", (seq,)).fetchall()
    finally:
        src.close()
    cols = len(rows[0])
    short.conn.execute("BEGIN IMMEDIATE")
    short.conn.executemany(f"INSERT INTO events VALUES ({', '.join('?' * cols)})", rows)
    short.conn.execute("COMMIT")
    Catchup(short, proj, DEFAULT_POLICY).run()
    short.close()


def _remove(db: Path) -> None:
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
