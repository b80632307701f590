"""The analytics answers: each one runs the named sections of one `sql/<name>.sql` file.

A `.sql` file holds several queries, each introduced by `-- name: SECTION`;
the first is the answer's main table. A relation that needs a rule of memory
is computed in Python and registered on the connection first (`COMPUTED`:
decay's `fact_walk` is the knowledge fold, under the answer's policy;
memory-effect's `memory_reads` and `memory_decisions` are what each model call
read of memory and which decisions used it, analytics/memory_use.py).

Usage::

    report = analyse("promotions", store)     # -> output.Report
    report.sections["funnel"].records()
"""

from __future__ import annotations

import re
from collections.abc import Callable

import duckdb

from memtape.analytics import decay, memory_reads
from memtape.analytics.mirror import connect
from memtape.analytics.queries import ANALYSES, sections
from memtape.analytics.tabular import Report, Table
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import Store
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds

_SHOW = re.compile(r"^--\s*show:\s*(.+)$", re.M)
_EMPTY = re.compile(r"^--\s*empty:\s*(.+)$", re.M)
#: analysis -> registers the relations its SQL reads that Python computes
COMPUTED: dict[str, Callable[[duckdb.DuckDBPyConnection, Thresholds], None]] = {
    "decay": decay.register,
    "memory-effect": memory_reads.register,
}


def run_query(con: duckdb.DuckDBPyConnection, sql: str, title: str = "") -> Table:
    """Run one query."""
    try:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        show, empty = _SHOW.search(sql), _EMPTY.search(sql)
        return Table(
            cols,
            [tuple(r) for r in cur.fetchall()],
            title,
            [c.strip() for c in show.group(1).split(",")] if show else None,
            empty.group(1).strip() if empty else "",
        )
    except duckdb.Error as exc:
        raise LedgerError(f"analytics query failed: {str(exc).splitlines()[0]}") from exc


def analyse(
    name: str, source: Store, policy: Thresholds | None = None, con: duckdb.DuckDBPyConnection | None = None
) -> Report:
    """Answer one analysis (`promotions`, `decay`, `recall`, `memory-effect`, `runs`) over a ledger,
    from its analytics mirror (caught up first)."""
    if name not in ANALYSES:
        raise LedgerError(f"unknown analysis {name!r}; choose one of: {', '.join(ANALYSES)}")
    file, title = ANALYSES[name]
    own = con is None
    con = con or connect(source)
    try:
        if name in COMPUTED:
            COMPUTED[name](con, policy or DEFAULT_POLICY)
        return Report(title, {sec: run_query(con, sql, sec.replace("_", " ")) for sec, sql in sections(file).items()})
    finally:
        if own:
            con.close()


def analyse_all(source: Store, policy: Thresholds | None = None) -> dict[str, Report]:
    """Every analysis over one DuckDB connection (the report uses this)."""
    con = connect(source)
    try:
        return {name: analyse(name, source, policy, con) for name in ANALYSES}
    finally:
        con.close()
