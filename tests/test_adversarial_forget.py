"""`memtape forget` on a projections.db built by incremental catch-ups, some of whose projections
were left as they were by the last one (stored at an older seq, read when first used): no byte of
the subject stays in the file, its WAL, its interval versions, its counts or its stored states —
nor comes back with the catch-ups, as-of reads, audits and explanations that follow."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memtape.ledger.store import SqliteStore
from memtape.projections.cache import compression, materialize
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.projections_support import fact
from tests.security_support import overlay_run, scan

NEEDLES = ["zebrafjord"]


def _lazy_states_holding(proj: Path, needle: str) -> list[str]:
    """The projections whose stored state is older than their checkpoint and holds `needle`."""
    conn = sqlite3.connect(proj)
    try:
        rows = conn.execute(
            "SELECT s.projection, s.state FROM _states s JOIN _checkpoints c "
            "ON c.projection = s.projection WHERE s.seq < c.seq"
        ).fetchall()
    finally:
        conn.close()
    return [name for name, blob in rows if needle.encode() in compression.unpacker()(blob).lower()]


def test_forget_leaves_no_bytes_after_incremental_catch_ups_and_lazy_projections(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db")
    proj = memory_path / "projections.db"
    mem = RecordingMemory(store, proj)
    overlay_run(mem, "run_keep", 'Open "Rye Bread"', "http://bakery.test/", "Rye Bread", "Accept all cookies")
    MemoryView.open(store, proj)
    overlay_run(
        mem,
        "run_zebra",
        'Open "Zebrafjord Lantern"',
        "http://zebrafjord.test/",
        "Zebrafjord Lantern",
        "Accept zebrafjord cookies",
        page_text="Zebrafjord harbour lanterns",
    )
    MemoryView.open(store, proj)  # an incremental catch-up files the subject
    MemoryWriter(store).append([fact("fresh", "bakery.test")])
    MemoryView.open(store, proj)  # folds knowledge only: the others keep their stored state
    # the test can fail: the subject is in the file, and in states the last catch-up left lazy
    assert {n for _, n in scan(proj, NEEDLES)} == set(NEEDLES)
    assert _lazy_states_holding(proj, "zebrafjord")
    store.close()

    r = run_cli("--memory-dir", str(memory_path), "forget", "--domain", "zebrafjord.test")
    assert r.code == 0, r.err
    assert scan(memory_path, NEEDLES, skip=["ledger.db", "ledger.db-wal"]) == []

    with SqliteStore.open(memory_path / "ledger.db") as store:
        forgot = store.head()
        MemoryWriter(store).append([fact("later", "bakery.test"), fact("later", "news.test")])
        view = MemoryView.open(store, proj)  # another incremental catch-up, after the forget
        assert view.run("run_zebra") is None and not view.facts("zebrafjord.test")
        assert view.as_of(forgot - 3).run("run_zebra") is not None  # folded from the log, not filed
        with materialize.indexed_memory(store, proj) as memory:
            assert memory.projection("runs", forgot).runs.get("run_zebra") is None
    for command in (
        ("audit", "run_keep", "--json"),
        ("explain", "modal", "--domain", "bakery.test", "--json"),
        ("state", "facts", "--as-of", str(forgot), "--json"),
    ):
        r = run_cli("--memory-dir", str(memory_path), *command)
        assert r.code == 0, (command, r.err)
    assert scan(memory_path, NEEDLES, skip=["ledger.db", "ledger.db-wal"]) == []
