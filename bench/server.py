"""The HTTP API's cost and durability through `memtape serve` (a real server process, uvicorn):

- one keep-alive client: record + recall pairs per second and p99 beside the same calls made
  through the library in the same run, on fresh memories of the same size (aim: 0.5x);
- 8 and 32 concurrent clients (each its own keep-alive connection and its own run, alternating
  record_step and recall_error): requests per second and the p99 of one request, beside one
  client on the same server in the same run (aim at 32 clients: p99 at most 4x one client's);
- `kill -9` mid-load: 8 clients record steps as fast as the server answers, the server process
  is killed with SIGKILL once enough were acknowledged, and the ledger is opened again: every
  step whose 200 a client received must be there, with the event id it was answered with, and
  `memtape verify` must pass.

- the machine's floor: a do-nothing ASGI app (it answers `{}`) on `memtape serve`'s uvicorn
  settings and HTTP parser (`memtape.server.run_app`), driven by the same clients at 1 and 32
  clients in the same run: what the machine and uvicorn give with no work at all. With 32
  closed-loop clients a request waits 32 / throughput on average (Little's law), so the 32-client
  p99 is at least that however the server works; `--json` reports the bound beside the ratio.

The clients are lean (`Client`: the standard library's `http.client` on one keep-alive
connection, JSON by `json`), so the figures measure the server and not a client library's cost
per request; httpx, which an agent may well use, costs about 0.5 ms more a request on this
machine (the `httpx_pairs_per_s` key of `--json`: the same pairs through httpx, same server).

Usage::

    python bench/server.py            # 1,000 pairs; 4,000 requests per concurrency; kill after 2,000 steps
    python bench/server.py --quick    # 150 pairs; 400 requests; kill after 200 steps
    python bench/server.py --http h11 # the server and the floor with h11 (default: httptools if installed)
    python bench/server.py --serve-bare PORT   # (the bench starts it) the floor's app on 127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from json import dumps, loads
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from starlette.types import Receive, Scope, Send

import memtape
from bench import Figure, clean_env, print_json, served, show
from memtape.http_guard import listen
from memtape.server import chosen_parser, run_app

BENCH = "server"
SHOP = "https://shop.example/"
BLOCKED = "element intercepts pointer events"
CONCURRENCY = (8, 32)
FLOOR_CLIENTS = CONCURRENCY[-1]


@dataclass(frozen=True)
class Answer:
    status_code: int
    text: str

    def json(self) -> Any:
        return loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"{self.status_code}: {self.text[:200]}")


class Client:
    """One keep-alive connection through `http.client`: little Python per request beside the server's.
    A connection the server dropped raises ConnectionError (http.client's own errors are its kind)."""

    def __init__(self, port: int, token: str):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()

    def _ask(self, method: str, path: str, body: bytes | None) -> Answer:
        try:
            self.connection.request(method, path, body=body, headers=self.headers)
            answer = self.connection.getresponse()
            return Answer(answer.status, answer.read().decode())
        except (http.client.HTTPException, OSError) as exc:
            raise ConnectionError(str(exc)) from exc

    def post(self, path: str, json: dict[str, Any]) -> Answer:
        return self._ask("POST", path, dumps(json).encode())

    def get(self, path: str, params: dict[str, Any]) -> Answer:
        return self._ask("GET", f"{path}?{urlencode(params)}", None)


@dataclass(frozen=True)
class Server:
    """A `memtape serve` process: where it answers, its token, the process (to kill)."""

    base: str
    port: int
    token: str
    process: subprocess.Popen[bytes]

    def client(self) -> Client:
        """One keep-alive connection, as an agent given the token has."""
        return Client(self.port, self.token)

    def httpx_client(self) -> httpx.Client:
        """The same through httpx (a figure of `--json` beside the lean client's)."""
        return httpx.Client(base_url=self.base, timeout=120, headers={"Authorization": f"Bearer {self.token}"})


@contextmanager
def _served(memory: Path, parser: str) -> Iterator[Server]:
    """`bench.served`'s server with the HTTP parser `parser`, with its port for the lean client."""
    with served(memory, "--http", parser) as server:
        yield Server(server.base, int(server.base.rsplit(":", 1)[1]), server.token, server.process)


async def bare_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The floor: reads the request's body and answers `{}`, whatever was asked."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


@contextmanager
def _served_bare(parser: str) -> Iterator[Server]:
    """`bare_app` in its own process (as `memtape serve` is), once it answers; terminated after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, str(Path(__file__).resolve()), "--serve-bare", str(port), "--http", parser]
    proc = subprocess.Popen(command, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with Client(port, "") as http:
                    http.get("/", {})
                break
            except ConnectionError:
                time.sleep(0.1)
        yield Server(f"http://127.0.0.1:{port}", port, "", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def p99(took_ms: list[float]) -> float:
    return statistics.quantiles(took_ms, n=100)[98]


def _timed(pairs: int, record: Callable[[int], object], recall: Callable[[int], object]) -> tuple[float, float]:
    """(pairs per second, p99 ms of one record+recall pair)."""
    took: list[float] = []
    start = time.perf_counter()
    for i in range(1, pairs + 1):
        t = time.perf_counter()
        record(i)
        recall(i)
        took.append((time.perf_counter() - t) * 1000)
    total = time.perf_counter() - start
    return pairs / total, p99(took)


def _through_library(memory: Path, pairs: int) -> tuple[float, float]:
    with memtape.open(memory) as mem:
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
        result = _timed(
            pairs,
            lambda i: run.record_step(step=i, action="click", target=f'button "B{i % 7}"', ok=False, error=BLOCKED),
            lambda i: run.recall_error(command="click", error=BLOCKED, step=i),
        )
        run.finish(success=True)
    return result


def _start(http: Client | httpx.Client, goal: str) -> str:
    answer = http.post("/runs", json={"goal": goal, "start_url": SHOP})
    answer.raise_for_status()
    return str(answer.json()["run_id"])


def _step(http: Client | httpx.Client, run: str, i: int) -> Answer | httpx.Response:
    return http.post(
        f"/runs/{run}/steps",
        json={"step": i, "action": "click", "target": f'button "B{i % 7}"', "ok": False, "error": BLOCKED},
    )


def _through_http(server: Server, pairs: int, lean: bool = True) -> tuple[float, float]:
    with server.client() if lean else server.httpx_client() as http:
        run = _start(http, "Buy wool socks")
        result = _timed(
            pairs,
            lambda i: _step(http, run, i).raise_for_status(),
            lambda i: http.get(
                f"/runs/{run}/recall/error", params={"command": "click", "error": BLOCKED, "step": i}
            ).raise_for_status(),
        )
        http.post(f"/runs/{run}/finish", json={"success": True}).raise_for_status()
    return result


def _load(server: Server, clients: int, per_client: int, bare: bool = False) -> tuple[float, float]:
    """(requests per second, p99 ms of one request): `clients` threads start together, each on its
    own connection and run, alternating record_step and recall_error `per_client` times (the same
    requests to the bare app, which starts no run)."""
    ready = threading.Barrier(clients + 1)
    took: list[list[float]] = [[] for _ in range(clients)]
    failures: list[str] = []

    def client(n: int) -> None:
        with server.client() as http:
            run = "bare" if bare else _start(http, f"Client {n} buys wool socks")
            ready.wait()
            for i in range(1, per_client + 1):
                t = time.perf_counter()
                if i % 2:
                    answer = _step(http, run, i)
                else:
                    answer = http.get(
                        f"/runs/{run}/recall/error", params={"command": "click", "error": BLOCKED, "step": i}
                    )
                took[n].append((time.perf_counter() - t) * 1000)
                if answer.status_code != 200:
                    failures.append(answer.text[:200])
            http.post(f"/runs/{run}/finish", json={"success": True}).raise_for_status()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed under load, the first: {failures[0]}")
    return clients * per_client / total, p99([ms for one in took for ms in one])


@dataclass(frozen=True)
class Killed:
    """What a kill -9 mid-load left: steps acknowledged (a 200 received), those in the ledger with
    the event id they were answered with, and whether the ledger verifies."""

    acknowledged: int
    found: int
    verified: bool
    seconds: float


def _kill_mid_load(memory: Path, clients: int, kill_after: int, parser: str) -> Killed:
    """`clients` threads record steps until the server is killed with SIGKILL after `kill_after`
    acknowledged steps; then every acknowledged step is looked up in the ledger."""
    acknowledged: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    enough = threading.Event()

    def client(n: int, server: Server) -> None:
        with server.client() as http:
            run = _start(http, f"Client {n} records until the kill")
            i = 0
            while True:
                i += 1
                try:
                    answer = _step(http, run, i)
                except ConnectionError:  # the server is gone: this request was never answered
                    return
                if answer.status_code != 200:
                    raise RuntimeError(f"step refused: {answer.status_code} {answer.text[:200]}")
                with lock:
                    acknowledged.append((run, i, answer.json()["event_id"]))
                    if len(acknowledged) >= kill_after:
                        enough.set()

    with _served(memory, parser) as server:
        threads = [threading.Thread(target=client, args=(n, server)) for n in range(clients)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        if not enough.wait(timeout=600):
            raise RuntimeError(f"only {len(acknowledged)} steps acknowledged in 600 s")
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
        seconds = time.perf_counter() - start
        for thread in threads:
            thread.join()
    with memtape.open(memory) as mem:
        stored = {(ev.run_id, ev.step): ev.id for ev in mem.store.read(types=["step_recorded"])}
    verify = subprocess.run(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory), "verify"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Killed(
        acknowledged=len(acknowledged),
        found=sum(1 for run, i, event_id in acknowledged if stored.get((run, i)) == event_id),
        verified=verify.returncode == 0,
        seconds=seconds,
    )


def measure(quick: bool = False, parser: str | None = None) -> tuple[list[Figure], dict[str, Any]]:
    parser = chosen_parser(parser)
    pairs = 150 if quick else 1000
    requests = 400 if quick else 4000
    kill_after = 200 if quick else 2000
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        lib_rate, lib_p99 = _through_library(Path(tmp) / "library", pairs)
        with _served(Path(tmp) / "http", parser) as server:
            http_rate, http_p99 = _through_http(server, pairs)
            httpx_rate, _ = _through_http(server, pairs, lean=False)
            one_rate, one_p99 = _load(server, 1, requests)
            loads = {clients: _load(server, clients, requests // clients) for clients in CONCURRENCY}
        with _served_bare(parser) as bare:
            floor = {clients: _load(bare, clients, requests // clients, bare=True) for clients in (1, FLOOR_CLIENTS)}
        killed = _kill_mid_load(Path(tmp) / "killed", 8, kill_after, parser)
    note = f"{pairs} pairs of record_step + recall_error, one client, SQLite memory"
    figures += [
        Figure(
            BENCH,
            "HTTP record+recall pairs/s",
            http_rate,
            "pairs/s",
            "library, same calls",
            lib_rate,
            aim=0.5,
            note=note,
        ),
        Figure(
            BENCH,
            "HTTP record+recall p99",
            http_p99,
            "ms",
            "library, same calls",
            lib_p99,
            higher_is_better=False,
            note=note,
        ),
    ]
    for clients, (rate, latency) in loads.items():
        note = (
            f"{requests} requests (record_step and recall_error alternating), {clients} keep-alive clients "
            f"each with its own run, one server process"
        )
        figures += [
            Figure(
                BENCH,
                f"HTTP {clients} clients: requests/s",
                rate,
                "req/s",
                "1 client, same server",
                one_rate,
                note=note,
            ),
            Figure(
                BENCH,
                f"HTTP {clients} clients: p99 of a request",
                latency,
                "ms",
                "1 client, same server",
                one_p99,
                aim=0.25 if clients == max(CONCURRENCY) else None,
                higher_is_better=False,
                note=note,
            ),
        ]
    note = (
        f"a do-nothing ASGI app answering {{}}, same uvicorn settings and parser ({parser}), "
        f"same client, {requests} requests"
    )
    (floor_one_rate, floor_one_p99), (floor_rate, floor_p99) = floor[1], floor[FLOOR_CLIENTS]
    figures += [
        Figure(BENCH, f"floor {FLOOR_CLIENTS} clients: requests/s", floor_rate, "req/s", "1 client", floor_one_rate),
        Figure(
            BENCH,
            f"floor {FLOOR_CLIENTS} clients: p99 of a request",
            floor_p99,
            "ms",
            "1 client, same app",
            floor_one_p99,
            higher_is_better=False,
            note=note,
        ),
    ]
    figures.append(
        Figure(
            BENCH,
            "kill -9 mid-load: acknowledged steps in the ledger",
            killed.found,
            "steps",
            "steps acknowledged",
            killed.acknowledged,
            aim=1.0,
            note=f"8 clients recording steps; SIGKILL after {kill_after} acknowledgements ({killed.seconds:.1f} s); "
            f"verify {'passed' if killed.verified else 'FAILED'}",
        )
    )
    top_rate, top_p99 = loads[FLOOR_CLIENTS]
    return figures, {
        "httpx_pairs_per_s": httpx_rate,
        "parser": parser,
        "floor": {
            "requests_per_s": {"1": floor_one_rate, str(FLOOR_CLIENTS): floor_rate},
            "p99_ms": {"1": floor_one_p99, str(FLOOR_CLIENTS): floor_p99},
            "p99_ratio": floor_p99 / floor_one_p99,
        },
        # Little's law: at this throughput a request waits FLOOR_CLIENTS / rate on average, and the
        # p99 is at least the mean: the lowest 32-vs-1 p99 ratio the measured throughput allows
        "littles_law": {
            "mean_wait_ms": FLOOR_CLIENTS / top_rate * 1000,
            "least_p99_ratio": FLOOR_CLIENTS / top_rate * 1000 / one_p99,
            "measured_p99_ratio": top_p99 / one_p99,
            "floor_least_p99_ratio": FLOOR_CLIENTS / floor_rate * 1000 / floor_one_p99,
        },
        "killed": {
            "acknowledged": killed.acknowledged,
            "found": killed.found,
            "missing": killed.acknowledged - killed.found,
            "verified": killed.verified,
        },
    }


def run(quick: bool = False) -> list[Figure]:
    return measure(quick)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object (the figures) instead of the table")
    parser.add_argument("--http", choices=["httptools", "h11"], help="the HTTP parser (default: memtape serve's)")
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help="serve the floor's do-nothing app on PORT")
    args = parser.parse_args()
    if args.serve_bare is not None:
        run_app(bare_app, listen("127.0.0.1", args.serve_bare), args.http)
        return
    figs, extra = measure(quick=args.quick, parser=args.http)
    if args.json:
        print_json(figs, **extra)
        return
    show("memtape serve: one client, 8 and 32 clients, kill -9 mid-load", figs)


if __name__ == "__main__":
    main()
