"""Start-up of the command line: `memtape --help` and a read command (`memtape recall tier1
--json`) beside `python -c pass`, each the median of 5 whole processes, measured in turn in the
same run (A B A B ...) so that a machine's drift moves both.

`--help` lists every command without importing any command's module (memtape.cli keeps their
summaries); a read command imports the ledger, the projections and the recall it uses, and
none of the extras. The bounds the issue sets: --help under 0.3 s, a read command under 0.5 s.

Usage::

    python bench/cli_startup.py           # median of 5 each
    python bench/cli_startup.py --json    # one JSON object: pass_ms, help_ms, recall_ms, bounds
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import memtape
from bench import Figure, print_json, show, wall_ms

BENCH = "cli_startup"
#: the issue's bounds, in milliseconds of wall time
HELP_BOUND_MS = 300.0
READ_BOUND_MS = 500.0


def memtape_command() -> list[str]:
    """The `memtape` script installed beside this interpreter (what a user runs), else `python -m memtape`."""
    script = Path(sys.executable).parent / "memtape"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memtape"]


def _memory(directory: Path) -> Path:
    """A memory directory with one finished run and a Tier 1 lesson, for the read command to recall."""
    memory = directory / "memory"
    with memtape.open(memory) as mem, mem.start_run(goal='Open "Wool Socks"', start_url="https://shop.test/") as run:
        run.record_step(step=1, action="click", target='button "Wool Socks"', ok=False, error="element is hidden")
        run.record_lesson(
            "Scroll a hidden element into view before clicking it.",
            category="error_recovery",
            failed_command="click",
            error_pattern="hidden",
            step=1,
        )
        run.finish(success=True, outcome="opened")
    return memory


def measure(runs: int = 5) -> tuple[list[Figure], dict[str, float]]:
    """The median wall time of each command over `runs` turns of (baseline, --help, recall), after one warm-up turn."""
    with tempfile.TemporaryDirectory(prefix="memtape-cli-startup-") as tmp:
        memory = _memory(Path(tmp))
        commands = {
            "pass": [sys.executable, "-c", "pass"],
            "help": [*memtape_command(), "--help"],
            "recall": [*memtape_command(), "--memory-dir", str(memory), "recall", "tier1", "--json"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for turn in range(runs + 1):
            for name, argv in commands.items():
                ms = wall_ms(argv)
                if turn:  # the first turn warms the page cache and the .pyc files
                    times[name].append(ms)
        shutil.rmtree(memory)
    med = {f"{name}_ms": statistics.median(values) for name, values in times.items()}
    baseline = med["pass_ms"]
    figures = [
        Figure(
            BENCH,
            "memtape --help",
            med["help_ms"],
            "ms",
            "python -c pass",
            baseline,
            higher_is_better=False,
            note=f"bound {HELP_BOUND_MS:.0f} ms: {'met' if med['help_ms'] < HELP_BOUND_MS else 'NOT met'}",
        ),
        Figure(
            BENCH,
            "memtape recall tier1 --json",
            med["recall_ms"],
            "ms",
            "python -c pass",
            baseline,
            higher_is_better=False,
            note=f"bound {READ_BOUND_MS:.0f} ms: {'met' if med['recall_ms'] < READ_BOUND_MS else 'NOT met'}",
        ),
    ]
    return figures, {**med, "runs": runs, "help_bound_ms": HELP_BOUND_MS, "read_bound_ms": READ_BOUND_MS}


def run(quick: bool = False) -> list[Figure]:
    return measure(3 if quick else 5)[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="measured turns (the median is quoted)")
    ap.add_argument("--quick", action="store_true", help="3 turns")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    figs, metrics = measure(3 if args.quick else max(1, args.runs))
    if args.json:
        print_json(figs, **metrics)
    else:
        show("CLI start-up (median wall time of whole processes)", figs)


if __name__ == "__main__":
    main()
