"""The lean path of `memtape serve` (memtape/http_calls.py): it answers the table's calls without
FastAPI's per-request work, and it answers exactly as FastAPI would: the same status and, for a
refusal, the same one line, for any body or query an agent (or an adversary) sends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi.routing
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import memtape
from memtape.http_calls import DirectCalls
from memtape.server import create_app

TOKEN = "t0ken"
RUN = "run-lean"
SHOP = "https://shop.example/"
BLOCKED = "element intercepts pointer events"


def _client(app: FastAPI) -> TestClient:
    """A client as a live server's sees it: a bug is a 500 answer, not an exception in the test."""
    return TestClient(
        app, base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {TOKEN}"}, raise_server_exceptions=False
    )


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient]]:
    """Two servers on two memories, one run of the same id in each: the lean one as served, and
    one without the lean path (every request through FastAPI's routes, as before it)."""
    root = tmp_path_factory.mktemp("twins")
    with memtape.open(root / "lean") as lean_memory, memtape.open(root / "plain") as plain_memory:
        lean = create_app(lean_memory, TOKEN)
        plain = create_app(plain_memory, TOKEN)
        plain.user_middleware = [m for m in plain.user_middleware if m.cls is not DirectCalls]
        with _client(lean) as lean_http, _client(plain) as plain_http:
            for http in (lean_http, plain_http):
                answer = http.post("/runs", json={"goal": "Buy wool socks", "start_url": SHOP, "run_id": RUN})
                assert answer.status_code == 201, answer.text
            yield lean_http, plain_http


def _same(lean: Any, plain: Any) -> None:
    assert lean.status_code == plain.status_code and lean.status_code < 500, (lean.text, plain.text)
    if lean.status_code >= 300:
        assert lean.json() == plain.json()
        assert set(lean.json()) == {"error"}
    elif isinstance(plain.json(), dict):
        assert set(lean.json()) == set(plain.json())
    else:
        assert type(lean.json()) is type(plain.json())


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
step_bodies = st.fixed_dictionaries(
    {},
    optional={
        "step": values,
        "action": st.one_of(st.sampled_from(["click", "fill", "goto"]), values),
        "target": st.one_of(st.just('button "Buy"'), values),
        "ok": values,
        "error": st.one_of(st.just(BLOCKED), values),
        "url": st.one_of(st.just(SHOP + "p/1"), values),
        "unknown": values,
    },
)
query_values = st.one_of(st.text(max_size=25), st.sampled_from(["1", "0", "-1", "2" * 40, "１２", "1.5", "", "true"]))
recall_queries = st.dictionaries(st.sampled_from(["command", "error", "step", "k", "other"]), query_values, max_size=5)
state_queries = st.dictionaries(st.sampled_from(["as_of", "until", "domain", "limit"]), query_values, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=step_bodies)
def test_a_step_body_is_answered_as_fastapi_answers_it(twins: tuple[TestClient, TestClient], body: Any) -> None:
    lean, plain = twins
    _same(lean.post(f"/runs/{RUN}/steps", json=body), plain.post(f"/runs/{RUN}/steps", json=body))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=recall_queries)
def test_a_recall_query_is_answered_as_fastapi_answers_it(twins: tuple[TestClient, TestClient], query: Any) -> None:
    lean, plain = twins
    path = f"/runs/{RUN}/recall/error"
    _same(lean.get(path, params=query), plain.get(path, params=query))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["lessons", "facts", "nothing", "runs"]), query=state_queries)
def test_a_read_is_answered_as_fastapi_answers_it(
    twins: tuple[TestClient, TestClient], kind: str, query: dict[str, str]
) -> None:
    lean, plain = twins
    _same(lean.get(f"/state/{kind}", params=query), plain.get(f"/state/{kind}", params=query))


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b'{"step": NaN, "action": "click", "target": "x", "ok": true}', "application/json"),
        (b'{"step": 1, "action": "click", "target": "x", "ok": true', "application/json"),
        (b"[" * 5000 + b"]" * 5000, "application/json"),
        (b"", "application/json"),
        (b'{"step": 1}\n', "application/x-ndjson"),
        ('{"step": 1, "action": "click", "target": "\u00e9", "ok": true}'.encode("utf-16"), "application/json"),
    ],
)
def test_a_body_fastapi_refuses_is_refused_in_its_words(
    twins: tuple[TestClient, TestClient], content: bytes, kind: str
) -> None:
    lean, plain = twins
    headers = {"Content-Type": kind}
    _same(
        lean.post(f"/runs/{RUN}/steps", content=content, headers=headers),
        plain.post(f"/runs/{RUN}/steps", content=content, headers=headers),
    )


def test_the_table_calls_skip_fastapis_endpoint_machinery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With FastAPI's endpoint runner broken, the lean path still answers what it takes (a valid
    record, recall, a keyed write and its replay); a body it hands on is refused by FastAPI's own
    validation, and a route outside the table (POST /events) reaches the broken runner."""

    async def broken(**_: Any) -> Any:
        raise RuntimeError("FastAPI's endpoint runner was called")

    with memtape.open(tmp_path / "memory") as memory:
        app = create_app(memory, TOKEN)
        with _client(app) as http:
            run = http.post("/runs", json={"goal": "g", "start_url": SHOP}).json()["run_id"]
            monkeypatch.setattr(fastapi.routing, "run_endpoint_function", broken)
            step = {"step": 1, "action": "click", "target": 'button "Buy"', "ok": False, "error": BLOCKED}
            recorded = http.post(f"/runs/{run}/steps", json=step)
            assert recorded.status_code == 200 and recorded.json()["event_id"]
            recalled = http.get(f"/runs/{run}/recall/error", params={"command": "click", "error": BLOCKED})
            assert recalled.status_code == 200 and isinstance(recalled.json(), list)
            keyed = http.post(f"/runs/{run}/steps", json={**step, "step": 2}, headers={"Idempotency-Key": "k1"})
            again = http.post(f"/runs/{run}/steps", json={**step, "step": 2}, headers={"Idempotency-Key": "k1"})
            assert again.json() == keyed.json() and again.headers["Idempotent-Replayed"] == "true"
            refused = http.post(f"/runs/{run}/steps", json={"step": "one"})
            assert refused.status_code == 422 and refused.json()["error"].startswith("step:")
            appended = http.post("/events", content=b"", headers={"Content-Type": "application/x-ndjson"})
            assert appended.status_code == 500 and appended.json() == {"error": "internal error (RuntimeError)"}
        steps = [ev.step for ev in memory.store.read(types=["step_recorded"])]
    assert steps == [1, 2]


@pytest.mark.postgres
def test_the_lean_path_on_a_postgresql_ledger(pg_url: str) -> None:
    """The same calls on the PostgreSQL store: recorded, recalled, a keyed write replayed, a
    refusal FastAPI's; what was answered is in the ledger."""
    with memtape.open(pg_url) as memory:
        with _client(create_app(memory, TOKEN)) as http:
            run = http.post("/runs", json={"goal": "g", "start_url": SHOP}).json()["run_id"]
            step = {"step": 1, "action": "click", "target": 'button "Buy"', "ok": False, "error": BLOCKED}
            recorded = http.post(f"/runs/{run}/steps", json=step, headers={"Idempotency-Key": "pg-1"})
            again = http.post(f"/runs/{run}/steps", json=step, headers={"Idempotency-Key": "pg-1"})
            assert recorded.status_code == 200 and again.json() == recorded.json()
            assert again.headers["Idempotent-Replayed"] == "true"
            recalled = http.get(f"/runs/{run}/recall/error", params={"command": "click", "error": BLOCKED, "step": 2})
            assert recalled.status_code == 200 and isinstance(recalled.json(), list)
            assert http.post(f"/runs/{run}/steps", json={**step, "step": -1}).status_code == 400
        stored = [ev.id for ev in memory.store.read(types=["step_recorded"])]
    assert stored == [recorded.json()["event_id"]]
