"""Append, read and verify throughput of the ledger, each beside a baseline measured in the same run.

Baselines: raw `sqlite3` doing the same inserts (same table and indexes, same
`synchronous`), the `eventsourcing` library's SQLite recorder doing the same
appends, and a JSON memory file rewritten on each update (the way the seed
systems keep memory) at 100, 1,000 and 10,000 lessons.

Usage::

    python bench/append.py                 # 50,000 events
    python bench/append.py --events 200000 --synchronous FULL
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench import Figure, print_json, table, timed
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import Action, EnvState, FactObserved, LessonDeduplicated, LessonRecorded, StepRecorded
from memtape.ledger.ids import uuid7
from memtape.ledger.store import GENESIS_HASH, SqliteStore

BENCH = "append"


def make_events(n: int) -> list[NewEvent]:
    """A realistic mix: browser steps, lessons and facts with a few hundred bytes of payload each."""
    out: list[NewEvent] = []
    for i in range(n):
        k = i % 4
        if k in (0, 1):
            p: Any = StepRecorded(
                env_before=EnvState(
                    url=f"https://shop.example.com/p/{i}",
                    title=f"Product {i}",
                    page_type="product",
                    elements=["button:Add to cart", "link:Home", f"heading:Product {i}"],
                ),
                env_after=EnvState(url=f"https://shop.example.com/cart?i={i}", title="Cart", page_type="cart"),
                think="The add-to-cart button is visible; click it.",
                action=Action(
                    command="click", args={"selector": "button#add", "role": "button", "name": "Add to cart"}
                ),
                ok=k == 0,
                error=None if k == 0 else "TimeoutError: waiting for selector button#add",
                duration_ms=120.5,
            )
            out.append(NewEvent(payload=p, run_id=f"run-{i // 50}", step=i % 50, domain="shop.example.com"))
        elif k == 2:
            p = LessonRecorded(
                lesson_id=f"lesson-{i}",
                lesson=f"When the cart button times out, wait for network idle ({i})",
                category="error_recovery",
                failed_command="click",
                error_pattern="TimeoutError",
                scope_domain="shop.example.com",
                triggered_domains=["shop.example.com"],
            )
            out.append(NewEvent(payload=p, run_id=f"run-{i // 50}", domain="shop.example.com"))
        else:
            p = FactObserved(fact_type="timing", key="cart_load_ms", value=str(800 + i % 200))
            out.append(NewEvent(payload=p, run_id=f"run-{i // 50}", domain="shop.example.com"))
    return out


def raw_inputs(events: list[NewEvent]) -> list[tuple[Any, ...]]:
    """What raw sqlite3 starts from: the envelope and the payload as a plain dict."""
    return [
        (
            e.resolved_stream,
            e.type,
            e.payload.schema_version,
            e.run_id,
            e.step,
            e.domain,
            e.payload.model_dump(mode="json", exclude={"type", "schema_version"}),
        )
        for e in events
    ]


def ledger_ddl(tmp: Path, synchronous: str) -> list[str]:
    """The ledger's own table and index DDL (without the append-only triggers, which inserts never fire)."""
    with SqliteStore.open(tmp / "ddl.db", synchronous=synchronous) as s:
        return [
            r[0]
            for r in s.conn.execute(
                "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC"
            )
        ]


def raw_connect(path: Path, ddl: list[str], synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    for sql in ddl:
        conn.execute(sql)
    return conn


_RAW_INSERT = (
    "INSERT INTO events (seq, id, stream, stream_version, type, schema_version, recorded_at, occurred_at, "
    "run_id, step, domain, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_TS = "2026-01-01T00:00:00.000000Z"
_HASH = "0" * 64


def raw_append(conn: sqlite3.Connection, inputs: list[tuple[Any, ...]], batch: int, start: int = 0) -> None:
    """Raw inserts: ids, stream versions and payload JSON, one transaction per `batch`.

    No validation, redaction or hashing: the hash columns get a fixed 64-character placeholder, so that
    both sides write rows of the same size."""
    versions: dict[str, int] = {}
    seq = start
    for i in range(0, len(inputs), batch):
        rows = []
        for stream, type_, sv, run_id, step, domain, data in inputs[i : i + batch]:
            seq += 1
            versions[stream] = versions.get(stream, 0) + 1
            rows.append(
                (
                    seq,
                    uuid7(),
                    stream,
                    versions[stream],
                    type_,
                    sv,
                    _TS,
                    _TS,
                    run_id,
                    step,
                    domain,
                    orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode(),
                    _HASH,
                    _HASH,
                )
            )
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_RAW_INSERT, rows)
        conn.execute("COMMIT")


def ledger_append(store: SqliteStore, events: list[NewEvent], batch: int) -> None:
    """The ledger's appends, one transaction per `batch` (the returned events are dropped, as raw keeps nothing)."""
    for i in range(0, len(events), batch):
        store.append(events[i : i + batch])


def raw_read(conn: sqlite3.Connection) -> int:
    n = 0
    for row in conn.execute("SELECT * FROM events ORDER BY seq"):
        orjson.loads(row[11])
        n += 1
    return n


def raw_verify(conn: sqlite3.Connection) -> int:
    prev, n = GENESIS_HASH, 0
    for row in conn.execute("SELECT * FROM events ORDER BY seq"):
        h = hashlib.sha256(prev.encode() + orjson.dumps(list(row[:13]))).hexdigest()
        orjson.loads(row[11])
        prev, n = h, n + 1
    return n


@contextmanager
def es_synchronous(synchronous: str) -> Iterator[None]:
    """eventsourcing's SQLite connections with the same `synchronous` setting as every other side
    (its pool opens them; the default would be FULL, an unfair handicap at NORMAL)."""
    from eventsourcing.sqlite import SQLiteConnectionPool

    create = SQLiteConnectionPool._create_connection

    def synced(self: Any) -> Any:
        conn = create(self)
        conn._sqlite_conn.execute(f"PRAGMA synchronous = {synchronous}")
        return conn

    SQLiteConnectionPool._create_connection = synced  # type: ignore[method-assign]
    try:
        yield
    finally:
        SQLiteConnectionPool._create_connection = create  # type: ignore[method-assign]


def eventsourcing_append(path: Path, inputs: list[tuple[Any, ...]], batch: int, synchronous: str) -> None:
    """The same appends through eventsourcing's SQLite recorder: pre-serialized stored events only."""
    from eventsourcing.sqlite import SQLiteDatastore

    with es_synchronous(synchronous):
        _recorder_append(SQLiteDatastore(str(path)), inputs, batch)


def _recorder_append(store: Any, inputs: list[tuple[Any, ...]], batch: int) -> None:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    recorder = SQLiteApplicationRecorder(store)
    recorder.create_table()
    ids: dict[str, uuid.UUID] = {}
    versions: dict[str, int] = {}
    for i in range(0, len(inputs), batch):
        stored = []
        for stream, type_, _sv, _run, _step, _dom, data in inputs[i : i + batch]:
            versions[stream] = versions.get(stream, 0) + 1
            oid = ids.setdefault(stream, uuid.uuid4())
            stored.append(
                StoredEvent(
                    originator_id=oid,
                    originator_version=versions[stream],
                    topic=type_,
                    state=orjson.dumps(data, option=orjson.OPT_SORT_KEYS),
                )
            )
        recorder.insert_events(stored)
    store.close()


def eventsourcing_app_append(path: Path, inputs: list[tuple[Any, ...]], batch: int, synchronous: str) -> None:
    """The same appends through eventsourcing's application layer, as its users write them: one
    aggregate per stream, a domain event per input (its mapper and JSON transcoder turn them into
    stored events), and one `save` of every changed aggregate per batch (one transaction)."""
    from eventsourcing.application import Application

    saved = {k: os.environ.get(k) for k in ("PERSISTENCE_MODULE", "SQLITE_DBNAME")}
    os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=str(path))
    try:
        with es_synchronous(synchronous):
            _application_append(Application(), stream_aggregate(), inputs, batch)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@lru_cache(maxsize=1)
def stream_aggregate() -> type:
    """One eventsourcing aggregate class per process (its topic registry refuses a second)."""
    from eventsourcing.domain import Aggregate, event

    class Stream(Aggregate):
        @event("Opened")
        def __init__(self, name: str) -> None:
            self.name = name

        @event("Recorded")
        def record(self, kind: str, data: dict[str, Any]) -> None:
            pass

    return Stream


def _application_append(app: Any, stream_cls: Any, inputs: list[tuple[Any, ...]], batch: int) -> None:
    streams: dict[str, Any] = {}
    for i in range(0, len(inputs), batch):
        changed: dict[str, Any] = {}
        for stream, type_, _sv, _run, _step, _dom, data in inputs[i : i + batch]:
            agg = streams.get(stream)
            if agg is None:
                agg = streams[stream] = stream_cls(stream)
            agg.record(type_, data)
            changed[stream] = agg
        app.save(*changed.values())
    app.close()


def _lessons_json(n: int) -> dict[str, Any]:
    return {
        "lessons": [
            {
                "id": f"lesson-{i}",
                "lesson": f"When the button times out on page {i}, wait for network idle first",
                "category": "error_recovery",
                "failed_command": "click",
                "error_pattern": f"TimeoutError {i}",
                "domain": f"site{i % 50}.example.com",
                "use_count": 1,
                "created_at": _TS,
                "last_used": _TS,
                "source": "learned",
                "triggered_domains": [f"site{i % 50}.example.com"],
            }
            for i in range(n)
        ]
    }


def json_update_seconds(tmp: Path, lessons: int, updates: int) -> float:
    """Per update: bump one lesson's use_count, then rewrite memory.json (what the seed systems do)."""
    path = tmp / f"memory-{lessons}.json"
    data = _lessons_json(lessons)
    path.write_text(json.dumps(data, indent=2))

    def run() -> None:
        for u in range(updates):
            item = data["lessons"][(u * 7919) % lessons]
            item["use_count"] += 1
            item["last_used"] = _TS
            path.write_text(json.dumps(data, indent=2))

    return timed(run) / updates


def ledger_update_seconds(tmp: Path, lessons: int, updates: int, synchronous: str) -> float:
    """Per update: append one `lesson_deduplicated` event (one transaction) to a ledger holding `lessons` lessons."""
    with SqliteStore.open(tmp / f"lessons-{lessons}.db", synchronous=synchronous) as store:
        for i in range(0, lessons, 1000):
            store.append(
                [
                    NewEvent(
                        payload=LessonRecorded(
                            lesson_id=f"lesson-{j}",
                            lesson=f"When the button times out on page {j}, wait for network idle first",
                            category="error_recovery",
                            failed_command="click",
                            error_pattern=f"TimeoutError {j}",
                            scope_domain=f"site{j % 50}.example.com",
                        )
                    )
                    for j in range(i, min(lessons, i + 1000))
                ]
            )

        def run() -> None:
            for u in range(updates):
                j = (u * 7919) % lessons
                store.append(
                    [
                        NewEvent(
                            payload=LessonDeduplicated(
                                lesson_id=f"lesson-{j}",
                                lesson=f"When the button times out on page {j}, wait for network idle first",
                                category="error_recovery",
                                failed_command="click",
                                error_pattern=f"TimeoutError {j}",
                                new_use_count=2 + u,
                            ),
                            domain=f"site{j % 50}.example.com",
                        )
                    ]
                )

        return timed(run) / updates


def run(
    quick: bool = False,
    events: int | None = None,
    synchronous: str = "NORMAL",
    lesson_sizes: tuple[int, ...] = (100, 1_000, 10_000),
) -> list[Figure]:
    """Measure everything; `quick` uses small sizes (for `python -m bench`)."""
    n = events or (5_000 if quick else 50_000)
    n_single = min(n, 1_000 if quick else 5_000)
    sync = synchronous.upper()
    evs = make_events(n)
    inputs = raw_inputs(evs)
    gc.collect()
    gc.freeze()  # the prebuilt inputs are not part of the measured work: keep them out of every GC pass
    try:
        return _measure(evs, inputs, n, n_single, sync, quick, lesson_sizes)
    finally:
        gc.unfreeze()


def _measure(
    evs: list[NewEvent],
    inputs: list[tuple[Any, ...]],
    n: int,
    n_single: int,
    sync: str,
    quick: bool,
    lesson_sizes: tuple[int, ...],
) -> list[Figure]:
    figs: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="memtape-bench-") as d:
        tmp = Path(d)
        ddl = ledger_ddl(tmp, sync)

        # batched: 1,000 events per transaction
        store = SqliteStore.open(tmp / "batched.db", synchronous=sync)
        t_led = timed(lambda: ledger_append(store, evs, 1000))
        raw = raw_connect(tmp / "raw-batched.db", ddl, sync)
        t_raw = timed(lambda: raw_append(raw, inputs, 1000))
        figs.append(
            Figure(
                BENCH,
                f"append, batches of 1,000 ({n:,} events)",
                n / t_led,
                "events/s",
                "raw sqlite3 executemany",
                n / t_raw,
                aim=0.5,
            )
        )
        t_es = timed(lambda: eventsourcing_append(tmp / "es-batched.db", inputs, 1000, sync))
        figs.append(
            Figure(
                BENCH,
                "append, batches of 1,000 vs eventsourcing",
                n / t_led,
                "events/s",
                "eventsourcing SQLite recorder (stored bytes only)",
                n / t_es,
                aim=5.0,
            )
        )
        t_app = timed(lambda: eventsourcing_app_append(tmp / "es-app-batched.db", inputs, 1000, sync))
        figs.append(
            Figure(
                BENCH,
                "append, batches of 1,000 vs eventsourcing application",
                n / t_led,
                "events/s",
                "eventsourcing Application.save (aggregates, mapper, transcoder)",
                n / t_app,
                aim=5.0,
            )
        )

        # one event per transaction
        single = SqliteStore.open(tmp / "single.db", synchronous=sync)
        t_led1 = timed(lambda: ledger_append(single, evs[:n_single], 1))
        raw1 = raw_connect(tmp / "raw-single.db", ddl, sync)
        t_raw1 = timed(lambda: raw_append(raw1, inputs[:n_single], 1))
        figs.append(
            Figure(
                BENCH,
                f"append, one event per transaction ({n_single:,})",
                n_single / t_led1,
                "events/s",
                "raw sqlite3 one INSERT per transaction",
                n_single / t_raw1,
                aim=0.5,
            )
        )
        t_es1 = timed(lambda: eventsourcing_append(tmp / "es-single.db", inputs[:n_single], 1, sync))
        figs.append(
            Figure(
                BENCH,
                "append, one per transaction vs eventsourcing",
                n_single / t_led1,
                "events/s",
                "eventsourcing SQLite recorder (stored bytes only)",
                n_single / t_es1,
            )
        )
        t_app1 = timed(lambda: eventsourcing_app_append(tmp / "es-app-single.db", inputs[:n_single], 1, sync))
        figs.append(
            Figure(
                BENCH,
                "append, one per transaction vs eventsourcing application",
                n_single / t_led1,
                "events/s",
                "eventsourcing Application.save (aggregates, mapper, transcoder)",
                n_single / t_app1,
                aim=5.0,
            )
        )
        single.close()
        raw1.close()

        # read back and verify the batched ledger
        t_read = timed(lambda: sum(1 for _ in store.read()), repeat=5)
        t_rread = timed(lambda: raw_read(raw), repeat=5)
        figs.append(
            Figure(
                BENCH,
                f"read back ({n:,} events)",
                n / t_read,
                "events/s",
                "raw scan + orjson parse",
                n / t_rread,
                aim=0.5,
            )
        )
        assert store.verify().ok
        t_ver = timed(store.verify)
        t_rver = timed(lambda: raw_verify(raw))
        figs.append(
            Figure(
                BENCH, f"verify ({n:,} events)", n / t_ver, "events/s", "raw scan + sha256 + parse", n / t_rver, aim=0.5
            )
        )
        store.close()
        raw.close()

        # an update vs rewriting a JSON memory file
        for lessons in lesson_sizes:
            json_updates = 50 if lessons <= 1_000 else (5 if quick else 20)
            t_json = json_update_seconds(tmp, lessons, json_updates)
            t_upd = ledger_update_seconds(tmp, lessons, 100 if quick else 500, sync)
            figs.append(
                Figure(
                    BENCH,
                    f"one update at {lessons:,} lessons",
                    t_upd * 1e3,
                    "ms",
                    "rewrite memory.json",
                    t_json * 1e3,
                    aim=100.0 if lessons == 10_000 else None,
                    higher_is_better=False,
                )
            )
    return figs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=None, help="events to append (default 50,000; 5,000 with --quick)")
    ap.add_argument(
        "--synchronous",
        default="NORMAL",
        choices=["OFF", "NORMAL", "FULL", "EXTRA"],
        help="SQLite synchronous setting for the ledger and every baseline",
    )
    ap.add_argument(
        "--lesson-sizes",
        type=int,
        nargs="+",
        default=None,
        help="memory sizes for the one-update figure (default 100 1000 10000)",
    )
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--json", action="store_true", help="print one JSON object (the figures) instead of the table")
    args = ap.parse_args(argv)
    from rich.console import Console

    figs = run(
        quick=args.quick,
        events=args.events,
        synchronous=args.synchronous,
        **({"lesson_sizes": tuple(args.lesson_sizes)} if args.lesson_sizes else {}),
    )
    if args.json:
        print_json(figs)
        return
    Console().print(table(f"ledger append/read/verify (synchronous={args.synchronous}, WAL)", figs))


if __name__ == "__main__":
    main()
