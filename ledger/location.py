"""Where memory lives: the memory directory (0700), choosing a store from a URL, and where projections.db is.

`--memory-dir` (env MEMTAPE_DIR, default `.agent-memory`) holds `ledger.db`
and `projections.db`; `--store` (env MEMTAPE_STORE) may point the ledger at
PostgreSQL instead (`postgresql://...`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from memtape.ledger.errors import LedgerError, LedgerReadOnly
from memtape.ledger.extras import require
from memtape.ledger.store import SqliteStore, Store

DEFAULT_DIR = ".agent-memory"
LEDGER_FILE = "ledger.db"
PROJECTIONS_FILE = "projections.db"
#: the analytics mirror (DuckDB) beside projections.db
MIRROR_FILE = "analytics.duckdb"
#: the suffix of a cache file's sealed stamp (projections.db's, the mirror's)
STAMP_SUFFIX = ".seal"
#: written by `memtape fork`: where the fork came from, its seq, and the isolation its runs use
FORK_FILE = "fork.json"
_log = logging.getLogger("memtape")
ISOLATIONS = ("shared", "per-run")


def mirror_path(projections_path: Path) -> Path:
    """analytics.duckdb beside projections.db."""
    return Path(projections_path).with_name(MIRROR_FILE)


def stamp_path(cache: Path) -> Path:
    """The sealed stamp beside a cache file (projections.db, the mirror): the file as this memory
    last wrote it."""
    return Path(cache).with_name(Path(cache).name + STAMP_SUFFIX)


def mirror_files(projections_path: Path) -> list[Path]:
    """Every file of the mirror beside `projections_path`: the database, its WAL, its stamp, and
    copies half-built by a process that died (`.analytics.duckdb.*`)."""
    target = mirror_path(projections_path)
    return [target, Path(f"{target}.wal"), stamp_path(target), *target.parent.glob(f".{target.name}.*")]


def memory_dir(path: str | Path | None = None, *, create: bool = True) -> Path:
    """Resolve (and create with mode 0700) the memory directory."""
    raw = str(path) if path is not None else os.environ.get("MEMTAPE_DIR", DEFAULT_DIR)
    if "\x00" in raw or not raw.strip():
        raise LedgerError("invalid memory directory name")
    p = Path(raw)
    if create and not p.exists():
        old_umask = os.umask(0o077)  # parents too (e.g. runs/ above runs/<run_id>/) are private
        try:
            p.mkdir(mode=0o700, parents=True)
        except PermissionError as exc:
            raise LedgerReadOnly(f"{p}: cannot create the memory directory ({exc.strerror})") from exc
        except OSError as exc:
            raise LedgerError(f"{p}: cannot create the memory directory ({exc.strerror})") from exc
        finally:
            os.umask(old_umask)
    elif p.exists() and not p.is_dir():
        raise LedgerError(f"{p}: not a directory")
    return p


def sqlite_path(url: str) -> Path | None:
    """The ledger file a SQLite store URL names, or None for a PostgreSQL URL.

    `sqlite:///rel/ledger.db` is relative and `sqlite:////abs/ledger.db` absolute (SQLAlchemy's
    convention: three slashes, then the path); a bare path (no scheme) is the file itself, or
    `ledger.db` inside it when it is a directory.
    """
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :])
    if "://" in url or url.startswith("sqlite:"):
        raise LedgerError(
            f"unsupported store URL {url[:60]!r}: use postgresql://..., sqlite:///relative/path, "
            "sqlite:////absolute/path or a bare path"
        )
    path = Path(url)
    return path / LEDGER_FILE if path.is_dir() else path


def holds_memory_files(path: Path, memory: str | Path | None = None, url: str | None = None) -> bool:
    """Is `path` at the top of a directory whose files are memory's — the memory directory, or the
    one a SQLite store URL puts the ledger in (ledger.db, its WAL, the head, projections.db, its key,
    the analytics mirror all live there), or a server ledger's cache home inside one? Nothing is
    created to answer."""
    url = url if url is not None else os.environ.get("MEMTAPE_STORE") or None
    ledger = sqlite_path(url) if url else None
    homes = {
        home.resolve() for home in {memory_dir(memory, create=False), *([ledger.parent] if ledger is not None else [])}
    }
    parent = Path(path).resolve().parent
    return parent in homes or (parent.parent in homes and _TAG.match(parent.name) is not None)


def check_memory_files(directory: Path) -> None:
    """Refuse a memory directory whose files memtape would follow elsewhere or trust from someone
    else: a symbolic link (a database created or overwritten outside the directory) or a file owned
    by another user is named in one line; a directory or file others may write gets a warning (they
    could plant a ledger or a key). Only the directory's own entries are looked at, never their targets."""
    try:
        here = os.stat(directory)
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LedgerError(f"{directory}: cannot read the memory directory ({exc.strerror})") from None
    me = os.geteuid()
    if here.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not here.st_mode & stat.S_ISVTX:
        _log.warning(f"{directory}: the memory directory is writable by other users (chmod 700 {directory})")
    for entry in entries:
        path = Path(directory) / entry.name
        if entry.is_symlink():
            raise LedgerError(
                f"{path}: a symbolic link in the memory directory; memtape does not follow it "
                "(move the file itself here)"
            )
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone since it was listed (a write-ahead log another process's close removed)
        if info.st_uid != me:
            raise LedgerError(f"{path}: owned by another user (uid {info.st_uid}); memtape uses only its own files")
        if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            _log.warning(f"{path}: writable by other users (chmod 600 {path})")


def open_store(
    memory: str | Path | None = None, url: str | None = None, *, create: bool = True, **kwargs: Any
) -> Store:
    """Open the ledger: PostgreSQL when `url` (or MEMTAPE_STORE) says so, a SQLite file when it
    is a `sqlite:///` URL or a bare path, else `ledger.db` in the memory dir. A PostgreSQL ledger
    keeps its projections.db and head file in `memory` (none when it is not given)."""
    url = url if url is not None else os.environ.get("MEMTAPE_STORE") or None
    if url:
        path = sqlite_path(url)
        if path is None:
            require("postgresql:// store", "postgres")
            from memtape.ledger.pgstore import PostgresStore  # psycopg loads only for a PostgreSQL URL

            home = memory_dir(memory) if memory is not None else None  # projections.db is written even by reads
            if home is not None:
                check_memory_files(home)
            return PostgresStore.open(url, create=create, home=home, **kwargs)
        if create:
            memory_dir(path.parent)
        check_memory_files(path.parent)
        return SqliteStore.open(path, create=create, **kwargs)
    d = memory_dir(memory, create=create)
    check_memory_files(d)
    return SqliteStore.open(d / LEDGER_FILE, create=create, **kwargs)


_TAG = re.compile(r"^[a-z]+-[0-9a-f]{16}$")


def store_tag(store: Store) -> str:
    """A server ledger's name in a memory directory: its kind and a digest of its URL (password left
    out), so that several ledgers used from one folder never share a file."""
    return f"{store.kind}-{hashlib.sha256(store.where.encode()).hexdigest()[:16]}"


def cache_home(store: Store) -> Path:
    """The folder of one ledger's caches (projections.db, its key, the analytics mirror): beside a
    SQLite ledger, its own directory; for a server ledger, a folder of its own in the memory
    directory it was opened with (created 0700), never the one a SQLite ledger there uses."""
    if store.home is None:
        raise LedgerError(f"{store.where}: opened without a memory directory, so it has no projections.db")
    if store.path is not None:
        return store.home
    home = memory_dir(store.home / store_tag(store))
    check_memory_files(home)
    return home


def projections_file(store: Store) -> Path:
    """Where projections.db lives, for every store and every caller: in the ledger's cache home."""
    return cache_home(store) / PROJECTIONS_FILE


def projections_path(store: Store) -> Path | None:
    """projections.db for reading memory through it: None when the store has no home, or was opened
    for forensics (its reads are not verified: nothing it reads may be materialized); memory is then
    folded from the log."""
    if store.home is None or not store.verify_reads:
        return None
    return projections_file(store)


def write_fork_info(directory: Path, info: dict[str, Any]) -> Path:
    """Record how a memory directory was forked (mode 0600), so that runs in it know their base."""
    path = Path(directory) / FORK_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
    return path


def read_fork_info(directory: Path) -> dict[str, Any] | None:
    """The fork record of a memory directory, or None when it was not made by `memtape fork`."""
    path = Path(directory) / FORK_FILE
    if not path.exists():
        return None
    try:
        info: dict[str, Any] = json.loads(path.read_text())
        until, isolation = int(info["until"]), info["memory_isolation"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LedgerError(f"{path}: not a fork record ({exc.__class__.__name__}); delete it or fork again") from None
    if isolation not in ISOLATIONS or until < 0:
        raise LedgerError(f"{path}: not a fork record (memory_isolation {isolation!r}, until {until})")
    return info
