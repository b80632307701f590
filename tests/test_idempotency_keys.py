"""`Memory.once` finds a key under every name it was ever written with, in one indexed query."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtape
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import KeyReused
from memtape.ledger.events import RequestAnswered
from memtape.ledger.store import SqliteTransaction


@pytest.fixture
def stream_queries(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The stream lookups every write transaction runs, by SQL text."""
    seen: list[str] = []
    fetch = SqliteTransaction._fetch

    def counted(self: SqliteTransaction, sql: str, params: Any = ()) -> Any:
        if "stream" in sql and "WHERE" in sql:
            seen.append(sql)
        return fetch(self, sql, params)

    monkeypatch.setattr(SqliteTransaction, "_fetch", counted)
    yield seen


def _legacy_answer(mem: Any, key: str, request: str, body: Any) -> str:
    """An answer as an earlier version wrote it: under `request-<hex>`, which the redactor may
    rename; returns the stream the ledger holds it in."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    answered = NewEvent(RequestAnswered(request_sha256=request, status=201, response=body), stream=f"request-{digest}")
    (recorded,) = mem.append([answered])
    return str(recorded.stream)


def _never(*_: Any) -> tuple[int, Any]:
    raise AssertionError("an answered key ran its request again")


def test_a_new_key_costs_one_lookup_and_an_old_key_is_answered_from_its_legacy_stream(
    tmp_path: Path, stream_queries: list[str]
) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        stream = _legacy_answer(mem, "old-key", "r1", {"run_id": "r-old"})
        assert stream.startswith(("request-", "redacted-")) and not stream.startswith("request-sha256-")
        stream_queries.clear()
        assert mem.once("new-key", "r2", lambda: (200, {"n": 1})) == (200, {"n": 1}, False)
        assert len(stream_queries) == 1 and "stream IN" in stream_queries[0]
        stream_queries.clear()
        assert mem.once("old-key", "r1", _never) == (201, {"run_id": "r-old"}, True)
        assert len(stream_queries) == 1
        with pytest.raises(KeyReused):
            mem.once("old-key", "another", _never)
        assert mem.once("new-key", "r2", _never) == (200, {"n": 1}, True)
    with memtape.open(tmp_path / "mem") as again:  # a reopened ledger answers both
        assert again.once("old-key", "r1", _never)[2] is True
        assert again.once("new-key", "r2", _never)[2] is True
        kinds = [e.stream for e in again.store.read(types=["request_answered"])]
    assert kinds == [stream, f"request-sha256-{hashlib.sha256(b'new-key').hexdigest()}"]


@settings(max_examples=25, deadline=None)
@given(key=st.text(min_size=1, max_size=200).filter(lambda k: k.isprintable() and k.strip() == k))
def test_any_legacy_key_is_answered_once_and_never_rewritten(tmp_path_factory: Any, key: str) -> None:
    with memtape.open(tmp_path_factory.mktemp("mem")) as mem:
        _legacy_answer(mem, key, "req", ["first"])
        assert mem.once(key, "req", _never) == (201, ["first"], True)
        assert len(list(mem.store.read(types=["request_answered"]))) == 1
