"""Delay from append to projection: `memtape watch` (store.subscribe + materializer catch-up)
beside a plain poll loop (check the head every 100 ms, then catch up), measured in the same run.

A writer appends one event at a time at irregular intervals; a follower thread
keeps projections.db current; the delay is from just before the append to the
moment the follower's catch-up of projections.db has committed that event.

Usage::

    python bench/watch.py            # 60 appends each
    python bench/watch.py --quick    # 15 appends each
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, table
from memtape.ledger.envelope import event
from memtape.ledger.events import FactObserved, LessonRecorded
from memtape.ledger.store import SqliteStore

BENCH = "watch"
POLL_MS = 100


def _event(i: int):  # type: ignore[no-untyped-def]
    if i % 2:
        return event(FactObserved(fact_type="quirk", key=f"k{i % 7}", value=f"v{i}"), domain=f"s{i % 5}.test")
    return event(
        LessonRecorded(
            lesson_id=f"L{i}",
            lesson=f"lesson {i}",
            category="error_recovery",
            failed_command=f"cmd{i % 9}",
            error_pattern=f"err {i}",
        ),
        domain=f"s{i % 5}.test",
    )


def _prefill(path: Path, n: int) -> None:
    store = SqliteStore.open(path)
    store.append([_event(i) for i in range(n)])
    store.close()


def _measure(directory: Path, n: int, follower: str, seed: int, catch_up: bool = True) -> list[float]:
    """Delays (ms) of n appends seen by the given follower ('watch' or 'poll'): in projections.db,
    or (catch_up=False) only noticed by the follower."""
    from memtape.analytics.watch import follow_projections
    from memtape.projections.cache.materialize import Catchup
    from memtape.projections.parameters import DEFAULT_POLICY

    ledger = directory / "ledger.db"
    proj = directory / "projections.db"
    reader = SqliteStore.open(ledger)
    seen: dict[int, float] = {}
    cond = threading.Condition()
    stop = threading.Event()

    def record(seq: int, at: float) -> None:
        with cond:
            seen[seq] = at
            cond.notify_all()

    if follower == "watch" and not catch_up:

        def run() -> None:
            for ev in reader.subscribe(reader.head() + 1, stop):
                record(ev.seq, time.perf_counter())
    elif follower == "watch":

        def run() -> None:
            follow_projections(reader, proj, on_change=lambda c: record(c.seq, c.projected_at), stop=stop)
    else:

        def run() -> None:
            head = Catchup(reader, proj, DEFAULT_POLICY).run().head if catch_up else reader.head()
            while not stop.is_set():
                now_head = reader.head()
                if now_head > head:
                    if catch_up:
                        Catchup(reader, proj, DEFAULT_POLICY).run()
                    at = time.perf_counter()
                    for s in range(head + 1, now_head + 1):
                        record(s, at)
                    head = now_head
                stop.wait(POLL_MS / 1000)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.5)
    writer = SqliteStore.open(ledger)
    rng = random.Random(seed)
    delays = []
    base = writer.head()
    for i in range(n):
        time.sleep(rng.uniform(0.03, 0.12))
        t0 = time.perf_counter()
        seq = writer.append([_event(base + i)])[0].seq
        with cond:
            cond.wait_for(lambda seq=seq: seq in seen, timeout=10)
        if seq in seen:
            delays.append((seen[seq] - t0) * 1000)
    stop.set()
    writer.append([_event(10**6)])  # wake the follower so it sees `stop`
    thread.join(timeout=5)
    writer.close()
    return delays


def run(quick: bool = False, appends: int | None = None) -> list[Figure]:
    n = appends or (15 if quick else 60)
    results: dict[tuple[str, bool], list[float]] = {}
    for catch_up in (False, True):
        for follower in ("watch", "poll"):
            with tempfile.TemporaryDirectory() as tmp:
                _prefill(Path(tmp) / "ledger.db", 2000)
                results[(follower, catch_up)] = _measure(Path(tmp), n, follower, seed=7, catch_up=catch_up)

    def p95(xs: list[float]) -> float:
        return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]

    base = f"poll loop every {POLL_MS} ms"
    figs = []
    for catch_up, label in ((False, "append -> follower wakes"), (True, "append -> projections.db current")):
        w, p = results[("watch", catch_up)], results[("poll", catch_up)]
        figs.append(
            Figure(
                BENCH,
                f"{label}, median ({len(w)} appends)",
                statistics.median(w),
                "ms",
                base,
                statistics.median(p),
                aim=1.0,
                higher_is_better=False,
            )
        )
        figs.append(Figure(BENCH, f"{label}, p95", p95(w), "ms", base, p95(p), higher_is_better=False))
    return figs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--appends", type=int, default=None)
    args = ap.parse_args()
    from rich.console import Console

    Console().print(table("watch: delay from append to projection", run(args.quick, args.appends)))


if __name__ == "__main__":
    main()
