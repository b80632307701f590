"""`memtape serve`: every route through a real HTTP client against a live server, logging
what the library call of the same name logs; bad input is a 4xx with one line and writes
nothing; a token guards every route; concurrent clients lose nothing."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from tests.cli_runner import run_cli
from tests.faces_support import ROUTES
from tests.server_support import Served, live_server

SHOP = "https://shop.example/"
BLOCKED = "element intercepts pointer events"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> tuple[Served, Path]:
    memory = tmp_path_factory.mktemp("served") / "memory"
    with live_server(memory) as served:
        yield served, memory


def _types(memory: Path, run_id: str) -> list[str]:
    with memtape.open(memory) as mem:
        return [ev.type for ev in mem.store.read(run_id=run_id)]


def test_openapi_lists_every_route(server: tuple[Served, Path]) -> None:
    served, _ = server
    spec = httpx.get(f"{served.base}/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    # every call of the faces' flow (one route each, finish_run sharing finish's) and `memtape append`
    wanted = {(method, path.replace("{run}", "{run_id}")) for method, path in ROUTES.values()} | {("post", "/events")}
    have = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    assert have == wanted
    assert spec["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert spec["security"] == [{"bearer": []}]
    error = {"$ref": "#/components/schemas/Error"}
    for method, path in wanted:
        answers = spec["paths"][path][method]["responses"]
        assert all(answers[s]["content"]["application/json"]["schema"] == error for s in ("401", "404", "422")), (
            path,
            answers,
        )


def test_two_runs_over_http_second_recalls_what_the_first_taught(server: tuple[Served, Path]) -> None:
    served, memory = server
    with served.client() as http:
        first = http.post("/runs", json={"goal": "Buy wool socks", "start_url": SHOP}).json()["run_id"]
        assert http.get(f"/runs/{first}/tier1").status_code == 200
        assert http.get(f"/runs/{first}/recall/domain", params={"step": 1}).json() == []
        assert (
            http.post(
                f"/runs/{first}/steps",
                json={
                    "step": 1,
                    "action": "click",
                    "target": 'button "Buy"',
                    "url": SHOP + "p/1",
                    "ok": False,
                    "error": BLOCKED,
                },
            ).status_code
            == 200
        )
        http.get(f"/runs/{first}/recall/error", params={"command": "click", "error": BLOCKED, "step": 1})
        lesson = http.post(
            f"/runs/{first}/lessons",
            json={
                "text": "Accept the cookie banner before clicking Buy",
                "category": "site_specific",
                "scope_domain": "shop.example",
                "step": 2,
            },
        ).json()["lesson_id"]
        assert lesson
        assert (
            http.post(
                f"/runs/{first}/facts",
                json={"kind": "quirk", "key": "cookie banner", "value": "blocks clicks until accepted", "step": 2},
            ).status_code
            == 200
        )
        assert (
            http.post(
                f"/runs/{first}/selectors", json={"element": 'button "Buy"', "selector": "#buy", "ok": True, "step": 3}
            ).status_code
            == 200
        )
        assert http.post(f"/runs/{first}/finish", json={"success": True, "outcome": "bought"}).status_code == 200

        second = http.post("/runs", json={"goal": "Buy wool socks", "start_url": SHOP}).json()["run_id"]
        site = http.get(f"/runs/{second}/recall/domain", params={"step": 1}).json()
        assert [l["text"] for l in site] == ["Accept the cookie banner before clicking Buy"]
        assert site[0]["lesson_id"] == lesson and site[0]["event_ids"]
        assert (site[0]["matched"], site[0]["score"]) == ("host", 2.0)
        assert (
            http.post(
                f"/runs/{second}/context",
                json={
                    "items": [
                        {
                            "source": "domain_tips",
                            "text": site[0]["text"],
                            "priority": 60,
                            "event_ids": site[0]["event_ids"],
                        }
                    ],
                    "step": 1,
                    "budget": 2500,
                },
            ).status_code
            == 200
        )
        http.post(f"/runs/{second}/finish", json={"success": True})

        audit = http.get(f"/audit/{second}", params={"step": 1}).json()
        origins = {o["run_id"] for i in audit["steps"][0]["prompt"][0]["items"] for o in i["origins"]}
        assert origins == {first}
        assert http.get("/state/lessons").json() and any(
            f["key"] == "cookie banner" for f in http.get("/state/facts", params={"domain": "shop.example"}).json()
        )
        runs = {r["run_id"]: r["status"] for r in http.get("/state/runs").json()}
        assert runs[first] == runs[second] == "completed"
    # the same events the library logs for the same calls
    first_types = _types(memory, first)
    for t in (
        "run_started",
        "tier1_loaded",
        "domain_recall",
        "step_recorded",
        "error_recall",
        "lesson_recorded",
        "fact_observed",
        "run_completed",
    ):
        assert t in first_types, t
    assert "context_built" in _types(memory, second)


def test_events_route_takes_append_lines(server: tuple[Served, Path]) -> None:
    served, memory = server
    line = {
        "type": "fact_observed",
        "domain": "news.example",
        "fact_type": "quirk",
        "key": "paywall",
        "value": "after 3 articles",
    }
    with served.client() as http:
        answer = http.post("/events", content=json.dumps(line) + "\n", headers={"Content-Type": "application/x-ndjson"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["appended"] >= 1
        facts = http.get("/state/facts", params={"domain": "news.example"}).json()
    assert [f["value"] for f in facts] == ["after 3 articles"]


BAD = [
    ("post", "/runs", {"goal": "", "start_url": SHOP}),
    ("post", "/runs", {"goal": 3, "start_url": SHOP}),
    ("post", "/runs", {"goal": "g", "start_url": SHOP, "extra": 1}),
    ("post", "/runs/no-such-run/steps", {"step": 1, "action": "click", "ok": True}),
    ("post", "/runs/{run}/steps", {"step": "1", "action": "click", "ok": True}),
    ("post", "/runs/{run}/steps", {"step": -1, "action": "click", "ok": True}),
    ("post", "/runs/{run}/steps", {"step": 2**63, "action": "click", "ok": True}),
    ("post", "/runs/{run}/steps", {"step": 1, "action": "click", "ok": "yes"}),
    ("post", "/runs/{run}/lessons", {"text": "", "category": "error_recovery"}),
    ("post", "/runs/{run}/facts", {"kind": "quirk", "key": "k"}),
    ("post", "/runs/{run}/context", {"items": "nope", "step": 1}),
    ("post", "/runs/{run}/finish", {"success": "true"}),
    ("post", "/events", "not json\n"),
    ("post", "/events", '{"type": "no_such_type"}\n'),
    ("get", "/state/nothing", None),
    ("get", "/audit/no-such-run", None),
]


def test_bad_input_is_a_4xx_with_one_line_and_writes_nothing(server: tuple[Served, Path]) -> None:
    served, memory = server
    with served.client() as http:
        run = http.post("/runs", json={"goal": "Bad input probe", "start_url": SHOP}).json()["run_id"]
        before = _event_count(memory)
        for method, path, body in BAD:
            path = path.replace("{run}", run)
            if isinstance(body, str):
                answer = http.request(method, path, content=body, headers={"Content-Type": "application/x-ndjson"})
            else:
                answer = http.request(method, path, json=body)
            assert 400 <= answer.status_code < 500, (path, body, answer.status_code, answer.text)
            error = answer.json()["error"]
            assert isinstance(error, str) and error and "\n" not in error, (path, error)
        assert _event_count(memory) == before


def _event_count(memory: Path) -> int:
    with memtape.open(memory) as mem:
        return int(mem.store.head())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.dictionaries(
        st.sampled_from(["step", "action", "target", "url", "ok", "error", "x"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.text(max_size=30),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
    )
)
def test_any_step_body_is_recorded_or_refused_cleanly(server: tuple[Served, Path], body: dict[str, object]) -> None:
    served, memory = server
    with served.client() as http:
        run = http.post("/runs", json={"goal": "Fuzzed steps", "start_url": SHOP}).json()["run_id"]
        before = _event_count(memory)
        answer = http.post(f"/runs/{run}/steps", json=body)
    assert answer.status_code in (200, 400, 404, 409, 422), answer.text
    if answer.status_code != 200:
        assert "\n" not in answer.json()["error"]
        assert _event_count(memory) == before


def test_token_required_when_set(tmp_path: Path) -> None:
    with live_server(tmp_path / "memory", token="s3cret") as served:
        base = served.base
        assert httpx.post(f"{base}/runs", json={"goal": "g", "start_url": SHOP}).status_code == 401
        wrong = httpx.get(f"{base}/state/lessons", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json() == {"error": "missing or wrong bearer token"}
        ok = httpx.post(
            f"{base}/runs", json={"goal": "g", "start_url": SHOP}, headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 201
        assert httpx.get(f"{base}/openapi.json").status_code == 200


def test_eight_concurrent_clients_lose_nothing(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    per_client = 200
    with live_server(memory) as served:

        def client(n: int) -> tuple[str, int]:
            with served.client(timeout=120) as http:
                run = http.post("/runs", json={"goal": f"Client {n} buys socks", "start_url": SHOP}).json()["run_id"]
                done = 1
                for i in range(1, per_client - 1):
                    if i % 2:
                        answer = http.post(
                            f"/runs/{run}/steps",
                            json={"step": i, "action": "click", "target": f'button "B{i}"', "ok": True},
                        )
                    else:
                        answer = http.get(
                            f"/runs/{run}/recall/error", params={"command": "click", "error": BLOCKED, "step": i}
                        )
                    assert answer.status_code == 200, answer.text
                    done += 1
                assert http.post(f"/runs/{run}/finish", json={"success": True}).status_code == 200
                return run, done + 1

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(client, range(8)))
    assert sum(n for _, n in results) == 8 * per_client
    with memtape.open(memory) as mem:
        events = list(mem.store.read())
        seqs = [ev.seq for ev in events]
        assert seqs == list(range(1, len(seqs) + 1))
        for run, _ in results:
            steps = [ev for ev in events if ev.run_id == run and ev.type == "step_recorded"]
            assert len(steps) == per_client // 2 - 1
        assert {r.status for r in mem.state("runs")} == {"completed"}
    verified = run_cli("--memory-dir", str(memory), "verify")
    assert verified.code == 0, verified.err
