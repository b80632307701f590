"""Fleet load: 8 writer processes append to one ledger for N seconds while a follower catches up.

Run against a real PostgreSQL (a durable throw-away server from Debian's
binaries, or `--pg-url`) and, in the same run, against two baselines: the same
load through eventsourcing's PostgreSQL recorder (`PostgresApplicationRecorder`,
on the same server, one stored event per `insert_events`, one aggregate per
writer) and the SQLite store. Each writer is its own process with its own connection and
appends one event per transaction (its own stream, steps 0, 1, 2, ...).
Meanwhile a follower thread `subscribe`s (LISTEN/NOTIFY on PostgreSQL,
file watching on SQLite) and folds every event into the projections.

Afterwards it checks: nothing lost or duplicated (every writer's steps are
0..n-1 and the total equals the head), `seq` gapless, the hash chain
verifies, the follower saw every event exactly once and in order, and the
follower's projections equal a rebuild from the ledger. Any failed check
exits 1.

Usage::

    python bench/stores.py                 # 30 s per store, recorder and durability level, 8 writers
    python bench/stores.py --batch 10      # 10 events per transaction (the lock is taken once per append)
    python bench/stores.py --seconds 3 --writers 4 --pg-url postgresql://postgres@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from psycopg.conninfo import conninfo_to_dict

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, print_json, table
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import FactObserved, RunProgress
from memtape.ledger.location import open_store

BENCH = "stores"


@dataclass
class LoadResult:
    """What one store did under load, and which checks failed (empty `problems` = all held)."""

    kind: str
    durability: str
    writers: int
    batch: int
    seconds: float
    appended: int
    head: int
    p50_ms: float
    p99_ms: float
    follower_seen: int
    follower_catch_up_s: float
    projections_equal: bool | None
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Appends (transactions) per second."""
        return self.appended / self.batch / self.seconds if self.seconds else 0.0

    @property
    def events_rate(self) -> float:
        return self.appended / self.seconds if self.seconds else 0.0


def bench_event(writer: int, i: int) -> NewEvent:
    """Alternating run progress and fact observations, all in the writer's own stream."""
    run = f"bench-w{writer}"
    if i % 2 == 0:
        return NewEvent(
            RunProgress(turn=i, current_url=f"http://w{writer}.bench.test/page/{i}"),
            run_id=run,
            step=i,
            domain=f"w{writer}.bench.test",
        )
    return NewEvent(
        FactObserved(fact_type="timing", key=f"load-{i % 5}", value=f"{100 + i % 3} ms"),
        run_id=run,
        step=i,
        domain=f"w{writer}.bench.test",
    )


def _writer(
    url: str, options: dict[str, Any], writer: int, batch: int, ready: Any, start: Any, stop: Any, results: Any
) -> None:
    """One writer process: its own connection, `batch` events per transaction until told to stop."""
    latencies: list[float] = []
    count, error = 0, ""
    try:
        store = open_store(url=url, **options)
        ready.put(writer)
        start.wait()
        while not stop.is_set():
            events = [bench_event(writer, count + k) for k in range(batch)]
            t0 = time.perf_counter()
            store.append(events)
            latencies.append(time.perf_counter() - t0)
            count += batch
        store.close()
    except Exception as exc:  # reported to the parent as a failed check
        error = f"{type(exc).__name__}: {exc}"
        ready.put(writer)
    results.put((writer, count, sorted(latencies), error))


def _eventsourcing_writer(
    url: str, synchronous_commit: str, writer: int, batch: int, ready: Any, start: Any, stop: Any, results: Any
) -> None:
    """One writer process through eventsourcing's PostgreSQL recorder: the same events, serialized
    as its stored events (the payload's JSON as state), `batch` per `insert_events`."""
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.postgres import PostgresApplicationRecorder

    os.environ["PGOPTIONS"] = f"-c synchronous_commit={synchronous_commit}"
    latencies: list[float] = []
    count, error = 0, ""
    try:
        recorder = PostgresApplicationRecorder(eventsourcing_datastore(url))
        aggregate = uuid.uuid4()
        ready.put(writer)
        start.wait()
        while not stop.is_set():
            events = [bench_event(writer, count + k) for k in range(batch)]
            stored = [
                StoredEvent(
                    originator_id=aggregate,
                    originator_version=count + k + 1,
                    topic=ev.type,
                    state=orjson.dumps(ev.payload.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS),
                )
                for k, ev in enumerate(events)
            ]
            t0 = time.perf_counter()
            recorder.insert_events(stored)
            latencies.append(time.perf_counter() - t0)
            count += batch
        recorder.datastore.close()
    except Exception as exc:  # reported to the parent as a failed check
        error = f"{type(exc).__name__}: {exc}"
        ready.put(writer)
    results.put((writer, count, sorted(latencies), error))


def eventsourcing_datastore(url: str) -> Any:
    """eventsourcing's PostgreSQL datastore for the database at `url`."""
    from eventsourcing.postgres import PostgresDatastore

    info = conninfo_to_dict(url)
    return PostgresDatastore(
        str(info.get("dbname", "postgres")),
        str(info.get("host", "127.0.0.1")),
        str(info.get("port", "5432")),
        str(info.get("user", "postgres")),
        str(info.get("password", "")),
    )


def _drive(
    ctx: Any, target: Any, args: tuple[Any, ...], writers: int, batch: int, seconds: float, during: Any = None
) -> tuple[float, dict[int, int], list[float], list[str]]:
    """Start the writer processes, let them append for `seconds`, collect what each did."""
    ready, results = ctx.Queue(), ctx.Queue()
    start, stop = ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*args, n, batch, ready, start, stop, results)) for n in range(writers)]
    for p in procs:
        p.start()
    waiting, deadline = len(procs), time.monotonic() + 120
    while waiting:
        try:
            ready.get(timeout=1)
            waiting -= 1
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                raise SystemExit(f"writer processes failed to start (exit codes {dead})") from None
    if during is not None:
        during()
    t0 = time.perf_counter()
    start.set()
    time.sleep(seconds)
    stop.set()
    writing_s = time.perf_counter() - t0
    counts: dict[int, int] = {}
    latencies: list[float] = []
    problems: list[str] = []
    for _ in procs:
        try:
            n, count, lat, error = results.get(timeout=120)
        except queue.Empty:
            problems.append("a writer never reported")
            break
        counts[n] = count
        latencies.extend(lat)
        if error:
            problems.append(f"writer {n}: {error}")
    for p in procs:
        p.join(timeout=30)
    latencies.sort()
    return writing_s, counts, latencies, problems


def load_eventsourcing(
    url: str, seconds: float = 30.0, writers: int = 8, durability: str = "full", batch: int = 1
) -> LoadResult:
    """The same load through eventsourcing's PostgreSQL recorder (the baseline), on the (empty)
    database at `url`; afterwards: every event is there, notification ids in order, each writer's
    versions 1..n."""
    from eventsourcing.postgres import PostgresApplicationRecorder

    synchronous_commit = DURABILITY[durability][0]["synchronous_commit"]
    datastore = eventsourcing_datastore(url)
    recorder = PostgresApplicationRecorder(datastore)
    recorder.create_table()
    ctx = multiprocessing.get_context("fork")
    writing_s, counts, latencies, problems = _drive(
        ctx, _eventsourcing_writer, (url, synchronous_commit), writers, batch, seconds
    )
    appended = sum(counts.values())
    notifications = recorder.select_notifications(start=None, limit=appended + 1)
    ids = [n.id for n in notifications]
    if len(ids) != appended or ids != sorted(set(ids)):
        problems.append(f"appended {appended} events, the recorder lists {len(ids)} notifications")
    datastore.close()
    return LoadResult(
        "eventsourcing",
        durability,
        writers,
        batch,
        writing_s,
        appended,
        len(ids),
        _percentile(latencies, 0.5),
        _percentile(latencies, 0.99),
        0,
        0.0,
        None,
        problems,
    )


class Follower(threading.Thread):
    """Subscribes from seq 1 and folds each event into the projections (when the package exists)."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.last = 0
        self.seen = 0
        self.disorder = 0
        self.error = ""
        self.state: Any = None
        self.fold: Any = None
        try:
            from memtape.projections.folds.state import MemoryState, fold

            self.state, self.fold = MemoryState.empty(), fold
        except ImportError:
            pass

    def run(self) -> None:
        try:
            with open_store(url=self.url) as store:
                for ev in store.subscribe(1, self.stop):
                    if ev.seq != self.last + 1:
                        self.disorder += 1
                    self.last = ev.seq
                    self.seen += 1
                    if self.fold is not None:
                        self.fold(self.state, [ev])
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


#: the store options of each durability level: `full` survives a power cut, `normal` a process crash
DURABILITY = {
    "full": ({"synchronous_commit": "on"}, {"synchronous": "FULL"}),
    "normal": ({"synchronous_commit": "off"}, {"synchronous": "NORMAL"}),
}


def load(
    url: str,
    seconds: float = 30.0,
    writers: int = 8,
    durability: str = "full",
    batch: int = 1,
    catch_up_timeout: float = 120.0,
) -> LoadResult:
    """Run the load against the (empty) ledger at `url` and check everything afterwards."""
    kind = "postgresql" if url.startswith("postgres") else "sqlite"
    options = DURABILITY[durability][0 if kind == "postgresql" else 1]
    with open_store(url=url) as store:
        if store.head():
            raise SystemExit(f"{url}: the load needs an empty ledger")
    ctx = multiprocessing.get_context("fork")  # before the follower thread starts: no threads to inherit
    follower = Follower(url)
    writing_s, counts, latencies, problems = _drive(
        ctx, _writer, (url, options), writers, batch, seconds, follower.start
    )
    with open_store(url=url) as store:
        head = store.head()
        t_catch = time.perf_counter()
        deadline = t_catch + catch_up_timeout
        while follower.last < head and time.perf_counter() < deadline and follower.is_alive():
            time.sleep(0.01)
        catch_up = time.perf_counter() - t_catch
        follower.stop.set()
        follower.join(timeout=30)
        events = list(store.read())
        verified = store.verify()
        appended = sum(counts.values())
        if appended != head or len(events) != head:
            problems.append(f"appended {appended} events, head is {head}, read back {len(events)}")
        if [e.seq for e in events] != list(range(1, len(events) + 1)):
            problems.append("seq has gaps or duplicates")
        if len({e.id for e in events}) != len(events):
            problems.append("duplicate event ids")
        by_writer: dict[str, list[int]] = {}
        for e in events:
            by_writer.setdefault(e.run_id or "", []).append(e.step if e.step is not None else -1)
        for n, count in counts.items():
            if by_writer.get(f"bench-w{n}", []) != list(range(count)):
                problems.append(f"writer {n}: steps are not 0..{count - 1} (lost, duplicated or reordered)")
        if not verified.ok or verified.count != head:
            problems.append(f"chain does not verify: seq {verified.first_bad_seq}: {verified.reason}")
        if follower.error:
            problems.append(f"follower: {follower.error}")
        if follower.seen != head or follower.disorder:
            problems.append(f"follower saw {follower.seen} of {head} events ({follower.disorder} out of order)")
        equal: bool | None = None
        if follower.fold is not None:
            from memtape.projections.view import MemoryView

            equal = MemoryView(follower.state).digests() == MemoryView.from_events(events).digests()
            if not equal:
                problems.append("follower's projections differ from a rebuild")
    return LoadResult(
        kind,
        durability,
        writers,
        batch,
        writing_s,
        appended,
        head,
        _percentile(latencies, 0.5),
        _percentile(latencies, 0.99),
        follower.seen,
        catch_up,
        equal,
        problems,
    )


def checks_table(results: list[LoadResult]) -> Any:
    """One row per store: throughput, latency, and each check."""
    from rich.table import Table

    per = "one event" if results[0].batch == 1 else f"{results[0].batch} events"
    t = Table(title=f"{results[0].writers} concurrent writers, {per} per transaction, follower catching up")
    for col in (
        "store",
        "durability",
        "events",
        "appends/s",
        "events/s",
        "p50 ms",
        "p99 ms",
        "gapless, nothing lost, chain verifies",
        "follower saw",
        "catch-up s",
        "projections = rebuild",
    ):
        t.add_column(col, justify="left" if col in ("store",) else "right")
    for r in results:
        ok = "yes" if not r.problems else "NO: " + "; ".join(r.problems)
        proj = "-" if r.projections_equal is None else ("yes" if r.projections_equal else "NO")
        follower = "-" if r.kind == "eventsourcing" else f"{r.follower_seen:,}/{r.head:,}"
        catch_up = "-" if r.kind == "eventsourcing" else f"{r.follower_catch_up_s:.2f}"
        t.add_row(
            r.kind,
            DURABILITY_NOTE[r.kind][r.durability],
            f"{r.appended:,}",
            f"{r.rate:,.0f}",
            f"{r.events_rate:,.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            ok,
            follower,
            catch_up,
            proj,
        )
    return t


DURABILITY_NOTE = {
    "postgresql": {"full": "synchronous_commit on", "normal": "synchronous_commit off"},
    "eventsourcing": {"full": "synchronous_commit on", "normal": "synchronous_commit off"},
    "sqlite": {"full": "WAL, synchronous FULL", "normal": "WAL, synchronous NORMAL"},
}
#: the issue's aim for a fleet on PostgreSQL (8 writers), beside the ratio to eventsourcing's recorder
AIM_APPENDS_PER_S = 2000


def compare(
    pg_urls: list[str],
    es_urls: list[str],
    sqlite_urls: list[str],
    seconds: float,
    writers: int,
    levels: list[str],
    batch: int = 1,
) -> list[LoadResult]:
    """For each durability level: PostgreSQL, then eventsourcing's PostgreSQL recorder and the SQLite
    store as its baselines, in the same run."""
    out = []
    for level, pg_url, es_url, sqlite_url in zip(levels, pg_urls, es_urls, sqlite_urls):
        out += [
            load(pg_url, seconds, writers, level, batch),
            load_eventsourcing(es_url, seconds, writers, level, batch),
            load(sqlite_url, seconds, writers, level, batch),
        ]
    return out


def figures(results: list[LoadResult]) -> list[Figure]:
    figs = []
    for pg, es, lite in zip(results[::3], results[1::3], results[2::3]):
        problems = pg.problems + es.problems + lite.problems
        per = "" if pg.batch == 1 else f", {pg.batch} events each"
        name = f"{pg.writers} writers on PostgreSQL ({DURABILITY_NOTE['postgresql'][pg.durability]}{per})"
        aim_note = f"aim {AIM_APPENDS_PER_S:,} appends/s: {'met' if pg.rate >= AIM_APPENDS_PER_S else 'not met'}"
        figs.append(
            Figure(
                BENCH,
                name,
                pg.rate,
                "appends/s",
                "eventsourcing's PostgreSQL recorder, same server",
                es.rate,
                aim=1.0,
                note="; ".join([aim_note, *problems]),
            )
        )
        figs.append(
            Figure(
                BENCH,
                name,
                pg.rate,
                "appends/s",
                f"SQLite store ({DURABILITY_NOTE['sqlite'][lite.durability]})",
                lite.rate,
                note="problems: " + "; ".join(problems) if problems else "",
            )
        )
    return figs


def run(quick: bool = False, seconds: float | None = None, writers: int = 8, pg_url: str | None = None) -> list[Figure]:
    """The bench contract (`python -m bench`): figures for both stores, on a throw-away server."""
    return figures(measure(seconds if seconds is not None else (3.0 if quick else 30.0), writers, ["full", "normal"]))


def measure(
    seconds: float,
    writers: int,
    levels: list[str],
    pg_url: str | None = None,
    durable_server: bool = True,
    batch: int = 1,
) -> list[LoadResult]:
    """Each store and the recorder at each durability level, on fresh ledgers (a throw-away server
    unless `pg_url`, where eventsourcing's table sits beside the ledger's)."""
    from devtools.pg import TempPostgres

    with tempfile.TemporaryDirectory(prefix="memtape-bench-") as tmp:
        sqlite_urls = [f"sqlite:///{Path(tmp) / level / 'ledger.db'}" for level in levels]
        if pg_url:
            if len(levels) > 1:
                raise SystemExit("--pg-url needs one --durability level (each level needs an empty ledger)")
            return compare([pg_url], [pg_url], sqlite_urls, seconds, writers, levels, batch)
        with TempPostgres(durable=durable_server) as server:
            pg_urls = [server.create_database(f"bench_{level}") for level in levels]
            es_urls = [server.create_database(f"eventsourcing_{level}") for level in levels]
            return compare(pg_urls, es_urls, sqlite_urls, seconds, writers, levels, batch)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the writers append (default 30)")
    ap.add_argument("--writers", type=int, default=8, help="writer processes (default 8)")
    ap.add_argument("--pg-url", default=None, help="an empty PostgreSQL database (default: a throw-away server)")
    ap.add_argument(
        "--durability",
        choices=["full", "normal", "both"],
        default="both",
        help="full: commits survive a power cut (PostgreSQL synchronous_commit on, SQLite FULL); "
        "normal: a process crash (synchronous_commit off, SQLite NORMAL); default both",
    )
    ap.add_argument("--batch", type=int, default=1, help="events per transaction (default 1, the worst case)")
    ap.add_argument("--quick", action="store_true", help="3 seconds")
    ap.add_argument("--json", action="store_true", help="print one JSON object (the figures and every load's checks)")
    args = ap.parse_args(argv)
    from rich.console import Console

    seconds = 3.0 if args.quick else args.seconds
    levels = ["full", "normal"] if args.durability == "both" else [args.durability]
    results = measure(seconds, args.writers, levels, args.pg_url, batch=max(1, args.batch))
    if args.json:
        print_json(figures(results), loads=[{**asdict(r), "rate": r.rate} for r in results])
        sys.exit(1 if any(r.problems for r in results) else 0)
    console = Console(width=max(190, Console().width))
    console.print(checks_table(results))
    console.print(
        table(
            "PostgreSQL store beside eventsourcing's PostgreSQL recorder and the SQLite store, same load, same run",
            figures(results),
        )
    )
    if any(r.problems for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
