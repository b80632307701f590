"""Scope by default (issue 37 item 3): a `site_specific` lesson recorded without `scope_domain`
takes the site the run is on, so domain recall returns it there, on every face."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from mcp.client import Client

import memtape
from memtape.mcp_server import build_server
from memtape.server import create_app

LOGIN = "https://app.example/login"
TEXT = "Reload the login page before submitting: its first CSRF token is stale."


def scopes(mem: Any) -> dict[str, str | None]:
    return {row.lesson: row.scope_domain for row in mem.state("lessons") if row.source == "learned"}


def test_the_library_scopes_a_site_lesson_to_the_runs_site(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Log in", start_url=LOGIN) as run:
            run.record_lesson(TEXT, category="site_specific")
            run.record_step(step=1, action="goto", url="https://docs.example/faq", ok=True)
            run.record_lesson("The FAQ hides answers behind tabs", category="site_specific", step=1)
            run.record_lesson("Given scope stays", category="site_specific", scope_domain="other.example", step=1)
            run.record_lesson("Recovery stays universal", failed_command="click", error_pattern="covered", step=1)
            assert [l.text for l in run.recall_domain(step=2, domain="app.example")] == [TEXT]
            run.finish(success=True)
        assert scopes(mem) == {
            TEXT: "app.example",
            "The FAQ hides answers behind tabs": "docs.example",
            "Given scope stays": "other.example",
            "Recovery stays universal": None,
        }
        with mem.start_run(goal="Log in again", start_url=LOGIN) as again:
            assert [l.text for l in again.recall_domain(step=1)] == [TEXT]
            again.finish(success=True)


def test_http_scopes_a_site_lesson_to_the_runs_site(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            run_id = http.post("/runs", json={"goal": "Log in", "start_url": LOGIN}).json()["run_id"]
            answer = http.post(f"/runs/{run_id}/lessons", json={"text": TEXT, "category": "site_specific"})
            assert answer.status_code == 200, answer.text
            recalled = http.get(f"/runs/{run_id}/recall/domain", params={"step": 1})
            assert [l["text"] for l in recalled.json()] == [TEXT], recalled.text
        assert scopes(mem) == {TEXT: "app.example"}


def test_mcp_scopes_a_site_lesson_to_the_runs_site(tmp_path: Path) -> None:
    async def agent(mem: Any) -> None:
        async with Client(build_server(mem)) as client:
            started = await client.call_tool("start_run", {"goal": "Log in", "start_url": LOGIN})
            run_id = started.structured_content["run_id"]
            recorded = await client.call_tool(
                "record_lesson", {"run_id": run_id, "text": TEXT, "category": "site_specific"}
            )
            assert not recorded.is_error, recorded.content

    with memtape.open(tmp_path / "mem") as mem:
        asyncio.run(agent(mem))
        assert scopes(mem) == {TEXT: "app.example"}
        assert [l.text for l in mem.recall_domain("app.example")] == [TEXT]
