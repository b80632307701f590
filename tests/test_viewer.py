"""The web viewer in real Chromium, served by a real `memtape serve`: the login link from its
output, the walk runs -> run -> step -> item, a diff, a search, keyboard navigation, hostile
memory text shown as text and running nothing, and no memory without the cookie."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

import memtape
from devtools.viewer_sample import Sample, build
from memtape.agent.browser import CHROMIUM, LAUNCH_FLAGS
from memtape.viewer.pages import PAGE_SIZE
from tests.server_support import Served, live_server

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class World:
    served: Served
    sample: Sample
    login: str
    browser: Browser
    shots: Path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, chromium: Browser) -> Iterator[World]:
    root = tmp_path_factory.mktemp("viewer-browser")
    sample = build(root / "memory")
    with live_server(root / "memory") as served:
        found = re.search(r"memtape: viewer: (\S+)", served.announced)
        assert found is not None, served.announced
        yield World(served, sample, found.group(1), chromium, root / "shots")


@pytest.fixture
def fresh(world: World) -> Iterator[BrowserContext]:
    """A browser context of its own: no cookie from another test."""
    ctx = world.browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield ctx
    finally:
        ctx.close()


def watched(ctx: BrowserContext) -> tuple[Page, list[str]]:
    """A page whose script errors, dialogs and CSP violations are collected."""
    page = ctx.new_page()
    trouble: list[str] = []
    page.on("pageerror", lambda e: trouble.append(f"pageerror {e}"))
    page.on("console", lambda m: trouble.append(f"console {m.text}") if m.type == "error" else None)
    page.on("dialog", lambda d: (trouble.append(f"dialog {d.message}"), d.dismiss()))
    return page, trouble


def log_in(world: World, ctx: BrowserContext) -> tuple[Page, list[str]]:
    page, trouble = watched(ctx)
    page.goto(world.login)
    return page, trouble


def shot(world: World, page: Page, name: str) -> None:
    world.shots.mkdir(exist_ok=True)
    path = world.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a page was drawn, not a blank


def test_serve_prints_the_login_link_and_opening_it_drops_the_token(world: World, fresh: BrowserContext) -> None:
    assert world.login == f"{world.served.base}/ui/?token={world.served.token}"
    page, trouble = log_in(world, fresh)
    assert page.url == f"{world.served.base}/ui/"  # the token left the address bar
    (cookie,) = fresh.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert page.evaluate("document.cookie") == ""  # no script reads it
    rows = page.locator("table.rows tbody tr")
    assert rows.count() == 3
    assert world.sample.learner in rows.nth(1).inner_text()
    shot(world, page, "runs")
    assert trouble == []


def test_walk_runs_run_step_item(world: World, fresh: BrowserContext) -> None:
    s = world.sample
    page, trouble = log_in(world, fresh)
    page.get_by_role("link", name=s.learner, exact=True).click()
    assert page.url.endswith(f"/ui/runs/{s.learner}")
    assert "Accept all cookies" in page.locator("table.rows").first.inner_text()
    shot(world, page, "run")
    page.get_by_role("link", name="1", exact=True).click()
    assert page.url.endswith(f"/ui/runs/{s.learner}/steps/1")
    prompt = page.locator("section.prompt table.rows").first.inner_text()
    assert s.tip_text in prompt and f"{s.teacher} · step 1" in prompt  # the tip and the run that taught it
    assert "Trimmed by the budget" in page.content()
    recalled = page.locator("tr", has=page.locator(f"a[href='/ui/items/{s.tip}']")).last.inner_text()
    assert "changed 1 of 1 decisions" in recalled  # whether the item changed the decision (memtape credit)
    shot(world, page, "step")
    page.locator(f"a[href='/ui/items/{s.tip}']").first.click()
    assert page.url.endswith(f"/ui/items/{s.tip}")
    body = page.locator("main").inner_text()
    assert s.tip_text in body and "recalled" in body
    assert page.locator(f"a[href='/ui/runs/{s.learner}/steps/1']").count() == 1  # the run that recalled it
    shot(world, page, "item")
    assert trouble == []


def test_a_diff_up_to_a_run_shows_what_it_taught(world: World, fresh: BrowserContext) -> None:
    s = world.sample
    page, trouble = log_in(world, fresh)
    page.get_by_role("link", name="Diff", exact=True).click()
    page.get_by_label("From").fill("0")
    page.get_by_label("To").fill(s.teacher)
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url("**/ui/diff?**")
    assert page.url.endswith(f"/ui/diff?from=0&to={s.teacher}")
    lessons = page.locator("table.rows").first.inner_text()
    assert s.tip in lessons and s.banner in lessons and s.hostile not in lessons
    shot(world, page, "diff")
    assert trouble == []


def test_search_finds_the_banner_tip(world: World, fresh: BrowserContext) -> None:
    page, trouble = log_in(world, fresh)
    page.get_by_role("searchbox", name="Search memory").fill("banner")
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/search?q=banner")
    assert "Close the newsletter banner" in page.locator("main").inner_text()
    shot(world, page, "search")
    assert trouble == []


def test_keyboard_navigation(world: World, fresh: BrowserContext) -> None:
    s = world.sample
    page, trouble = log_in(world, fresh)
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.locator("tr.selected").inner_text().startswith(s.learner)
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/runs/{s.learner}")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/runs/{s.learner}/steps/1")
    page.keyboard.press("n")
    page.wait_for_url(f"**/ui/runs/{s.learner}/steps/2")
    page.keyboard.press("p")
    page.wait_for_url(f"**/ui/runs/{s.learner}/steps/1")
    page.keyboard.press("u")
    page.wait_for_url(f"**/ui/runs/{s.learner}")
    page.keyboard.press("/")
    page.keyboard.type("socks")  # typed into the search box, not taken as keys
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/search?q=socks")
    assert trouble == []


def test_hostile_memory_text_is_shown_as_text_and_runs_nothing(world: World, fresh: BrowserContext) -> None:
    s = world.sample
    page, trouble = log_in(world, fresh)
    for path in (f"/ui/items/{s.hostile}", f"/ui/runs/{s.learner}", "/ui/search?q=pwned"):
        page.goto(world.served.base + path)
        page.wait_for_load_state("load")
        assert page.title() != "pwned" and not page.title().startswith("pwned")
        assert "<img src=x onerror=" in page.locator("main").inner_text()  # shown as the text it is
        assert "<script>document.title='pwned'</script>" in page.locator("main").inner_text()
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    shot(world, page, "hostile")
    assert trouble == []


def test_without_the_cookie_the_viewer_shows_no_memory(world: World, fresh: BrowserContext) -> None:
    s = world.sample
    page, trouble = watched(fresh)
    for path in ("/ui/", f"/ui/runs/{s.learner}", f"/ui/runs/{s.learner}/steps/1", f"/ui/items/{s.tip}"):
        answer = page.goto(world.served.base + path)
        assert answer is not None and answer.status == 401
        text = page.content()
        assert s.learner not in text and "Wool Socks" not in text and "shop.example" not in text
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "open the viewer link" in page.locator("main").inner_text()
    shot(world, page, "login-refused")
    # Chromium logs each refused page itself (the 401 asked for); nothing else went wrong
    assert trouble == ["console Failed to load resource: the server responded with a status of 401 (Unauthorized)"] * 4


def test_no_token_serves_the_viewer_to_this_machine(tmp_path: Path, chromium: Browser) -> None:
    sample = build(tmp_path / "memory")
    with live_server(tmp_path / "memory", no_token=True) as served:
        assert f"memtape: viewer: {served.base}/ui/\n" in served.announced
        page = chromium.new_page()
        try:
            answer = page.goto(f"{served.base}/ui/")
            assert answer is not None and answer.status == 200 and sample.learner in page.content()
        finally:
            page.close()


def test_the_runs_list_pages_by_its_links_its_keys_and_its_filters(tmp_path: Path, chromium: Browser) -> None:
    """More runs than a page: "1–50 of N", next and previous by link and by key, a filter (a link in
    a row, the outcome chosen in the form) paging the matches only."""
    where, extra = tmp_path / "memory", 12
    with memtape.open(where) as mem:
        for i in range(PAGE_SIZE + extra):
            run = mem.start_run(goal=f"paged task {i}", start_url="https://paged.test/", session_id=f"s{i % 3}")
            run.finish(success=i % 2 == 0)
    total = PAGE_SIZE + extra
    with live_server(where) as served:
        ctx = chromium.new_context(viewport={"width": 1280, "height": 800})
        try:
            page, trouble = watched(ctx)
            page.goto(f"{served.base}/ui/?token={served.token}")
            rows = page.locator("table.rows tbody tr")
            assert rows.count() == PAGE_SIZE and f"paged task {total - 1}" in rows.first.inner_text()
            assert f"1–{PAGE_SIZE} of {total}" in page.locator("p.span").inner_text()
            page.get_by_role("link", name="next →").click()
            page.wait_for_url("**/ui/?page=2")
            assert rows.count() == extra and f"paged task {extra - 1}" in rows.first.inner_text()
            assert f"{PAGE_SIZE + 1}–{total} of {total}" in page.locator("nav.pager").inner_text()
            assert page.get_by_role("link", name="next →").count() == 0
            page.keyboard.press("p")
            page.wait_for_url("**/ui/?page=1")
            page.keyboard.press("n")
            page.wait_for_url("**/ui/?page=2")
            page.keyboard.press("j")
            page.keyboard.press("Enter")  # keys still open a row's run
            page.wait_for_url("**/ui/runs/run_*")
            page.go_back()
            page.get_by_role("link", name="s1", exact=True).first.click()  # a row's session filters the list
            page.wait_for_url("**/ui/?session=s1")
            in_s1 = [i for i in range(total) if i % 3 == 1]
            assert (
                rows.count() == len(in_s1) and f"1–{len(in_s1)} of {len(in_s1)}" in page.locator("p.span").inner_text()
            )
            page.get_by_label("Outcome").select_option("failed")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_url("**/ui/?site=&session=s1&outcome=failed")
            failed = [i for i in in_s1 if i % 2 == 1]
            assert (
                rows.count() == len(failed)
                and f"1–{len(failed)} of {len(failed)}" in page.locator("p.span").inner_text()
            )
            assert trouble == []
        finally:
            ctx.close()
