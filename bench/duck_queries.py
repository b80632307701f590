"""DuckDB audit queries over a synthetic agent ledger: the analytics mirror vs SQLite itself.

`memtape analytics` answers audit questions with DuckDB over the analytics mirror
(`analytics.duckdb` beside projections.db: the events as analytics may show them and the
validity intervals, in DuckDB's own storage, caught up incrementally); this bench says
whether that pays, against the obvious alternative of asking SQLite directly
(`json_extract` on the payload column), and against reading ledger.db through DuckDB's
offline sqlite_scanner on every query (`analytics.duck.attach`, the raw log).

Figures: each query on the mirror and through the scanner beside SQLite; building the
mirror from nothing (projections.db already current), its file's size beside the ledger's,
and catching it up after 1% more events; and a cold `memtape analytics promotions` — a
new process, the mirror current — beside the old way, which copied the ledger into DuckDB
through the scanner in every process (and beside `memtape --version`, what starting the
command line alone costs).

Queries: the promotions funnel (`analytics/sql/promotions.sql`), the recall hit rate
(`recall.sql`), run outcomes by domain (`runs.sql`), and an event count by type and day.
Each DuckDB answer is checked equal to SQLite's before any time is reported. The SQLite
side masks no forgotten subjects (the bench refuses a ledger that has any) and reads the
`lesson_id` in the payload (every synthetic lesson event carries its id). SQLite gets its
best plan: the ledger's indexes ((type, seq), (run_id, seq)) where they help, a straight
table scan where they do not.

Usage::

    python bench/duck_queries.py                   # 1,000,000 events
    python bench/duck_queries.py --events 300000
    python bench/duck_queries.py --quick           # 50,000 events
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sqlite3
import statistics
import subprocess
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

from bench import Figure, print_json, show, timed
from devtools.synthetic import build_ledger, synthetic_events
from memtape.analytics.answers import sections
from memtape.analytics.duck import attach
from memtape.analytics.mirror import DDL, connect
from memtape.analytics.queries import sql_text
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import caught_up

BENCH = "duck_queries"
#: the mirror's tables the views read beside `events`, left empty: the raw ledger has no validity intervals
EMPTY_DDL = [
    ddl
    for ddl in DDL
    if ddl.startswith(("CREATE TABLE intervals", "CREATE TABLE short_term_intervals", "CREATE TABLE step_as_of"))
]
#: the raw ledger through the scanner, shaped as the mirror's `events` (no forgotten subject is masked)
SCANNED_EVENTS = """
CREATE VIEW events AS
SELECT seq, id, stream, stream_version, type, schema_version, recorded_at, occurred_at,
       CAST(recorded_at AS TIMESTAMP) AS recorded_ts, CAST(occurred_at AS TIMESTAMP) AS occurred_ts,
       run_id, step, domain, json_extract_string(payload, '$.lesson_id') AS lesson_id, payload
FROM {table}
"""

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
SQLITE_BY_DAY = (
    "SELECT type, date(occurred_at) AS day, count(*) AS events FROM events NOT INDEXED GROUP BY 1, 2 ORDER BY 1, 2"
)


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


def duck_mirror(path: Path) -> duckdb.DuckDBPyConnection:
    """The analytics mirror beside `path` (built or caught up first), as `memtape analytics` reads it."""
    store = SqliteStore.open(path)
    try:
        return connect(store)
    finally:
        store.close()


def duck_scanner(path: Path, table: bool = False) -> duckdb.DuckDBPyConnection:
    """The project's views over ledger.db attached through the scanner: read again by every query, or
    (`table`) copied into DuckDB once, as every analytics process did before the mirror."""
    con, events = attach(path)
    ddl = SCANNED_EVENTS.format(table=events)
    con.execute(ddl.replace("CREATE VIEW", "CREATE TABLE") if table else ddl)
    for ddl in EMPTY_DDL:
        con.execute(ddl)
    con.execute(sql_text("views"))
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
    lite = sqlite_ro(path)
    try:
        forgotten = lite.execute("SELECT count(*) FROM events WHERE type = 'subject_forgotten'").fetchone()[0]
        if forgotten:
            raise RuntimeError(f"{path}: {forgotten} forget events; the SQLite queries do not mask forgotten subjects")
    finally:
        lite.close()
    native, scanner, lite = duck_mirror(path), duck_scanner(path), sqlite_ro(path)
    try:
        out: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
        for q in queries():
            got = {
                "duckdb": rows(native.execute(q.duck)),
                "scanner": rows(scanner.execute(q.duck)),
                "sqlite": rows(lite.execute(q.sqlite)),
            }
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


def cold_ms(argv: list[str], repeat: int) -> float:
    """Median wall time of `argv` run as a new process, in milliseconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}

    def once() -> None:
        subprocess.run(argv, check=True, capture_output=True, env=env)

    return median_ms(once, repeat)


#: one analysis in a new process, the old way: the ledger copied into DuckDB through the scanner
OLD_COLD = """
import sys
from bench.duck_queries import duck_scanner
from memtape.analytics.answers import analyse
con = duck_scanner(sys.argv[1], table=True)
analyse("promotions", None, con=con)
"""
#: the same through the library, the mirror current
NEW_COLD = """
import sys
from memtape.analytics.answers import analyse
from memtape.ledger.store import SqliteStore
with SqliteStore.open(sys.argv[1]) as store:
    analyse("promotions", store)
"""


def measure(path: Path, repeat: int) -> list[Figure]:
    got = answers(path)  # checked equal first (building the mirror); also warms the OS page cache for every side
    head = sum(r[2] for r in got["events by type and day"]["sqlite"])
    native, scanner, lite = duck_mirror(path), duck_scanner(path), sqlite_ro(path)
    figs: list[Figure] = []
    try:
        for q in queries():
            t_lite = median_ms(lambda q=q: lite.execute(q.sqlite).fetchall(), repeat)
            t_native = median_ms(lambda q=q: native.execute(q.duck).fetchall(), repeat)
            t_scan = median_ms(lambda q=q: scanner.execute(q.duck).fetchall(), repeat)
            rows_note = f"{len(got[q.name]['sqlite']):,} rows, equal in all three"
            figs.append(
                Figure(
                    BENCH,
                    f"{q.name}: DuckDB mirror",
                    t_native,
                    "ms",
                    "SQLite",
                    t_lite,
                    higher_is_better=False,
                    note=f"{head:,} events; {rows_note}",
                )
            )
            figs.append(
                Figure(
                    BENCH,
                    f"{q.name}: DuckDB scanner",
                    t_scan,
                    "ms",
                    "SQLite",
                    t_lite,
                    higher_is_better=False,
                    note=f"{head:,} events; {rows_note}; ledger.db re-read per query",
                )
            )
    finally:
        native.close()
        scanner.close()
        lite.close()
    root = str(Path(__file__).resolve().parent.parent)
    python = [sys.executable, "-c"]
    t_new = cold_ms([*python, f"import sys; sys.path.insert(0, {root!r})\n" + NEW_COLD, str(path)], repeat)
    t_old = cold_ms([*python, f"import sys; sys.path.insert(0, {root!r})\n" + OLD_COLD, str(path)], repeat)
    figs.append(
        Figure(
            BENCH,
            "cold analysis (promotions) in a new process, mirror current",
            t_new,
            "ms",
            "the same, the ledger copied into DuckDB by the process",
            t_old,
            higher_is_better=False,
            note=f"{head:,} events; library call, interpreter start and imports included",
        )
    )
    command = str(Path(sys.executable).with_name("memtape"))
    t_cli = cold_ms([command, "--memory-dir", str(path.parent), "analytics", "promotions", "--format", "json"], repeat)
    figs.append(
        Figure(
            BENCH,
            "cold `memtape analytics promotions`, mirror current",
            t_cli,
            "ms",
            "`memtape --version` (starting the command line)",
            cold_ms([command, "--version"], repeat),
            higher_is_better=False,
            note=f"{head:,} events",
        )
    )
    mirror = path.with_name(MIRROR_FILE)

    def rebuild() -> None:
        mirror.unlink()
        duck_mirror(path).close()

    t_build = median_ms(rebuild, max(1, repeat // 2))
    t_copy = median_ms(lambda: duck_scanner(path, table=True).close(), max(1, repeat // 2))
    figs.append(
        Figure(
            BENCH,
            "build the mirror from nothing (projections.db current)",
            t_build,
            "ms",
            "copy ledger.db into DuckDB through the scanner (every process did, before)",
            t_copy,
            higher_is_better=False,
            note=f"{head:,} events, checked reads, forget applied in Python",
        )
    )
    con = duckdb.connect(str(mirror), read_only=True)
    short_term = con.execute("SELECT count(*) FROM short_term_intervals").fetchone()[0]  # type: ignore[index]
    con.close()
    figs.append(
        Figure(
            BENCH,
            "the mirror's file (analytics.duckdb)",
            mirror.stat().st_size / 1e6,
            "MB",
            "ledger.db",
            path.stat().st_size / 1e6,
            higher_is_better=False,
            note=f"{head:,} events; {short_term:,} versions of short-term memory among its intervals",
        )
    )
    store = SqliteStore.open(path)
    try:
        store.append(synthetic_events(max(100, head // 100)))
        more = store.head() - head
        t_catch = timed(lambda: caught_up(store, path.with_name("projections.db")))
    finally:
        store.close()
    t_mirror = timed(lambda: duck_mirror(path).close())
    figs.append(
        Figure(
            BENCH,
            f"catch the mirror up after {more:,} more events",
            t_mirror * 1e3,
            "ms",
            "build the mirror from nothing",
            t_build,
            higher_is_better=False,
            note=f"projections.db caught up first, apart ({t_catch:.1f} s)",
        )
    )
    return figs


def run(quick: bool = False, events: int | None = None, repeat: int | None = None) -> list[Figure]:
    """Build a synthetic ledger (1,000,000 events; 50,000 when quick) and measure every query."""
    n = events or (50_000 if quick else 1_000_000)
    with tempfile.TemporaryDirectory(prefix="memtape-bench-") as d:
        path = Path(d) / "ledger.db"
        t0 = time.perf_counter()
        build_ledger(path, n).close()
        print(
            f"ledger of {n:,} events built in {time.perf_counter() - t0:.1f} s ({path.stat().st_size / 1e6:.0f} MB)",
            file=sys.stderr,
        )
        return measure(path, repeat or 5)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--events", type=int, default=None, help="events in the ledger (default 1,000,000; 50,000 with --quick)"
    )
    ap.add_argument("--repeat", type=int, default=None, help="repetitions per figure, the median reported (default 5)")
    ap.add_argument("--quick", action="store_true", help="50,000 events")
    ap.add_argument(
        "--ledger",
        type=Path,
        default=None,
        help="measure this ledger.db instead of a synthetic one (more events are appended to it)",
    )
    ap.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the figures and every query's answers from each engine",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.ledger is not None:
        got = answers(args.ledger)  # before the catch-up figure appends to the ledger
        figs = measure(args.ledger, args.repeat or 5)
    else:
        got, figs = {}, run(quick=args.quick, events=args.events, repeat=args.repeat)
    if args.json:
        print_json(figs, answers=got)
        return
    console = show(f"DuckDB vs SQLite audit queries (median of {args.repeat or 5})", figs)
    console.print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
