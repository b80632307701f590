"""The confidence walk of every fact, for `memtape analytics decay`: the knowledge fold itself.

The walk is not re-derived in SQL: the mirror's fact events (as analytics may show
them) are folded by `projections.folds.knowledge.apply` under the answer's policy, and each
event that changed a fact gives one row with the fact as the fold left it. What a row
says is read off the fold: a fact that was not current and now is was `observed`; one
that changed under another observation was `confirmed`, under a contradiction
`contradicted`; one that stopped being current was `pruned` (its confidence the last
it had). The SQL of sql/decay.sql then only counts and orders these rows, registered
on the connection as the relation `fact_walk`.

Usage::

    register(con, policy)     # then: SELECT * FROM fact_walk ORDER BY seq
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb

from memtape.analytics.forget_filter import fact_changes
from memtape.analytics.mirror import arrow_table, mirrored_events
from memtape.ledger.envelope import RecordedEvent
from memtape.projections.folds import knowledge
from memtape.projections.parameters import Thresholds

RELATION = "fact_walk"
#: the relation's columns and their Arrow types
_COLUMNS = {
    "seq": "int64",
    "occurred_at": "string",
    "domain": "string",
    "fact_type": "string",
    "key": "string",
    "value": "string",
    "kind": "string",
    "confidence": "double",
    "alive": "bool",
}
#: a current fact changed by an event of this type was ...
_CHANGED = {"fact_observed": "confirmed", "fact_contradicted": "contradicted"}


def walk(events: Iterator[RecordedEvent], policy: Thresholds) -> Iterator[tuple[Any, ...]]:
    """One row per (event, fact it changed), in `_COLUMNS` order, as the knowledge fold changes them."""
    state = knowledge.empty()
    for ev in events:
        made, removed = fact_changes(state, ev, policy)
        changed = [(f, "observed" if new else _CHANGED.get(ev.type, ev.type), True) for _, f, new in made]
        changed += [(f, "pruned", False) for f in removed.values()]
        for f, kind, alive in sorted(changed, key=lambda c: (c[0].domain, c[0].fact_type, c[0].key, c[0].value)):
            yield ev.seq, ev.occurred_at, f.domain, f.fact_type, f.key, f.value, kind, f.confidence, alive


def register(con: duckdb.DuckDBPyConnection, policy: Thresholds) -> None:
    """The relation `fact_walk` on `con` (a mirror connection), for the policy's fold."""
    cols: list[list[Any]] = [[] for _ in _COLUMNS]
    for row in walk(mirrored_events(con, knowledge.TYPES), policy):
        for col, value in zip(cols, row):
            col.append(value)
    con.register(RELATION, arrow_table(_COLUMNS, _COLUMNS.values(), cols))
