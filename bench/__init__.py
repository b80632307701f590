"""Benchmarks: every figure beside a baseline measured in the same run, printed as a ratio.

Contract for a bench module `bench/NAME.py` (so `python -m bench` can collect it):
define `run(quick: bool = False) -> list[Figure]` (quick = small sizes for the
suite) and a `main()` for `python bench/NAME.py`, which prints `table(...)`, or
with `--json` one JSON object (`print_json`): the tests run the scripts and read
it, because tests and bench never import each other.
A module without `run` is still executed by `bench/run_all.py` as a script
(with `--quick`) and its output is kept verbatim.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from memtape.http_guard import token_file


@dataclass(frozen=True)
class Figure:
    """One measured figure and its baseline. `higher_is_better` says how to read the ratio."""

    bench: str
    name: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    aim: float | None = None  # the ratio aimed for (value/baseline, or baseline/value when lower is better)
    higher_is_better: bool = True
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline_value in (None, 0) or self.value == 0:
            return None
        assert self.baseline_value is not None
        return self.value / self.baseline_value if self.higher_is_better else self.baseline_value / self.value

    @property
    def met(self) -> bool | None:
        if self.aim is None or self.ratio is None:
            return None
        return self.ratio >= self.aim

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "met": self.met}


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table(title: str, figures: list[Figure]) -> Any:
    """A rich table of figures (value, baseline, ratio, aim)."""
    from rich.table import Table

    t = Table(title=title)
    for col, justify in (
        ("figure", "left"),
        ("value", "right"),
        ("unit", "left"),
        ("baseline", "left"),
        ("baseline value", "right"),
        ("ratio", "right"),
        ("aim", "right"),
        ("met", "center"),
    ):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for f in figures:
        met = "" if f.met is None else ("yes" if f.met else "NO")
        t.add_row(
            f.name,
            fmt(f.value),
            f.unit,
            f.baseline,
            fmt(f.baseline_value),
            f"{fmt(f.ratio)}x" if f.ratio is not None else "-",
            f"≥ {fmt(f.aim)}x" if f.aim else "",
            met,
        )
    return t


def show(title: str, figures: list[Figure], width: int | None = None) -> Any:
    """Print the figures' table, then each figure's note on a line of its own; returns the console
    (for a module's extra lines)."""
    from rich.console import Console

    console = Console(width=width)
    console.print(table(title, figures))
    for f in figures:
        if f.note:
            console.print(f"  {f.name}: {f.note}")
    return console


def print_json(figures: list[Figure], **extra: Any) -> None:
    """`--json`: one JSON object on stdout, `{"figures": [...], **extra}` (what else the bench
    measured or checked)."""
    print(json.dumps({"figures": [f.as_dict() for f in figures], **extra}, default=str))


def markdown(figures: list[Figure]) -> str:
    """The same figures as one markdown table."""
    lines = [
        "| bench | figure | value | unit | baseline | baseline value | ratio | aim | met |",
        "|---|---|---:|---|---|---:|---:|---:|:---:|",
    ]
    for f in figures:
        met = "" if f.met is None else ("yes" if f.met else "**no**")
        ratio = f"{fmt(f.ratio)}x" if f.ratio is not None else "-"
        aim = f"≥ {fmt(f.aim)}x" if f.aim else ""
        lines.append(
            f"| {f.bench} | {f.name} | {fmt(f.value)} | {f.unit} | {f.baseline} | "
            f"{fmt(f.baseline_value)} | {ratio} | {aim} | {met} |"
        )
    return "\n".join(lines) + "\n"


def timed(fn: Callable[[], Any], repeat: int = 1) -> float:
    """Best wall time of `repeat` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def ms(fn: Callable[[], Any]) -> float:
    """Wall time of one call, in milliseconds."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def clean_env() -> dict[str, str]:
    """This environment without MEMTAPE_* settings, and with Python's bytecode caches written and
    used as on an ordinary install (PYTHONDONTWRITEBYTECODE would compile every module at every
    start): what a measured `memtape` process is started with."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_") and k != "PYTHONDONTWRITEBYTECODE"}


def wall_ms(argv: list[str]) -> float:
    """Wall time of one command run to its end (its output dropped; a failure raises), in ms."""
    return ms(lambda: subprocess.run(argv, check=True, capture_output=True, env=clean_env(), timeout=600))


@dataclass(frozen=True)
class Server:
    """A `memtape serve` process: where it answers, its token, the process (to kill)."""

    base: str
    token: str
    process: subprocess.Popen[bytes]

    def client(self) -> httpx.Client:
        """One keep-alive connection, as an agent given the token has."""
        return httpx.Client(base_url=self.base, timeout=120, headers={"Authorization": f"Bearer {self.token}"})


@contextmanager
def served(memory: Path, *options: str) -> Iterator[Server]:
    """`memtape serve [OPTIONS]` over `memory` on a free loopback port, once it answers (the server
    makes its token and keeps it in the memory directory); terminated after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory), "serve", "--port", str(port), *options],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                httpx.get(f"{base}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield Server(base, token_file(memory).read_text().strip(), proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def over_memory(
    memory: Path | None,
    prefix: str,
    prepare: Callable[[Path], int],
    measure: Callable[[Path], tuple[list[Figure], dict[str, Any]]],
) -> tuple[list[Figure], dict[str, Any]]:
    """`measure` over the memory directory `memory` once `prepare` has readied it (and given its
    head: the metrics' `events`), else over a new temporary one, removed after."""
    if memory is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as d:
            return over_memory(Path(d), prefix, prepare, measure)
    head = prepare(memory)
    figs, metrics = measure(memory)
    return figs, {"events": head, **metrics}


def memory_command(
    argv: list[str] | None,
    doc: str,
    measured: Callable[..., tuple[list[Figure], dict[str, Any]]],
    *,
    events: int,
    quick_events: int,
    repeat: int,
    repeat_means: str,
    memory_means: str,
) -> tuple[list[Figure], dict[str, Any]] | None:
    """The command line of a benchmark over one memory directory (`--events`, `--memory-dir`,
    `--repeat`, `--quick`, `--json`): runs `measured` and prints `--json` itself; else returns the
    figures and metrics for the caller's own table (None after `--json`)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--events", type=int, default=None, help=f"events in the ledger (default {events:,})")
    ap.add_argument("--memory-dir", type=Path, default=None, metavar="DIR", help=memory_means)
    ap.add_argument("--repeat", type=int, default=None, help=f"{repeat_means}, the median reported (default {repeat})")
    ap.add_argument("--quick", action="store_true", help=f"{quick_events:,} events")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    if args.events is not None and args.events < 1:
        ap.error("--events must be at least 1")
    if args.repeat is not None and args.repeat < 1:
        ap.error("--repeat must be at least 1")
    figs, metrics = measured(quick=args.quick, events=args.events, repeat=args.repeat, memory=args.memory_dir)
    if args.json:
        print_json(figs, **metrics)
        return None
    return figs, metrics
