"""Load: N agent processes share one memory directory and run the bundled suite at once.

Each process is a real `memtape run --cases agent/sites/cases.json` (its own
sites server and Chromium) tagged with its own session id. Afterwards the
ledger is checked: every process's runs are present with run_started and
run_completed, `seq` is gapless, the hash chain verifies, and the projections
the agents caught up incrementally equal a full rebuild (digests). Throughput
(runs/s, events/s) is printed beside the same cases run by one process.

Usage::

    python bench/agents_load.py                 # 3 processes, the whole suite
    python bench/agents_load.py --processes 2 --case shop-view-socks --case search-padel
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, print_json, show
from memtape.agent.sites import CASES_FILE, load_cases
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import rebuild
from memtape.projections.view import MemoryView

ROOT = Path(__file__).resolve().parent.parent
QUICK_CASES = ["shop-view-socks", "search-padel", "portal-login"]


@dataclass
class LoadResult:
    processes: int
    cases: int
    seconds: float
    runs: int
    events: int
    verified: bool
    gapless: bool
    digests_equal: bool
    #: process index -> (runs started, runs completed, exit code)
    per_process: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        return any(s != self.cases or c != self.cases or rc != 0 for s, c, rc in self.per_process.values())

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost}

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def run_load(
    memory_dir: Path, processes: int = 3, case_ids: list[str] | None = None, cases_file: Path = CASES_FILE
) -> LoadResult:
    """Start `processes` agents on one memory directory, wait for all, check the ledger."""
    ids = case_ids or [c["id"] for c in load_cases(cases_file)]
    memory_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ledger = memory_dir / "ledger.db"
    with SqliteStore.open(ledger) as store:
        head_before = store.head()
    with tempfile.TemporaryDirectory(prefix="agents-load-") as d:
        logs = Path(d)
        t0 = time.perf_counter()
        children = []
        for i in range(processes):
            cmd = [
                sys.executable,
                "-m",
                "memtape",
                "--memory-dir",
                str(memory_dir),
                "run",
                "--cases",
                str(cases_file),
                "--session-id",
                f"load-p{i}",
                *[a for cid in ids for a in ("--case", cid)],
            ]
            out = open(logs / f"p{i}.log", "wb")  # noqa: SIM115 - closed after the wait
            children.append((subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT), out))
        codes = []
        for child, out in children:
            codes.append(child.wait())
            out.close()
        seconds = time.perf_counter() - t0
        result = LoadResult(processes, len(ids), seconds, 0, 0, False, False, False)
        for i, rc in enumerate(codes):
            if rc != 0:
                result.errors.append(f"process {i} exited {rc}: {(logs / f'p{i}.log').read_text()[-300:]}")
    with SqliteStore.open(ledger) as store:
        count, lo, hi = store.conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM events").fetchone()
        result.gapless = count == hi and lo == 1
        result.events = hi - head_before
        result.verified = store.verify().ok
        session_of = {e.run_id: e.data.get("session_id") for e in store.read(head_before + 1, types=["run_started"])}
        done = {e.run_id for e in store.read(head_before + 1, types=["run_completed"])}
        for i, rc in enumerate(codes):
            mine = {r for r, s in session_of.items() if s == f"load-p{i}"}
            result.per_process[i] = (len(mine), len(mine & done), rc)
        result.runs = len(done)
        incremental = MemoryView.open(store, memory_dir / "projections.db").digests()
        with tempfile.TemporaryDirectory() as tmp:
            full = MemoryView(rebuild(store, Path(tmp) / "projections.db")).digests()
        result.digests_equal = incremental == full
    return result


def figures(load: LoadResult, single: LoadResult | None) -> list[Figure]:
    base_runs = single.runs_per_s if single else None
    base_events = single.events_per_s if single else None
    note = (
        f"{load.runs} runs, {load.events} events in {load.seconds:.1f} s; nothing lost: {not load.lost}; "
        f"gapless: {load.gapless}; verify: {load.verified}; catch-up == rebuild: {load.digests_equal}"
    )
    return [
        Figure(
            "agents_load",
            f"{load.processes} agents: runs/s",
            load.runs_per_s,
            "runs/s",
            "1 agent process, same cases",
            base_runs,
            note=note,
        ),
        Figure(
            "agents_load",
            f"{load.processes} agents: events/s",
            load.events_per_s,
            "events/s",
            "1 agent process, same cases",
            base_events,
        ),
    ]


def run(quick: bool = False, processes: int | None = None, case_ids: list[str] | None = None) -> list[Figure]:
    return figures(*loads(quick, processes, case_ids))


def loads(
    quick: bool = False, processes: int | None = None, case_ids: list[str] | None = None
) -> tuple[LoadResult, LoadResult]:
    """The shared load and its baseline, the same cases in one process."""
    n = processes or (2 if quick else 3)
    ids = case_ids or (QUICK_CASES if quick else None)
    with tempfile.TemporaryDirectory() as tmp:
        single = run_load(Path(tmp) / "single" / ".agent-memory", 1, ids)
        load = run_load(Path(tmp) / "shared" / ".agent-memory", n, ids)
    return load, single


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3, help="agent processes sharing one memory directory")
    ap.add_argument("--case", action="append", default=[], help="only these case ids (default: the whole suite)")
    ap.add_argument("--quick", action="store_true", help="2 processes, 3 cases")
    ap.add_argument("--json", action="store_true", help="print one JSON object (the figures and both loads' checks)")
    args = ap.parse_args(argv)
    load, single = loads(quick=args.quick, processes=None if args.quick else args.processes, case_ids=args.case or None)
    if args.json:
        print_json(figures(load, single), shared=load.as_dict(), single=single.as_dict())
        return
    show("agents sharing one memory directory", figures(load, single), width=160)


if __name__ == "__main__":
    main()
