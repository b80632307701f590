"""A tamper-evident chain, as a property: whatever single row is edited — any column, re-hashed or not, the
tail included — `verify` (the chain walk, then the remembered head) names exactly that seq."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memtape.ledger.anchor import HeadFile, remember_head, verify_ledger
from memtape.ledger.clock import SteppingClock
from memtape.ledger.errors import ChainBroken
from memtape.ledger.store import COLUMNS, ChainCheck, SqliteStore, chain_hash
from tests.ledger_samples import sample_event

N = 9
EDITABLE = COLUMNS[1:13]  # every column but seq and the row's own hash


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("chain")
    with SqliteStore.open(d / "ledger.db", clock=SteppingClock()) as store:
        store.append(
            [
                sample_event(t, run_id="r1", domain="a.com")
                for t in (
                    "run_started",
                    "lesson_recorded",
                    "fact_observed",
                    "run_progress",
                    "lesson_recorded",
                    "selector_succeeded",
                    "run_progress",
                    "fact_observed",
                    "run_completed",
                )
            ]
        )
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
def test_any_single_edit_is_named_exactly(
    template: Path, tmp_path: Path, seq: int, column: str, rehashed: bool
) -> None:
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


def _outcome(check: Any, rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """What a chain check says about rows fed in pages: the first break (seq, reason), or where it
    stands (last seq, its hash, rows counted)."""
    chain = ChainCheck()
    try:
        for page in (rows[:4], rows[4:]):
            check(chain, page)
        chain.finish(last=True)
    except ChainBroken as exc:
        return ("broken", exc.seq, exc.reason, exc.rewritten_tail)
    return ("ok", chain.seq, chain.hash, chain.count)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seq=st.integers(1, N),
    column=st.sampled_from((*EDITABLE, "seq", "hash")),
    rehashed=st.booleans(),
    dropped=st.booleans(),
)
def test_a_page_is_checked_exactly_as_row_by_row(
    template: Path, seq: int, column: str, rehashed: bool, dropped: bool
) -> None:
    """`check_page`, the hot path of every verified read, names the same break (or none) as `check`
    row by row, whatever single row is edited, re-hashed or dropped, on either side of a page."""
    conn = sqlite3.connect(template / "ledger.db")
    try:
        rows = [list(r) for r in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY seq")]
    finally:
        conn.close()
    if dropped:
        del rows[seq - 1]
    else:
        i = COLUMNS.index(column)
        rows[seq - 1][i] = (
            _changed(rows[seq - 1][i], column)
            if column not in ("seq", "hash")
            else (rows[seq - 1][i] + 100 if column == "seq" else "f" * 64)
        )
        if rehashed and column != "hash":
            rows[seq - 1][13] = chain_hash(rows[seq - 1][12], rows[seq - 1][:13])
    pages = [tuple(r) for r in rows]
    row_by_row = _outcome(lambda chain, page: [chain.check(row) for row in page], pages)
    assert _outcome(lambda chain, page: chain.check_page(page), pages) == row_by_row
    assert row_by_row[0] == "broken" or seq == N  # a re-hashed or dropped tail: only a remembered head tells


def test_an_intact_ledger_checks_whole_in_pages(template: Path) -> None:
    conn = sqlite3.connect(template / "ledger.db")
    try:
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    assert _outcome(lambda chain, page: chain.check_page(page), rows) == ("ok", N, rows[-1][13], N)
