"""The analytics answers: each one runs the named sections of one `sql/<name>.sql` file.

A `.sql` file holds several queries, each introduced by `-- name: SECTION`;
the first is the answer's main table. Queries may use `$initial` and `$rate`
(the policy's fact confidence parameters), bound from a `Policy`.

Usage::

    report = analyse("promotions", store)     # -> output.Report
    report.sections["funnel"].records()
"""
from __future__ import annotations

import re
from typing import Any

import duckdb

from memledger.analytics.duck import connect, sql_text
from memledger.analytics.output import Report, Table
from memledger.ledger.errors import LedgerError

_NAME = re.compile(r"^--\s*name:\s*([a-z_]+)\s*$", re.M)
_PARAM = re.compile(r"\$([a-z_]+)")

#: analysis name -> (sql file, title)
ANALYSES: dict[str, tuple[str, str]] = {
    "promotions": ("promotions", "Lesson promotions: recorded → deduplicated → promoted"),
    "decay": ("decay", "Fact confidence over time: confirmations, contradictions, pruning"),
    "recall": ("recall", "Recall: hit rate of error and domain recall, lessons never recalled"),
    "memory-effect": ("memory_effect", "Memory effect: same goals with memory off vs on, cold vs warm"),
    "runs": ("runs", "Runs: sessions, lineage, outcomes"),
}


def sections(name: str) -> dict[str, str]:
    """The named queries of `sql/<name>.sql`, in file order."""
    text = sql_text(name)
    marks = list(_NAME.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[m.group(1)] = text[m.end():end].strip().rstrip(";")
    return out


def policy_params(policy: Any | None = None) -> dict[str, Any]:
    if policy is None:
        try:
            from memledger.projections.policy import Policy
            policy = Policy()
        except ImportError:
            return {"initial": 0.6, "rate": 0.2}
    return {"initial": float(policy.fact_initial_confidence), "rate": float(policy.fact_confirm_rate)}


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None,
              title: str = "") -> Table:
    """Run one query; bind only the parameters it names."""
    used = {k: v for k, v in (params or {}).items() if k in set(_PARAM.findall(sql))}
    try:
        cur = con.execute(sql, used) if used else con.execute(sql)
        cols = [d[0] for d in cur.description]
        return Table(cols, [tuple(r) for r in cur.fetchall()], title)
    except duckdb.Error as exc:
        raise LedgerError(f"analytics query failed: {str(exc).splitlines()[0]}") from exc


def analyse(name: str, source: Any, policy: Any | None = None,
            con: duckdb.DuckDBPyConnection | None = None) -> Report:
    """Answer one analysis (`promotions`, `decay`, `recall`, `memory-effect`, `runs`) over a ledger."""
    if name not in ANALYSES:
        raise LedgerError(f"unknown analysis {name!r}; choose one of: {', '.join(ANALYSES)}")
    file, title = ANALYSES[name]
    own = con is None
    con = con or connect(source)
    try:
        params = policy_params(policy)
        return Report(title, {sec: run_query(con, sql, params, sec.replace("_", " "))
                              for sec, sql in sections(file).items()})
    finally:
        if own:
            con.close()


def analyse_all(source: Any, policy: Any | None = None) -> dict[str, Report]:
    """Every analysis over one DuckDB connection (the report uses this)."""
    con = connect(source)
    try:
        return {name: analyse(name, source, policy, con) for name in ANALYSES}
    finally:
        con.close()

