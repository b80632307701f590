"""`memtape serve` as a real process on a free loopback port, for tests and benchmarks."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(memory_dir: Path, token: str | None = None) -> Iterator[str]:
    """Start `memtape --memory-dir DIR serve` and yield its base URL once it answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    cmd = [sys.executable, "-m", "memtape", "--memory-dir", str(memory_dir), "serve", "--port", str(port)]
    if token is not None:
        cmd += ["--token", token]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"memtape serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
            try:
                httpx.get(f"{base}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
