"""The relations of `memtape analytics memory-effect` that Python computes: the memory every model
call read and every decision, by analytics/memory_use.py's rule over the mirror's events (so a
forgotten subject is left out as everywhere in analytics).

- `memory_reads`: one row per memory item one call read (run_id, step, source, tokens, used);
- `memory_decisions`: one row per decided step (run_id, step, decided_by, used_memory).

Usage::

    register(con, policy)     # then: SELECT source, sum(tokens) FROM memory_reads GROUP BY 1
"""

from __future__ import annotations

import duckdb

from memtape.analytics.memory_use import TYPES, reads
from memtape.analytics.mirror import arrow_table, mirrored_events
from memtape.projections.parameters import Thresholds

READS = "memory_reads"
DECISIONS = "memory_decisions"
_READ_COLUMNS = {"run_id": "string", "step": "int64", "source": "string", "tokens": "int64", "used": "bool"}
_DECISION_COLUMNS = {"run_id": "string", "step": "int64", "decided_by": "string", "used_memory": "bool"}


def register(con: duckdb.DuckDBPyConnection, policy: Thresholds) -> None:
    """Both relations on `con` (a mirror connection); the rule needs no memory policy."""
    got, decisions = reads(mirrored_events(con, TYPES))
    con.register(
        READS, arrow_table(_READ_COLUMNS, _READ_COLUMNS.values(), [[getattr(r, c) for r in got] for c in _READ_COLUMNS])
    )
    con.register(
        DECISIONS,
        arrow_table(
            _DECISION_COLUMNS,
            _DECISION_COLUMNS.values(),
            [[getattr(d, c) for d in decisions] for c in _DECISION_COLUMNS],
        ),
    )
