"""A real, throw-away PostgreSQL server for tests and benchmarks (Debian's binaries).

`TempPostgres` runs `initdb` into a temporary directory and starts `postgres`
on 127.0.0.1 on a free port (no Unix socket outside its data directory, trust
auth for the local superuser `postgres`). PostgreSQL refuses to run as root,
so when we are root the server runs as the `postgres` system user that
Debian's package creates (or a `memtape-pg` user we create).

Usage::

    with TempPostgres() as server:
        url = server.create_database("t1")
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = "PostgreSQL is not installed: run `apt-get install -y postgresql` (Debian's server binaries)"


class PostgresMissing(RuntimeError):
    """Debian's PostgreSQL server binaries are not installed."""


def find_bindir() -> Path:
    """The newest /usr/lib/postgresql/<major>/bin holding initdb and postgres."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise PostgresMissing(INSTALL_HINT)


def _server_user() -> str | None:
    """None when we are not root; else a system user PostgreSQL agrees to run as."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "memtape-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "memtape-pg"],
        check=True,
        capture_output=True,
    )
    return "memtape-pg"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TempPostgres:
    """One PostgreSQL server in a temporary directory; `durable=False` turns fsync off (tests)."""

    def __init__(self, durable: bool = False, max_connections: int = 100):
        self.bindir = find_bindir()
        self.user = _server_user()
        self.durable = durable
        self.max_connections = max_connections
        self.port = free_port()
        # under /tmp when we hand it to another user: $TMPDIR may be a directory only root can enter
        base = "/tmp" if self.user and Path("/tmp").is_dir() else None
        self.root = Path(tempfile.mkdtemp(prefix="memtape-pg-", dir=base))
        self.data = self.root / "data"
        self.proc: subprocess.Popen[bytes] | None = None
        self._counter = 0

    def _run_as(self) -> dict[str, object]:
        return {"user": self.user} if self.user else {}

    def start(self) -> TempPostgres:
        if self.user:
            shutil.chown(self.root, user=self.user)
        log = self.root / "initdb.log"
        with open(log, "wb") as out:
            done = subprocess.run(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                **self._run_as(),
            )  # type: ignore[call-overload]
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {log.read_text()[-400:]}")
        settings = [
            "-c",
            "listen_addresses=127.0.0.1",
            "-p",
            str(self.port),
            "-k",
            str(self.data),
            "-c",
            f"max_connections={self.max_connections}",
            "-c",
            "shared_buffers=128MB",
        ]
        if not self.durable:
            settings += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        self.log = open(self.root / "server.log", "wb")  # noqa: SIM115 (the server writes it until stop())
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.data), *settings],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            start_new_session=True,
            **self._run_as(),
        )  # type: ignore[call-overload]
        atexit.register(self.stop)  # a server outliving an interrupted test run is a leak
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.root / 'server.log').read_text()[-600:]}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str) -> str:
        """libpq key=value form, as DuckDB's postgres scanner ATTACHes it."""
        return f"dbname={dbname} host=127.0.0.1 port={self.port} user=postgres"

    def create_database(self, name: str | None = None) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        if name is None:
            self._counter += 1
            name = f"t{os.getpid()}_{self._counter}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            # FILE_COPY (PostgreSQL 15+) is about twice as fast as WAL-logging a small template
            strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            conn.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'{strategy}")
        return self.url(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown: the data is thrown away anyway
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
