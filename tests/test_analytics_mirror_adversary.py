"""The analytics mirror against an adversary or a careless user: whatever is done to analytics.duckdb,
its WAL or its seal, every `memtape analytics ...` command either answers exactly what an honest
mirror answers (after rebuilding it, with a warning) or fails with one `error:` line and exit 1 —
never a tampered number, never a traceback, never a hang, never a byte of ledger.db changed, never a
half-built copy left behind."""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.analytics.answers import analyse_all
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.test_security_forget import build_memory

ANALYSES = ("promotions", "decay", "recall", "memory-effect", "runs")
MIRROR_TABLES = ("events", "intervals", "short_term_intervals", "step_as_of")


@dataclass
class Honest:
    """A memory with a current mirror, and what it answers."""

    memory: Path
    #: analysis -> `memtape analytics NAME --format json`
    cli: dict[str, str]
    #: every analysis through the library (`_all_answers`)
    library: str


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Honest:
    base = tmp_path_factory.mktemp("honest") / "memory"
    base.mkdir(mode=0o700)
    build_memory(base)
    return Honest(base, _answers(base), _all_answers(base))


def _answers(memory: Path) -> dict[str, str]:
    out = {}
    for name in ANALYSES:
        r = run_cli("--memory-dir", str(memory), "analytics", name, "--format", "json")
        assert r.code == 0, r.err
        out[name] = r.out
    return out


def _all_answers(memory: Path) -> str:
    """Every analysis through the library, over one connection to the mirror."""
    with SqliteStore.open(memory / "ledger.db", create=False) as store:
        return orjson.dumps({name: report.as_json() for name, report in analyse_all(store).items()}).decode()


def _copy(honest: Honest, tmp_path: Path) -> Path:
    memory = tmp_path / "memory"
    shutil.copytree(honest.memory, memory, symlinks=True)
    return memory


def _edit(memory: Path, *sql: str) -> None:
    con = duckdb.connect(str(memory / MIRROR_FILE))
    for statement in sql:
        con.execute(statement)
    con.close()


# ---- forging a row that keeps DuckDB's hash() -----------------------------------------------

_M = (1 << 64) - 1
_C = 0xD6E8FEB86659FD93  # DuckDB's MurmurHash64 multiplier (hash of an integer; CombineHash)
_C_INV = pow(_C, -1, 1 << 64)


def _unmix(y: int) -> int:
    """The inverse of CombineHash's mixing of its left side, `(a ^ a >> 32) * C`."""
    y = (y * _C_INV) & _M
    return y ^ (y >> 32)


def _unhash(h: int) -> int:
    """The BIGINT whose DuckDB hash() is `h` (MurmurHash64 is invertible)."""
    for _ in range(2):
        h ^= h >> 32
        h = (h * _C_INV) & _M
    h ^= h >> 32
    return h - (1 << 64) if h >= 1 << 63 else h


def forge_keeping_hash(con: duckdb.DuckDBPyConnection, table: str, where: str, change: str, free: str) -> None:
    """Apply `change` to the row `where` selects, then set its integer column `free` so that hash() of the
    row is what it was: a keyless digest of the rows (a sum of hash()) cannot tell."""
    cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
    rowid, before = con.execute(f"SELECT rowid, hash(t) FROM {table} t WHERE {where}").fetchone()
    con.execute(f"UPDATE {table} SET {change} WHERE rowid = ?", (rowid,))
    hashes = [con.execute(f"SELECT hash({c}) FROM {table} WHERE rowid = ?", (rowid,)).fetchone()[0] for c in cols]
    k = cols.index(free)
    after = before  # walk back from the row's hash to the state after column k ...
    for i in range(len(cols) - 1, k, -1):
        after = _unmix(after ^ hashes[i])
    prefix = hashes[0]  # ... and forward to the state before it
    for i in range(1, k):
        prefix = ((prefix ^ (prefix >> 32)) * _C & _M) ^ hashes[i]
    con.execute(
        f"UPDATE {table} SET {free} = ? WHERE rowid = ?",
        (_unhash(after ^ ((prefix ^ (prefix >> 32)) * _C & _M)), rowid),
    )
    assert con.execute(f"SELECT hash(t) FROM {table} t WHERE rowid = ?", (rowid,)).fetchone()[0] == before


def _forged_row(memory: Path) -> None:
    con = duckdb.connect(str(memory / MIRROR_FILE))
    forge_keeping_hash(
        con,
        "events",
        "type = 'run_completed' AND run_id = 'run_keep_0'",
        "payload = replace(CAST(payload AS VARCHAR), '\"success\":true', '\"success\":false')",
        "stream_version",
    )
    con.close()


def _sqlite_file(memory: Path) -> None:
    (memory / MIRROR_FILE).unlink()
    con = sqlite3.connect(memory / MIRROR_FILE)
    con.execute("CREATE TABLE events (seq)")
    con.commit()
    con.close()


def _replace(path: Path, make: Any) -> None:
    path.unlink()
    make(path)


#: what is done to the mirror's files -> how
TAMPERS = {
    "a row forged to keep DuckDB's hash": _forged_row,
    "a view rewritten": lambda m: _edit(m, "CREATE OR REPLACE VIEW ev AS SELECT * FROM events WHERE seq % 2 = 0"),
    "a macro rewritten": lambda m: _edit(m, "CREATE OR REPLACE MACRO j(p, k) AS NULL"),
    "a view dropped": lambda m: _edit(m, "DROP VIEW run_started"),
    "a view replaced by a table": lambda m: _edit(
        m,
        "CREATE TABLE forged AS SELECT * FROM run_completed",
        "UPDATE forged SET success = NOT success",
        "DROP VIEW run_completed",
        "ALTER TABLE forged RENAME TO run_completed",
    ),
    "a table added": lambda m: _edit(m, "CREATE TABLE notes AS SELECT 'planted' AS x"),
    "a column added": lambda m: _edit(m, "ALTER TABLE events ADD COLUMN extra INTEGER"),
    "a second checkpoint row": lambda m: _edit(m, "INSERT INTO _mirror SELECT * FROM _mirror"),
    "rows deleted": lambda m: _edit(m, "DELETE FROM events WHERE type = 'run_started'"),
    "a table dropped": lambda m: _edit(m, "DROP TABLE step_as_of"),
    "garbage": lambda m: (m / MIRROR_FILE).write_bytes(b"\x07not duckdb" * 999),
    "an empty file": lambda m: (m / MIRROR_FILE).write_bytes(b""),
    "a SQLite file": _sqlite_file,
    "a FIFO": lambda m: _replace(m / MIRROR_FILE, os.mkfifo),
    "a FIFO as its WAL": lambda m: os.mkfifo(m / f"{MIRROR_FILE}.wal"),
    "a garbage WAL": lambda m: (m / f"{MIRROR_FILE}.wal").write_bytes(b"\x01" * 5000),
    "an edit left in its WAL": lambda m: _edit(
        m, "PRAGMA disable_checkpoint_on_shutdown", "UPDATE events SET run_id = 'forged' WHERE type = 'run_started'"
    ),
    "a FIFO as its seal": lambda m: _replace(m / f"{MIRROR_FILE}.seal", os.mkfifo),
    "a binary seal": lambda m: (m / f"{MIRROR_FILE}.seal").write_bytes(b"\xff\xfe\x00" * 40),
    "no seal": lambda m: (m / f"{MIRROR_FILE}.seal").unlink(),
}


def _ledger_bytes(memory: Path) -> bytes:
    return (memory / "ledger.db").read_bytes()


def _half_built(memory: Path) -> list[str]:
    return [p.name for p in memory.iterdir() if p.name.startswith(f".{MIRROR_FILE}")]


@pytest.mark.timeout(60)  # a FIFO once blocked the first read forever
@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_a_tampered_mirror_never_serves_its_numbers(honest: Honest, tmp_path: Path, tamper: str) -> None:
    memory = _copy(honest, tmp_path)
    ledger = _ledger_bytes(memory)
    TAMPERS[tamper](memory)
    r = run_cli("--memory-dir", str(memory), "analytics", "runs", "--format", "json")
    assert r.code == 0, r.err
    assert r.out == honest.cli["runs"]
    assert all(line.startswith("warning: ") for line in r.err.splitlines()), r.err
    assert _all_answers(memory) == honest.library  # every other analysis too
    assert _ledger_bytes(memory) == ledger
    assert not _half_built(memory)
    assert (memory / MIRROR_FILE).is_file() and not (memory / MIRROR_FILE).is_symlink()


LINKS = {
    "a link to ledger.db": lambda m: _replace(m / MIRROR_FILE, lambda p: p.symlink_to(m / "ledger.db")),
    "a link to ledger.db as its WAL": lambda m: (m / f"{MIRROR_FILE}.wal").symlink_to(m / "ledger.db"),
}


@pytest.mark.parametrize("tamper", list(LINKS))
def test_a_link_in_the_mirrors_place_is_refused_and_followed_nowhere(
    honest: Honest, tmp_path: Path, tamper: str
) -> None:
    """A link in the memory directory is refused in one line before anything is opened: neither
    the mirror nor the ledger it points at is read or written through it."""
    memory = _copy(honest, tmp_path)
    ledger = _ledger_bytes(memory)
    LINKS[tamper](memory)
    r = run_cli("--memory-dir", str(memory), "analytics", "runs", "--format", "json")
    assert r.code == 1 and r.out == ""
    assert r.err.startswith("error: ") and r.err.count("\n") == 1 and "symbolic link" in r.err, r.err
    assert _ledger_bytes(memory) == ledger
    assert not _half_built(memory)


def test_a_memory_under_a_path_that_says_lock_rebuilds_its_mirror(honest: Honest, tmp_path: Path) -> None:
    """Only DuckDB's own lock refusal sends an answer to a private copy: a damaged mirror under
    /home/sherlock/ is rebuilt in place like any other, not worked around on every command."""
    memory = _copy(honest, tmp_path / "sherlock")
    (memory / MIRROR_FILE).write_bytes(b"damaged" * 500)
    assert _all_answers(memory) == honest.library
    with duckdb.connect(str(memory / MIRROR_FILE), read_only=True) as con:  # a real mirror again
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] > 0


@pytest.mark.parametrize("blocked", [MIRROR_FILE, f"{MIRROR_FILE}.seal", f"{MIRROR_FILE}.wal"])
def test_a_directory_in_the_mirrors_place_is_one_clear_error(honest: Honest, tmp_path: Path, blocked: str) -> None:
    """A directory cannot be replaced (and is not deleted): exit 1, one line naming it, no copy of the
    rebuilt mirror left beside it, the ledger untouched."""
    memory = _copy(honest, tmp_path)
    ledger = _ledger_bytes(memory)
    path = memory / blocked
    if path.exists():
        path.unlink()
    path.mkdir()
    (path / "keep").write_text("the user's")
    for name in ("runs", "promotions"):
        r = run_cli("--memory-dir", str(memory), "analytics", name)
        assert r.code == 1 and not r.out, r.err
        errors = [line for line in r.err.splitlines() if not line.startswith("warning: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {path}: "), r.err
        assert "Traceback" not in r.err
    assert (path / "keep").read_text() == "the user's"
    assert _ledger_bytes(memory) == ledger
    assert not _half_built(memory)


_value = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=30), st.none())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(MIRROR_TABLES), row=st.integers(0, 10**6), column=st.integers(0, 20), value=_value)
def test_any_single_cell_edit_is_caught(
    honest: Honest, tmp_path_factory: pytest.TempPathFactory, table: str, row: int, column: int, value: Any
) -> None:
    """Any one cell of any mirror table set to any value (extremes included): the answers stay honest."""
    memory = _copy(honest, tmp_path_factory.mktemp("cell"))
    con = duckdb.connect(str(memory / MIRROR_FILE))
    cols = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]
    name, kind = cols[column % len(cols)]
    rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid").fetchall()]
    try:
        con.execute(
            f'UPDATE {table} SET "{name}" = TRY_CAST(? AS {kind}) WHERE rowid = ?', (value, rowids[row % len(rowids)])
        )
    except duckdb.Error:
        pass  # the value does not fit the column (NOT NULL): the file is as it was, bar its times
    con.close()
    assert _all_answers(memory) == honest.library
