"""The table of operations (memtape/operations.py) makes both network faces: a row added through
the faces' public hook is an HTTP route, an OpenAPI path and an MCP tool with nothing else
edited; the compact MCP set is small; the face modules stay thin."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from mcp.client import Client

import memtape
from memtape import mcp_server, server
from memtape.face_models import HasPageMap, ProgressBody
from memtape.mcp_server import build_server
from memtape.operations import OPERATIONS, Operation, compact
from memtape.server import create_app

SHOP = "https://shop.example/"
#: throwaway rows: a write with a body and a read with a query parameter, each a library method
#: already offered under another name
NOTED = Operation(
    "note_turn", memtape.Run.progress, "write", "POST /runs/{run_id}/noted", "Where the run is.", body=ProgressBody
)
MAPPED = Operation(
    "mapped",
    memtape.Run.has_page_map,
    "read",
    "GET /runs/{run_id}/mapped",
    "Whether this run stored a PageMap for `url`.",
    answer=bool,
    tool_answer=HasPageMap,
)
TABLE = [*OPERATIONS, NOTED, MAPPED]


def _mapped_run(mem: memtape.Memory) -> str:
    run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
    run.store_page_map(SHOP, {"title": "Shop", "summary": "front page", "regions": []}, step=1)
    return run.run_id


def _progress(mem: memtape.Memory, run_id: str) -> list[dict[str, Any]]:
    return [e.data for e in mem.store.read(run_id=run_id, types=["run_progress"])]


def test_a_row_added_through_the_hook_is_a_route_and_an_openapi_path(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        run_id = _mapped_run(mem)
        with TestClient(create_app(mem, operations=TABLE), base_url="http://127.0.0.1") as http:
            spec = http.get("/openapi.json").json()
            noted = http.post(f"/runs/{run_id}/noted", json={"turn": 2, "url": SHOP + "cart"})
            mapped = http.get(f"/runs/{run_id}/mapped", params={"url": SHOP})
            refused = http.post(f"/runs/{run_id}/noted", json={"turn": "2", "url": SHOP})
        assert (noted.status_code, noted.json()) == (200, {"ok": True})
        assert (mapped.status_code, mapped.json()) == (200, True)
        assert refused.status_code == 422 and set(refused.json()) == {"error"}
        assert _progress(mem, run_id) == [{"turn": 2, "current_url": SHOP + "cart"}]
        assert spec["paths"]["/runs/{run_id}/noted"]["post"]["operationId"] == "note_turn"
        assert spec["paths"]["/runs/{run_id}/mapped"]["get"]["operationId"] == "mapped"
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            assert "/runs/{run_id}/noted" not in http.get("/openapi.json").json()["paths"]
            assert http.post(f"/runs/{run_id}/noted", json={"turn": 3, "url": SHOP}).status_code == 404


def test_a_row_added_through_the_hook_is_a_tool(tmp_path: Path) -> None:
    async def calls(mem: memtape.Memory, run_id: str) -> tuple[set[str], Any, Any, Any]:
        async with Client(build_server(mem, TABLE)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            noted = await client.call_tool("note_turn", {"run_id": run_id, "turn": 2, "url": SHOP + "cart"})
            mapped = await client.call_tool("mapped", {"run_id": run_id, "url": SHOP})
            refused = await client.call_tool("note_turn", {"run_id": run_id, "turn": "2", "url": SHOP})
            return names, noted, mapped, refused

    with memtape.open(tmp_path / "mem") as mem:
        run_id = _mapped_run(mem)
        names, noted, mapped, refused = asyncio.run(calls(mem, run_id))
        assert {"note_turn", "mapped"} <= names
        assert json.loads(noted.content[0].text) == {"ok": True}
        assert json.loads(mapped.content[0].text) == {"has_page_map": True}
        assert refused.is_error and "\n" not in refused.content[0].text
        assert _progress(mem, run_id) == [{"turn": 2, "current_url": SHOP + "cart"}]


def _definitions(mem: memtape.Memory, tools: str) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]]:
        async with Client(build_server(mem, tools=tools)) as client:  # type: ignore[arg-type]
            return [t.model_dump(mode="json", exclude_none=True) for t in (await client.list_tools()).tools]

    return asyncio.run(listed())


def test_the_compact_set_is_small_and_all_is_every_row(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        small = _definitions(mem, "compact")
        every = _definitions(mem, "all")
    assert [t["name"] for t in small] == [op.name for op in compact(OPERATIONS)]
    assert len(small) <= 12 and len(json.dumps(small)) <= 16_000
    assert [t["name"] for t in every] == [op.name for op in OPERATIONS]
    assert all("output_schema" in t for t in every)
    # a description says what a model needs once: no two tools share one
    assert len({t["description"] for t in every}) == len(every)


def test_every_row_is_named_once_and_routed_once() -> None:
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)
    assert len({op.route_name for op in OPERATIONS}) == len(OPERATIONS)
    assert len({(op.method, op.path) for op in OPERATIONS}) == len(OPERATIONS)
    assert all(op.method in ("GET", "POST") and op.path.startswith("/") for op in OPERATIONS)
    assert all(op.method == "POST" for op in OPERATIONS if op.body is not None)


def test_the_faces_stay_thin() -> None:
    """The two face modules under 900 lines together, no registration function over 80."""
    sources = [Path(module.__file__).read_text() for module in (server, mcp_server) if module.__file__]
    assert sum(len(text.splitlines()) for text in sources) < 900
    for text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None and node.end_lineno - node.lineno < 80, node.name


STALE = "Reload the login page before submitting: its first CSRF token is stale."


def test_search_is_a_route_and_a_compact_tool_logged_as_the_library_logs_it(tmp_path: Path) -> None:
    async def searched(mem: memtape.Memory) -> Any:
        async with Client(build_server(mem, tools="compact")) as client:
            found = await client.call_tool("search", {"query": "stale token", "kinds": ["lessons"]})
            return json.loads(found.content[0].text)

    with memtape.open(tmp_path / "mem") as mem:
        run = mem.start_run(goal="Log in", start_url="https://app.example/login")
        run.record_lesson(STALE, category="site_specific", scope_domain="app.example", step=1)
        run.finish(success=True)
        library = [hit.text for hit in mem.search("stale token", kinds=["lessons"])]
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            over_http = http.get("/search", params={"query": "stale token", "kinds": ["lessons"]})
            refused = http.get("/search", params={"query": "stale token", "limit": "many"})
        over_mcp = asyncio.run(searched(mem))
        logged = list(mem.store.read(types=["memory_searched"]))
    assert library == [STALE]
    assert over_http.status_code == 200 and [hit["text"] for hit in over_http.json()] == library
    assert [hit["text"] for hit in over_mcp["results"]] == library
    assert refused.status_code == 422 and set(refused.json()) == {"error"}
    assert [event.data["query"] for event in logged] == ["stale token"] * 3
