"""What every command needs to find memory: the memory directory and the store URL."""
from __future__ import annotations

from collections.abc import Callable, Sequence
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memledger.ledger.errors import LedgerError, NoLedger
from memledger.ledger.events import NewEvent, RecordedEvent
from memledger.ledger.location import LEDGER_FILE, PROJECTIONS_FILE, display_url, memory_dir, open_store

#: appends observations (and, above `ledger`, the policy decisions they cause)
Writer = Callable[[Any, Sequence[NewEvent]], list[RecordedEvent]]


def raw_writer(store: Any, events: Sequence[NewEvent]) -> list[RecordedEvent]:
    return store.append(events)


class NoMemory(LedgerError):
    """A command that only reads was pointed at a place that holds no ledger (a typo, usually)."""


@dataclass
class Settings:
    """`reads_only`: the command only reads memory, so a missing ledger is an error (`no memory at
    DIR`) and nothing is created, where a command that writes creates the directory and ledger."""

    memory: str | None = None
    store_url: str | None = None
    writer: Writer = raw_writer
    reads_only: bool = False
    _store: Any = field(default=None, repr=False)

    @property
    def dir(self) -> Path:
        if self.reads_only:
            self.store()  # no ledger: NoMemory before anything is created (PostgreSQL: the dir holds projections.db)
        return memory_dir(self.memory)

    @property
    def ledger_path(self) -> Path:
        return self.dir / LEDGER_FILE

    @property
    def projections_path(self) -> Path:
        return self.dir / PROJECTIONS_FILE

    def store(self, create: bool = True) -> Any:
        if self._store is None:
            create = create and not self.reads_only
            try:
                self._store = open_store(self.memory, self.store_url, create=create)
            except NoLedger:
                raise NoMemory(f"no memory at {self.where()}") from None
        return self._store

    def where(self) -> str:
        """The memory a user named: the store URL (password hidden) or the memory directory."""
        url = self.store_url or os.environ.get("MEMLEDGER_STORE")
        if url:
            return display_url(url)
        return str(memory_dir(self.memory, create=False))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
