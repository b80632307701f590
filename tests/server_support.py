"""`memtape serve` as a real process on a free loopback port, for tests and benchmarks."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memtape.http_guard import token_file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running server: where it answers, the token a client sends (None under --no-token),
    its process id, and what it printed on stderr before it answered."""

    base: str
    token: str | None
    pid: int
    announced: str

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def client(self, **options: Any) -> httpx.Client:
        """An HTTP client that sends the token, as an agent given the token would."""
        return httpx.Client(base_url=self.base, headers=self.auth, timeout=options.pop("timeout", 60), **options)


@contextmanager
def live_server(
    memory_dir: Path,
    token: str | None = None,
    *,
    no_token: bool = False,
    args: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    port: int | None = None,
) -> Iterator[Served]:
    """Start `memtape --memory-dir DIR serve` (with `environ` as its only MEMTAPE_ variables) and
    yield it once it answers. Without `token` the server makes its own and the client reads it
    from DIR/serve.token, as a local agent would (with MEMTAPE_TOKEN in `environ`, that one)."""
    port = port or free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}, **(environ or {})}
    cmd = [sys.executable, "-m", "memtape", "--memory-dir", str(memory_dir), "serve", "--port", str(port), *args]
    if token is not None:
        cmd += ["--token", token]
    if no_token:
        cmd += ["--no-token"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"memtape serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''!r}"
                )
            try:
                httpx.get(f"{base}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert proc.stderr is not None
        announced = b""
        while select.select([proc.stderr], [], [], 0)[0]:  # printed before the port answered: all there now
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                break
            announced += chunk
        if token is None and not no_token:
            token = env.get("MEMTAPE_TOKEN") or token_file(memory_dir).read_text().strip()
        yield Served(base, None if no_token else token, proc.pid, announced.decode())
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
