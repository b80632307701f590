"""`fork`: a new ledger holding the events up to a seq, chain intact, for A/B runs.

Rows are copied verbatim (same seq, ids, times, payload text, hashes), so the
fork verifies with `memledger verify` and its first SEQ events are the
source's, byte for byte. Agents then append to the fork independently.

Usage::

    fork_ledger(store, until=120, out_dir=Path("ab/memory-b"))   # -> ForkResult
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.clock import system_clock
from ledger.errors import LedgerError
from ledger.location import LEDGER_FILE
from ledger.store import COLUMNS, SqliteStore

_INSERT = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


@dataclass(frozen=True)
class ForkResult:
    path: Path
    count: int
    head: int
    head_hash: str
    verified: bool


def resolve_seq(store: Any, until: int | str | None) -> int:
    """A seq from an int, a digit string or an ISO time (the last seq recorded by then)."""
    if until is None:
        return int(store.head())
    if isinstance(until, int):
        seq = until
    elif str(until).strip().isdigit():
        seq = int(str(until).strip())
    else:
        try:
            seq = store.seq_at_time(str(until))
        except ValueError as exc:
            raise LedgerError(f"--until {until!r}: expected a seq or an ISO time") from exc
    if seq < 0:
        raise LedgerError("--until must be >= 0")
    return min(seq, int(store.head()))


def fork_ledger(store: Any, until: int | str | None, out_dir: str | Path, batch: int = 5000) -> ForkResult:
    """Copy events 1..until of `store` into a new SQLite ledger at `out_dir/ledger.db`."""
    seq = resolve_seq(store, until)
    out = Path(out_dir)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = out / LEDGER_FILE
    if target.exists() and target.stat().st_size > 0:
        raise LedgerError(f"{target}: a ledger already exists there; fork into an empty directory")
    dest = SqliteStore.open(target, clock=getattr(store, "clock", None) or system_clock)
    count, head_hash = 0, ""
    try:
        rows: list[tuple[Any, ...]] = []
        dest.conn.execute("BEGIN IMMEDIATE")
        try:
            for ev in store.read(to_seq=seq, batch=batch) if seq > 0 else ():
                rows.append((ev.seq, ev.id, ev.stream, ev.stream_version, ev.type, ev.schema_version,
                             ev.recorded_at, ev.occurred_at, ev.run_id, ev.step, ev.domain, ev.payload_json,
                             ev.prev_hash, ev.hash))
                head_hash = ev.hash
                if len(rows) >= batch:
                    dest.conn.executemany(_INSERT, rows)
                    count += len(rows)
                    rows = []
            if rows:
                dest.conn.executemany(_INSERT, rows)
                count += len(rows)
            dest.conn.execute("COMMIT")
        except BaseException:
            dest.conn.execute("ROLLBACK")
            raise
        result = dest.verify()
    finally:
        dest.close()
    if not result.ok:
        raise LedgerError(f"fork does not verify at seq {result.first_bad_seq}: {result.reason}")
    return ForkResult(target, count, seq if count else 0, head_hash, result.ok)
