"""`state` rows and `diff` changes: the same typed records in Python, over HTTP, over MCP and on
the command line, and the same one-line refusal of a bad point on each."""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver.exceptions import ToolError

import memtape
from devtools.viewer_sample import build
from memtape.api import Memory
from memtape.mcp_server import build_server
from memtape.projections.recording.checks import plain
from memtape.projections.state_rows import STATE_KINDS, STATE_ROWS, Change
from memtape.server import create_app
from tests.cli_runner import run_cli
from tests.faces_support import through_library


@pytest.fixture(scope="module")
def memories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two memories that between them hold rows of every kind: the faces' two runs (scratch,
    page maps, snapshots, a sitemap, ...) and the viewer's sample (a credited item)."""
    folder = tmp_path_factory.mktemp("state")
    through_library(folder / "faces")
    build(folder / "sample")
    return folder / "faces", folder / "sample"


@pytest.fixture
def faces(memories: tuple[Path, Path]) -> Iterator[list[tuple[Memory, TestClient, Any]]]:
    """Each memory with its HTTP app and its MCP server (`--tools all`)."""
    opened = [memtape.open(location) for location in memories]
    try:
        yield [(mem, TestClient(create_app(mem), base_url="http://127.0.0.1"), build_server(mem)) for mem in opened]
    finally:
        for mem in opened:
            mem.close()


def tool(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    return asyncio.run(server.call_tool(name, arguments)).structured_content


def test_each_kind_is_a_list_of_its_record_in_python_over_http_and_mcp(
    faces: list[tuple[Memory, TestClient, Any]],
) -> None:
    seen = set()
    for mem, client, server in faces:
        for kind in STATE_KINDS:
            rows = mem.state(kind)
            assert all(type(row) is STATE_ROWS[kind] for row in rows), kind
            seen |= {kind} if rows else set()
            answer = client.get(f"/state/{kind}")
            assert answer.status_code == 200 and answer.json() == plain(rows), kind
            assert tool(server, "state", {"kind": kind}) == {"items": plain(rows)}, kind
    assert seen == set(STATE_KINDS)  # every kind was compared with rows in it


def test_the_type_checker_knows_each_kinds_record() -> None:
    """Each literal kind's overload answers a list of the kind's record; any other string, a row of any kind."""
    answers: dict[str, Any] = {}
    for overload in typing.get_overloads(Memory.state):
        hints = typing.get_type_hints(overload)
        for kind in typing.get_args(hints["kind"]) or ("any",):
            answers[kind] = hints["return"]
    assert {kind: answers[kind] for kind in STATE_KINDS} == {kind: list[row] for kind, row in STATE_ROWS.items()}
    assert set(typing.get_args(typing.get_args(answers["any"])[0])) == set(STATE_ROWS.values())


def test_the_openapi_document_and_the_tool_name_every_kinds_row(faces: list[tuple[Memory, TestClient, Any]]) -> None:
    mem, client, server = faces[0]
    spec = client.get("/openapi.json").json()
    ok = spec["paths"]["/state/{kind}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    named = {member["items"]["$ref"].rsplit("/", 1)[1] for member in ok["anyOf"]}
    assert named == {row.__name__ for row in STATE_ROWS.values()}
    assert all(name in spec["components"]["schemas"] for name in named)
    assert "lesson_id" in spec["components"]["schemas"]["ListedLesson"]["properties"]
    (state,) = [t for t in asyncio.run(server.list_tools()) if t.name == "state"]
    assert '"ItemCredit"' in json.dumps(state.output_schema) and '"RunManifest"' in json.dumps(state.output_schema)
    diff = spec["paths"]["/diff"]["get"]
    assert [p["name"] for p in diff["parameters"]] == ["from", "to"] and all(p["required"] for p in diff["parameters"])
    assert diff["responses"]["200"]["content"]["application/json"]["schema"]["items"] == {
        "$ref": "#/components/schemas/Change"
    }


def test_a_diff_is_the_same_changes_on_every_face(
    faces: list[tuple[Memory, TestClient, Any]], memories: tuple[Path, Path]
) -> None:
    mem, client, server = faces[0]
    changes = mem.diff(0, "run_faces_a")
    assert changes and all(type(c) is Change for c in changes)
    assert {c.change for c in changes} >= {"gained"} and {c.projection for c in changes} >= {"lessons", "runs"}
    answer = client.get("/diff", params={"from": "0", "to": "run_faces_a"})
    assert answer.status_code == 200 and answer.json() == plain(changes)
    assert tool(server, "diff", {"start": 0, "end": "run_faces_a"}) == {"changes": plain(changes)}
    done = run_cli("--memory-dir", str(memories[0]), "diff", "--from", "0", "--to", "run_faces_a", "--json")
    assert done.code == 0 and json.loads(done.out) == plain(changes)
    later = mem.diff("run_faces_a", mem.store.head())
    assert client.get("/diff", params={"from": "run_faces_a", "to": str(mem.store.head())}).json() == plain(later)


#: bad points, each as (from, to) over HTTP and the command line, and the refusal they all give
REFUSED = [
    ("0", "no-such-run", "diff end 'no-such-run': expected a seq, an ISO time or a run id"),
    ("nowhere", "0", "diff start 'nowhere': expected a seq, an ISO time or a run id"),
    ("9999999", "0", "diff start"),
    ("run_faces_a", "0", "a diff runs forward; swap them"),
    ("0", "", "end must be a seq, an ISO time or a run id"),
]


@pytest.mark.parametrize(("start", "end", "says"), REFUSED)
def test_a_bad_point_is_refused_in_one_line_on_every_face_and_writes_nothing(
    faces: list[tuple[Memory, TestClient, Any]], memories: tuple[Path, Path], start: str, end: str, says: str
) -> None:
    mem, client, server = faces[0]
    head = mem.store.head()
    with pytest.raises(memtape.MemtapeError) as refused:
        mem.diff(start, end)
    message = str(refused.value)
    assert says in message and "\n" not in message
    answer = client.get("/diff", params={"from": start, "to": end})
    assert (answer.status_code, answer.json()) == (400, {"error": message})
    with pytest.raises(ToolError) as failed:
        tool(server, "diff", {"start": start, "end": end})
    assert str(failed.value) == f"Error executing tool diff: {message}"
    done = run_cli("--memory-dir", str(memories[0]), "diff", "--from", start, "--to", end, "--json")
    assert done.code != 0 and done.out == "" and says in done.err
    assert mem.store.head() == head


def test_a_missing_or_mistyped_point_is_refused_by_each_face(
    faces: list[tuple[Memory, TestClient, Any]], memories: tuple[Path, Path]
) -> None:
    mem, client, server = faces[0]
    missing = client.get("/diff", params={"from": "0"})  # a request of the wrong shape: 422, as every route
    assert missing.status_code == 422 and "to" in missing.json()["error"] and "\n" not in missing.json()["error"]
    for start, end in ((True, 1), (0, None), (0, 1.5), (-1, 5), (0, [1])):
        with pytest.raises(memtape.MemtapeError):
            mem.diff(start, end)
        with pytest.raises(ToolError):
            tool(server, "diff", {"start": start, "end": end})
    assert run_cli("--memory-dir", str(memories[0]), "diff", "--from", "0").code != 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(point=st.one_of(st.text(max_size=60), st.integers(min_value=-(2**70), max_value=2**70).map(str)))
def test_any_text_as_a_point_is_answered_or_refused_in_one_line(
    faces: list[tuple[Memory, TestClient, Any]], point: str
) -> None:
    mem, client, _server = faces[0]
    head = mem.store.head()
    answer = client.get("/diff", params={"from": "0", "to": point})
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 400:
        error = answer.json()["error"]
        assert error and "\n" not in error
    else:
        assert answer.json() == plain(mem.diff(0, point))
    assert mem.store.head() == head
