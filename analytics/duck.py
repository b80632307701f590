"""A DuckDB connection over the ledger, attached read-only, with typed views per event type.

DuckDB never downloads anything here: extension auto-install and auto-load
are off, and the scanner extension is LOADed from the file shipped in the
`duckdb_extension_sqlite_scanner` (or `..._postgres_scanner`) package. The
attach depends on the store kind (SQLite file or PostgreSQL URL); everything
above it reads the view `ev` and the typed views defined in `sql/views.sql`.

Usage::

    con = connect(store)                      # a SqliteStore / PostgresStore / path / URL
    con.sql("SELECT category, count(*) FROM lesson_recorded GROUP BY 1").fetchall()
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import duckdb

from memledger.analytics.queries import sql_text
from memledger.ledger.errors import LedgerError

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def extension_path(package: str, name: str) -> Path:
    """The `.duckdb_extension` file inside an installed `duckdb_extension_*` package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LedgerError(f"DuckDB extension package {package} is not installed")
    base = Path(next(iter(spec.submodule_search_locations)))
    path = base / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.exists():
        found = sorted(base.glob(f"extensions/*/{name}.duckdb_extension"))
        if not found:
            raise LedgerError(f"{name} extension for DuckDB {duckdb.__version__} not found under {base}")
        path = found[-1]
    return path


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _target(source: Any) -> tuple[str, str]:
    """(kind, location) of a store object, a ledger path or a store URL."""
    if hasattr(source, "kind") and getattr(source, "kind") == "sqlite" and hasattr(source, "path"):
        return "sqlite", str(source.path)
    if getattr(source, "kind", None) in ("postgres", "postgresql"):
        conninfo = getattr(source, "conninfo", None)
        return "postgres", conninfo() if callable(conninfo) else str(getattr(source, "url"))
    text = str(source)
    if text.startswith(("postgresql://", "postgres://")):
        return "postgres", text
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///"):]
    path = Path(text)
    if not path.exists():
        raise LedgerError(f"{path}: no ledger here")
    return "sqlite", str(path)


def _attach_sqlite(con: duckdb.DuckDBPyConnection, location: str) -> str:
    con.execute(f"LOAD {_quote(str(extension_path('duckdb_extension_sqlite_scanner', 'sqlite_scanner')))}")
    con.execute(f"ATTACH {_quote(location)} AS ledger (TYPE sqlite, READ_ONLY)")
    return "ledger.events"


def _attach_postgres(con: duckdb.DuckDBPyConnection, location: str) -> str:
    con.execute(f"LOAD {_quote(str(extension_path('duckdb_extension_postgres_scanner', 'postgres_scanner')))}")
    con.execute(f"ATTACH {_quote(location)} AS ledger (TYPE postgres, READ_ONLY)")
    return "ledger.public.events"


#: store kind -> function attaching it as `ledger` and returning the events table's name
ATTACHERS = {"sqlite": _attach_sqlite, "postgres": _attach_postgres}


def _where(kind: str, location: str) -> str:
    """Where the ledger is, for messages (never a password)."""
    if kind == "sqlite":
        return location
    return "the PostgreSQL ledger"


def connect(source: Any) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the ledger attached read-only and the typed views defined."""
    kind, location = _target(source)
    con = duckdb.connect(config=_CONFIG)
    try:
        table = ATTACHERS[kind](con, location)
        con.execute(f"CREATE VIEW ev_raw AS SELECT * FROM {table}")
    except duckdb.Error as exc:
        con.close()
        raise LedgerError(f"DuckDB cannot read {_where(kind, location)}: {str(exc).splitlines()[0]}") from exc
    try:
        con.execute(sql_text("views"))
    except duckdb.Error as exc:
        bad = _first_bad_payload(con)
        con.close()
        where = f"seq {bad}: the stored payload is not JSON (run `memledger verify`); " if bad else ""
        raise LedgerError(f"DuckDB cannot read {_where(kind, location)}: {where}{str(exc).splitlines()[0]}") from exc
    return con


def _first_bad_payload(con: duckdb.DuckDBPyConnection) -> int | None:
    """The first event whose payload DuckDB cannot parse (the views' usual failure on an edited ledger)."""
    try:
        row = con.execute("SELECT min(seq) FROM ev_raw WHERE NOT coalesce(json_valid(payload), false)").fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None
