"""The HTTP API's cost: record + recall requests per second and p99 through `memtape serve`
(a real server process, one keep-alive client) beside the same calls made through the library
in the same run, on fresh memories of the same size.

Usage::

    python bench/server.py            # 1,000 record+recall pairs each
    python bench/server.py --quick    # 150 pairs each
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

import memtape
from bench import Figure, print_json, table
from memtape.http_guard import token_file

BENCH = "server"
SHOP = "https://shop.example/"
BLOCKED = "element intercepts pointer events"


@contextmanager
def _served(memory: Path) -> Iterator[tuple[str, str]]:
    """(base URL, token): the server makes its token and keeps it in the memory directory."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    proc = subprocess.Popen([sys.executable, "-m", "memtape", "--memory-dir", str(memory), "serve",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base, token_file(memory).read_text().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _timed(pairs: int, record: Callable[[int], None], recall: Callable[[int], None]) -> tuple[float, float]:
    """(pairs per second, p99 ms of one record+recall pair)."""
    took: list[float] = []
    start = time.perf_counter()
    for i in range(1, pairs + 1):
        t = time.perf_counter()
        record(i)
        recall(i)
        took.append((time.perf_counter() - t) * 1000)
    total = time.perf_counter() - start
    return pairs / total, statistics.quantiles(took, n=100)[98]


def _through_library(memory: Path, pairs: int) -> tuple[float, float]:
    with memtape.open(memory) as mem:
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
        result = _timed(pairs,
                        lambda i: run.record_step(step=i, action="click", target=f'button "B{i % 7}"', ok=False,
                                                  error=BLOCKED),
                        lambda i: run.recall_error(command="click", error=BLOCKED, step=i))
        run.finish(success=True)
    return result


def _through_http(memory: Path, pairs: int) -> tuple[float, float]:
    with _served(memory) as (base, token), httpx.Client(base_url=base, timeout=60,
                                                          headers={"Authorization": f"Bearer {token}"}) as http:
        run = http.post("/runs", json={"goal": "Buy wool socks", "start_url": SHOP}).json()["run_id"]
        result = _timed(pairs,
                        lambda i: http.post(f"/runs/{run}/steps", json={
                            "step": i, "action": "click", "target": f'button "B{i % 7}"', "ok": False,
                            "error": BLOCKED}).raise_for_status(),
                        lambda i: http.get(f"/runs/{run}/recall/error", params={
                            "command": "click", "error": BLOCKED, "step": i}).raise_for_status())
        http.post(f"/runs/{run}/finish", json={"success": True}).raise_for_status()
    return result


def run(quick: bool = False) -> list[Figure]:
    pairs = 150 if quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        lib_rate, lib_p99 = _through_library(Path(tmp) / "library", pairs)
        http_rate, http_p99 = _through_http(Path(tmp) / "http", pairs)
    note = f"{pairs} pairs of record_step + recall_error, one client, SQLite memory"
    return [
        Figure(BENCH, "HTTP record+recall pairs/s", http_rate, "pairs/s", "library, same calls", lib_rate, note=note),
        Figure(BENCH, "HTTP record+recall p99", http_p99, "ms", "library, same calls", lib_p99,
               higher_is_better=False, note=note),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the figures) instead of the table")
    args = parser.parse_args()
    figs = run(quick=args.quick)
    if args.json:
        print_json(figs)
        return
    from rich.console import Console
    Console().print(table("memtape serve vs the library", figs))


if __name__ == "__main__":
    main()
