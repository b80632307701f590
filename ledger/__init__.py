"""The log: event models, the append-only store, the hash chain, the clock.

`ledger` imports nothing of `projections`, `agent` or `analytics`. The package itself imports
none of its modules, so `memtape.ledger.errors` (all the command line needs to start) loads
without the event models.
"""
