"""Full-text search of memory (issue 37 item 2): `mem.search`, `run.search`, `memtape search`.
Ranked by FTS5's BM25, as-of aware, a search is a `memory_searched` event the audit shows,
forgotten items never come back, and a query is words: FTS5 syntax is never read as syntax."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client

import memtape
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import MAX_QUERY
from memtape.mcp_server import build_server
from memtape.projections.search import SEARCH_KINDS
from memtape.projections.state_rows import STATE_KINDS
from memtape.server import create_app
from tests.cli_runner import run_cli

LOGIN = "https://app.example/login"
STALE = "Reload the login page before submitting: its first CSRF token is stale."


def teach(mem: Any) -> dict[str, str]:
    """A run that leaves a lesson, a fact, a selector and a session behind; their ids."""
    with mem.start_run(goal="Log in to the dashboard", start_url=LOGIN) as run:
        run.record_step(step=1, action="click", target='button "Sign in"', url=LOGIN, ok=False, error="403 CSRF")
        stale = run.record_lesson(STALE, category="site_specific", step=1)
        other = run.record_lesson(
            "Dismiss the cookie banner before clicking",
            failed_command="click",
            error_pattern="intercepts pointer events",
            step=1,
        )
        run.observe_fact(kind="quirk", key="login form", value="needs a fresh token after reload", step=1)
        run.selector_result(element='button "Sign in"', selector="#signin", ok=True, step=2)
        run.finish(success=True, outcome="signed in after reloading the token page")
    return {"stale": stale, "other": other, "run": run.run_id}


def searched(mem: Any) -> list[Any]:
    return [e for e in mem.store.read() if e.type == "memory_searched"]


def test_search_finds_the_stale_token_lesson_and_logs_it(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        ids = teach(mem)
        hits = mem.search("stale token")
        assert hits[0].kind == "lessons" and hits[0].item_id == ids["stale"] and hits[0].text == STALE
        assert hits[0].domain == "app.example" and hits[0].score > 0
        assert all(h.item_id != ids["other"] for h in hits)  # shares no word with the query
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        (ev,) = searched(mem)
        assert ev.data["query"] == "stale token" and ev.data["matched"] == len(hits)
        assert ev.data["hits"][0] == {"kind": "lessons", "item_id": ids["stale"], "score": hits[0].score}
        assert ev.run_id is None


def test_search_covers_every_kind_and_filters_by_kind_and_domain(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        teach(mem)
        kinds = {h.kind for h in mem.search("token signin sign login reloading", limit=50)}
        assert {"lessons", "facts", "selectors", "sessions"} <= kinds
        assert {h.kind for h in mem.search("token", kinds=["facts"])} == {"facts"}
        assert mem.search("token", domain="elsewhere.example") == []
        assert mem.search("token", domain="app.example")
        assert len(mem.search("token", limit=1)) == 1
        assert searched(mem)[1].data["kinds"] == ["facts"]


def test_run_search_is_logged_against_the_run_and_step(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        ids = teach(mem)
        with mem.start_run(goal="Log in again", start_url=LOGIN) as run:
            hits = run.search("csrf", step=3)
            assert hits[0].item_id == ids["stale"]
            (ev,) = searched(mem)
            assert (ev.run_id, ev.step, ev.domain) == (run.run_id, 3, "app.example")
            run.finish(success=True)
        (step,) = [s for s in mem.audit(run.run_id)["steps"] if s["step"] == 3]
        assert step["searched"] == [
            {
                "query": "csrf",
                "kinds": None,
                "domain": None,
                "as_of": None,
                "matched": len(hits),
                "hits": ev.data["hits"],
            }
        ]


def test_search_as_of_sees_memory_as_it_was(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="g", start_url=LOGIN) as run:
            run.finish(success=True)
        before = mem.store.head()
        teach(mem)
        assert mem.search("stale token")
        assert mem.search("stale token", as_of=before) == []
        assert searched(mem)[-1].data["as_of"] == str(before)


def test_a_forgotten_lesson_never_comes_back(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    with memtape.open(memory) as mem:
        ids = teach(mem)
        assert any(h.item_id == ids["stale"] for h in mem.search("stale token"))
    assert run_cli("--memory-dir", str(memory), "forget", "--lesson", ids["stale"]).code == 0
    with memtape.open(memory) as mem:
        assert all(h.item_id != ids["stale"] for h in mem.search("stale token csrf"))
    out = json.loads(run_cli("--memory-dir", str(memory), "search", "stale token", "--json").out)
    assert all(h["item_id"] != ids["stale"] for h in out)


def test_searches_in_a_row_share_one_index_and_see_new_items(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        teach(mem)
        mem.search("token")
        index = mem._search_index
        mem.search("csrf")
        assert index is not None and mem._search_index is index
        with mem.start_run(goal="Check the wool socks", start_url="https://shop.example/") as run:
            run.record_lesson("Wool socks hide under the winter menu", category="site_specific")
            run.finish(success=True)
        assert mem.search("wool winter")[0].text == "Wool socks hide under the winter menu"


def test_cli_search_json_finds_the_lesson(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    with memtape.open(memory) as mem:
        ids = teach(mem)
    result = run_cli("--memory-dir", str(memory), "search", "stale token", "--json")
    assert result.code == 0, result.err
    hits = json.loads(result.out)
    assert hits[0]["item_id"] == ids["stale"] and hits[0]["text"] == STALE and hits[0]["kind"] == "lessons"
    table = run_cli("--memory-dir", str(memory), "search", "stale token", "--kind", "lessons")
    assert table.code == 0 and ids["stale"] in table.out
    with memtape.open(memory) as mem:
        assert [e.data["query"] for e in searched(mem)] == ["stale token", "stale token"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("search", ""), "at least one word"),
        (("search", "x" * (MAX_QUERY + 1)), f"at most {MAX_QUERY}"),
        (("search", "token", "--kind", "nope"), "unknown search kind"),
        (("search", "token", "--as-of", "not-a-time"), "expected a seq or an ISO time"),
        (("search", "token", "--limit", "0"), "limit"),
    ],
)
def test_cli_refuses_bad_input_in_one_line_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    memory = tmp_path / "mem"
    with memtape.open(memory) as mem:
        teach(mem)
        before = len(list(mem.store.read()))
    result = run_cli("--memory-dir", str(memory), *args)
    assert result.code != 0 and message in result.err and len(result.err.strip().splitlines()) == 1
    with memtape.open(memory) as mem:
        assert len(list(mem.store.read())) == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": ""},
        {"query": "   "},
        {"query": 7},
        {"query": "a\x00b"},
        {"query": "x" * (MAX_QUERY + 1)},
        {"query": "token", "kinds": ["lessons", "tips"]},
        {"query": "token", "kinds": []},
        {"query": "token", "limit": 0},
        {"query": "token", "limit": True},
        {"query": "token", "domain": "not a domain"},
        {"query": "token", "as_of": "yesterday"},
    ],
)
def test_library_refuses_bad_input_and_writes_nothing(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        teach(mem)
        before = len(list(mem.store.read()))
        with pytest.raises(memtape.MemtapeError) as refused:
            mem.search(**kwargs)
        assert "\n" not in str(refused.value)
        assert len(list(mem.store.read())) == before


HOSTILE = [
    '"',
    "*",
    "NEAR(",
    "AND",
    "OR NOT",
    '"stale',
    "stale*",
    "token)",
    "^stale",
    "col:stale",
    "NEAR(stale token, 2)",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(st.sampled_from(HOSTILE), st.text(min_size=1, max_size=30)),
        min_size=1,
        max_size=8,
    ).map(" ".join)
)
def test_hostile_queries_are_words_never_fts_syntax(tmp_path_factory: pytest.TempPathFactory, query: str) -> None:
    with memtape.open(tmp_path_factory.mktemp("mem")) as mem:
        teach(mem)
        try:
            hits = mem.search(query)
        except InvalidEvent as refused:  # only what is not text: nothing to search for, or not storable
            assert not query.strip() or "\x00" in query or any("\ud800" <= c <= "\udfff" for c in query), refused
            return
        if "stale" in query.lower():
            assert any(h.text == STALE for h in hits)
        assert searched(mem)[-1].data["query"] == query


def test_extreme_queries(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        teach(mem)
        assert mem.search('" * NEAR( AND') == []
        longest = ("stale " * MAX_QUERY)[:MAX_QUERY]
        assert mem.search(longest)[0].text == STALE
        with pytest.raises(InvalidEvent, match="at most"):
            mem.search("stale " * 20_000)


def test_every_kind_is_a_state_kind() -> None:
    assert set(SEARCH_KINDS) <= set(STATE_KINDS)


@pytest.mark.postgres
def test_a_postgresql_ledger_searches_with_postgresqls_full_text_search(pg_url: str, tmp_path: Path) -> None:
    with memtape.open(pg_url) as mem:
        ids = teach(mem)
        ranks = mem.store.text_ranks
        ranked = ranks(["Wool socks", "Reload the page: its CSRF tokens are stale"], ["token", "stale"])
        assert [i for i, _ in ranked] == [1] and ranked[0][1] > 0
        calls: list[list[str]] = []

        def recorded(texts: Sequence[str], words: Sequence[str]) -> list[tuple[int, float]] | None:
            calls.append(list(words))
            return ranks(texts, words)

        mem.store.text_ranks = recorded  # type: ignore[method-assign]
        hits = mem.search("stale tokens")
        assert hits[0].item_id == ids["stale"] and hits[0].text == STALE and hits[0].score > 0
        assert calls[-1] == ["stale", "tokens"]  # ranked by the server, stemmed: "tokens" finds "token"
        for query in HOSTILE:
            mem.search(query)  # words only: never a tsquery syntax error
        assert mem.search('" * NEAR( AND OR !') == []
        assert len(searched(mem)) == 2 + len(HOSTILE)
    result = run_cli("--store", pg_url, "--memory-dir", str(tmp_path / "dir"), "search", "stale token", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)[0]["item_id"] == ids["stale"]


def test_http_and_mcp_search_as_the_library_does(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        ids = teach(mem)
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            found = http.get("/search", params={"query": "stale token", "kinds": ["lessons", "facts"]})
            assert found.status_code == 200, found.text
            assert found.json()[0]["item_id"] == ids["stale"] and found.json()[0]["text"] == STALE
            refused = http.get("/search", params={"query": " "})
            assert refused.status_code == 400 and "\n" not in refused.json()["error"]
            run_id = http.post("/runs", json={"goal": "Log in", "start_url": LOGIN}).json()["run_id"]
            in_run = http.get("/search", params={"query": "csrf", "run_id": run_id, "step": 2})
            assert in_run.json()[0]["item_id"] == ids["stale"], in_run.text

        async def over_mcp() -> Any:
            async with Client(build_server(mem)) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert "search" in tools
                return (
                    await client.call_tool("search", {"run_id": run_id, "query": '"stale" AND token*'})
                ).structured_content

        answer = asyncio.run(over_mcp())
        assert answer["results"][0]["item_id"] == ids["stale"]
        logged = [(e.run_id, e.step) for e in searched(mem)]
        assert logged == [(None, None), (run_id, 2), (run_id, None)]  # the refused search wrote nothing
