"""`memtape serve` from its start to its first `/ui/`, warmed (as it starts now) beside a server
that does not warm, measured in the same run.

A server that starts after other processes appended to the ledger pays for them once: catching
projections.db up and decoding the states it reads. `serve` pays that before it prints its login
link (projections/recording/warming.py), so the first page after start does not. Each repetition
copies the memory (ledger and projections.db, current), appends the events of the ledger's last
run again under a new run id (as an agent's process appends while no server runs: see
bench/catchup.py), starts `memtape serve --port 0` and times, from the command's start, the
login link on stderr (ready) and then the first `/ui/` through that link. The baseline starts
the same command with the warm-up taken out (`memtape.server.warm` a no-op).

Usage::

    python bench/serve_start.py                          # 100,000 events (built in a temp dir)
    python bench/serve_start.py --memory-dir DIR --events 1000000 --repeat 1
    python bench/serve_start.py --json                   # one JSON object: events, warm_ready_ms, ...
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, clean_env, memory_command, over_memory, show
from bench.catchup import COPIED, last_run
from devtools.synthetic import ensure_memory
from memtape.ledger.jsonl import parse_event
from memtape.ledger.location import LEDGER_FILE
from memtape.ledger.store import SqliteStore

BENCH = "serve_start"
#: `memtape` as the console script runs it
SERVE = "import sys; from memtape.cli import main; sys.argv[0] = 'memtape'; main()"
#: the baseline: the same command, its warm-up a no-op that still ends the progress line
UNWARMED = (
    "import sys, memtape.server as server; "
    "server.warm = lambda memory, progress=None: progress and progress('decoding', 1, 1); "
    "from memtape.cli import main; sys.argv[0] = 'memtape'; main()"
)
LINK = re.compile(r"viewer: (\S+)")


def start_to_first_page(work: Path, script: str) -> dict[str, float]:
    """(ready, first page) in ms for one server over `work`, started by `script`."""
    argv = [sys.executable, "-c", script, "--memory-dir", str(work), "serve", "--port", "0"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        link = next((m.group(1) for line in proc.stderr if (m := LINK.search(line))), None)
        if link is None:
            raise RuntimeError(f"memtape serve printed no login link (exit {proc.wait(30)})")
        ready = time.perf_counter() - t0
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        t1 = time.perf_counter()
        with browser.open(link, timeout=600) as page:
            page.read()
        return {"ready": ready * 1e3, "page": (time.perf_counter() - t1) * 1e3}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def trial(memory: Path, work: Path, lines: list[dict[str, Any]], script: str) -> dict[str, float]:
    """One server started over a fresh copy of `memory` with `lines` appended."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    for name in COPIED:
        if (memory / name).exists():
            shutil.copy2(memory / name, work / name)
    with SqliteStore.open(work / LEDGER_FILE, create=False) as store:
        store.append([parse_event(line) for line in lines])
    return start_to_first_page(work, script)


def measure(memory: Path, repeat: int) -> tuple[list[Figure], dict[str, Any]]:
    with SqliteStore.open(memory / LEDGER_FILE, create=False) as store:
        lines = last_run(store)
    samples: dict[str, list[dict[str, float]]] = {"warm": [], "cold": []}
    with tempfile.TemporaryDirectory(prefix="memtape-serve-start-") as d:
        for _ in range(repeat):
            samples["cold"].append(trial(memory, Path(d) / "memory", lines, UNWARMED))
            samples["warm"].append(trial(memory, Path(d) / "memory", lines, SERVE))

    def median(side: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[side])

    def total(side: str) -> float:
        return statistics.median(s["ready"] + s["page"] for s in samples[side])

    figs = [
        Figure(
            BENCH,
            "first /ui/ after start",
            median("warm", "page"),
            "ms",
            "a server that does not warm",
            median("cold", "page"),
            higher_is_better=False,
            note=f"ready after {median('warm', 'ready'):,.0f} ms (baseline {median('cold', 'ready'):,.0f} ms)",
        ),
        Figure(
            BENCH,
            "start to first /ui/ answered",
            total("warm"),
            "ms",
            "a server that does not warm",
            total("cold"),
            higher_is_better=False,
        ),
    ]
    metrics = {
        "warm_ready_ms": median("warm", "ready"),
        "warm_page_ms": median("warm", "page"),
        "cold_ready_ms": median("cold", "ready"),
        "cold_page_ms": median("cold", "page"),
        "run_events": len(lines),
        "load_average": os.getloadavg()[0],
        "repeat": repeat,
    }
    return figs, metrics


def measured(
    quick: bool = False, events: int | None = None, repeat: int | None = None, memory: Path | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures and the metrics of `--json`, over copies of `memory` (built there with `events`
    events when it holds no ledger), else of a new temporary one (100,000 events; 5,000 when quick)."""
    n = events or (5_000 if quick else 100_000)
    reps = repeat or (1 if quick else 3)
    return over_memory(memory, "memtape-serve-start-src-", lambda m: ensure_memory(m, n), lambda m: measure(m, reps))


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
        repeat_means="servers started per side",
        memory_means="measure over copies of DIR (its ledger built with --events events when it has none)",
    )
    if done is None:
        return
    figs, metrics = done
    show(
        f"`memtape serve` to its first /ui/ at {metrics['events']:,} events after one run appended "
        f"(median of {metrics['repeat']}; load average {metrics['load_average']:.1f})",
        figs,
    )


if __name__ == "__main__":
    main()
