"""Issue 19 item 3, as a property: whatever single row is edited — any column, re-hashed or not, the
tail included — `verify` (the chain walk, then the remembered head) names exactly that seq."""
from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memledger.ledger.anchor import HeadFile, remember_head, verify_ledger
from memledger.ledger.clock import SteppingClock
from memledger.ledger.store import COLUMNS, SqliteStore, chain_hash
from tests.ledger_samples import sample_event

N = 9
EDITABLE = COLUMNS[1:13]  # every column but seq and the row's own hash


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("chain")
    with SqliteStore.open(d / "ledger.db", clock=SteppingClock()) as store:
        store.append([sample_event(t, run_id="r1", domain="a.com") for t in
                      ("run_started", "lesson_recorded", "fact_observed", "run_progress", "lesson_recorded",
                       "selector_succeeded", "run_progress", "fact_observed", "run_completed")])
        remember_head(store, [HeadFile(d / "ledger.head")])
    return d


def _changed(value: object, column: str) -> object:
    if column in ("stream_version", "schema_version", "step"):
        return (value or 0) + 100  # type: ignore[operator]
    if column == "payload":
        return str(value)[:-1] + ',"x":1}'
    if column == "prev_hash":
        return "e" * 64
    return f"{value}x"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.integers(1, N), column=st.sampled_from(EDITABLE), rehashed=st.booleans())
@example(seq=N, column="prev_hash", rehashed=True)  # the tail re-linked: only the remembered head tells
@example(seq=N - 1, column="payload", rehashed=True)  # the row before the tail: its successor tells
@example(seq=1, column="prev_hash", rehashed=True)
@example(seq=N, column="payload", rehashed=True)
def test_any_single_edit_is_named_exactly(template: Path, tmp_path: Path, seq: int, column: str, rehashed: bool) -> None:
    d = Path(tempfile.mkdtemp(dir=tmp_path)) / "memory"
    shutil.copytree(template, d)
    conn = sqlite3.connect(d / "ledger.db")
    conn.execute("DROP TRIGGER events_no_update")
    row = list(conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events WHERE seq = ?", (seq,)).fetchone())
    i = COLUMNS.index(column)
    row[i] = _changed(row[i], column)
    if rehashed:
        row[13] = chain_hash(row[12], row[:13])
    conn.execute(f"UPDATE events SET {column} = ?, hash = ? WHERE seq = ?", (row[i], row[13], seq))
    conn.commit()
    conn.close()
    with SqliteStore.open(d / "ledger.db") as store:
        result = verify_ledger(store, [HeadFile(d / "ledger.head")])
    assert (result.ok, result.first_bad_seq) == (False, seq), (column, rehashed, result)
