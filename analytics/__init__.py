"""Analytics over the ledger: DuckDB views, audits, policy experiments, reports, live follow.

`analytics` reads `ledger` and `projections` and writes nothing but its own
outputs (reports, forked ledgers, projections.db through the materializer).
"""
