"""Verified reads (issue 19): what checking every event's link and content hash costs a rebuild.

The same synthetic ledger (devtools/synthetic.py's generator) is rebuilt into projections.db twice
in one run, alternating, best of `repeat`: once by a store that checks each event against the hash
chain as it folds (the default) and once by a store that does not. The figure is rebuild
throughput with verification, beside throughput without; the aim is a cost of at most 10% of
rebuild time (ratio ≥ 0.9). Times are this process's CPU time, so that other processes on a
shared box do not decide the ratio (wall time is in the note).

Usage::

    python bench/verified_reads.py                 # 200,000 events
    python bench/verified_reads.py --events 20000  # a quicker run
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, print_json, show
from devtools.synthetic import build_ledger
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import rebuild
from memtape.projections.folds.state import digests

BENCH = "verified_reads"


def _rebuild_s(ledger: Path, out: Path, verify: bool) -> tuple[float, float, dict[str, str]]:
    """(CPU seconds, wall seconds, digests) of one rebuild from scratch."""
    with SqliteStore.open(ledger, verify_reads=verify) as store:
        for p in out.parent.glob(out.name + "*"):
            p.unlink()
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        state = rebuild(store, out)
        return time.process_time() - c0, time.perf_counter() - t0, digests(state)


def run(quick: bool = False, events: int | None = None, repeat: int = 3) -> list[Figure]:
    n = events or (20_000 if quick else 200_000)
    with tempfile.TemporaryDirectory(prefix="memtape-bench-") as d:
        tmp = Path(d)
        build_ledger(tmp / "ledger.db", n).close()
        best = {True: float("inf"), False: float("inf")}
        wall = {True: float("inf"), False: float("inf")}
        answers = {}
        for _ in range(repeat):
            for verify in (False, True):
                cpu, seconds, answers[verify] = _rebuild_s(tmp / "ledger.db", tmp / "projections.db", verify)
                best[verify], wall[verify] = min(best[verify], cpu), min(wall[verify], seconds)
        assert answers[True] == answers[False], "verified and unverified rebuilds disagree"
    cost = best[True] / best[False] - 1
    return [
        Figure(
            BENCH,
            f"rebuild with verified reads ({n:,} events, CPU time)",
            n / best[True],
            "events/s",
            "rebuild without verification",
            n / best[False],
            aim=0.9,
            note=f"verification costs {cost:+.1%} of rebuild CPU time (best of {repeat}, alternating); "
            f"wall time {wall[True]:.1f} s vs {wall[False]:.1f} s",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="rebuilds of each kind, the best kept (default 3)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the figures) instead of the table")
    args = parser.parse_args(argv)
    figs = run(args.quick, args.events, args.repeat)
    if args.json:
        print_json(figs)
    else:
        show("verified reads: the cost of checking the chain while rebuilding", figs)


if __name__ == "__main__":
    main()
