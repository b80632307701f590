"""`fork`: a new ledger holding the events up to a seq, chain intact, for A/B runs.

Rows are copied verbatim (same seq, ids, times, payload text, hashes), so the
fork verifies with `memtape verify` and its first SEQ events are the
source's, byte for byte. Agents then append to the fork independently.

The fork also records its memory isolation (seed 000) in `fork.json`, which
`memtape run` in that directory follows unless told otherwise: `shared`
runs append to the fork, so later runs see what earlier ones learned;
`per-run` runs each start from the forked memory in a scope of their own
(`runs/<run_id>/`), so every arm of an experiment sees the same memory and
nothing leaks between runs.

Usage::

    fork_ledger(store, until=120, out_dir=Path("ab/memory-b"), isolation="per-run")   # -> ForkResult
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memtape.ledger.copy import copy_events
from memtape.ledger.errors import LedgerError
from memtape.ledger.location import ISOLATIONS, LEDGER_FILE, memory_dir, write_fork_info
from memtape.ledger.store import SqliteStore, Store
from memtape.ledger.urls import display_url
from memtape.projections.cache.materialize import resolve_seq as seq_of


@dataclass(frozen=True)
class ForkResult:
    path: Path
    count: int
    head: int
    head_hash: str
    verified: bool
    isolation: str = "shared"


def resolve_seq(store: Store, until: int | str | None) -> int:
    """A seq from an int, a digit string or an ISO time (the last seq recorded by then), at most
    the head; None is the head."""
    head = int(store.head())
    if until is None:
        return head
    if isinstance(until, int) and until < 0:
        raise LedgerError(f"the fork point must be a seq >= 0, got {until}")
    return min(seq_of(store, until, "fork point"), head)


def fork_ledger(
    store: Store, until: int | str | None, out_dir: str | Path, isolation: str = "shared", batch: int = 5000
) -> ForkResult:
    """Copy events 1..until of `store` into a new SQLite ledger at `out_dir/ledger.db`."""
    if isolation not in ISOLATIONS:
        raise LedgerError(f"memory isolation must be one of {', '.join(ISOLATIONS)}, not {isolation!r}")
    seq = resolve_seq(store, until)
    out = memory_dir(out_dir)
    target = out / LEDGER_FILE
    if target.exists() and target.stat().st_size > 0:
        raise LedgerError(f"{target}: a ledger already exists there; fork into an empty directory")
    dest = SqliteStore.open(target, clock=store.clock)
    try:
        copied = copy_events(store, dest, seq, chunk=batch)
    finally:
        dest.close()
    source = display_url(store.url)
    write_fork_info(
        out, {"source": source, "until": copied.count, "head_hash": copied.head_hash, "memory_isolation": isolation}
    )
    return ForkResult(target, copied.count, copied.count, copied.head_hash if copied.count else "", True, isolation)
