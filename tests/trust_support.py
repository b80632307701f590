"""Edits an adversary makes behind the ledger's back, and a small memory to make them on."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import COLUMNS, SqliteStore, chain_hash
from memtape.projections.writer import MemoryWriter
from tests.projections_support import T0, fact, lesson, run_completed, run_started, session, trajectory


def small_memory(memory: Path) -> Path:
    """A memory of ~20 events through the policy writer (seeds, lessons, a fact, a run)."""
    store = SqliteStore.open(memory / "ledger.db", clock=SteppingClock())
    w = MemoryWriter(store)
    w.open_for_run("r1", T0)
    w.append(
        [
            run_started("r1", domain="amazon.com", session_id="s1"),
            lesson(domain="google.com"),
            fact("shadow dom", "amazon.com"),
            session(1, "amazon.com"),
            trajectory("t1", "buy shoes", "amazon.com"),
            run_completed("r1", domain="amazon.com"),
        ]
    )
    for d in ["bing.com", "yahoo.com", "reddit.com", "x.com"]:
        w.append([lesson(domain=d)])
    store.close()
    return memory


def behind_the_back(ledger: Path, *sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run statements with the append-only triggers dropped (what a careless admin or an attacker does)."""
    conn = sqlite3.connect(ledger)
    conn.execute("DROP TRIGGER IF EXISTS events_no_update")
    conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
    for statement in sql:
        conn.execute(statement, params)
    conn.commit()
    conn.close()


def rows(ledger: Path) -> list[list[Any]]:
    conn = sqlite3.connect(ledger)
    out = [list(r) for r in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY seq")]
    conn.close()
    return out


def _write_rows(ledger: Path, changed: list[list[Any]]) -> None:
    sets = ", ".join(f"{c} = ?" for c in COLUMNS[1:])
    conn = sqlite3.connect(ledger)
    conn.execute("DROP TRIGGER IF EXISTS events_no_update")
    for row in changed:
        conn.execute(f"UPDATE events SET {sets} WHERE seq = ?", (*row[1:], row[0]))
    conn.commit()
    conn.close()


def edit_payload(data: dict[str, Any]) -> dict[str, Any]:
    """The forgery every case uses: a field's text changed."""
    for key in ("lesson", "goal", "value", "summary", "current_url"):
        if isinstance(data.get(key), str):
            return {**data, key: "forged " + data[key]}
    return {**data, "forged": True}


def rehash(ledger: Path, seq: int, edit: Callable[[list[Any]], None], *, through_tail: bool = False) -> None:
    """Edit row `seq` (the row as a list, columns as in COLUMNS) and recompute its hash; with
    `through_tail`, re-link and re-hash every later row too (a whole rewritten chain)."""
    all_rows = rows(ledger)
    changed = []
    prev = all_rows[seq - 2][13] if seq > 1 else "0" * 64
    for row in all_rows[seq - 1 :]:
        if row[0] == seq:
            edit(row)
        elif not through_tail:
            break
        else:
            row[12] = prev
        row[13] = chain_hash(row[12], row[:13])
        prev = row[13]
        changed.append(row)
    _write_rows(ledger, changed)


def payload_editor(row: list[Any]) -> None:
    row[11] = orjson.dumps(edit_payload(orjson.loads(row[11])), option=orjson.OPT_SORT_KEYS).decode()
