"""Shared fixtures: small, named, and usable by every test module."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from memtape.agent.browser import Browser
from memtape.agent.sites import SitesServer
from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore

if TYPE_CHECKING:
    from devtools.pg import TempPostgres

# CI runs the suite once, so by default every property test draws the same examples on every run
# (seeded from the test's own source): a failure is reproducible, never luck. HYPOTHESIS_PROFILE=explore
# draws fresh random examples on every run to hunt for new failures; pin any it finds with @example.
# No deadline: a test's outcome never depends on how busy the machine is (a first call that loads
# the public suffix list took 468 ms on a loaded box and failed hypothesis's 200 ms default).
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("explore", print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def memory_path(tmp_path: Path) -> Path:
    """An empty memory directory (0700) for one test."""
    d = tmp_path / "memory"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def ledger_path(memory_path: Path) -> Path:
    return memory_path / "ledger.db"


@pytest.fixture
def clock() -> SteppingClock:
    """A deterministic clock: 2026-01-01T00:00:00Z, one second per call."""
    return SteppingClock()


@pytest.fixture
def fresh_ledger(ledger_path: Path, clock: SteppingClock) -> Iterator[SqliteStore]:
    store = SqliteStore.open(ledger_path, clock=clock)
    yield store
    store.close()


# ---- the bundled sites and one Chromium per test module (the browser tests) ----

@pytest.fixture(scope="module")
def sites() -> Iterator[SitesServer]:
    """The bundled sites (shop.test, ...) on 127.0.0.1, behind their proxy."""
    with SitesServer() as s:
        yield s


@pytest.fixture(scope="module")
def chromium(sites: SitesServer) -> Iterator[Browser]:
    """Debian's Chromium, headless, routed to the bundled sites."""
    with Browser(proxy=sites.proxy) as b:
        yield b


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[tuple[SqliteStore, Path]]:
    """An empty ledger and where its projections.db goes."""
    store = SqliteStore.open(tmp_path / "ledger.db")
    yield store, tmp_path / "projections.db"
    store.close()


# ---- PostgreSQL (issue 8): a real server from Debian's binaries, one per session ----

@pytest.fixture(scope="session")
def pg_server() -> Iterator["TempPostgres"]:
    """A throw-away PostgreSQL on 127.0.0.1; fails (never skips) when the binaries are missing."""
    from devtools.pg import PostgresMissing, TempPostgres
    try:
        server = TempPostgres().start()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: "TempPostgres") -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database()
