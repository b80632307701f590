"""Property tests: what goes into the ledger comes out byte for byte, and bad batches write nothing."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import normalize_ts
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import PAYLOAD_ADAPTER, RunCompleted
from memtape.ledger.redact import MARKER, default_redactor
from memtape.ledger.store import SqliteStore, serialize_payload
from tests.ledger_samples import new_events, sample_event

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fixed_clock() -> datetime:
    return datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM events ORDER BY seq").fetchall()


@FAST
@given(st.lists(new_events(), min_size=1, max_size=8), st.integers(1, 3))
def test_valid_sequences_round_trip_byte_for_byte(batch: list[NewEvent], chunks: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ledger.db"
        with SqliteStore.open(path) as store:
            returned = []
            size = max(1, len(batch) // chunks)
            for i in range(0, len(batch), size):
                returned += store.append(batch[i : i + size])
            back = list(store.read())
            assert [e.as_dict() for e in back] == [e.as_dict() for e in returned]
            assert [e.seq for e in back] == list(range(1, len(batch) + 1))
            for original, ev in zip(batch, back):
                expected = serialize_payload(original.payload, default_redactor())
                assert ev.payload_json == expected
                assert ev.data == orjson.loads(expected)
                assert ev.type == original.type
                assert (ev.run_id, ev.step, ev.domain) == (original.run_id, original.step, original.domain)
                assert ev.stream == original.resolved_stream
                if original.occurred_at is None:
                    assert ev.occurred_at == ev.recorded_at
                else:
                    assert ev.occurred_at == normalize_ts(original.occurred_at)
                if MARKER not in ev.payload_json:
                    assert ev.payload.model_dump() == original.payload.model_dump()
                    assert ev.payload == original.payload
            assert store.verify().ok
        stored = rows(path)
        assert [r[11] for r in stored] == [e.payload_json for e in back]  # the payload column, unchanged bytes
        with SqliteStore.open(path) as again:  # a reopened store reads the same bytes and hashes
            assert [e.as_dict() for e in again.read()] == [e.as_dict() for e in back]


def _invalid_items(existing_id: str) -> list[tuple[str, Any]]:
    big = RunCompleted.model_construct(success=True, turns=2**70)
    surrogate = RunCompleted.model_construct(success=True, summary="bad \udc80 text")
    return [
        ("not an event", {"type": "lesson_seeded"}),
        ("id already in the ledger", sample_event("lesson_seeded", id=existing_id)),
        ("integer beyond 64 bits", NewEvent(payload=big, run_id="r1")),
        ("lone surrogate", NewEvent(payload=surrogate, run_id="r1")),
    ]


@FAST
@given(st.lists(new_events(), min_size=0, max_size=6), st.integers(0, 3), st.data())
def test_invalid_sequences_write_nothing(batch: list[NewEvent], which: int, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ledger.db"
        with SqliteStore.open(path) as store:
            first = store.append([sample_event("lesson_seeded", id="seed-1"), sample_event("run_started")])
            before = rows(path)
            _, bad = _invalid_items(first[0].id)[which]
            pos = data.draw(st.integers(0, len(batch)))
            attempt = [*batch[:pos], bad, *batch[pos:]]
            with pytest.raises(LedgerError):
                store.append(attempt)
            assert store.head() == 2
            assert rows(path) == before
            store.append([sample_event("run_progress")])  # the store is still usable afterwards
            assert store.verify().ok and store.head() == 3


def test_duplicate_ids_inside_one_batch_write_nothing(fresh_ledger: SqliteStore) -> None:
    batch = [
        sample_event("lesson_seeded", id="same"),
        sample_event("run_started"),
        sample_event("lesson_seeded", id="same"),
    ]
    with pytest.raises(LedgerError):
        fresh_ledger.append(batch)
    assert fresh_ledger.head() == 0


@FAST
@given(st.lists(new_events(), min_size=1, max_size=12), st.lists(st.integers(1, 5), min_size=1, max_size=12))
def test_chunking_does_not_change_hashes(batch: list[NewEvent], sizes: list[int]) -> None:
    batch = [
        NewEvent(
            payload=e.payload,
            run_id=e.run_id,
            step=e.step,
            domain=e.domain,
            stream=e.stream,
            occurred_at=e.occurred_at,
            id=f"ev-{i}",
        )
        for i, e in enumerate(batch)
    ]
    with tempfile.TemporaryDirectory() as d:
        with SqliteStore.open(Path(d) / "one.db", clock=fixed_clock) as one:
            whole = [(e.seq, e.id, e.stream_version, e.hash) for e in one.append(batch)]
        with SqliteStore.open(Path(d) / "many.db", clock=fixed_clock) as many:
            i, k = 0, 0
            while i < len(batch):
                n = sizes[k % len(sizes)]
                many.append(batch[i : i + n])
                i, k = i + n, k + 1
            chunked = [(e.seq, e.id, e.stream_version, e.hash) for e in many.read()]
        assert chunked == whole


def test_recorded_at_never_goes_backwards(ledger_path: Path) -> None:
    times = iter([datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC)])
    with SqliteStore.open(ledger_path, clock=lambda: next(times)) as store:
        for _ in range(3):
            store.append([sample_event("lesson_seeded")])
        recorded = [e.recorded_at for e in store.read()]
    assert recorded == sorted(recorded)
    assert recorded[1] == recorded[0]


def test_payload_model_is_rebuilt_from_data(fresh_ledger: SqliteStore) -> None:
    (ev,) = fresh_ledger.append([sample_event("step_recorded", text="click the button")])
    again = next(fresh_ledger.read())
    assert again.payload == PAYLOAD_ADAPTER.validate_python({"type": "step_recorded", **again.data})
    assert again.payload.model_dump_json() == ev.payload.model_dump_json()
