"""Following a SQLite ledger as other processes append to it (watchfiles)."""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from watchfiles import watch

from memledger.ledger.events import RecordedEvent


class LedgerFile(Protocol):
    """A ledger in one file that other processes append to (the SQLite store)."""

    path: Path

    def read(self, from_seq: int | None = None) -> Iterable[RecordedEvent]: ...


def follow(store: LedgerFile, from_seq: int = 1, stop: threading.Event | None = None,
           poll_ms: int = 1000) -> Iterator[RecordedEvent]:
    """Yield every event from `from_seq` on, then each new one as it is committed, until `stop` is set."""
    next_seq = from_seq
    for ev in store.read(from_seq=next_seq):
        yield ev
        next_seq = ev.seq + 1
    directory = Path(store.path).parent
    names = {store.path.name, f"{store.path.name}-wal"}
    for changes in watch(directory, stop_event=stop, rust_timeout=poll_ms, yield_on_timeout=True,
                         watch_filter=lambda _c, p: Path(p).name in names, debounce=50, step=20):
        del changes
        for ev in store.read(from_seq=next_seq):
            yield ev
            next_seq = ev.seq + 1
        if stop is not None and stop.is_set():
            return
