"""The log: event models, the append-only store, the hash chain, the clock.

`ledger` imports nothing of `projections`, `agent` or `analytics`.
"""
from memledger.ledger.errors import LedgerError
from memledger.ledger.events import EVENT_TYPES, NewEvent, RecordedEvent, event
from memledger.ledger.location import open_store

__all__ = ["EVENT_TYPES", "LedgerError", "NewEvent", "RecordedEvent", "event", "open_store"]
