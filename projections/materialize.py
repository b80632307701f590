"""projections.db: materialized projection state, checkpoints, snapshots (stage 1: fold only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from projections.policy import DEFAULT_POLICY, Policy
from projections.state import MemoryState, fold


def resolve_seq(store: Any, at: int | str) -> int:
    """A seq, or an ISO time meaning recorded time (what the ledger knew then)."""
    if isinstance(at, int):
        return max(0, at)
    text = str(at).strip()
    if text.isdigit():
        return int(text)
    try:
        return int(store.seq_at_time(text))
    except ValueError as exc:
        raise LedgerError(f"as-of {text[:40]!r}: expected a seq or an ISO time") from exc


def load_state(store: Any, projections_path: Path | None, policy: Policy = DEFAULT_POLICY,
               as_of: int | str | None = None) -> MemoryState:
    to_seq = resolve_seq(store, as_of) if as_of is not None else None
    return fold(MemoryState.empty(), store.read(1, to_seq), policy)
