"""The web viewer in process (memtape/viewer/): the gate, the headers, every page's answer to any
query an adversary or a careless person types, and the diff by run id it reads through
`Memory.diff` (the same answer as `memtape diff`). Chromium walks it in tests/test_viewer.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from devtools.viewer_sample import HOSTILE_LESSON, Sample, build
from memtape.api import Memory, MemtapeError
from memtape.server import create_app
from memtape.viewer import pages
from memtape.viewer.gate import COOKIE, session_value
from tests.cli_runner import run_cli

TOKEN = "viewer-test-token"
PAGES = ("/ui/", "/ui/diff", "/ui/search?q=socks")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Sample]:
    where = tmp_path_factory.mktemp("viewer") / "memory"
    return where, build(where)


@pytest.fixture(scope="module")
def memory(sample: tuple[Path, Sample]) -> Iterator[Memory]:
    mem = memtape.open(sample[0])
    try:
        yield mem
    finally:
        mem.close()


@pytest.fixture(scope="module")
def client(memory: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(memory, TOKEN), base_url="http://127.0.0.1", follow_redirects=False) as each:
        yield each


@pytest.fixture
def http(client: TestClient) -> TestClient:
    """The module's client with no cookie kept from another test: each one says what it sends."""
    client.cookies.clear()
    return client


def logged_in(http: TestClient) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={session_value(TOKEN)}"}


def head(memory: Memory) -> int:
    return int(memory.store.head())


def test_the_login_link_sets_a_strict_httponly_cookie_and_drops_the_token(http: TestClient, sample: Any) -> None:
    answer = http.get(f"/ui/runs/{sample[1].learner}?token={TOKEN}&page=1")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/ui/runs/{sample[1].learner}?page=1"  # the token left the address
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={session_value(TOKEN)};")
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/ui" in cookie
    assert TOKEN not in cookie  # the cookie opens the viewer, it is not the API's token
    assert http.get("/runs/x/facts", headers={"Authorization": f"Bearer {session_value(TOKEN)}"}).status_code == 401


@pytest.mark.parametrize("path", ["/ui/", "/ui", "/ui/runs/{learner}", "/ui/runs/{learner}/steps/1", "/ui/items/{tip}"])
def test_without_the_cookie_no_page_shows_memory(http: TestClient, sample: Any, path: str) -> None:
    s: Sample = sample[1]
    for headers in ({}, {"Cookie": f"{COOKIE}=forged"}, {"Authorization": f"Bearer {TOKEN}"}, {"Cookie": "x=1"}):
        answer = http.get(path.format(learner=s.learner, tip=s.tip), headers=headers, follow_redirects=True)
        assert answer.status_code == 401, (path, headers)
        for secret in (s.learner, s.teacher, s.tip_text[:30], "Wool Socks", "shop.example"):
            assert secret not in answer.text
    wrong = http.get("/ui/?token=not-the-token")
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers and "token is wrong" in wrong.text
    twice = http.get(f"/ui/?token={TOKEN}&token={TOKEN}")
    assert twice.status_code == 401 and "set-cookie" not in twice.headers


def test_every_answer_carries_a_csp_without_inline_script(http: TestClient, sample: Any) -> None:
    s: Sample = sample[1]
    paths = [*PAGES, f"/ui/runs/{s.learner}", f"/ui/runs/{s.learner}/steps/1", f"/ui/items/{s.tip}"]
    paths += ["/ui/runs/nope", "/ui/nowhere", "/ui/static/viewer.js", "/ui/?page=x"]
    for path in paths:
        for headers in ({}, logged_in(http)):
            answer = http.get(path, headers=headers)
            csp = answer.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert answer.headers["referrer-policy"] == "no-referrer" and answer.headers["cache-control"] == "no-store"
            if answer.headers["content-type"].startswith("text/html"):
                assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text), path  # no inline script
                assert " style=" not in answer.text and " on" + "click=" not in answer.text


def test_pages_answer_what_was_asked(http: TestClient, sample: Any) -> None:
    s: Sample = sample[1]
    cookie = logged_in(http)
    runs = http.get("/ui/", headers=cookie).text
    assert runs.index(s.failed) < runs.index(s.learner) < runs.index(s.teacher)  # newest first
    only_failed = http.get("/ui/?outcome=failed", headers=cookie).text
    assert s.failed in only_failed and s.learner not in only_failed
    by_site = http.get("/ui/?site=shop.example&session=shop-session", headers=cookie).text
    assert s.learner in by_site and s.failed not in by_site
    step = http.get(f"/ui/runs/{s.learner}/steps/1", headers=cookie).text
    assert f'href="/ui/runs/{s.teacher}/steps/1"' in step and f'href="/ui/items/{s.tip}"' in step
    assert "Trimmed by the budget" in step
    assert "changed 1 of 1 decisions" in step and "+2 turns saved" in step  # the item_credited event
    item = http.get(f"/ui/items/{s.tip}", headers=cookie).text
    assert f'href="/ui/runs/{s.learner}/steps/1"' in item  # the run and step that recalled it
    assert "changed 1 of 1 that showed it" in item and "<dt>Tokens saved</dt><dd>180</dd>" in item
    diff = http.get(f"/ui/diff?from=0&to={s.teacher}", headers=cookie).text
    assert s.tip in diff and s.hostile not in diff  # the later run's lesson came after
    assert s.banner in http.get("/ui/search?q=BANNER newsletter", headers=cookie).text


def test_hostile_memory_text_is_escaped(http: TestClient, sample: Any) -> None:
    s: Sample = sample[1]
    for path in (
        f"/ui/items/{s.hostile}",
        f"/ui/runs/{s.learner}",
        "/ui/search?q=pwned",
        f"/ui/diff?from=0&to={s.learner}",
    ):
        text = http.get(path, headers=logged_in(http)).text
        assert "&lt;img src=x onerror=" in text and "<img src=x" not in text, path
        assert "&lt;script&gt;document.title" in text and "<script>document" not in text
    assert HOSTILE_LESSON.startswith("<img src=x onerror=")


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/ui/runs/nope", 404, "no run 'nope'"),
        ("/ui/runs/{learner}/steps/99", 404, "has no step 99"),
        ("/ui/runs/{learner}/steps/-1", 400, "a step is a whole number"),
        ("/ui/items/nothing-here", 404, "no lesson, fact, selector or trajectory"),
        ("/ui/diff?from=0", 400, "a diff needs both"),
        ("/ui/diff?from=nowhere&to=1", 400, "expected a seq, an ISO time or a run id"),
        ("/ui/diff?from={learner}&to={teacher}", 400, "a diff runs forward"),
        ("/ui/?page=0", 400, "page must be a whole number from 1"),
        ("/ui/?outcome=maybe", 400, "outcome must be one of"),
        ("/ui/?site=a&site=b", 400, "site given 2 times"),
        ("/ui/search?q=" + "x" * 2001, 400, "a search takes at most 2000"),
        ("/ui/elsewhere", 404, "no page /ui/elsewhere"),
    ],
)
def test_bad_questions_answer_one_line_and_write_nothing(
    http: TestClient, memory: Memory, sample: Any, path: str, status: int, says: str
) -> None:
    s: Sample = sample[1]
    before = head(memory)
    answer = http.get(path.format(learner=s.learner, teacher=s.teacher), headers=logged_in(http))
    assert answer.status_code == status
    message = re.search(r'<p class="message">(.*?)</p>', answer.text, re.S)
    assert message is not None and says in message.group(1).replace("&#39;", "'") and "\n" not in message.group(1)
    assert head(memory) == before


def test_a_search_is_memory_search_logged_as_a_recall(http: TestClient, memory: Memory, sample: Any) -> None:
    before = head(memory)
    page = http.get("/ui/search?q=newsletter banner", headers=logged_in(http)).text
    assert page.index(sample[1].banner) < page.index("</table>")  # the banner tip, ranked first of its kind
    (searched,) = list(memory.store.read(before + 1, types=["memory_searched"]))
    assert searched.data["query"] == "newsletter banner" and sample[1].banner in str(searched.data["hits"])
    assert head(memory) == before + 1
    assert http.get("/ui/search?q=", headers=logged_in(http)).status_code == 200 and head(memory) == before + 1


def test_the_viewer_only_reads(http: TestClient, memory: Memory, sample: Any) -> None:
    """Every page but a search (a recall, logged) only reads."""
    before = head(memory)
    for path in ("/ui/", f"/ui/runs/{sample[1].learner}/steps/1"):
        assert http.post(path, headers=logged_in(http), json={}).status_code == 405
        http.get(path, headers=logged_in(http))
    assert head(memory) == before  # no page logs an event (no page recalls)


def test_a_page_of_runs_is_one_paged_read_kept_while_the_head_stays(http: TestClient, memory: Memory) -> None:
    """The list of runs asks the library for the page it shows (`state` with limit and offset, the
    filters in the read) and for the count of the list; the same page again, a page past the last
    (the last) or going back asks nothing while the head stays; a write in between drops what was kept."""
    asked: list[tuple[Any, ...]] = []
    real_state, real_count = memory.state, memory.count

    def state(kind: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(("state", kind, kwargs))
        return real_state(kind, *args, **kwargs)

    def count(kind: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(("count", kind, kwargs))
        return real_count(kind, *args, **kwargs)

    memory.start_run(goal="paging moves the head", start_url="https://paging.test/").finish(success=True)
    every = {"domain": None, "session": None, "outcome": None}
    success = every | {"outcome": "success"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "state", state)
        patch.setattr(memory, "count", count)
        for path in ("/ui/", "/ui/?page=2", "/ui/?outcome=success", "/ui/?outcome=success&page=3", "/ui/"):
            assert http.get(path, headers=logged_in(http)).status_code == 200
        assert [a for a in asked if a[1] == "runs"] == [
            ("count", "runs", every),
            ("state", "runs", every | {"run": None, "limit": pages.PAGE_SIZE, "offset": 0}),
            ("count", "runs", success),
            ("state", "runs", success | {"run": None, "limit": pages.PAGE_SIZE, "offset": 0}),
        ]
        assert sorted(a[1] for a in asked if a[1] != "runs") == ["lessons", "tier1"]  # the funnel, once
        memory.start_run(goal="paging moves the head again", start_url="https://paging.test/").finish(success=True)
        asked.clear()
        assert "paging moves the head again" in http.get("/ui/", headers=logged_in(http)).text
        assert [a[:2] for a in asked if a[1] == "runs"] == [("count", "runs"), ("state", "runs")]


text = st.text(st.characters(codec="utf-8"), max_size=300) | st.sampled_from(
    ["0", "-1", "1e9", "9" * 30, "２", "run_", "2026-01-01T00:00:00Z", "<script>", "%00", "../..", " "]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page=st.sampled_from(["/ui/", "/ui/diff", "/ui/search", "/ui/items/", "/ui/runs/"]),
    key=st.sampled_from(["page", "from", "to", "q", "site", "outcome", "session", "domain"]),
    value=text,
    tail=text,
)
def test_any_query_is_answered_or_refused_never_a_crash(
    http: TestClient, memory: Memory, page: str, key: str, value: str, tail: str
) -> None:
    before = head(memory)
    path = page + (quote(tail, safe="") if page != "/ui/" and page.endswith("/") else "")
    answer = http.get(path, params={key: value, "to": "1"} if key == "from" else {key: value}, headers=logged_in(http))
    assert answer.status_code in (200, 400, 404), (path, key, value, answer.text[-300:])
    assert "<script>" not in answer.text.replace('<script src="/ui/static/viewer.js" defer></script>', "")
    searched = page == "/ui/search" and key == "q" and answer.status_code == 200 and value.strip()
    assert head(memory) == before + (1 if searched else 0)  # only a search writes: its memory_searched


def test_diff_by_run_id_is_the_diff_to_the_run_end(memory: Memory, sample: Any) -> None:
    s: Sample = sample[1]
    last = max(e.seq for e in memory.store.read(run_id=s.teacher))
    assert memory.diff(0, s.teacher) == memory.diff(0, last) == memory.diff("0", str(last))
    gained = {c.item for c in memory.diff(0, s.teacher) if c.projection == "lessons"}
    assert s.tip in gained and s.banner in gained and s.hostile not in gained
    between = memory.diff(s.teacher, s.learner)
    assert {c.item for c in between if c.change == "gained" and c.projection == "lessons"} == {s.hostile}


@pytest.mark.parametrize(
    ("start", "end", "says"),
    [
        (True, 1, "diff: start must be a whole number or a string, got True"),
        (0, None, "diff: end must be a whole number or a string, got None"),
        (-1, 5, "start must be a seq >= 0"),
        (0, "  ", "end must be"),
        (0, "no-such-run", "diff end 'no-such-run': expected a seq, an ISO time or a run id"),
        (0, 1.5, "end must be"),
    ],
)
def test_memory_diff_refuses_bad_points_in_one_line(memory: Memory, start: Any, end: Any, says: str) -> None:
    with pytest.raises(MemtapeError, match=re.escape(says)):
        memory.diff(start, end)


def test_the_diff_command_takes_a_run_id(sample: Any) -> None:
    where, s = sample
    res = run_cli("--memory-dir", str(where), "diff", "--from", "0", "--to", s.teacher, "--json")
    assert res.code == 0, res.err
    assert {c["item"] for c in json.loads(res.out) if c["projection"] == "lessons"} >= {s.tip, s.banner}
    bad = run_cli("--memory-dir", str(where), "diff", "--from", "0", "--to", "no-such-run")
    assert bad.code == 1 and "expected a seq, an ISO time or a run id" in bad.err


def test_no_token_opens_the_viewer_to_loopback_callers(memory: Memory, sample: Any) -> None:
    with TestClient(create_app(memory, None), base_url="http://127.0.0.1") as open_http:
        assert sample[1].learner in open_http.get("/ui/").text
        assert open_http.get("/ui/", headers={"Host": "evil.example"}).status_code == 403  # the Host check holds


def test_memtape_ui_serves_on_a_free_port_and_opens_the_login_link(tmp_path: Path, sample: Any) -> None:
    """The browser is the one $BROWSER names: here a script that writes down what it was asked to open."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")} | {"BROWSER": f"{browser} %s"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memtape", "--memory-dir", str(sample[0]), "ui"], env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not opened.exists() or not opened.read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        link = opened.read_text().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui/\?token=\S+", link)
        answer = httpx.get(link, follow_redirects=False, timeout=30)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/"
        cookie = answer.headers["set-cookie"].split(";")[0]
        runs = httpx.get(link.split("?")[0], headers={"Cookie": cookie}, timeout=30)
        assert runs.status_code == 200 and sample[1].learner in runs.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.stderr is not None and f"memtape: viewer: {link}" in proc.stderr.read().decode()
