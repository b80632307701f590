"""Moving a ledger between stores (SQLite <-> PostgreSQL) with its hash chain intact.

Rows are copied verbatim and in order (seq, ids, both clocks, payload text,
prev_hash, hash), so the copy is the same ledger, not a re-recording: its
`verify()` walks the identical chain. Every row's link and hash are checked
on the way (a broken source is refused, not laundered into a fresh chain),
the whole copy is one write transaction on the target (all or nothing), and
the target is verified at the end.

Usage::

    result = copy_ledger("sqlite:///.agent-memory/ledger.db", "postgresql://db.internal/memory")
    print(result.count, result.head_hash)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memtape.ledger.errors import ChainBroken, LedgerError
from memtape.ledger.location import open_store
from memtape.ledger.store import GENESIS_HASH, ChainCheck, Row, Store
from memtape.ledger.urls import display_url

#: called with (copied so far, total to copy)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class CopyResult:
    count: int
    head_hash: str
    source: str
    target: str


def copy_ledger(from_url: str, to_url: str, *, chunk: int = 2000, on_progress: Progress | None = None) -> CopyResult:
    """Copy every event of `from_url` into the empty ledger at `to_url`, then verify the target."""
    source = open_store(url=from_url, create=False)
    try:
        target = open_store(url=to_url)
        try:
            return copy_events(source, target, chunk=chunk, on_progress=on_progress)
        finally:
            target.close()
    finally:
        source.close()


def copy_events(
    source: Store, target: Store, until: int | None = None, *, chunk: int = 2000, on_progress: Progress | None = None
) -> CopyResult:
    """Copy events 1..`until` (all by default) of an open store into an open, empty one, checking
    every link on the way, in one transaction on the target; then verify the target.

    `memtape copy` moves whole ledgers with it; `memtape fork` and per-run memory scopes in a
    forked directory copy a prefix."""
    head = source.head()  # a snapshot: events appended to the source meanwhile are not copied
    total = head if until is None else max(0, min(until, head))
    chain = ChainCheck()  # whether or not the source verifies its own reads
    with target.atomic() as tx:
        existing = tx.head()
        if existing:
            raise LedgerError(
                f"{display_url(target.url)}: target already holds {existing} events; copy needs an empty ledger"
            )
        rows: list[Row] = []
        try:
            for ev in source.read(1, total, batch=chunk) if total else ():
                row = (
                    ev.seq,
                    ev.id,
                    ev.stream,
                    ev.stream_version,
                    ev.type,
                    ev.schema_version,
                    ev.recorded_at,
                    ev.occurred_at,
                    ev.run_id,
                    ev.step,
                    ev.domain,
                    ev.payload_json,
                    ev.prev_hash,
                    ev.hash,
                )
                chain.check(row)
                rows.append(row)
                if len(rows) >= chunk:
                    tx.copy_rows(rows)
                    rows.clear()
                    if on_progress:
                        on_progress(chain.seq, total)
            chain.finish()
        except ChainBroken as exc:
            raise LedgerError(
                f"{display_url(source.url)}: source chain broken at seq {exc.seq} ({exc.reason}); nothing copied"
            ) from None
        if rows:
            tx.copy_rows(rows)
        seq, prev = chain.seq, chain.hash or GENESIS_HASH
        if seq != total:
            raise LedgerError(f"{display_url(source.url)}: expected {total} events, read {seq}; nothing copied")
    if on_progress:
        on_progress(seq, total)
    result = target.verify()
    if not result.ok or result.count != total:
        raise LedgerError(
            f"{display_url(target.url)}: copy does not verify (seq {result.first_bad_seq}: {result.reason})"
        )
    return CopyResult(total, prev, source.url, target.url)
