"""Typed answers (issue 37 item 6): a public read answers records, not `Any`, and the faces
declare the very same records, so a Python caller and a generated client see one shape."""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

import memtape
from memtape import face_models
from memtape.api import Run
from memtape.mcp_server import build_server
from memtape.projections import records
from memtape.projections.recording.checks import plain
from memtape.projections.state_rows import STATE_KINDS
from memtape.server import create_app

SHOP = "https://shop.example/login"

#: each public read of a run and the record it answers (a list of them, or one, or None)
READS = {
    "sessions": list[records.SessionEntry],
    "facts": list[records.Fact],
    "selectors": list[records.SelectorEntry],
    "step_memories": list[records.StepMemory],
    "relevant_context": list[records.ContextEntry],
    "prompt_context": list[records.ContextEntry],
    "patterns": list[records.Pattern],
    "extractions": list[records.ContextEntry],
    "snapshots": list[records.Snapshot],
    "short_term": records.ShortTerm,
    "sitemap": records.SiteMap | None,
    "get_page_map": records.PageMap | None,
}

#: the face's answer model and its field for each read: the same record, not a twin
FACE = {
    "sessions": (face_models.Sessions, "sessions"),
    "facts": (face_models.Facts, "facts"),
    "selectors": (face_models.Selectors, "selectors"),
    "step_memories": (face_models.StepMemories, "step_memories"),
    "relevant_context": (face_models.ContextEntries, "context"),
    "patterns": (face_models.Patterns, "patterns"),
    "extractions": (face_models.Extractions, "extractions"),
    "snapshots": (face_models.Snapshots, "snapshots"),
    "short_term": (face_models.ShortTermMemory, "short_term"),
    "sitemap": (face_models.Sitemap, "sitemap"),
    "get_page_map": (face_models.FoundPageMap, "page_map"),
}


def mentions_any(hint: Any) -> bool:
    return hint is Any or any(mentions_any(a) for a in typing.get_args(hint))


def test_every_public_read_of_a_run_is_declared_as_its_record() -> None:
    for name, record in READS.items():
        answer = typing.get_type_hints(getattr(Run, name))["return"]
        assert answer == record, name
        assert not mentions_any(answer), name


def test_the_faces_answer_the_records_the_library_answers() -> None:
    for name, (model, field) in FACE.items():
        library = typing.get_type_hints(getattr(Run, name))["return"]
        assert model.model_fields[field].annotation == library, name


def test_what_a_run_reads_back_are_those_records(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem, mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
        run.observe_fact("quirk", "login", "The login form reloads once", step=1)
        run.selector_result("button 'Sign in'", "#signin", True, step=1, url=SHOP)
        run.give_context({"size": "42"})
        run.snapshot(SHOP, "Login", "a form", {"user": "ann"}, (0, 10), step=1)
        run.store_page_map(SHOP, {"title": "Login", "summary": "a form", "regions": []}, step=1)
        got = {
            "facts": run.facts(),
            "selectors": run.selectors(),
            "prompt_context": run.prompt_context(),
            "snapshots": run.snapshots(),
        }
        for name, values in got.items():
            record = typing.get_args(READS[name])[0]
            assert values and all(type(v) is record for v in values), name
        assert type(run.short_term()) is records.ShortTerm
        assert type(run.get_page_map(SHOP)) is records.PageMap
        assert run.sitemap() is None
        run.finish(success=True, outcome="done")


def test_the_audit_schema_is_typed_and_holds_exactly_what_the_library_answers(tmp_path: Path) -> None:
    """`memtape audit --json` stays plain data; the faces' `Audit` declares every field of it
    (no open object at the top, the run, the outcome, each step, its action, searches and grade)."""
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            run.recall_domain(step=1)
            run.search("socks", step=1)
            run.record_step(1, "click", 'button "Buy"', url=SHOP, ok=False, error="hidden", duration_ms=12)
            run.record_lesson("Accept the cookie banner before clicking Buy", step=1)
            run.record_step(2, "click", 'button "Buy"', url=SHOP, duration_ms=7.5)
            run.finish(success=True, outcome="bought")
        plain = mem.audit(run.run_id)
    typed = face_models.Audit.model_validate(plain)
    assert typed.model_dump(mode="json") == plain
    assert typed.run is not None and typed.outcome is not None and typed.outcome.success is True
    assert [s.step for s in typed.steps] == [1, 2] and typed.steps[0].action is not None
    assert typed.steps[0].action.error == "hidden" and typed.steps[0].searched[0].query == "socks"
    with_a_typo = {**plain, "steps": [{**plain["steps"][0], "actoin": None}]}
    with pytest.raises(ValidationError, match="actoin"):
        face_models.Audit.model_validate(with_a_typo)


def test_state_kinds_are_an_enumeration_on_both_faces_and_the_library_still_refuses_a_wrong_one(
    tmp_path: Path,
) -> None:
    """A generated client refuses a misspelt `state` kind at compile time (the schemas list the
    library's kinds, not a copy), while a caller who sends one anyway gets the library's refusal."""
    with memtape.open(tmp_path / "memory") as mem:
        app = create_app(mem)
        (kind,) = [p for p in app.openapi()["paths"]["/state/{kind}"]["get"]["parameters"] if p["name"] == "kind"]
        assert kind["schema"]["enum"] == list(STATE_KINDS)
        server = build_server(mem)
        (tool,) = [t for t in asyncio.run(server.list_tools()) if t.name == "state"]
        assert tool.input_schema["properties"]["kind"]["enum"] == list(STATE_KINDS)
        refusal = "unknown state 'lesson': choose from " + ", ".join(STATE_KINDS)
        client = TestClient(app, base_url="http://127.0.0.1")
        answer = client.get("/state/lesson")
        assert (answer.status_code, answer.json()) == (400, {"error": refusal})
        assert client.get("/state/tier1").json() == plain(mem.state("tier1"))
        with pytest.raises(ToolError, match=refusal):
            asyncio.run(server.call_tool("state", {"kind": "lesson"}))
        with pytest.raises(ToolError, match="valid string"):
            asyncio.run(server.call_tool("state", {"kind": 3}))
