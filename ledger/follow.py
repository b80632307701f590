"""Following a ledger file as other processes append to it (watchfiles)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from memtape.ledger.envelope import RecordedEvent


def follow_file(
    path: Path,
    read_from: Callable[[int], Iterator[RecordedEvent]],
    from_seq: int = 1,
    stop: threading.Event | None = None,
    poll_ms: int = 1000,
) -> Iterator[RecordedEvent]:
    """Yield every event from `from_seq` on (`read_from(seq)` reads them), then each new one as it
    is committed to the file at `path` (or its write-ahead log), until `stop` is set."""
    import watchfiles  # only a follower needs it: it brings asyncio and anyio, too slow for every start

    next_seq = from_seq
    for ev in read_from(next_seq):
        yield ev
        next_seq = ev.seq + 1
    names = {path.name, f"{path.name}-wal"}
    for changes in watchfiles.watch(
        path.parent,
        stop_event=stop,
        rust_timeout=poll_ms,
        yield_on_timeout=True,
        watch_filter=lambda _c, p: Path(p).name in names,
        debounce=50,
        step=20,
    ):
        del changes
        for ev in read_from(next_seq):
            yield ev
            next_seq = ev.seq + 1
        if stop is not None and stop.is_set():
            return
