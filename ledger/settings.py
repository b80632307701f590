"""What every command needs to find memory: the memory directory and the store URL."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memtape.ledger.anchor import HeadFile, Keeper, head_path, refuse_if_behind, remember_head
from memtape.ledger.errors import LedgerError, NoLedger
from memtape.ledger.location import LEDGER_FILE, memory_dir, open_store, projections_path
from memtape.ledger.store import Store
from memtape.ledger.urls import display_url

#: another place that remembers the head, given the settings (above `ledger`: projections.db)
KeeperFactory = Callable[["Settings"], Keeper]


class NoMemory(LedgerError):
    """A command that only reads was pointed at a place that holds no ledger (a typo, usually)."""


@dataclass
class Settings:
    """`reads_only`: the command only reads memory, so a missing ledger is an error (`no memory at
    DIR`) and nothing is created, where a command that writes creates the directory and ledger."""

    memory: str | None = None
    store_url: str | None = None
    reads_only: bool = False
    #: the seed lessons a new memory starts with (`--seeds`: default, none, browser-use or a JSON
    #: file's path; None: default), read by the commands that open memory for runs
    seeds: str | None = None
    #: forensics (`--allow-broken`): reads are not checked against the chain or the remembered
    #: head, projections.db is neither read nor written, and no head is remembered
    allow_broken: bool = False
    keeper_factories: list[KeeperFactory] = field(default_factory=list)
    _store: Store | None = field(default=None, repr=False)

    @property
    def dir(self) -> Path:
        if self.reads_only:
            self.store()  # no ledger: NoMemory before anything is created (PostgreSQL: the dir holds projections.db)
        return memory_dir(self.memory)

    @property
    def ledger_path(self) -> Path:
        return self.dir / LEDGER_FILE

    @property
    def projections_path(self) -> Path | None:
        """projections.db, where `ledger.location.projections_path` puts it for this store (None
        under --allow-broken: memory is folded from the log instead)."""
        return projections_path(self.store())

    def keepers(self, store: Store) -> list[Keeper]:
        """Every place this memory remembers the head it saw."""
        return [
            HeadFile(head_path(store)),
            *(factory(self) for factory in self.keeper_factories if self.projections_path is not None),
        ]

    def store(self, create: bool = True, check_head: bool = True) -> Store:
        """The ledger, opened once; refused in one line when it no longer holds a head this memory
        saw (`check_head=False` for `verify`, which reports it instead)."""
        if self._store is None:
            create = create and not self.reads_only
            try:
                store = open_store(
                    memory_dir(self.memory, create=False),
                    self.store_url,
                    create=create,
                    verify_reads=not self.allow_broken,
                )
            except NoLedger:
                raise NoMemory(f"no memory at {self.where()}") from None
            self._store = store  # before the check: the keepers find the memory directory through it
            if check_head and not self.allow_broken:
                try:
                    refuse_if_behind(store, self.keepers(store))
                except BaseException:
                    self._store = None
                    store.close()
                    raise
        return self._store

    def where(self) -> str:
        """The memory a user named: the store URL (password hidden) or the memory directory."""
        url = self.store_url or os.environ.get("MEMTAPE_STORE")
        if url:
            return display_url(url)
        return str(memory_dir(self.memory, create=False))

    def close(self) -> None:
        """Remember the head seen (unless it is not the one remembered: the next opening names that)."""
        if self._store is not None:
            try:
                if not self.allow_broken:
                    remember_head(self._store, self.keepers(self._store))
            finally:
                self._store.close()
                self._store = None
