"""The log: event models, the append-only store, the hash chain, the clock.

`ledger` imports nothing of `projections`, `agent` or `analytics`.
"""
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import EVENT_TYPES, NewEvent, RecordedEvent, event
from memtape.ledger.location import open_store

__all__ = ["EVENT_TYPES", "LedgerError", "NewEvent", "RecordedEvent", "event", "open_store"]
