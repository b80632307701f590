"""What every command needs to find memory: the memory directory and the store URL."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memledger.ledger.events import NewEvent, RecordedEvent
from memledger.ledger.location import LEDGER_FILE, PROJECTIONS_FILE, memory_dir, open_store

#: appends observations (and, above `ledger`, the policy decisions they cause)
Writer = Callable[[Any, Sequence[NewEvent]], list[RecordedEvent]]


def raw_writer(store: Any, events: Sequence[NewEvent]) -> list[RecordedEvent]:
    return store.append(events)


@dataclass
class Settings:
    memory: str | None = None
    store_url: str | None = None
    writer: Writer = raw_writer
    _store: Any = field(default=None, repr=False)

    @property
    def dir(self) -> Path:
        return memory_dir(self.memory)

    @property
    def ledger_path(self) -> Path:
        return self.dir / LEDGER_FILE

    @property
    def projections_path(self) -> Path:
        return self.dir / PROJECTIONS_FILE

    def store(self, create: bool = True) -> Any:
        if self._store is None:
            self._store = open_store(self.memory, self.store_url, create=create)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
