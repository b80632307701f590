"""The first write after `memtape.open()` on a big memory, beside the same on a 1,000-event memory.

A writer makes its policy decisions from the lessons, knowledge, trajectories and patterns it
has folded; it starts from projections.db, read outside the write lock, so the first write of
every `open()` holds BEGIN IMMEDIATE (and every other writer waits) for what it appends, not for
a replay of the whole log. Each repetition copies the memory (ledger and projections.db, current,
as any read leaves it), then in a new process opens it and appends one observation (a fact, which
the knowledge projection's decisions answer), timing:

- the first write: `mem.append` after `memtape.open()` (wall clock, the warm start included);
- the time the write lock was held during it (from BEGIN IMMEDIATE to COMMIT).

Both beside the same on a 1,000-event memory built the same way, in the same run.

Usage::

    python bench/first_write.py                         # 1,000,000 events (built in a temp dir)
    python bench/first_write.py --events 100000         # a quicker run
    python bench/first_write.py --memory-dir DIR        # built there once (made current), reused
    python bench/first_write.py --json                  # one JSON object: events, first_write_ms, ...
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, memory_command, over_memory, show
from devtools.synthetic import ensure_memory
from memtape.ledger.location import LEDGER_FILE
from memtape.ledger.store import SqliteStore

BENCH = "first_write"
PROJECTIONS_FILE = "projections.db"
SMALL = 1_000
#: what a memory directory holds that opening and writing read (the analytics mirror is not copied)
COPIED = (LEDGER_FILE, "ledger.head", PROJECTIONS_FILE, "projections.key")

#: one open and first write in a new process (argv: memory dir): wall seconds of each, and the
#: seconds the write lock was held (each `atomic()` from BEGIN IMMEDIATE to COMMIT)
FIRST_WRITE = """
import json, sys, time
from contextlib import contextmanager
import memtape
from memtape.ledger.events import FactObserved
from memtape.ledger.store import SqliteStore
held = []
atomic = SqliteStore.atomic
@contextmanager
def timed(self):
    t = time.perf_counter()
    try:
        with atomic(self) as tx:
            yield tx
    finally:
        held.append(time.perf_counter() - t)
SqliteStore.atomic = timed
t0 = time.perf_counter()
mem = memtape.open(sys.argv[1])
t1 = time.perf_counter()
mem.append([mem.event(FactObserved, {"fact_type": "timing", "key": "k_first_write", "value": "v1"},
                      domain="www.site1.com")])
t2 = time.perf_counter()
mem.close()
print(json.dumps({"open": t1 - t0, "write": t2 - t1, "held": sum(held)}))
"""


def trial(memory: Path, work: Path) -> dict[str, float]:
    """Open a fresh copy of `memory` in a new process and write once: milliseconds."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    for name in COPIED:
        if (memory / name).exists():
            shutil.copy2(memory / name, work / name)
    done = subprocess.run([sys.executable, "-c", FIRST_WRITE, str(work)], check=True, capture_output=True, text=True)
    return {k: v * 1e3 for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def samples(memory: Path, repeat: int) -> dict[str, float]:
    """The median of `repeat` trials, per timing."""
    with tempfile.TemporaryDirectory(prefix="memtape-first-write-") as d:
        runs = [trial(memory, Path(d) / "memory") for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def measure(memory: Path, small: Path, repeat: int) -> tuple[list[Figure], dict[str, Any]]:
    small_events = ensure_memory(small, SMALL)
    big, base = samples(memory, repeat), samples(small, repeat)
    with SqliteStore.open(memory / LEDGER_FILE, create=False) as store:
        events = int(store.head())
    figs = [
        Figure(
            BENCH,
            f"first write after open() at {events:,} events",
            big["write"],
            "ms",
            f"the same at {small_events:,} events",
            base["write"],
            aim=0.5,
            higher_is_better=False,
            note=f"open() {big['open']:,.0f} ms vs {base['open']:,.0f} ms",
        ),
        Figure(
            BENCH,
            f"write lock held by that write at {events:,} events",
            big["held"],
            "ms",
            f"the same at {small_events:,} events",
            base["held"],
            aim=0.5,
            higher_is_better=False,
        ),
    ]
    metrics = {
        "small_events": small_events,
        "first_write_ms": big["write"],
        "small_first_write_ms": base["write"],
        "lock_held_ms": big["held"],
        "small_lock_held_ms": base["held"],
        "open_ms": big["open"],
        "small_open_ms": base["open"],
        "load_average": os.getloadavg()[0],
        "repeat": repeat,
    }
    return figs, metrics


def measured(
    quick: bool = False, events: int | None = None, repeat: int | None = None, memory: Path | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures and the metrics of `--json`, over `memory` (built there with `events` events
    when it holds no ledger), else over a new temporary one (1,000,000 events; 5,000 when quick)."""
    n = events or (5_000 if quick else 1_000_000)
    reps = repeat or (1 if quick else 3)
    with tempfile.TemporaryDirectory(prefix="memtape-first-write-small-") as small:
        return over_memory(
            memory,
            "memtape-first-write-src-",
            lambda m: ensure_memory(m, n),
            lambda m: measure(m, Path(small) / "memory", reps),
        )


def run(quick: bool = False) -> list[Figure]:
    return measured(quick)[0]


def main(argv: list[str] | None = None) -> None:
    done = memory_command(
        argv,
        __doc__ or "",
        measured,
        events=1_000_000,
        quick_events=5_000,
        repeat=3,
        repeat_means="copies per memory",
        memory_means="measure over copies of DIR (its ledger built with --events events when it has none)",
    )
    if done is None:
        return
    figs, metrics = done
    show(
        f"the first write after open() at {metrics['events']:,} events "
        f"(median of {metrics['repeat']}; load average {metrics['load_average']:.1f})",
        figs,
    )


if __name__ == "__main__":
    main()
