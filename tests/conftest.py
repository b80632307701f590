"""Shared fixtures: small, named, and usable by every test module."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

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
# Hypothesis keeps its examples and caches in .hypothesis/ under the directory it starts in: the suite
# writes nothing where it is run from, so they go to a folder of their own (HYPOTHESIS_STORAGE_DIRECTORY wins).
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "memtape-hypothesis")


@pytest.fixture(autouse=True)
def elsewhere(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in an empty directory of its own, with no MEMTAPE_* variable (no MEMTAPE_DIR,
    MEMTAPE_STORE or MEMTAPE_TOKEN naming a memory): the suite never reads or writes the folder it
    is run from, such as the `.agent-memory` the README's demo leaves in the repository. Nor COLUMNS
    or LINES (pytest-xdist's workers set 80x24): a table's width is the piped one unless a test sets it."""
    for name in [n for n in os.environ if n.startswith("MEMTAPE_") or n in ("COLUMNS", "LINES")]:
        monkeypatch.delenv(name)
    cwd = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(cwd)
    return cwd


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


# ---- PostgreSQL: a real server from Debian's binaries, one per session (so one per xdist worker) ----


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TempPostgres]:
    """A throw-away PostgreSQL on 127.0.0.1; fails (never skips) when the binaries are missing."""
    from devtools.pg import PostgresMissing, TempPostgres

    try:
        server = TempPostgres().start()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: TempPostgres) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts PostgreSQL (it needs `pg_server`, directly or through another fixture
    such as `pg_url`) is marked `postgres`, so `-m "not postgres"` leaves out all of them, and the
    marker cannot fall behind a new test."""
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
