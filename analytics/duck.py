"""DuckDB attached to the ledger itself, read-only, offline — the recipe for reading ledger.db (or a
PostgreSQL ledger) from DuckDB directly, without the analytics mirror.

`memtape analytics` reads the mirror (mirror.py), not this: an attach re-reads
the ledger through a scanner on every query and sees every event, forgotten
subjects included. It stays for the record (bench/duck_queries.py measures the
mirror against it) and for anyone who wants the raw log in DuckDB.

DuckDB never downloads anything here: extension auto-install and auto-load
are off, and the scanner extension is LOADed from the file shipped in the
`duckdb_extension_sqlite_scanner` (or `..._postgres_scanner`) package.

Usage::

    con = attach(Path(".agent-memory/ledger.db"))     # or a postgresql:// URL
    con.sql("SELECT type, count(*) FROM ledger.events GROUP BY 1").fetchall()
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

from memtape.analytics.mirror import CONFIG
from memtape.ledger.errors import LedgerError
from memtape.ledger.extras import require


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


def _attach_sqlite(con: duckdb.DuckDBPyConnection, location: str) -> str:
    require("DuckDB attach of ledger.db", "analytics")
    con.execute(f"LOAD {_quote(str(extension_path('duckdb_extension_sqlite_scanner', 'sqlite_scanner')))}")
    con.execute(f"ATTACH {_quote(location)} AS ledger (TYPE sqlite, READ_ONLY)")
    return "ledger.events"


def _attach_postgres(con: duckdb.DuckDBPyConnection, location: str) -> str:
    require("DuckDB attach of a postgresql:// store", "postgres-analytics")
    con.execute(f"LOAD {_quote(str(extension_path('duckdb_extension_postgres_scanner', 'postgres_scanner')))}")
    con.execute(f"ATTACH {_quote(location)} AS ledger (TYPE postgres, READ_ONLY)")
    return "ledger.public.events"


#: store kind -> function attaching it as `ledger` and returning the events table's name
ATTACHERS = {"sqlite": _attach_sqlite, "postgres": _attach_postgres}


def attach(location: Path | str) -> tuple[duckdb.DuckDBPyConnection, str]:
    """An in-memory DuckDB with the ledger at `location` (a ledger.db path or a postgresql:// URL)
    attached read-only as `ledger`, and the name of its events table."""
    text = str(location)
    kind = "postgres" if text.startswith(("postgresql://", "postgres://")) else "sqlite"
    if kind == "sqlite" and not Path(text).exists():
        raise LedgerError(f"{text}: no ledger here")
    con = duckdb.connect(config=CONFIG)
    try:
        return con, ATTACHERS[kind](con, text)
    except duckdb.Error as exc:
        con.close()
        where = text if kind == "sqlite" else "the PostgreSQL ledger"
        raise LedgerError(f"DuckDB cannot read {where}: {str(exc).splitlines()[0]}") from exc
