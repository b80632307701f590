"""Run every benchmark in `bench/` with small sizes and write one markdown table to bench/results/latest.md.

A bench module with `run(quick=True) -> list[Figure]` is imported and called;
any other `bench/*.py` script is run as `python bench/NAME.py --quick` and its
output is kept verbatim under the table.

Usage::

    python bench/run_all.py          # or: python -m bench
    python bench/run_all.py --full   # the modules' default (large) sizes
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sqlite3
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.progress import Progress

from bench import Figure, markdown, table

BENCH_DIR = Path(__file__).resolve().parent
SKIP = {"__init__", "__main__", "run_all"}


def bench_modules() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if p.stem not in SKIP and not p.stem.startswith("_"))


def run_one(name: str, quick: bool) -> tuple[list[Figure], str]:
    """Figures from the module's `run` (in a fresh process, so that one bench's leftover threads or
    heap never skew the next one's timings), or the verbatim output of running it as a script."""
    module = importlib.import_module(f"bench.{name}")
    if hasattr(module, "run"):
        done = subprocess.run(
            [sys.executable, "-m", "bench.run_all", "--child", name, *([] if quick else ["--full"])],
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=BENCH_DIR.parent,
        )
        last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
        if not last or not last[0].startswith(_CHILD_MARK):
            return [], f"FAILED (exit {done.returncode})\n{done.stderr.strip()[-2000:]}"
        rows = json.loads(last[0][len(_CHILD_MARK) :])
        return [Figure(**{k: v for k, v in row.items() if k not in ("ratio", "met")}) for row in rows], ""
    args = [sys.executable, str(BENCH_DIR / f"{name}.py"), *(["--quick"] if quick else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=BENCH_DIR.parent)
    return [], (done.stdout + done.stderr).strip()


_CHILD_MARK = "FIGURES "


def child(name: str, quick: bool) -> None:
    """Run one bench module's `run` and print its figures as one JSON line (see `run_one`)."""
    figures = importlib.import_module(f"bench.{name}").run(quick=quick)
    print(_CHILD_MARK + json.dumps([f.as_dict() for f in figures]), flush=True)


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description="Run every benchmark and write bench/results/latest.md")
    ap.add_argument("--full", action="store_true", help="each module's full sizes instead of the quick ones")
    ap.add_argument("--only", action="append", default=[], help="run only this bench module (repeatable)")
    ap.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "latest.md")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, quick=not args.full)
        return args.out
    names = [n for n in bench_modules() if not args.only or n in args.only]
    console = Console()
    figures: list[Figure] = []
    texts: dict[str, str] = {}
    timings: dict[str, float] = {}
    with Progress(console=console, transient=True, auto_refresh=False) as progress:  # no refresh thread in timings
        task = progress.add_task("benchmarks", total=len(names))
        for name in names:
            progress.update(task, description=f"bench/{name}.py", refresh=True)
            t0 = time.perf_counter()
            try:
                figs, text = run_one(name, quick=not args.full)
            except Exception:  # one broken bench must not hide the others' figures
                figs, text = [], "FAILED\n" + traceback.format_exc(limit=3)
            timings[name] = time.perf_counter() - t0
            figures += figs
            if text:
                texts[name] = text
            progress.advance(task)
            progress.refresh()
    console.print(table("memtape benchmarks" + ("" if args.full else " (quick sizes)"), figures))
    for name, text in texts.items():
        console.print(f"[bold]bench/{name}.py[/bold]\n{text}")
    head = (
        f"# memtape benchmarks\n\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{'full' if args.full else 'quick'} sizes; Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.machine()}. Each figure's baseline was measured in "
        f"the same run; the ratio reads 'times better than the baseline' (≥ 1 is faster).\n\n"
    )
    body = markdown(figures)
    for name, text in texts.items():
        body += f"\n## bench/{name}.py\n\n```\n{text}\n```\n"
    body += "\n" + ", ".join(f"{n}: {t:.1f} s" for n, t in timings.items()) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(head + body)
    console.print(f"wrote {args.out}")
    return args.out


if __name__ == "__main__":
    main()
