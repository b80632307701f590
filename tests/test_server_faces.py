"""HTTP is a full face of the Python API: every argument of every library call is a field of its
route, with the library's default; an agent's two runs made with every field over a real
`memtape serve` (uvicorn) log the events the library logs for the same calls and get the same
answers; every answer, refusals and unknown routes included, is what `/openapi.json` declares."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import memtape
from memtape.api import MemtapeError
from memtape.server import create_app
from tests.faces_support import (
    FLOW,
    LOCAL_CALLS,
    MEMORY_CALLS,
    ONE_FACE_CALLS,
    QUERY_NAMES,
    RECORDING,
    ROUTES,
    RUN_READS,
    RUN_REFUSED,
    SECRET,
    SHARED,
    SHOP,
    answers_equal,
    extremes,
    finished_run,
    library_call,
    plain,
    public_calls,
    qualified,
    raw_bytes,
    run_events,
    steady,
    through_library,
)
from tests.server_support import Served, live_server

PATH_FIELDS = ("kind", "run_id", "item", "key")
#: arguments a route leaves to its caller: get_scratch's default (a key never set answers null)
CALLERS_OWN = {"get_scratch": "default"}
#: answers that come as one object holding the library's value
UNWRAPPED = {
    "count": "count",
    "get_scratch": "value",
    "abandon_stale_runs": "abandoned",
    "infer_context": "recorded",
    "known_failure": "signature",
    "recorded_embedding": "vector",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path, dict[str, Any]]]:
    memory = tmp_path_factory.mktemp("faces") / "memory"
    with live_server(memory) as server:
        yield server, memory, httpx.get(f"{server.base}/openapi.json").json()


def _operation(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return spec["paths"][path.replace("{run}", "{run_id}")][method]  # type: ignore[no-any-return]


def _resolved(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def conforms(spec: dict[str, Any], schema: dict[str, Any], body: Any) -> None:
    """`body` is valid against `schema`, a schema of the document (its $refs resolved in it)."""
    Draft202012Validator({**schema, "components": spec["components"]}).validate(body)


def answered_as_declared(spec: dict[str, Any], method: str, path: str, answer: httpx.Response) -> None:
    """The status is one the route declares and the body is valid against its schema."""
    responses = _operation(spec, method, path)["responses"]
    assert str(answer.status_code) in responses, (method, path, answer.status_code, sorted(responses))
    conforms(spec, responses[str(answer.status_code)]["content"]["application/json"]["schema"], answer.json())


def _fields(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """Every field a route takes (path, query, body) -> its declared default (`...` when required;
    an optional field declared without one defaults to null)."""
    operation = _operation(spec, method, path)
    fields = {
        p["name"]: p.get("schema", {}).get("default") if not p.get("required") else ...
        for p in operation.get("parameters", [])
        if p["in"] in ("path", "query")
    }
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        schema = _resolved(spec, body["schema"])
        for name, field in schema["properties"].items():
            fields[name] = ... if name in schema.get("required", ()) else field.get("default")
    return fields


def _library_fields(name: str) -> dict[str, Any]:
    method = library_call(name)
    return {
        p.name: ...
        if p.default is inspect.Parameter.empty
        else (list(p.default) if isinstance(p.default, tuple) else p.default)
        for p in list(inspect.signature(method).parameters.values())[1:]
    }


def test_every_library_argument_is_a_route_field_with_its_default(served: tuple[Served, Path, dict[str, Any]]) -> None:
    _, _, spec = served
    for name, (method, path) in ROUTES.items():
        wanted = _library_fields(name)
        wanted.pop(CALLERS_OWN.get(name, ""), None)
        if name not in MEMORY_CALLS:
            wanted["run_id"] = ...  # the run, in the path
        named = QUERY_NAMES.get(name, {})  # a field the query string names otherwise (diff's from= and to=)
        fields = {field: value for field, value in _fields(spec, method, path).items() if field not in named.values()}
        fields |= {argument: _fields(spec, method, path)[query] for argument, query in named.items()}
        if name in SHARED:  # the route of another call, taking more: every argument of this one
            fields = {field: fields.get(field, "missing") for field in wanted}
        assert fields == wanted, name


def test_every_public_call_of_the_library_has_its_route(served: tuple[Served, Path, dict[str, Any]]) -> None:
    """A public method added to `Run` or `Memory` fails here until it has a route (or a reason not to)."""
    _, _, spec = served
    offered = {qualified(name) for name in ROUTES}
    assert public_calls() - LOCAL_CALLS.keys() - ONE_FACE_CALLS.keys() == offered
    assert offered.isdisjoint(LOCAL_CALLS) and set(LOCAL_CALLS) <= public_calls()
    for name, (method, path) in ROUTES.items():
        operation = _operation(spec, method, path)
        assert operation["operationId"] == SHARED.get(name, name), name
    assert "/events" in spec["paths"]  # Memory.append


def test_the_document_declares_answers_errors_the_bearer_scheme_and_idempotency(
    served: tuple[Served, Path, dict[str, Any]],
) -> None:
    _, _, spec = served
    assert spec["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert spec["security"] == [{"bearer": []}]
    error = spec["components"]["schemas"]["Error"]
    assert error["required"] == ["error"] and error["additionalProperties"] is False
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # a 422 shape the server never sends
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            answers = operation["responses"]
            ok = [s for s in answers if s.startswith("2")]
            assert len(ok) == 1, (path, method)
            schema = answers[ok[0]]["content"]["application/json"]["schema"]
            assert set(schema) - {"title", "description"}, (path, method, "answers an undeclared shape")
            with_body = "requestBody" in operation
            refusals = {"400", "401", "403", "404", "409", "422", "500", "507"} | (
                {"413", "415"} if with_body else set()
            )
            assert set(answers) - set(ok) == refusals, (path, method)
            assert all(
                answers[s]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
                for s in refusals
            )
            keys = [
                p for p in operation.get("parameters", []) if p["in"] == "header" and p["name"] == "Idempotency-Key"
            ]
            assert len(keys) == (method == "post"), (path, method)


def _call(http: httpx.Client, name: str, arguments: dict[str, Any], run: str) -> httpx.Response:
    """Call `name` with `arguments` on its route, for run `run`."""
    method, path = ROUTES[name]
    rest = dict(arguments)
    url = path.replace("{run}", run)
    for field in PATH_FIELDS:
        if "{" + field + "}" in url:
            url = url.replace("{" + field + "}", quote(rest.pop(field), safe=""))
    if method == "post":
        return http.post(url, json=rest)  # every field, null ones included
    named = QUERY_NAMES.get(name, {})
    return http.get(url, params={named.get(k, k): v for k, v in rest.items() if v is not None})


def _through_http(http: httpx.Client, spec: dict[str, Any]) -> list[Any]:
    answers: list[Any] = []
    run = ""
    for name, arguments in FLOW:
        method, path = ROUTES[name]
        answer = _call(http, name, arguments, run)
        assert answer.status_code in (200, 201), (name, answer.text)
        answered_as_declared(spec, method, path, answer)
        if name == "start_run":
            run = answer.json()["run_id"]
        answers.append(answer.json())
    return answers


def test_two_runs_with_every_field_log_what_the_library_logs(
    served: tuple[Served, Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, _, spec = served
    memory = tmp_path / "served"  # a fresh memory: the answers hold seqs, sessions and the head
    with live_server(memory) as server, server.client() as http:
        answers = _through_http(http, spec)
    library = tmp_path / "library"
    answers_equal(
        answers, through_library(library), lambda name, answer: answer[UNWRAPPED[name]] if name in UNWRAPPED else answer
    )
    events = run_events(memory)
    assert events == run_events(library)
    types = [e[0] for e in events]
    for wanted in (
        "step_recorded",
        "error_recall",
        "domain_recall",
        "tier1_loaded",
        "lesson_recorded",
        "fact_observed",
        "selector_failed",
        "selector_succeeded",
        "context_built",
        "trajectory_recalled",
        "session_recorded",
        "run_completed",
    ):
        assert wanted in types, wanted
    steps = [e[4] for e in events if e[0] == "step_recorded"]
    assert steps[0]["env_before"]["elements"] and steps[0]["think"] == "buy the wool socks"
    assert steps[0]["duration_ms"] == 41.5 and steps[0]["target"]["selector"] == "#buy"
    assert steps[1]["action"]["sensitive"] and steps[2]["decided_by"] == "replay"
    assert SECRET.encode() not in raw_bytes(memory)


def test_a_finished_run_is_read_as_the_library_reads_it_and_refuses_writes(
    served: tuple[Served, Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, _, spec = served
    memory = tmp_path / "memory"
    run, library = finished_run(memory)
    with memtape.open(memory) as mem:
        with pytest.raises(MemtapeError, match="is already failed"):
            mem.run(run)  # a handle to record into: a finished run has none
        by_id = mem.read_run(run)
        assert [plain(getattr(by_id, name)(**arguments)) for name, arguments in RUN_READS] == library
        head = mem.store.head()
    with live_server(memory) as server, server.client() as http:
        for (name, arguments), want in zip(RUN_READS, library, strict=True):
            answer = _call(http, name, arguments, run)
            assert answer.status_code == 200, (name, answer.text)
            answered_as_declared(spec, *ROUTES[name], answer)
            got = answer.json()
            assert steady(got[UNWRAPPED[name]] if name in UNWRAPPED else got) == steady(want), name
        for name, arguments in RUN_REFUSED:
            answer = _call(http, name, arguments, run)
            assert answer.status_code == 409, (name, answer.text)
            assert run in answer.json()["error"], (name, answer.text)  # naming the run
    with memtape.open(memory) as mem:
        assert mem.store.head() == head  # the reads logged nothing, the refusals wrote nothing


def test_finish_answers_what_was_learned_not_python_reprs(served: tuple[Served, Path, dict[str, Any]]) -> None:
    server, _, spec = served
    with server.client() as http:
        run = http.post("/runs", json={"goal": "Open the sale page", "start_url": SHOP}).json()["run_id"]
        http.post(
            f"/runs/{run}/steps",
            json={
                "step": 1,
                "action": "click",
                "target": 'link "Sale"',
                "ok": False,
                "error": "Timeout 5000ms exceeded waiting for locator",
            },
        )
        http.post(f"/runs/{run}/steps", json={"step": 2, "action": "scroll", "args": {"direction": "down"}})
        http.post(
            f"/runs/{run}/steps",
            json={"step": 3, "action": "click", "target": 'link "Sale"', "url_after": SHOP + "sale"},
        )
        answer = http.post(f"/runs/{run}/finish", json={"success": True, "outcome": "on the sale page"})
    answered_as_declared(spec, "post", "/runs/{run}/finish", answer)
    learned = answer.json()
    assert learned["run_id"] == run and learned["success"] is True
    assert learned["trajectory"]["steps"][-1]["command"] == "finish"
    assert all(
        lesson["type"] == "lesson_recorded" and lesson["lesson_id"].startswith("lsn_") for lesson in learned["lessons"]
    )


REFUSED: list[tuple[str, str, str, dict[str, str], Any, int]] = [
    # (method, route as declared, URL, headers, body, status)
    ("post", "/runs/{run}/steps", "/runs/{run}/steps", {}, {"step": 1, "action": ""}, 400),
    ("get", "/state/{kind}", "/state/nothing", {}, None, 400),
    ("get", "/runs/{run}/sessions", "/runs/{run}/sessions", {"Authorization": "Bearer wrong"}, None, 401),
    ("get", "/runs/{run}/facts", "/runs/{run}/facts", {"Host": "rebound.example"}, None, 403),
    ("post", "/runs/{run}/lessons", "/runs/{run}/lessons", {"Origin": "https://evil.example"}, {"text": "x"}, 403),
    ("get", "/explain/{item}", "/explain/no-such-item", {}, None, 404),
    ("get", "/runs/{run}/loop_warnings", "/runs/run_nope/loop_warnings", {}, None, 404),
    (
        "post",
        "/runs/{run}/context",
        "/runs/{run}/context",
        {},
        {"items": [{"source": "s", "text": "t"}], "step": 1},
        422,
    ),
    ("get", "/runs/{run}/step_memories", "/runs/{run}/step_memories", {}, None, 422),
    ("post", "/experiment", "/experiment", {"Content-Type": "text/plain"}, "{}", 415),
    ("post", "/runs/{run}/selectors", "/runs/{run}/selectors", {}, "x" * (16 * 1024 * 1024 + 1), 413),
    ("post", "/runs/abandon_stale", "/runs/abandon_stale", {}, {"older_than": -1}, 422),
    ("post", "/runs/abandon_stale", "/runs/abandon_stale", {}, {"older_than": 1e300}, 422),
    ("get", "/recall/trajectory", "/recall/trajectory?goal=g&url=u&run_id=run_nope", {}, None, 404),
    ("post", "/runs/{run}/finish", "/runs/{finished}/finish", {}, {"success": True}, 409),
    ("post", "/runs/{run}/steps", "/runs/{finished}/steps", {}, {"step": 9, "action": "click"}, 409),
]


def test_every_refusal_is_declared_on_its_route_with_the_shape_sent(
    served: tuple[Served, Path, dict[str, Any]],
) -> None:
    server, _, spec = served
    with server.client() as http:
        run = http.post("/runs", json={"goal": "Refusals", "start_url": SHOP}).json()["run_id"]
        done = http.post("/runs", json={"goal": "Finished", "start_url": SHOP}).json()["run_id"]
        http.post(f"/runs/{done}/finish", json={"success": True}).raise_for_status()
        for method, route, url, headers, body, status in REFUSED:
            url = url.replace("{run}", run).replace("{finished}", done)
            if isinstance(body, str):
                answer = http.request(
                    method, url, content=body, headers={"Content-Type": "application/json", **headers}
                )
            else:
                answer = http.request(method, url, json=body, headers=headers)
            assert answer.status_code == status, (url, answer.status_code, answer.text)
            answered_as_declared(spec, method, route, answer)
            assert "\n" not in answer.json()["error"]
        # an unknown route and a wrong method answer the same shape
        for answer, status in (
            (http.get("/no/such/route"), 404),
            (http.post("/runs/x/nope", json={}), 404),
            (http.delete(f"/runs/{run}/steps"), 405),
        ):
            assert answer.status_code == status
            conforms(spec, {"$ref": "#/components/schemas/Error"}, answer.json())


def _head(memory: Path) -> int:
    with memtape.open(memory) as mem:
        return int(mem.store.head())


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(sorted(RECORDING)), field=st.data(), value=extremes())
def test_any_value_in_any_field_of_a_recording_route_is_taken_or_refused_in_one_line(
    served: tuple[Served, Path, dict[str, Any]], name: str, field: st.DataObject, value: Any
) -> None:
    """Never a crash: an answer the route declares, and a refusal (4xx, one line) writes nothing."""
    server, memory, spec = served
    arguments = dict(RECORDING[name])
    arguments[field.draw(st.sampled_from(sorted(arguments)), label="field")] = value
    with server.client() as http:
        run = http.post("/runs", json={"goal": "Any value", "start_url": SHOP}).json()["run_id"]
        before = _head(memory)
        answer = _call(http, name, arguments, run)
    answered_as_declared(spec, *ROUTES[name], answer)
    assert answer.status_code in (200, 400, 422), (name, arguments, answer.text)
    if answer.status_code != 200:
        assert "\n" not in answer.json()["error"]
        assert _head(memory) == before, (name, arguments)


def test_a_run_abandoned_when_another_starts_is_refused_by_its_routes(tmp_path: Path) -> None:
    """The server's handle on a run does not outlive the run: once a start abandoned it as stale,
    its recall and writes are 409 naming it, and log nothing."""
    with memtape.open(tmp_path / "mem", stale_after=timedelta(0)) as mem:
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            first = http.post("/runs", json={"goal": "g", "start_url": SHOP}).json()["run_id"]
            http.post(f"/runs/{first}/steps", json={"step": 1, "action": "click"}).raise_for_status()
            http.post("/runs", json={"goal": "h", "start_url": SHOP}).raise_for_status()  # abandons the first
            answers = [
                http.get(f"/runs/{first}/tier1"),
                http.post(f"/runs/{first}/progress", json={"turn": 2, "url": SHOP}),
            ]
        assert [e.type for e in mem.store.read(types=["tier1_loaded", "step_recorded", "run_progress"])] == [
            "step_recorded"
        ]
    for answer in answers:
        assert answer.status_code == 409 and first in answer.json()["error"], answer.text
