"""A page of `state` (limit, offset) and the filters it is read with (domain, run, session,
outcome): on every face (library, CLI, HTTP, MCP) the slice `[offset:offset + limit]` of the
unpaged list, `count` its length, only the page converted, and a bad page or filter refused in
one line with nothing written."""

from __future__ import annotations

import asyncio
import dataclasses
import json
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
from memtape.api import Memory, MemtapeError
from memtape.mcp_server import build_server
from memtape.projections import state_rows
from memtape.projections.folds import runs as runs_mod
from memtape.projections.recording.checks import plain
from memtape.projections.state_rows import MAX_PAGE, OUTCOMES, STATE_KINDS, TAUGHT_BY
from memtape.server import create_app
from tests.cli_runner import run_cli
from tests.faces_support import through_library

SITES = ("https://a.test/", "https://shop.a.test/", "https://c.test/")
SESSIONS = (None, "s1", "s2", "s3")
RUNS = 37


@pytest.fixture(scope="module")
def locations(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A memory of many runs (three sites, one a subdomain of another; four sessions; running,
    succeeded and failed runs), the faces' two runs (rows of the per-run kinds) and the viewer's
    sample (lessons, facts and a credited item taught by its runs)."""
    folder = tmp_path_factory.mktemp("paging")
    with memtape.open(folder / "runs") as mem:
        for i in range(RUNS):
            run = mem.start_run(goal=f"task {i}", start_url=SITES[i % 3], session_id=SESSIONS[i % 4])
            run.observe_fact("quirk", f"key{i % 7}", f"value {i}")
            if i % 5 != 4:  # every fifth run is left running
                run.finish(success=i % 2 == 0)
    through_library(folder / "faces")
    build(folder / "sample")
    return [folder / "runs", folder / "faces", folder / "sample"]


Faces = tuple[Path, Memory, TestClient, Any]


@pytest.fixture(scope="module")
def faces(locations: list[Path]) -> Iterator[list[Faces]]:
    opened = [memtape.open(where) for where in locations]
    try:
        yield [
            (where, mem, TestClient(create_app(mem), base_url="http://127.0.0.1"), build_server(mem))
            for where, mem in zip(locations, opened, strict=True)
        ]
    finally:
        for mem in opened:
            mem.close()


def tool(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    return asyncio.run(server.call_tool(name, arguments)).structured_content


def cli(where: Path, kind: str, *options: str) -> Any:
    done = run_cli("--memory-dir", str(where), "state", kind, *options, "--json")
    assert done.code == 0, done.err
    return json.loads(done.out)


def options(query: dict[str, Any]) -> list[str]:
    """A query's fields as the command line's options."""
    return [part for name, value in query.items() if value is not None for part in (f"--{name}", str(value))]


def test_a_page_is_the_slice_of_the_whole_list_on_every_face(faces: list[Faces]) -> None:
    seen, several = set(), set()
    for where, mem, client, server in faces:
        for kind in STATE_KINDS:
            whole = mem.state(kind)
            seen |= {kind} if whole else set()
            several |= {kind} if len(whole) > 2 else set()
            assert mem.count(kind) == len(whole)
            assert client.get(f"/state/{kind}/count").json() == {"count": len(whole)}
            assert tool(server, "count", {"kind": kind}) == {"count": len(whole)}
            for limit, offset in ((1, 0), (2, 1), (MAX_PAGE, 0), (None, 1), (3, len(whole)), (1, 2**63 - 1)):
                part = whole[offset : None if limit is None else offset + limit]
                assert mem.state(kind, limit=limit, offset=offset) == part, (kind, limit, offset)
                query = {"limit": limit, "offset": offset}
                asked = {k: v for k, v in query.items() if v is not None}
                assert client.get(f"/state/{kind}", params=asked).json() == plain(part)
                assert tool(server, "state", {"kind": kind, **asked}) == {"items": plain(part)}
                if kind == "runs" or (limit, offset) == (2, 1):  # the command line is slower: a few
                    assert cli(where, kind, *options(query)) == plain(part)
    assert seen == set(STATE_KINDS)  # every kind was paged with rows in it
    assert several >= {"runs", "lessons", "tier1", "facts", "sessions", "context"}


def test_runs_are_paged_newest_first_with_the_filters_applied_before(faces: list[Faces]) -> None:
    where, mem, client, server = faces[0]
    every = mem.state("runs")
    assert [r.goal for r in every] == [f"task {i}" for i in reversed(range(RUNS))]  # one write each: newest first
    assert {r.status for r in every} == {"running", "completed", "failed"}
    shown = {"running": "running", "completed": "success", "failed": "failed"}
    for domain in (None, "a.test", "shop.a.test", "c.test", "nowhere.test"):
        for session in (None, "s1", "s3", "none-such"):
            for outcome in (None, *OUTCOMES):
                query = {"domain": domain, "session": session, "outcome": outcome}
                kept = [
                    r
                    for r in every
                    if (domain is None or r.domain == domain or r.domain.endswith("." + domain))
                    and (session is None or r.session_id == session)
                    and (outcome is None or shown[r.status] == outcome)
                ]
                assert mem.state("runs", **query) == kept
                assert mem.count("runs", **query) == len(kept)
                assert mem.state("runs", **query, limit=2, offset=1) == kept[1:3]
    query = {"domain": "a.test", "session": "s2", "outcome": "success"}
    part = mem.state("runs", **query, limit=1, offset=1)
    assert len(part) == 1 and part == mem.state("runs", **query)[1:2]
    assert client.get("/state/runs", params={**query, "limit": 1, "offset": 1}).json() == plain(part)
    assert tool(server, "state", {"kind": "runs", **query, "limit": 1, "offset": 1}) == {"items": plain(part)}
    assert cli(where, "runs", *options({**query, "limit": 1, "offset": 1})) == plain(part)
    assert client.get("/state/runs/count", params=query).json() == {"count": mem.count("runs", **query)}
    assert tool(server, "count", {"kind": "runs", **query}) == {"count": mem.count("runs", **query)}
    table = run_cli("--memory-dir", str(where), "state", "runs", "--limit", "10", "--offset", "30")
    assert table.code == 0 and f"31-{RUNS} of {RUNS}" in table.out


def test_sessions_filter_by_session_and_outcome(faces: list[Faces]) -> None:
    _where, mem, _client, _server = faces[0]
    every = mem.state("sessions")
    assert len({s.session_id for s in every}) > 1 and {s.success for s in every} == {True, False}
    for session in ("s1", "s2"):
        for outcome, success in (("success", True), ("failed", False)):
            kept = [s for s in every if s.session_id == session and s.success is success]
            assert mem.state("sessions", session=session, outcome=outcome) == kept
    assert mem.state("sessions", outcome="running") == []  # a session entry is a finished run


def test_run_keeps_what_the_run_taught(faces: list[Faces]) -> None:
    checked = set()
    for _where, mem, client, _server in faces:
        for run in mem.state("runs"):
            for kind, field in TAUGHT_BY.items():
                taught = [r for r in mem.state(kind) if getattr(r, field) == run.run_id]
                assert mem.state(kind, run=run.run_id) == taught, (kind, run.run_id)
                checked |= {kind} if taught else set()
                if taught and kind == "lessons":
                    answer = client.get(f"/state/{kind}", params={"run": run.run_id})
                    assert answer.json() == plain(taught)
    assert checked >= {"lessons", "facts", "trajectories", "patterns", "sessions", "selectors"}


def test_only_the_page_is_converted(faces: list[Faces], monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of lessons flags only its own rows (`instruction_like`), whatever the list's length."""
    _where, mem, _client, _server = faces[2]
    flagged: list[str] = []
    real = state_rows.instruction_like
    monkeypatch.setattr(state_rows, "instruction_like", lambda text: flagged.append(text) or real(text))
    whole = mem.state("lessons")
    assert len(flagged) == len(whole) > 3
    flagged.clear()
    assert mem.state("lessons", limit=2, offset=1) == whole[1:3] and len(flagged) == 2
    flagged.clear()
    assert mem.count("lessons") == len(whole) and len(flagged) <= 1


BAD_PAGES: list[tuple[dict[str, Any], str]] = [
    ({"limit": 0}, "limit must be a whole number from 1 to 10000, got 0"),
    ({"limit": -1}, "limit must be a whole number from 1 to 10000, got -1"),
    ({"limit": MAX_PAGE + 1}, "limit must be a whole number from 1 to 10000, got 10001"),
    ({"limit": 2**64}, "limit must be a whole number from 1 to 10000"),
    ({"offset": -1}, "offset must be a whole number from 0 to 2**63-1, got -1"),
    ({"offset": 2**63}, "offset must be a whole number from 0 to 2**63-1, got 9223372036854775808"),
    ({"outcome": "maybe"}, "outcome must be one of running, success, failed, got 'maybe'"),
    ({"kind": "lessons", "session": "s1"}, "session filters runs and sessions, not lessons"),
    ({"kind": "facts", "outcome": "failed"}, "outcome filters runs and sessions, not facts"),
    ({"kind": "sitemap", "run": "r1"}, "run cannot filter sitemap: its records name no run"),
]


@pytest.mark.parametrize(("query", "says"), BAD_PAGES)
def test_a_bad_page_or_filter_is_refused_in_one_line_on_every_face(
    faces: list[Faces], query: dict[str, Any], says: str
) -> None:
    where, mem, client, server = faces[0]
    asked = dict(query)
    kind = asked.pop("kind", "runs")
    head = mem.store.head()
    with pytest.raises(MemtapeError) as refused:
        mem.state(kind, **asked)
    message = str(refused.value)
    assert says in message and "\n" not in message
    answer = client.get(f"/state/{kind}", params=asked)
    assert (answer.status_code, answer.json()) == (400, {"error": message})
    with pytest.raises(ToolError) as failed:
        tool(server, "state", {"kind": kind, **asked})
    assert str(failed.value) == f"Error executing tool state: {message}"
    done = run_cli("--memory-dir", str(where), "state", kind, *options(asked), "--json")
    assert done.code != 0 and done.out == "" and says in done.err and done.err.count("\n") == 1
    if "limit" not in asked and "offset" not in asked:  # the count takes the same filters, and refuses the same
        with pytest.raises(MemtapeError, match="^" + message.replace("*", r"\*").replace("(", r"\(") + "$"):
            mem.count(kind, **asked)
        assert client.get(f"/state/{kind}/count", params=asked).status_code == 400
    assert mem.store.head() == head


NOT_WHOLE = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.integers(min_value=-(2**70), max_value=-1),
    st.integers(min_value=2**63, max_value=2**70),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["limit", "offset"]), value=NOT_WHOLE)
def test_any_value_that_is_no_page_is_refused_by_the_library_and_mcp(faces: list[Faces], name: str, value: Any) -> None:
    _where, mem, _client, server = faces[1]
    head = mem.store.head()
    with pytest.raises(MemtapeError) as refused:
        mem.state("runs", **{name: value})
    assert name in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(ToolError):
        tool(server, "state", {"kind": "runs", name: value})
    assert mem.store.head() == head


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["limit", "offset"]),
    value=st.one_of(st.text(max_size=30), st.integers(min_value=-(2**70), max_value=2**70).map(str)),
)
def test_any_text_as_a_page_is_answered_or_refused_in_one_line_over_http(
    faces: list[Faces], name: str, value: str
) -> None:
    _where, mem, client, _server = faces[1]
    head = mem.store.head()
    answer = client.get("/state/runs", params={name: value})
    assert answer.status_code in (200, 400, 422), answer.text
    if answer.status_code == 200:
        number = int(value)
        whole = mem.state("runs")
        assert answer.json() == plain(whole[:number] if name == "limit" else whole[number:])
    else:
        error = answer.json()["error"]
        assert error and "\n" not in error
    assert mem.store.head() == head


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(STATE_KINDS),
    limit=st.one_of(st.none(), st.integers(min_value=1, max_value=MAX_PAGE), st.sampled_from([1, MAX_PAGE])),
    offset=st.one_of(st.integers(min_value=0, max_value=40), st.sampled_from([0, 2**31, 2**63 - 1])),
    location=st.integers(min_value=0, max_value=2),
)
def test_any_page_of_any_kind_is_its_slice(
    faces: list[Faces], kind: str, limit: int | None, offset: int, location: int
) -> None:
    _where, mem, _client, _server = faces[location]
    whole = mem.state(kind)
    assert mem.state(kind, limit=limit, offset=offset) == whole[offset : None if limit is None else offset + limit]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(
        st.tuples(st.sampled_from(["2026-01-01", "2026-01-02", "2026-01-03"]), st.integers(0, 2)), max_size=40
    ),
    limit=st.integers(min_value=0, max_value=45),
)
def test_the_first_runs_by_a_heap_are_the_head_of_the_sorted_list_ties_included(
    faces: list[Faces], keys: list[tuple[str, int]], limit: int
) -> None:
    template = faces[0][1].state("runs", limit=1)[0]
    runs = [
        dataclasses.replace(template, run_id=f"r{i}", updated_at=at, updated_seq=seq)
        for i, (at, seq) in enumerate(keys)
    ]
    assert runs_mod.ordered(runs, limit) == runs_mod.ordered(runs)[:limit]
