"""DuckDB audit queries over a synthetic agent ledger vs the same queries answered by SQLite itself.

`memledger analytics` answers audit questions with DuckDB over the SQLite ledger; this bench
says whether that pays, against the obvious alternative of asking SQLite directly
(`json_extract` on the payload column). How DuckDB reads the ledger matters, so both ways
are measured:

- native: `analytics.duck.connect` ATTACHes ledger.db read-only through the offline
  sqlite_scanner and copies the events (forgotten subjects masked) into a native DuckDB
  table `ev` once per connection; every typed view and answer then reads that table. The
  copy is timed as its own figure, and a cold session (copy + the four queries, what one
  `memledger analytics` call pays) beside SQLite's four queries;
- scanner: the same views with `ev` a view over the attached file, so every query reads
  ledger.db through the scanner again.

Queries: the promotions funnel (`analytics/sql/promotions.sql`), the recall hit rate
(`recall.sql`), run outcomes by domain (`runs.sql`), and an event count by type and day.
Each DuckDB answer is checked equal to SQLite's before any time is reported. The SQLite
side masks no forgotten subjects (the bench refuses a ledger that has any) and reads the
`lesson_id` in the payload (SQLite has no sha256 for the views' fallback; every
synthetic lesson event carries its id). SQLite gets its best plan: the ledger's indexes
((type, seq), (run_id, seq)) where they help, a straight table scan where they do not.

Usage::

    python bench/duck_queries.py           # 1,000,000 events
    python bench/duck_queries.py --quick   # 50,000 events
"""
from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb

from bench import Figure, show, timed
from bench.projections import build_ledger
from memledger.analytics.answers import sections
from memledger.analytics.duck import ATTACHERS, connect, sql_text

BENCH = "duck_queries"
#: as analytics.duck: DuckDB never downloads an extension
DUCK_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

SQLITE_FUNNEL = """
WITH born AS (
    SELECT lesson_id FROM (
        SELECT json_extract(payload, '$.lesson_id') AS lesson_id,
               row_number() OVER (PARTITION BY json_extract(payload, '$.lesson_id') ORDER BY seq) AS rn
        FROM events WHERE type = 'lesson_recorded')
    WHERE rn = 1
), stages AS (
    SELECT 1 AS ord, 'recorded' AS stage, count(*) AS lessons FROM born
    UNION ALL
    SELECT 2, 'deduplicated', count(*) FROM born WHERE lesson_id IN (
        SELECT json_extract(payload, '$.lesson_id') FROM events WHERE type = 'lesson_deduplicated')
    UNION ALL
    SELECT 3, 'promoted', count(*) FROM born WHERE lesson_id IN (
        SELECT json_extract(payload, '$.lesson_id') FROM events WHERE type = 'lesson_promoted')
)
SELECT stage, lessons,
       round(lessons * 1.0 / nullif((SELECT lessons FROM stages WHERE ord = 1), 0), 4) AS share_of_recorded
FROM stages ORDER BY ord
"""

SQLITE_HIT_RATE = """
WITH r AS (
    SELECT run_id, CASE type WHEN 'error_recall' THEN 'error' ELSE 'domain' END AS kind,
           CASE WHEN coalesce(json_array_length(payload, '$.lesson_ids'), 0) = 0
                THEN CAST(json_extract(payload, '$.matched') AS INTEGER)
                ELSE json_array_length(payload, '$.lesson_ids') END AS n
    FROM events WHERE type IN ('error_recall', 'domain_recall')
)
SELECT kind, count(*) AS recalls, count(*) FILTER (WHERE n > 0) AS hits,
       round(count(*) FILTER (WHERE n > 0) * 1.0 / nullif(count(*), 0), 4) AS hit_rate,
       sum(n) AS lessons_returned, count(DISTINCT run_id) AS runs
FROM r GROUP BY kind ORDER BY kind DESC
"""

#: each run's last run_completed looked up through the (run_id, seq) index: the literal translation
#: (window over run_completed, LEFT JOIN) makes SQLite nested-loop the join, quadratic in runs
SQLITE_OUTCOMES = """
WITH r AS MATERIALIZED (
    SELECT s.domain, (SELECT c.payload FROM events c WHERE c.run_id = s.run_id AND c.type = 'run_completed'
                      ORDER BY c.seq DESC LIMIT 1) AS done
    FROM events s WHERE s.type = 'run_started'
), d AS (
    SELECT domain, done IS NOT NULL AS completed, json_extract(done, '$.success') AS success,
           CAST(json_extract(done, '$.turns') AS INTEGER) AS turns
    FROM r
)
SELECT coalesce(domain, '-') AS domain, count(*) AS runs,
       count(*) FILTER (WHERE completed AND success) AS passed,
       count(*) FILTER (WHERE completed AND NOT success) AS failed,
       count(*) FILTER (WHERE NOT completed) AS running,
       round(count(*) FILTER (WHERE completed AND success) * 1.0
             / nullif(count(*) FILTER (WHERE completed), 0), 4) AS pass_rate,
       round(avg(turns), 2) AS avg_turns
FROM d GROUP BY 1 ORDER BY 1
"""

DUCK_BY_DAY = "SELECT type, CAST(occurred_ts AS DATE) AS day, count(*) AS events FROM ev GROUP BY ALL ORDER BY 1, 2"
#: NOT INDEXED: left alone, SQLite walks the (type, seq) index for the GROUP BY and fetches every
#: row out of order, about twice as slow as a straight scan of the table
SQLITE_BY_DAY = ("SELECT type, date(occurred_at) AS day, count(*) AS events FROM events NOT INDEXED "
                 "GROUP BY 1, 2 ORDER BY 1, 2")


@dataclass(frozen=True)
class Query:
    """One audit question, asked of DuckDB (the project's SQL over the typed views) and of SQLite."""

    name: str
    duck: str
    sqlite: str


def queries() -> tuple[Query, ...]:
    """The timed questions; DuckDB's SQL is read from analytics/sql/ so the bench follows the shipped answers."""
    return (
        Query("promotions funnel", sections("promotions")["funnel"], SQLITE_FUNNEL),
        Query("recall hit rate", sections("recall")["hit_rate"], SQLITE_HIT_RATE),
        Query("run outcomes by domain", sections("runs")["outcomes"], SQLITE_OUTCOMES),
        Query("events by type and day", DUCK_BY_DAY, SQLITE_BY_DAY),
    )


# ---- the three ways of asking --------------------------------------------------------

def duck_scanner(path: Path) -> duckdb.DuckDBPyConnection:
    """The project's views with `ev` a view, not a table: every query reads ledger.db through the scanner."""
    views = sql_text("views")
    if views.count("CREATE TABLE ev AS") != 1:
        raise RuntimeError("analytics/sql/views.sql no longer defines `ev` as one table; update this bench")
    con = duckdb.connect(config=DUCK_CONFIG)
    events = ATTACHERS["sqlite"](con, str(path))
    con.execute(f"CREATE VIEW ev_raw AS SELECT * FROM {events}")
    con.execute(views.replace("CREATE TABLE ev AS", "CREATE VIEW ev AS"))
    return con


def sqlite_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _cell(v: Any) -> Any:
    """One value as both engines can agree on it (SQLite has no bool, date or decimal)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def rows(cur: Any) -> list[tuple[Any, ...]]:
    return [tuple(_cell(v) for v in r) for r in cur.fetchall()]


def answers(path: Path) -> dict[str, dict[str, list[tuple[Any, ...]]]]:
    """Every query's rows from DuckDB native, DuckDB through the scanner and SQLite; raises unless all equal."""
    native, scanner, lite = connect(path), duck_scanner(path), sqlite_ro(path)
    try:
        forgotten = lite.execute("SELECT count(*) FROM events WHERE type = 'subject_forgotten'").fetchone()[0]
        if forgotten:
            raise RuntimeError(f"{path}: {forgotten} forget events; the SQLite queries do not mask forgotten subjects")
        out: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
        for q in queries():
            got = {"duckdb": rows(native.execute(q.duck)), "scanner": rows(scanner.execute(q.duck)),
                   "sqlite": rows(lite.execute(q.sqlite))}
            if not got["duckdb"] == got["scanner"] == got["sqlite"]:
                raise AssertionError(f"{q.name}: answers differ\n" + "\n".join(f"{k}: {v[:5]}" for k, v in got.items()))
            out[q.name] = got
        return out
    finally:
        native.close()
        scanner.close()
        lite.close()


# ---- timing --------------------------------------------------------------------------

def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time of `repeat` calls, in milliseconds."""
    return statistics.median(timed(fn) for _ in range(repeat)) * 1e3


def measure(path: Path, repeat: int) -> list[Figure]:
    got = answers(path)  # checked equal first; also warms the OS page cache for every side
    head = sum(r[2] for r in got["events by type and day"]["sqlite"])
    native, scanner, lite = connect(path), duck_scanner(path), sqlite_ro(path)
    figs: list[Figure] = []
    sqlite_total = 0.0
    try:
        for q in queries():
            t_lite = median_ms(lambda: lite.execute(q.sqlite).fetchall(), repeat)
            t_native = median_ms(lambda: native.execute(q.duck).fetchall(), repeat)
            t_scan = median_ms(lambda: scanner.execute(q.duck).fetchall(), repeat)
            sqlite_total += t_lite
            rows_note = f"{len(got[q.name]['sqlite']):,} rows, equal in all three"
            figs.append(Figure(BENCH, f"{q.name}: DuckDB native", t_native, "ms", "SQLite", t_lite,
                               higher_is_better=False, note=f"{head:,} events; {rows_note}; load excluded"))
            figs.append(Figure(BENCH, f"{q.name}: DuckDB scanner", t_scan, "ms", "SQLite",
                               t_lite, higher_is_better=False,
                               note=f"{head:,} events; {rows_note}; ledger.db re-read (and re-masked) per query"))
    finally:
        native.close()
        scanner.close()
        lite.close()
    t_load = median_ms(lambda: connect(path).close(), repeat)
    figs.append(Figure(BENCH, "load events into DuckDB (connect)", t_load, "ms",
                       note=f"{head:,} events through sqlite_scanner, once per connection"))

    def cold() -> None:
        con = connect(path)
        for q in queries():
            con.execute(q.duck).fetchall()
        con.close()

    figs.append(Figure(BENCH, "cold: connect + 4 queries", median_ms(cold, repeat), "ms",
                       "SQLite, 4 queries", sqlite_total, higher_is_better=False,
                       note="what one `memledger analytics` process pays; baseline = sum of the SQLite medians"))
    return figs


def run(quick: bool = False, events: int | None = None, repeat: int | None = None) -> list[Figure]:
    """Build a synthetic ledger (1,000,000 events; 50,000 when quick) and measure every query."""
    n = events or (50_000 if quick else 1_000_000)
    with tempfile.TemporaryDirectory(prefix="memledger-bench-") as d:
        path = Path(d) / "ledger.db"
        t0 = time.perf_counter()
        build_ledger(path, n).close()
        print(f"ledger of {n:,} events built in {time.perf_counter() - t0:.1f} s "
              f"({path.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
        return measure(path, repeat or 5)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=None,
                    help="events in the ledger (default 1,000,000; 50,000 with --quick)")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per figure, the median reported (default 5)")
    ap.add_argument("--quick", action="store_true", help="50,000 events")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    figs = run(quick=args.quick, events=args.events, repeat=args.repeat)
    console = show(f"DuckDB vs SQLite audit queries (median of {args.repeat or 5})", figs)
    console.print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
