"""The analytics SQL as text: `sql/<name>.sql` files of named queries (`-- name: SECTION`).

Comment lines inside a query tell tables for people (the command line's tables,
the HTML report) how to show it: `-- show: col, col` the columns worth reading
(json, csv and parquet keep every column) and `-- empty: Sentence.` why the
table may have no rows.

Kept apart from the DuckDB connection so that the command line can list an
answer's section names without loading DuckDB.
"""

from __future__ import annotations

import re
from pathlib import Path

SQL_DIR = Path(__file__).with_name("sql")
_NAME = re.compile(r"^--\s*name:\s*([a-z_]+)\s*$", re.M)

#: analysis name -> (sql file, title)
ANALYSES: dict[str, tuple[str, str]] = {
    "promotions": ("promotions", "Lesson promotions: recorded → deduplicated → promoted"),
    "decay": ("decay", "Fact confidence over time: confirmations, contradictions, pruning"),
    "recall": ("recall", "Recall: hit rate of error and domain recall, lessons never recalled"),
    "memory-effect": ("memory_effect", "Memory effect: same goals with memory off vs on, cold vs warm"),
    "runs": ("runs", "Runs: sessions, lineage, outcomes"),
    "credit": ("credit", "Credit: what each memory item was worth by counterfactual (memtape credit)"),
}


def sql_text(name: str) -> str:
    """The text of `analytics/sql/<name>.sql` (SQL lives beside the Python that runs it)."""
    return (SQL_DIR / f"{name}.sql").read_text()


def sections(name: str) -> dict[str, str]:
    """The named queries of `sql/<name>.sql`, in file order."""
    text = sql_text(name)
    marks = list(_NAME.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[m.group(1)] = text[m.end() : end].strip().rstrip(";")
    return out
