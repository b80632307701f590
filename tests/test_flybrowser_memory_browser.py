"""Seed 003's layered memory end to end in real headless Chromium on the bundled cases
(agent/sites/memory_cases.json): a login learned then reused as a pattern, a dead end left by
backtracking to the last good snapshot, a small site explored (sitemap, extraction cache,
extraction budget and compression)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memtape.agent.browser import Browser
from memtape.agent.compress import urls_in
from memtape.agent.explore import explore
from memtape.agent.loop import RunConfig, RunResult, run_task
from memtape.agent.policy import ScriptedPolicy
from memtape.agent.sites import MEMORY_CASES_FILE, load_cases
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import CHARS_PER_TOKEN, count_tokens, estimate_tokens, token_counter
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.view import MemoryView

pytestmark = pytest.mark.browser
CASES = {c["id"]: c for c in load_cases(MEMORY_CASES_FILE)}
CLUB_PASSWORD = b"oar-and-river-9"


def case(
    browser: Browser, ledger: tuple[SqliteStore, Path], case_id: str, enabled: bool = True, **kw: Any
) -> RunResult:
    store, proj = ledger
    c = CASES[case_id]
    return run_task(
        browser,
        RecordingMemory(store, proj, enabled=enabled),
        ScriptedPolicy(),
        goal=c["goal"],
        start_url=c["start_url"],
        success_check=c["success"],
        case_id=case_id,
        **kw,
    )


def events(store: SqliteStore, run_id: str, *types: str) -> list[Any]:
    return list(store.read(run_id=run_id, types=list(types) or None))


def view(ledger: tuple[SqliteStore, Path]) -> MemoryView:
    return MemoryView.open(ledger[0], ledger[1])


def test_login_flow_learned_then_reused(chromium: Browser, ledger: tuple[SqliteStore, Path], tmp_path: Path) -> None:
    store, _ = ledger
    first = case(chromium, ledger, "club-learn-login")
    assert first.outcome.success
    learned = events(store, first.run_id, "pattern_learned")
    login = [e for e in learned if e.data["pattern_type"] == "login_flow"]
    assert len(login) == 1 and login[0].domain == "club.test"
    steps = login[0].data["steps"]
    assert [(s["command"], s["name"]) for s in steps] == [
        ("click", "Member area"),
        ("fill", "Username (member number)"),
        ("fill", "Password"),
        ("click", "Sign in"),
    ]
    assert [s["value"] for s in steps] == [None, "{username_member_number}", "{password}", None]
    inferred = [e.data for e in events(store, first.run_id, "context_inferred")]
    assert {"key": "login_required", "value": "true", "source": "login form at /members/login"} in [
        {k: d[k] for k in ("key", "value", "source")} for d in inferred
    ]

    # the second task says only "log in": without the pattern the scripted policy finds no sign-in form
    second = case(chromium, ledger, "club-reuse-login")
    assert second.outcome.success and second.errors == 0
    steps_run = [e.data for e in events(store, second.run_id, "step_recorded")]
    # the policy names the pattern as its prompt numbers it (it sees no ids); pattern_used ties it to the id
    assert steps_run[0]["think"].startswith("memory (learned_patterns): learned pattern 1\n")
    used = events(store, second.run_id, "pattern_used")
    assert [(e.data["pattern_id"], e.data["success"]) for e in used] == [(login[0].data["pattern_id"], True)]
    prompt = next(e for e in events(store, second.run_id, "context_built") if e.data["prompt"] == "system")
    item = next(i for i in prompt.data["items"] if i["source"] == "learned_patterns")  # the site's: the system prompt
    assert item["priority"] == 45 and "LEARNED PATTERNS" in item["text"] and login[0].id in item["event_ids"]
    pattern = next(p for p in view(ledger).patterns("club.test") if p.pattern_type == "login_flow")
    assert (pattern.success_count, pattern.failure_count, pattern.success_rate) == (2, 0, 1.0)
    assert pattern.last_used == used[0].occurred_at
    assert CLUB_PASSWORD not in (tmp_path / "ledger.db").read_bytes()

    chromium.new_page()  # a snapshot's form state never holds what was typed into a password field
    chromium.execute("goto", {"url": "http://club.test/members/login"})
    chromium.page.fill("#member", "4711")
    chromium.page.fill("#secret", "oar-and-river-9")
    assert chromium.form_state() == {"member": "4711", "secret": "[REDACTED]"}

    control = SqliteStore.open(tmp_path / "control.db")  # the same task with no memory cannot log in
    try:
        alone = case(chromium, (control, tmp_path / "control-projections.db"), "club-reuse-login", enabled=False)
        assert not alone.outcome.success and alone.outcome.reason == "gave_up"
    finally:
        control.close()


def test_dead_end_backtracks_to_the_last_good_snapshot(chromium: Browser, ledger: tuple[SqliteStore, Path]) -> None:
    store, proj = ledger
    stuck = case(chromium, ledger, "help-backtrack", config=RunConfig(backtrack=False))
    assert not stuck.outcome.success and stuck.outcome.reason == "gave_up"

    r = case(chromium, ledger, "help-backtrack")
    assert r.outcome.success
    back = events(store, r.run_id, "backtracked")
    assert len(back) == 1
    b = back[0].data
    assert (b["from_url"], b["to_url"], b["avoided"]) == (
        "http://help.test/more",
        "http://help.test/",
        ["link:More help"],
    )
    assert b["reason"].startswith("repeated failure: click failed again")
    warned = events(store, r.run_id, "repeated_failure_detected")
    assert warned and all(e.data["response"] == "warned" and e.data["url"] == "http://help.test/more" for e in warned)
    assert warned[0].seq < back[0].seq
    snaps = view(ledger).snapshots(r.run_id)
    assert [s.url for s in snaps] == [
        "http://help.test/",
        "http://help.test/more",
        "http://help.test/",
        "http://help.test/older",
        "http://help.test/return-form",
    ]
    assert snaps[0].restored == 1 and snaps[0].dead_ends == ("http://help.test/more",)
    assert snaps[0].snapshot_id == b["snapshot_id"] and snaps[-1].title.startswith("Return form")
    assert all(s.scroll_x == 0 and s.associated_step >= 1 for s in snaps)
    steps = [e.data for e in events(store, r.run_id, "step_recorded")]
    assert [s["decided_by"] for s in steps].count("backtrack") == 1
    after = steps[[s["decided_by"] for s in steps].index("backtrack") + 1]
    assert after["action"]["command"] == "click" and after["target"]["name"] == "Older topics"

    # short-term memory is kept after the run, with seed 003's priorities on its entries
    st = view(ledger).short_term(r.run_id)
    assert st.completed and st.navigation_path[-1] == "http://help.test/return-form"
    assert "http://help.test/more" in st.visited_urls
    by_command = {(e["key"].split("(")[0], e["ok"]): e["priority"] for e in st.recent}
    assert by_command[("click", False)] == "critical" and by_command[("wait", True)] == "low"
    assert by_command[("click", True)] == "high" and by_command[("finish", True)] == "critical"
    # working memory in the prompt: the path, and the action that already failed on this page
    prompts = [e.data for e in events(store, r.run_id, "context_built") if e.data["prompt"] == "step"]
    wm = [i for p in prompts for i in p["items"] if i["source"] == "working_memory"]
    assert any("Already failed here" in i["text"] and "click" in i["text"] for i in wm)
    assert any('"http://help.test/" -> "http://help.test/more"' in i["text"] for i in wm)  # fenced data
    for p in prompts:  # every item's tokens are counted (the tokenizer, else by detected content type)
        assert p["counted_by"] == token_counter()
        for i in p["items"]:
            assert i["content_type"] in CHARS_PER_TOKEN and 0.5 <= i["confidence"] <= 1
            assert i["tokens"] == count_tokens(i["text"], i["content_type"])


def test_explore_a_small_site_then_the_cache_then_extractions_in_prompts(
    chromium: Browser, ledger: tuple[SqliteStore, Path]
) -> None:
    store, proj = ledger
    done = explore(
        chromium, RecordingMemory(store, proj), "http://docs.test/", max_depth=2, max_pages=50, session_id="docs_1"
    )
    depth1 = {
        "http://docs.test/guides",
        "http://docs.test/api",
        "http://docs.test/about",
        "http://docs.test/privacy",
        "http://docs.test/guides/install",
    }
    depth2 = {"http://docs.test/guides/config", "http://docs.test/api/events", "http://docs.test/changelog"}
    assert done.visited[0] == "http://docs.test/" and set(done.visited[1:6]) == depth1
    assert set(done.visited[6:]) == depth2 and done.complete and not done.served_from_cache
    pages = {p.url: p for p in view(ledger).sitemap_pages("docs.test")}
    assert pages["http://docs.test/guides"].link_type == "main_nav"
    assert pages["http://docs.test/privacy"].link_type == "footer"
    assert pages["http://docs.test/guides/install"].link_type == "content"
    ref = pages["http://docs.test/guides/config/reference"]
    assert ref.depth == 3 and not ref.visited  # beyond --max-depth 2: discovered, never visited
    home = pages["http://docs.test/"]
    assert home.visited and home.title == "Ledger Docs — Ledger Docs" and home.section_count == 3
    assert "Documentation for the ledger" in home.summary
    completed = events(store, done.run_id, "exploration_completed")[0].data
    assert (
        completed["complete"] and completed["pages_visited"] == 9 and "Explored pages (9 total)" in completed["summary"]
    )
    assert len(events(store, done.run_id, "snapshot_taken")) == 9

    again = explore(chromium, RecordingMemory(store, proj), "http://docs.test/", session_id="docs_1")
    assert not again.visited and set(again.served_from_cache) == set(done.visited)  # within the 300 s TTL
    served = events(store, again.run_id, "extraction_served")
    assert len(served) == 9 and all(e.data["ttl_seconds"] == 300 for e in served)
    assert not events(store, again.run_id, "step_recorded")  # nothing was loaded again
    assert view(ledger).sitemap("docs.test").explorations == 2

    r = run_task(
        chromium,
        RecordingMemory(store, proj),
        ScriptedPolicy(),
        goal='Open "Guides"',
        start_url="http://docs.test/",
        session_id="docs_1",
        config=RunConfig(budget=20_000),
    )
    assert r.outcome.success
    prompt = next(e.data for e in events(store, r.run_id, "context_built") if e.data["prompt"] == "step")
    extracted = [i for i in prompt["items"] if i["source"] == "extracted_data"]
    others = sum(i["tokens"] for i in prompt["items"] if i["source"] != "extracted_data")
    assert extracted and sum(i["tokens"] for i in extracted) <= min(4000, int((20_000 - others) * 0.2))
    changelog = next(i for i in extracted if "docs.test/changelog" in i["text"].splitlines()[0])
    assert "tier 2" in changelog["text"] and "compressed" in changelog["text"]  # same session, > 2,000 tokens
    source = next(
        e.data["text"]
        for e in store.read(types=["extraction_recorded"])
        if e.data["url"] == "http://docs.test/changelog"
    )
    assert estimate_tokens(source) > 2000
    assert len(urls_in(source)) > 60 and all(u in changelog["text"] for u in urls_in(source))  # every URL kept
