"""Seed 003's layered memory without a browser: learned patterns and their pruning decision, the
context store and extraction cache, snapshots, the sitemap graph, memory priorities, token
estimation by content type, the extraction budget and compression (property tests), and
`memtape state` for each new projection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memtape.agent import compress as C
from memtape.agent.prompt import recent_actions
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    ContextGiven,
    ContextInferred,
    ExplorationStarted,
    PatternLearned,
    PatternUsed,
    SitemapLinksDiscovered,
    SitemapPageVisited,
    SnapshotTaken,
    SubjectForgotten,
)
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import BudgetItem, count_tokens, detect_content_type, estimate_tokens, fit, shed
from memtape.projections.folds.context import fresh_extraction
from memtape.projections.folds.patterns import to_prune
from memtape.projections.folds.short_term import priority_of, trim
from memtape.projections.folds.sitemap import next_page
from memtape.projections.parameters import Thresholds
from memtape.projections.pattern_learning import fill_placeholders, learn_patterns
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.values import StepRecord
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.projections_support import T0, at, run_started


def rec(
    step: int,
    command: str,
    url: str,
    after: str | None = None,
    role: str | None = None,
    name: str | None = None,
    ok: bool = True,
    sensitive: bool = False,
    **args: Any,
) -> StepRecord:
    return StepRecord(
        step, command, dict(args), ok, None if ok else "boom", url, after or url, role, name, sensitive=sensitive
    )


LOGIN_RUN = [
    rec(1, "click", "https://a.test/", "https://a.test/login", "link", "Sign in here"),
    rec(2, "fill", "https://a.test/login", role="textbox", name="E-mail", value="ann@a.test"),
    rec(3, "fill", "https://a.test/login", role="textbox", name="Password", value="hunter2!", sensitive=True),
    rec(4, "click", "https://a.test/login", "https://a.test/home", "button", "Log in"),
    rec(5, "finish", "https://a.test/home"),
]


# ---- long-term patterns --------------------------------------------------------------------


def test_login_flow_is_learned_with_placeholders_and_typed_by_its_steps() -> None:
    (p,) = learn_patterns(LOGIN_RUN, "a.test")
    assert p.pattern_type == "login_flow" and p.description == "Login flow for a.test"
    assert [(s.command, s.name, s.value) for s in p.steps] == [
        ("click", "Sign in here", None),
        ("fill", "E-mail", "{e_mail}"),
        ("fill", "Password", "{password}"),
        ("click", "Log in", None),
    ]
    assert "hunter2" not in p.model_dump_json() and "ann@a.test" not in p.model_dump_json()
    filled = fill_placeholders([s.model_dump() for s in p.steps], "bob", "pw")
    assert [s["value"] for s in filled] == [None, "bob", "pw", None]
    form = [
        rec(1, "fill", "https://a.test/s", role="textbox", name="Query", value="x"),
        rec(2, "press", "https://a.test/s", "https://a.test/r", key="Enter"),
    ]
    (f,) = learn_patterns(form, "a.test")
    assert f.pattern_type == "form_fill" and [s.value for s in f.steps] == ["{query}", "Enter"]
    nav = [
        rec(1, "click", "https://a.test/", "https://a.test/1", "link", "One"),
        rec(2, "click", "https://a.test/1", "https://a.test/2", "link", "Two"),
    ]
    (n,) = learn_patterns(nav, "a.test")
    assert n.pattern_type == "navigation" and n.description == 'Navigate a.test: "One" → "Two"'
    assert learn_patterns(nav[:1], "a.test") == []  # one click is no pattern
    assert learn_patterns([rec(1, "fill", "https://a.test/s", role="textbox", name="Q", value="x")], "a.test") == []


def pattern(pid: str, domain: str = "a.test", when: str = T0, run_id: str | None = None) -> NewEvent:
    return NewEvent(
        PatternLearned(
            pattern_id=pid,
            description=f"flow {pid}",
            pattern_type="navigation",
            steps=[{"command": "click", "role": "link", "name": pid}],
        ),
        domain=domain,
        occurred_at=when,
        run_id=run_id,
    )


def used(pid: str, ok: bool, when: str) -> NewEvent:
    return NewEvent(PatternUsed(pattern_id=pid, success=ok), domain="a.test", occurred_at=when)


def test_pattern_counts_and_the_pruning_decision(fresh_ledger: SqliteStore) -> None:
    w = MemoryWriter(fresh_ledger, Thresholds(max_patterns=5))
    w.append([pattern(f"p{i}", when=at(i)) for i in range(5)])
    w.append(
        [used("p0", False, at(10)), used("p1", True, at(11)), used("p1", False, at(12)), pattern("p2", when=at(13))]
    )
    v = MemoryView.open(fresh_ledger, None)
    p1 = next(p for p in v.patterns() if p.pattern_id == "p1")
    assert (p1.success_count, p1.failure_count, p1.success_rate, p1.last_used) == (2, 1, 2 / 3, at(12))
    assert next(p for p in v.patterns() if p.pattern_id == "p2").success_count == 2  # learned again: a success
    assert not list(fresh_ledger.read(types=["patterns_pruned"]))
    w.append([pattern("p5", when=at(20))])  # 6 > 5: down to int(5 * 0.8) = 4, lowest (success_rate, last_used) first
    (pruned,) = list(fresh_ledger.read(types=["patterns_pruned"]))
    assert pruned.data["pattern_ids"] == ["p0", "p1"] and pruned.data["remaining_count"] == 4
    assert [p.pattern_id for p in MemoryView.open(fresh_ledger, None).patterns()] == ["p2", "p5", "p4", "p3"]
    MemoryWriter(fresh_ledger).append([NewEvent(SubjectForgotten(subject_kind="domain", subject="a.test"))])
    assert MemoryView.open(fresh_ledger, None).patterns() == []


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 50)), min_size=0, max_size=30),
    st.integers(1, 20),
)
@settings(max_examples=60, deadline=None)
def test_pruning_removes_the_bottom_by_rate_then_recency(uses: list[tuple[int, int, int]], cap: int) -> None:
    from memtape.projections.folds.patterns import Pattern, PatternsState, rate

    state = PatternsState(
        {
            f"p{i}": Pattern(f"p{i}", "a.test", "d", "navigation", (), s, f, rate(s, f), at(t), T0, ())
            for i, (s, f, t) in enumerate(uses)
        }
    )
    gone = to_prune(state, cap)
    if len(uses) <= cap:
        assert gone == []
        return
    assert len(state.patterns) - len(gone) == int(cap * 0.8)
    kept = [p for pid, p in state.patterns.items() if pid not in gone]
    worst_kept = min((p.success_rate, p.last_used) for p in kept) if kept else None
    assert all(
        worst_kept is None or (state.patterns[g].success_rate, state.patterns[g].last_used) <= worst_kept for g in gone
    )


# ---- context store and extraction cache -----------------------------------------------------------


def test_relevant_context_by_keyword_overlap(fresh_ledger: SqliteStore) -> None:
    MemoryWriter(fresh_ledger).append(
        [
            run_started("r1", goal="log in and list the products", domain="a.test"),
            NewEvent(ContextGiven(key="preferred_language", value="English"), run_id="r1", domain="a.test"),
            NewEvent(ContextGiven(key="max_products", value="100"), run_id="r1", domain="a.test"),
            NewEvent(
                ContextInferred(key="login_required", value="true", source="login form at /login"), domain="a.test"
            ),
            NewEvent(ContextInferred(key="login_required", value="true", source="login form"), domain="b.test"),
            NewEvent(ContextGiven(key="products_wanted", value="all"), run_id="r2", domain="a.test"),
        ]
    )
    v = MemoryView.open(fresh_ledger, None)
    got = v.relevant_context("login to the website and list the products", "r1", "a.test")
    assert [(e.kind, e.key) for e in got] == [("user", "max_products"), ("inferred", "login_required")]
    assert [e.key for e in v.context("r1")] == ["preferred_language", "max_products"]
    assert {e.domain for e in v.context(None, "b.test")} == {"b.test"}


def test_extraction_cache_serves_within_the_ttl_and_logs_it(tmp_path: Path) -> None:
    clock = SteppingClock(step=__import__("datetime").timedelta(seconds=0))
    store = SqliteStore.open(tmp_path / "ledger.db", clock=clock)
    run = RecordingMemory(store, None).start_run(goal="read the docs", start_url="https://d.test/", run_id="r1")
    calls: list[int] = []

    def page() -> dict[str, Any]:
        calls.append(1)
        return {"title": "Docs", "text": f"version {len(calls)}", "links": [], "section_count": 2}

    first = run.extraction("page:https://d.test/", "extract_text", "https://d.test/", page)
    clock.advance(__import__("datetime").timedelta(seconds=300))  # exactly the TTL: still fresh
    second = run.extraction("page:https://d.test/", "extract_text", "https://d.test/", page)
    assert not first.served_from_cache and second.served_from_cache and second.text == "version 1" and len(calls) == 1
    served = list(store.read(types=["extraction_served"]))[0].data
    assert served["extraction_id"] == first.event_id and served["age_seconds"] == 300 and served["ttl_seconds"] == 300
    clock.advance(__import__("datetime").timedelta(seconds=1))
    third = run.extraction("page:https://d.test/", "extract_text", "https://d.test/", page)
    assert not third.served_from_cache and third.text == "version 2"
    entry = MemoryView.open(store, None).context(None, "d.test")[0]
    assert entry.kind == "extraction" and entry.served_count == 0 and entry.value == "version 2"
    assert fresh_extraction(MemoryView.open(store, None).state.context, "page:https://d.test/", at(1), 300) is None


# ---- snapshots, sitemap ------------------------------------------------------------------------


def test_sitemap_picks_shallowest_first_within_the_limits(fresh_ledger: SqliteStore) -> None:
    home = "https://s.test/"
    links = [{"url": f"https://s.test/{n}", "text": n, "link_type": "main_nav"} for n in ("a", "b")]
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            NewEvent(ExplorationStarted(homepage_url=home, max_depth=1, max_pages=3), domain="s.test"),
            NewEvent(SitemapPageVisited(url=home, title="Home", summary="hi", section_count=2), domain="s.test"),
            NewEvent(SitemapLinksDiscovered(parent_url=home, depth=0, links=links), domain="s.test"),
            NewEvent(
                SitemapLinksDiscovered(
                    parent_url="https://s.test/a",
                    depth=1,
                    links=[
                        {"url": "https://s.test/a/deep", "text": "deep"},
                        {"url": "https://s.test/b", "text": "again"},
                    ],
                ),
                domain="s.test",
            ),
        ]
    )
    site = MemoryView.open(fresh_ledger, None).sitemap("s.test")
    assert next_page(site, {home}).url == "https://s.test/a"
    assert next_page(site, {home, "https://s.test/a"}).url == "https://s.test/b"
    assert next_page(site, {home, "https://s.test/a", "https://s.test/b"}) is None  # /a/deep is depth 2 > 1
    assert site.pages["https://s.test/b"].link_type == "main_nav" and site.pages["https://s.test/a/deep"].depth == 2
    w.append([NewEvent(SitemapPageVisited(url=f"https://s.test/{n}", depth=1), domain="s.test") for n in ("a", "b")])
    site = MemoryView.open(fresh_ledger, None).sitemap("s.test")
    assert site.visited_this_exploration == 3 and next_page(site, set()) is None  # max_pages reached
    w.append([NewEvent(ExplorationStarted(homepage_url=home, max_depth=2, max_pages=50), domain="s.test")])
    site = MemoryView.open(fresh_ledger, None).sitemap("s.test")  # the graph persists across explorations
    assert site.explorations == 2 and site.pages[home].visited and next_page(site, set()).url == home


def test_snapshots_fold_and_forget(fresh_ledger: SqliteStore) -> None:
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            run_started("r1", session_id="s1", domain="a.test"),
            NewEvent(
                SnapshotTaken(
                    snapshot_id="snap_r1_1",
                    url="https://a.test/",
                    form_state={"q": "shoes"},
                    scroll_y=500,
                    associated_step=1,
                ),
                run_id="r1",
                domain="a.test",
            ),
        ]
    )
    (s,) = MemoryView.open(fresh_ledger, None).snapshots("r1")
    assert (s.url, s.form_state, s.scroll_y, s.associated_step) == ("https://a.test/", {"q": "shoes"}, 500, 1)
    w.append([NewEvent(SubjectForgotten(subject_kind="session", subject="s1", run_ids=["r1"]))])
    assert MemoryView.open(fresh_ledger, None).snapshots() == []


# ---- priorities -------------------------------------------------------------------------------


def step_data(command: str, ok: bool = True, **args: Any) -> dict[str, Any]:
    return {"action": {"command": command, "args": args}, "ok": ok}


def test_priorities_by_rule() -> None:
    assert priority_of(step_data("click", ok=False), "u", "u") == "critical"
    assert priority_of(step_data("finish"), "u", "u") == "critical"
    assert priority_of(step_data("click"), "u", "v") == "high"
    assert priority_of(step_data("fill", value="x"), "u", "u") == "high"
    assert priority_of(step_data("click"), "u", "u") == "normal"
    assert priority_of(step_data("wait", ms=5), "u", "u") == "low"
    assert priority_of(step_data("press", key="Escape"), "u", "u") == "low"
    assert priority_of({**step_data("wait"), "priority": "critical"}, "u", "u") == "critical"


@given(st.lists(st.sampled_from(["critical", "high", "normal", "low"]), max_size=80), st.integers(1, 50))
@settings(max_examples=80, deadline=None)
def test_trimming_never_drops_critical_and_drops_low_first(levels: list[str], limit: int) -> None:
    entries = tuple({"i": i, "priority": p} for i, p in enumerate(levels))
    kept = trim(entries, limit)
    crit = [e for e in entries if e["priority"] == "critical"]
    assert all(e in kept for e in crit)
    assert len(kept) == max(min(len(entries), limit), len(crit))
    rank = {"critical": 0, "high": 1, "normal": 2, "low": 3}
    dropped = [e for e in entries if e not in kept]
    for d in dropped:  # nothing kept is of lower priority than something dropped, or older at the same level
        assert all(
            rank[k["priority"]] < rank[d["priority"]] or (k["priority"] == d["priority"] and k["i"] > d["i"])
            for k in kept
            if k["priority"] != "critical" and rank[k["priority"]] >= rank[d["priority"]]
        )
    assert [e["i"] for e in kept] == sorted(e["i"] for e in kept)


def test_prompt_budget_sheds_routine_lines_before_errors() -> None:
    lines = [
        "1. [Success] wait" + " x" * 40,
        '2. [Failed] click button "Go" (see error)',
        "3. [Success] scroll" + " y" * 40,
    ]
    item = recent_actions(lines, ["Warning: click repeated 3 times"], priorities=["low", "critical", "low"])
    whole = item.tokens
    fewer = shed(item, whole - 10)
    assert fewer is not None and "wait" not in fewer.text and "scroll" in fewer.text and "[Failed]" in fewer.text
    assert fewer.truncated and "Warning" in fewer.text
    page = BudgetItem("page_state", 80, "p" * 400)
    result = fit([page, item], budget=page.tokens + whole - 20)
    kept = next(i for i in result.kept if i.source == "recent_actions")
    assert "[Failed]" in kept.text and kept.truncated and item in result.trimmed


# ---- token estimation by content type -----------------------------------------------------------


def test_content_type_detection_and_estimates() -> None:
    assert detect_content_type('{"a": [1, 2], "b": null}') == ("json", 0.95)
    kind, conf = detect_content_type("<ul><li>a</li><li>b</li></ul>")
    assert kind == "html" and conf > 0.9
    kind, conf = detect_content_type("def f(x):\n    return x\nimport os\nclass A:\n    pass")
    assert kind == "code" and 0.5 < conf <= 0.9
    assert detect_content_type("Plain words about a shop. Nothing else.") == ("text", 1.0)
    assert detect_content_type("a {b} <c> line\nanother one")[0] == "text"
    text = "x" * 100
    assert [estimate_tokens(text, k) for k in ("text", "code", "json", "html")] == [25, 29, 34, 40]
    item = BudgetItem("s", 1, '{"k": "' + "v" * 93 + '"}')
    assert item.content_type == "json" and item.confidence == 0.95 and estimate_tokens(item.text, "json") == 34
    assert item.tokens == count_tokens(item.text, "json")
    assert BudgetItem("s", 1, "<p>x</p>", content_type="text").content_type == "text"


# ---- extraction budget and compression -----------------------------------------------------------

WORD = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd", "Zs", "Po")), max_size=12)
URL = st.from_regex(r"\Ahttps?://[a-z]{1,8}\.test(/[a-z0-9_-]{0,10}){0,3}\Z")
SELECTOR = st.one_of(
    st.from_regex(r"\A#[a-z][a-z0-9_-]{0,10}\Z"),
    st.from_regex(r"\A\.[a-z][a-z0-9_-]{2,10}\Z"),
    st.from_regex(r'\A\[data-[a-z]{1,6}="[a-z0-9 ]{0,8}"\]\Z'),
    st.from_regex(r'\Arole=(button|link)\[name="[A-Za-z ]{0,10}"s\]\Z'),
)


@given(st.lists(st.one_of(WORD, URL, SELECTOR, st.just("\n"), st.just("  ")), max_size=80), st.sampled_from([1, 2]))
@settings(max_examples=200, deadline=None)
def test_tiers_one_and_two_keep_every_url_and_selector(parts: list[str], tier: int) -> None:
    text = " ".join(parts)
    out = C.compress(text, tier)
    for u in C.urls_in(text):
        assert u in out
    for s in C.selectors_in(text):
        assert s in out
    for p in parts:  # the ones put in on purpose, whatever surrounds them
        if C.URL_RE.fullmatch(p) or (p.startswith(("#", ".", "[", "role=")) and p in C.selectors_in(f" {p} ")):
            assert p in out


def test_tier_three_keeps_facts_only_and_compression_is_deterministic() -> None:
    text = "Intro words without figures\nPrice: 12 EUR\nMore prose here\nStock 4 left\n" * 3
    out = C.compress(text, 3)
    assert out == "Facts:\n- Price: 12 EUR\n- Stock 4 left" and C.compress(text, 3) == out
    assert C.compress(text, 2) == "Intro words without figures\nPrice: 12 EUR\nMore prose here\nStock 4 left"


def test_extraction_limits_and_url_critical_results() -> None:
    big = "\n".join(f"Row {i} has the value {i * 7} and some filler text to make it long enough" for i in range(400))
    assert count_tokens(big) > 2000
    prepared = C.prepare(big, "extract_text", 2)
    assert prepared.compressed and len(prepared.text) <= C.MAX_SINGLE_CHARS
    critical = C.prepare(big, "get_page_state", 3)
    assert not critical.compressed and critical.truncated and len(critical.text) <= C.MAX_SINGLE_CHARS
    assert critical.text.startswith("Row 0 ") and critical.text.endswith(
        "Row 399 has the value 2793 and some filler text to make it long enough"
    )
    recent = C.prepare(big, "extract_text", 1)
    assert not recent.compressed and recent.text == C.head_tail(big, C.MAX_SINGLE_CHARS)
    assert C.allowance(100_000) == 4000 and C.allowance(5000) == 1000 and C.allowance(0) == 0


@given(st.lists(st.tuples(st.integers(0, 12_000), st.sampled_from([1, 2, 3])), max_size=12), st.integers(0, 60_000))
@settings(max_examples=100, deadline=None)
def test_extractions_never_exceed_their_allowance(sizes: list[tuple[int, int]], left: int) -> None:
    texts = [(("w " * n)[:n], "extract_text", tier) for n, tier in sizes]
    kept = C.fit_extractions(texts, left)
    assert sum(count_tokens(x.text) for x in kept) <= C.allowance(left)
    assert all(len(x.text) <= C.MAX_SINGLE_CHARS for x in kept)
    prepared = [C.prepare(*t) for t in texts[: len(kept)]]
    assert kept[:-1] == prepared[:-1]  # whole while they fit, in order; only the last one kept may be cut
    assert not kept or kept[-1] == prepared[-1] or kept[-1].truncated


@given(st.text(max_size=3000), st.integers(0, 4000))
def test_head_tail_keeps_both_ends_within_the_limit(text: str, limit: int) -> None:
    out = C.head_tail(text, limit)
    assert len(out) <= max(limit, 0) or out == text[:limit]
    if len(text) <= limit:
        assert out == text


# ---- memtape state for each projection --------------------------------------------------------


def test_state_commands_for_the_new_projections(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    w = MemoryWriter(store)
    w.append(
        [
            run_started("r1", domain="a.test"),
            pattern("p1", run_id="r1"),
            NewEvent(ContextGiven(key="lang", value="en"), run_id="r1", domain="a.test"),
            NewEvent(
                SnapshotTaken(snapshot_id="snap_r1_1", url="https://a.test/", associated_step=1),
                run_id="r1",
                domain="a.test",
            ),
            NewEvent(ExplorationStarted(homepage_url="https://a.test/", max_depth=2, max_pages=5), domain="a.test"),
            run_started("r2", domain="b.test"),
            NewEvent(SnapshotTaken(snapshot_id="snap_r2_1", url="https://b.test/"), run_id="r2", domain="b.test"),
        ]
    )
    store.close()
    mem = str(memory_path)
    out = {
        k: json.loads(run_cli("--memory-dir", mem, "state", k, "--json").out)
        for k in ("patterns", "context", "snapshots", "sitemap", "short-term")
    }
    assert out["patterns"][0]["pattern_id"] == "p1" and out["patterns"][0]["success_rate"] == 1.0
    assert out["context"][0]["key"] == "lang" and out["sitemap"][0]["url"] == "https://a.test/"
    assert {s["run_id"] for s in out["snapshots"]} == {"r1", "r2"}
    assert [
        s["snapshot_id"]
        for s in json.loads(run_cli("--memory-dir", mem, "state", "snapshots", "--run", "r2", "--json").out)
    ] == ["snap_r2_1"]
    assert (
        json.loads(run_cli("--memory-dir", mem, "state", "snapshots", "--domain", "a.test", "--json").out)[0]["run_id"]
        == "r1"
    )
    assert json.loads(run_cli("--memory-dir", mem, "state", "patterns", "--as-of", "1", "--json").out) == []
    table = run_cli("--memory-dir", mem, "state", "patterns")
    assert table.code == 0 and "patterns at seq" in table.out and "p1" in table.out


def test_the_public_api_records_and_reads_the_layered_memory(tmp_path: Path) -> None:
    import memtape

    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="find the price list", start_url="https://p.test/") as run:
        run.give_context({"price_currency": "EUR"})
        assert run.infer_context("pagination_type", "numbered", "page analysis", step=1)
        assert not run.infer_context("pagination_type", "numbered", "page analysis", step=2)  # once
        run.snapshot("https://p.test/", "Prices", "3 links", {"q": "list"}, (0, 120), step=1)
        run.record_step(1, "click", 'link "Price list"', "https://p.test/", True, url_after="https://p.test/prices")
        got = run.extraction(
            "prices",
            "extract_text",
            "https://p.test/prices",
            lambda: {"title": "Prices", "text": "Socks 4 EUR", "links": []},
            step=2,
        )
        assert not got.served_from_cache
        assert [e.key for e in run.relevant_context()] == ["price_currency"]
        run.finish(success=True, outcome="read the prices")
    rid = run.run_id
    assert {(c.kind, c.key) for c in mem.state("context", run=rid)} == {
        ("user", "price_currency"),
        ("inferred", "pagination_type"),
        ("extraction", "prices"),
    }
    assert mem.state("snapshots", run=rid)[0].scroll_y == 120
    assert mem.state("short-term", run=rid)[0].completed is True
    assert mem.state("snapshots", run="nobody") == []


def test_an_experiment_replays_the_pattern_pruning_under_another_cap(fresh_ledger: SqliteStore) -> None:
    from memtape.analytics.experiment import run_experiment

    MemoryWriter(fresh_ledger).append([pattern(f"p{i}", when=at(i)) for i in range(6)])
    assert not list(fresh_ledger.read(types=["patterns_pruned"]))  # 6 <= 100
    result = run_experiment(fresh_ledger, {"max_patterns": 5})
    assert [d.item for d in result.decisions if d.decision == "patterns_pruned"] == ["p0", "p1"]
    assert result.sizes["reality"]["patterns"] == 6 and result.sizes["experiment"]["patterns"] == 4
    assert run_experiment(fresh_ledger, {}).differences == 0


def test_verify_decisions_rederives_the_pattern_pruning(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    for where, policy, count in ((good, Thresholds(), 101), (bad, Thresholds(max_patterns=3), 4)):
        where.mkdir()
        store = SqliteStore.open(where / "ledger.db", clock=SteppingClock())
        MemoryWriter(store, policy).append([pattern(f"p{i:03}", when=at(i)) for i in range(count)])
        pruned = [e.data["pattern_ids"] for e in store.read(types=["patterns_pruned"])]
        store.close()
        assert len(pruned) == 1 and pruned[0][0] == "p000" and len(pruned[0]) == count - int(policy.max_patterns * 0.8)
    assert run_cli("--memory-dir", str(good), "verify", "--decisions").code == 0
    res = run_cli("--memory-dir", str(bad), "verify", "--decisions")  # the default cap (100) would not prune
    assert res.code == 1 and "patterns_pruned" in (res.out + res.err)
