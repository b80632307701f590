"""A catch-up of projections.db after a few new events: one fact, and one agent run's events,
each beside a baseline measured in the same run.

A catch-up should cost what the new events touch, not the size of the whole memory. Each
repetition copies the memory (ledger and projections.db, current), appends the events raw (no
policy step), then times `caught_up` in a new process (the call alone, wall clock and CPU):

- one `fact_observed` (it reaches the knowledge projection only);
- the events of the ledger's last run, appended again under a new run id and session (they
  reach ten of the twelve projections, the large step memories and short-term memory among them).

The baseline, in a new process on the same copy before the append: decoding every projection's
stored state (`MemoryView.open` and each of the twelve read) — the least a catch-up that loads
every projection pays, as each one did before it loaded only those its events reach.

Usage::

    python bench/catchup.py                          # 100,000 events (built in a temp dir)
    python bench/catchup.py --memory-dir DIR --events 1000000   # built there once (made current), reused
    python bench/catchup.py --json                   # one JSON object: events, fact_ms, run_ms, ...
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
from memtape.ledger.jsonl import parse_event
from memtape.ledger.location import LEDGER_FILE
from memtape.ledger.store import SqliteStore

BENCH = "catchup"
PROJECTIONS_FILE = "projections.db"
#: what a memory directory holds that a catch-up reads (the analytics mirror is not copied)
COPIED = (LEDGER_FILE, "ledger.head", PROJECTIONS_FILE, "projections.key")

#: one catch-up in a new process (argv: memory dir): the call alone, wall and CPU seconds
CATCH_UP = """
import json, sys, time
from pathlib import Path
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import caught_up
store = SqliteStore.open(Path(sys.argv[1]) / "ledger.db", create=False)
t0, c0 = time.perf_counter(), time.process_time()
caught_up(store, Path(sys.argv[1]) / "projections.db")
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""

#: the baseline in a new process (argv: memory dir): every projection's stored state decoded
READ_ALL = """
import json, sys, time
from pathlib import Path
from memtape.ledger.store import SqliteStore
from memtape.projections.folds.state import PROJECTIONS
from memtape.projections.view import MemoryView
store = SqliteStore.open(Path(sys.argv[1]) / "ledger.db", create=False)
t0, c0 = time.perf_counter(), time.process_time()
view = MemoryView.open(store, Path(sys.argv[1]) / "projections.db")
for name in PROJECTIONS:
    getattr(view.state, name)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def one_fact() -> list[dict[str, Any]]:
    return [
        {"type": "fact_observed", "domain": "www.site1.com", "fact_type": "timing", "key": "k_bench", "value": "v1"}
    ]


def last_run(store: SqliteStore) -> list[dict[str, Any]]:
    """The events of the ledger's last completed run, as JSON Lines objects under a new run id and session."""
    run_id = list(store.read(max(1, store.head() - 5000), types=["run_completed"]))[-1].run_id
    lines = []
    for ev in store.read(run_id=run_id):
        data = dict(ev.data)
        if "session_id" in data:
            data["session_id"] = "s_bench"
        line = {"type": ev.type, "run_id": "run_bench", "domain": ev.domain, **data}
        if ev.step is not None:
            line["step"] = ev.step
        lines.append(line)
    return lines


def _timed(script: str, memory: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", script, str(memory)], check=True, capture_output=True, text=True)
    return {k: v * 1e3 for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def trial(memory: Path, work: Path, lines: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """(the baseline, the catch-up) on a fresh copy of `memory` with `lines` appended."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    for name in COPIED:
        if (memory / name).exists():
            shutil.copy2(memory / name, work / name)
    baseline = _timed(READ_ALL, work)
    with SqliteStore.open(work / LEDGER_FILE, create=False) as store:
        store.append([parse_event(line) for line in lines])
    return baseline, _timed(CATCH_UP, work)


def measure(memory: Path, repeat: int) -> tuple[list[Figure], dict[str, Any]]:
    with SqliteStore.open(memory / LEDGER_FILE, create=False) as store:
        workloads = {"fact": one_fact(), "run": last_run(store)}
    samples: dict[str, list[dict[str, float]]] = {"baseline": [], "fact": [], "run": []}
    with tempfile.TemporaryDirectory(prefix="memtape-catchup-") as d:
        for _ in range(repeat):
            for name, lines in workloads.items():
                baseline, took = trial(memory, Path(d) / "memory", lines)
                samples["baseline"].append(baseline)
                samples[name].append(took)

    def median(name: str, key: str = "wall") -> float:
        return statistics.median(s[key] for s in samples[name])

    base = median("baseline")
    figs = [
        Figure(
            BENCH,
            "catch-up after one fact",
            median("fact"),
            "ms",
            "decoding every stored state",
            base,
            higher_is_better=False,
            note=f"CPU {median('fact', 'cpu'):,.0f} ms",
        ),
        Figure(
            BENCH,
            f"catch-up after one run's {len(workloads['run'])} events",
            median("run"),
            "ms",
            "decoding every stored state",
            base,
            higher_is_better=False,
            note=f"CPU {median('run', 'cpu'):,.0f} ms",
        ),
    ]
    metrics = {
        "fact_ms": median("fact"),
        "fact_cpu_ms": median("fact", "cpu"),
        "run_ms": median("run"),
        "run_cpu_ms": median("run", "cpu"),
        "run_events": len(workloads["run"]),
        "read_all_ms": base,
        "read_all_cpu_ms": median("baseline", "cpu"),
        "load_average": os.getloadavg()[0],
        "repeat": repeat,
    }
    return figs, metrics


def measured(
    quick: bool = False, events: int | None = None, repeat: int | None = None, memory: Path | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures and the metrics of `--json`, over `memory` (built there with `events` events
    when it holds no ledger), else over a new temporary one (100,000 events; 5,000 when quick)."""
    n = events or (5_000 if quick else 100_000)
    reps = repeat or (1 if quick else 3)
    return over_memory(memory, "memtape-catchup-src-", lambda m: ensure_memory(m, n), lambda m: measure(m, reps))


def run(quick: bool = False) -> list[Figure]:
    return measured(quick)[0]


def main(argv: list[str] | None = None) -> None:
    done = memory_command(
        argv,
        __doc__ or "",
        measured,
        events=100_000,
        quick_events=5_000,
        repeat=3,
        repeat_means="copies per workload",
        memory_means="measure over copies of DIR (its ledger built with --events events when it has none)",
    )
    if done is None:
        return
    figs, metrics = done
    show(
        f"catch-up after a few events at {metrics['events']:,} events "
        f"(median of {metrics['repeat']}; load average {metrics['load_average']:.1f})",
        figs,
    )


if __name__ == "__main__":
    main()
