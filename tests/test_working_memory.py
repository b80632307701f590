"""Seed 003's working memory beyond short-term: the scratch pad (`set_scratch` / `get_scratch` by
key for the run) and PageMaps (per URL: regions and their elements), as events, projections, Run
methods and `memtape state scratch|page-maps`; user context in the prompt by priority, not by
shared words with the goal; compression that keeps every URL that fits and numbers distinct."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import memtape
from memtape.agent import compress as C
from memtape.agent.browser import Element, Observation
from memtape.agent.loop import step_items
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.event_schema import json_schema
from memtape.ledger.events import PageMapStored, ScratchSet, SubjectForgotten
from memtape.ledger.field_rules import MAX_DEPTH
from memtape.ledger.redact import MARKER, secret_named
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import estimate_tokens
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.projections_support import run_started

PRICES = "https://p.test/prices"
NAV = {
    "kind": "navigation",
    "name": "Main menu",
    "description": "top bar",
    "elements": ['link "Home"', 'link "Prices"'],
    "start_y": 0,
    "end_y": 80,
}
LIST = {"kind": "content", "name": "Price list", "elements": ['row "Socks 4 EUR"'], "start_y": 80, "end_y": 2400}


def events_in(path: Path) -> int:
    with SqliteStore.open(path / "ledger.db") as store:
        return len(list(store.read()))


# ---- the scratch pad --------------------------------------------------------------------------


def test_the_scratch_pad_sets_and_gets_by_key_for_the_run(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="collect the prices", start_url="https://p.test/") as run:
        run.set_scratch("extracted_items", [])
        items = run.get_scratch("extracted_items", default=None)
        items.append("changed outside")  # a copy: the pad changes only when set again
        assert run.get_scratch("extracted_items") == []
        run.set_scratch("current_page", 1, step=1)
        run.set_scratch("current_page", 2, step=2)
        run.set_scratch("extracted_items", [{"name": "Socks", "price": 4}], step=2)
        assert run.get_scratch("current_page") == 2 and run.get_scratch("missing", default=7) == 7
        assert run.get_scratch("missing") is None
        assert run.scratch() == {"extracted_items": [{"name": "Socks", "price": 4}], "current_page": 2}
        run.set_scratch("password", "hunter2!")  # a secret-named key keeps no value
        assert run.get_scratch("password") == MARKER
        again = mem.run(run.run_id)  # another handle on the same run reads the same pad
        assert again.get_scratch("current_page") == 2
        run.finish(success=True, outcome="done")
    with mem.start_run(goal="another run", start_url="https://p.test/") as other:
        assert other.scratch() == {} and other.get_scratch("current_page") is None  # the run's own
        other.finish(success=True)
    rows = mem.state("scratch", run=run.run_id)
    assert [(r.key, r.value, r.writes) for r in rows] == [
        ("extracted_items", [{"name": "Socks", "price": 4}], 2),
        ("current_page", 2, 2),
        ("password", MARKER, 1),
    ]
    assert rows[1].step == 2 and rows[1].domain == "p.test"
    assert "hunter2" not in (tmp_path / "mem" / "ledger.db").read_bytes().decode("latin-1")
    mem.close()


def test_the_scratch_pad_works_with_memory_off(ledger_path: Path) -> None:
    run = RecordingMemory(SqliteStore.open(ledger_path), None, enabled=False).start_run(
        goal="count the pages", start_url="https://p.test/"
    )
    run.set_scratch("pages", 3)
    assert run.get_scratch("pages") == 3


KEYS = st.one_of(
    st.text(alphabet="abcdefghijklmnop _-.0123", max_size=210),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "k" * 200, "k" * 201, "pin", "api_token"]),
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(),
    st.text(alphabet="abc xyz", max_size=8),
    st.sampled_from(["\x00", "\udfff", 2**63 - 1, -(2**63)]),
)
VALUES = st.one_of(
    st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text("abc", max_size=3), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    st.sampled_from([{1, 2}, (1, 2), object(), {1: "x"}]),
)


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def storable(value: Any) -> bool:
    """What JSON (and the ledger: finite 64-bit numbers, text without NUL or lone surrogates) holds."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        return math.isfinite(value) and -(2**63) <= value <= 2**63 - 1
    if isinstance(value, str):
        return "\x00" not in value and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return all(storable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and storable(k) and storable(v) for k, v in value.items())
    return False


@given(KEYS, st.one_of(VALUES, st.sampled_from([deep(MAX_DEPTH), deep(MAX_DEPTH + 2)])))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_key_and_value_is_stored_exactly_or_refused_in_one_line(tmp_path: Path, key: str, value: Any) -> None:
    where = tmp_path / f"m{abs(hash((key, repr(value)))) % 10**9}"
    mem = memtape.open(where)
    run = mem.start_run(goal="g", start_url="https://p.test/")
    before = events_in(where)
    good = 1 <= len(key) <= 200 and key.strip() and storable(key) and storable(value) and value != deep(MAX_DEPTH + 2)
    if good:
        run.set_scratch(key, value)
        want = MARKER if secret_named(key) and value not in (None, "") else value
        assert run.get_scratch(key, default="absent") == want
        assert events_in(where) == before + 1
    else:
        with pytest.raises(memtape.MemtapeError) as refused:
            run.set_scratch(key, value)
        assert "\n" not in str(refused.value) and events_in(where) == before
    mem.close()


def test_the_schema_bounds_a_scratch_value_as_the_door_does() -> None:
    validator = Draft202012Validator(json_schema())
    line = {"type": "scratch_set", "run_id": "r1", "key": "k"}
    assert validator.is_valid({**line, "value": {"rows": [1, "two", None, 2**63 - 1]}})
    for bad in (2**63, "a\x00b", {"k": [-(2**63) - 1]}):
        assert not validator.is_valid({**line, "value": bad})
    assert json_schema()["$defs"]["JsonValue"] == json_schema("run_started")["$defs"]["JsonValue"] != {}


# ---- PageMaps ---------------------------------------------------------------------------------


def test_page_maps_are_stored_per_url_with_regions_and_elements(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="read the prices", start_url="https://p.test/") as run:
        assert not run.has_page_map(PRICES) and run.get_page_map(PRICES) is None and run.get_page_summary(PRICES) == ""
        run.store_page_map(
            PRICES,
            {"title": "Prices", "summary": "A price list", "total_width": 1280, "total_height": 2400, "regions": [NAV]},
            step=1,
        )
        run.store_page_map("https://p.test/", {"title": "Home", "regions": []}, step=1)
        run.store_page_map(
            PRICES,
            {"title": "Prices", "summary": "The full price list", "total_height": 2400, "regions": [NAV, LIST]},
            step=2,
        )  # stored again: replaces the first map
        page = run.get_page_map(PRICES)
        assert page is not None and run.has_page_map(PRICES) and run.get_page_summary(PRICES) == "The full price list"
        assert [(r["kind"], r["name"], r["elements"]) for r in page.regions] == [
            ("navigation", "Main menu", ['link "Home"', 'link "Prices"']),
            ("content", "Price list", ['row "Socks 4 EUR"']),
        ]
        assert (page.total_width, page.total_height, page.stored, page.step) == (0, 2400, 2, 2)
        assert list(run.get_all_page_maps()) == [PRICES, "https://p.test/"]
        before = events_in(tmp_path / "mem")
        for bad in (
            {"regions": [{"kind": "banner", "name": "x"}]},
            {"regions": [{"name": ""}]},
            {"colour": "red"},
            {"regions": "not a list"},
            {"total_height": -1},
            "a title",
        ):
            with pytest.raises(memtape.MemtapeError) as refused:
                run.store_page_map(PRICES, bad)  # type: ignore[arg-type]
            assert "\n" not in str(refused.value)
        with pytest.raises(memtape.MemtapeError):
            run.store_page_map("", {"title": "x"})
        assert events_in(tmp_path / "mem") == before
        run.finish(success=True)
    (row,) = mem.state("page-maps", domain="p.test", run=run.run_id)[:1]
    assert row.url == PRICES and row.regions[1]["elements"] == ['row "Socks 4 EUR"']
    mem.close()


# ---- the folds: forgetting, and `memtape state` ------------------------------------------------


def working(run_id: str, domain: str) -> list[NewEvent]:
    return [
        NewEvent(ScratchSet(key="page", value=1), run_id=run_id, domain=domain),
        NewEvent(PageMapStored(url=f"https://{domain}/", regions=[NAV]), run_id=run_id, domain=domain),
    ]


def test_forgetting_a_run_a_session_or_a_domain_drops_its_working_memory(fresh_ledger: SqliteStore) -> None:
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            run_started("r1", session_id="s1", domain="a.test"),
            *working("r1", "a.test"),
            run_started("r2", session_id="s2", domain="b.test"),
            *working("r2", "b.test"),
            NewEvent(ScratchSet(key="elsewhere", value=2), run_id="r2", domain="shop.a.test"),
            run_started("r3", session_id="s3", domain="c.test"),
            *working("r3", "c.test"),
        ]
    )
    view = MemoryView.open(fresh_ledger, None)
    assert {e.run_id for e in view.scratch_entries()} == {"r1", "r2", "r3"} and len(view.page_map_entries()) == 3
    w.append([NewEvent(SubjectForgotten(subject_kind="session", subject="s1", run_ids=["r1"]))])
    w.append([NewEvent(SubjectForgotten(subject_kind="domain", subject="a.test"))])  # r2's key set on shop.a.test
    w.append([NewEvent(SubjectForgotten(subject_kind="run", subject="r3"))])
    view = MemoryView.open(fresh_ledger, None)
    assert [(e.run_id, e.key) for e in view.scratch_entries()] == [("r2", "page")]
    assert [m.url for m in view.page_map_entries()] == ["https://b.test/"]
    assert view.scratch("r1") == {} and view.page_maps("r3") == {}


def test_memtape_state_scratch_and_page_maps(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    MemoryWriter(store).append(
        [
            run_started("r1", domain="a.test"),
            *working("r1", "a.test"),
            run_started("r2", domain="b.test"),
            *working("r2", "b.test"),
        ]
    )
    store.close()
    mem = str(memory_path)
    scratch = json.loads(run_cli("--memory-dir", mem, "state", "scratch", "--json").out)
    assert [(s["run_id"], s["key"], s["value"]) for s in scratch] == [("r1", "page", 1), ("r2", "page", 1)]
    maps = json.loads(run_cli("--memory-dir", mem, "state", "page-maps", "--run", "r2", "--json").out)
    assert [(m["url"], m["regions"][0]["name"]) for m in maps] == [("https://b.test/", "Main menu")]
    assert (
        json.loads(run_cli("--memory-dir", mem, "state", "page-maps", "--domain", "a.test", "--json").out)[0]["run_id"]
        == "r1"
    )
    assert json.loads(run_cli("--memory-dir", mem, "state", "scratch", "--as-of", "1", "--json").out) == []
    table = run_cli("--memory-dir", mem, "state", "scratch")
    assert table.code == 0 and "scratch at seq" in table.out and "page" in table.out
    assert run_cli("--memory-dir", mem, "state", "page-maps").code == 0


# ---- user context by priority ----------------------------------------------------------------


def test_user_context_reaches_the_prompt_without_sharing_a_word_with_the_goal(ledger_path: Path) -> None:
    run = RecordingMemory(SqliteStore.open(ledger_path), None).start_run(
        goal="Open the return form", start_url="https://help.test/"
    )
    run.give_context({"order_number": "A-1234", "preferred_language": "English"})
    run.infer_context("login_required", "true", "login form at /login", 1, "help.test")
    run.infer_context("return_window", "30 days", "page analysis of /returns", 1, "help.test")
    run.infer_context("pagination_type", "numbered pages with next links", "page analysis of /faq", 1, "help.test")
    obs = Observation(
        url="https://help.test/",
        title="Help",
        elements=(Element("e1", "link", "Returns"),),
        text="",
        summary="",
        page_type="content",
    )
    (context,) = [i for i in step_items(obs, run, [], None, []) if i.source == "context"]
    assert "order_number" in context.text and "A-1234" in context.text and "preferred_language" in context.text
    assert context.priority == 55
    # what a page showed about the site goes in only when it shares a word with the goal ("return"):
    # a login form and pagination change no decision of a task that names neither
    assert "return_window" in context.text and "login_required" not in context.text
    assert [e.key for e in run.prompt_context()] == ["order_number", "preferred_language", "return_window"]
    assert [e.key for e in run.relevant_context()] == ["return_window"]


def test_inferred_context_that_shares_only_function_words_with_the_goal_stays_out(ledger_path: Path) -> None:
    run = RecordingMemory(SqliteStore.open(ledger_path), None).start_run(
        goal='Log in as "demo" with password "pw" and open "Profile"', start_url="https://portal.test/"
    )
    run.infer_context("login_required", "true", "login form at /login", 1, "portal.test")
    run.infer_context("pagination_type", "numbered pages with next links", "page analysis of /a", 1, "portal.test")
    assert run.prompt_context() == [] and run.relevant_context() == []  # "with" and "in" say nothing
    obs = Observation(url="https://portal.test/login", title="", elements=(), text="", summary="", page_type="login")
    assert not [i for i in step_items(obs, run, [], None, []) if i.source == "context"]


# ---- compression: every URL that fits, numbers distinct -----------------------------------------


def catalogue(n: int) -> str:
    return "\n".join(
        f"Product {i}: warm wool socks, hand knitted in the valley, sizes 36 to 46, see "
        f"https://shop.test/item/{i} for the colours"
        for i in range(n)
    )


@pytest.mark.parametrize("tier", [2, 3])
def test_a_compressed_extraction_keeps_every_url_that_fits(tier: int) -> None:
    text = catalogue(200)
    assert estimate_tokens(text) > C.COMPRESS_ABOVE_TOKENS
    out = C.prepare(text, "extract_text", tier)
    assert out.compressed and out.truncated and len(out.text) <= C.MAX_SINGLE_CHARS
    assert set(C.URL_RE.findall(out.text)) == set(C.urls_in(text))
    huge = C.prepare(catalogue(2000), "extract_text", tier)  # the list alone is longer than 8,000 characters
    assert len(huge.text) <= C.MAX_SINGLE_CHARS and huge.truncated
    kept = C.URL_RE.findall(huge.text)
    assert kept == [f"https://shop.test/item/{i}" for i in range(len(kept))] and len(kept) > 250  # first ones first
    assert f"[... {2000 - len(kept)} more URLs omitted ...]" in huge.text


def test_the_extraction_at_the_budget_boundary_keeps_its_urls() -> None:
    (boundary,) = C.fit_extractions([(catalogue(200), "extract_text", 2)], 5000)  # 1,000 tokens allowed
    assert boundary.truncated and estimate_tokens(boundary.text) <= 1000
    assert "https://shop.test/item/0" in boundary.text and "https://shop.test/item/100 " in boundary.text


@pytest.mark.parametrize("tier", [2, 3])
def test_lines_differing_only_in_numbers_are_not_duplicates(tier: int) -> None:
    priced = "\n".join(f"Socks size {36 + i % 11}, colour number {i}: {i * 3 + 2} EUR" for i in range(200))
    out = C.compress(priced, tier)
    assert all(f"colour number {i}: {i * 3 + 2} EUR" in out for i in range(200))
    assert C.compress(priced + "\n" + priced, tier) == out  # a line repeated word for word is one line
    listing = "\n".join([f"Item {i} costs {i * 3 + 2} EUR" for i in range(200)] * 3)
    prepared = C.prepare(listing, "extract_text", tier)  # 200 distinct lines, each three times: they fit
    assert prepared.compressed and not prepared.truncated
    assert all(f"Item {i} costs {i * 3 + 2} EUR\n" in prepared.text + "\n" for i in range(200))


@given(
    st.lists(
        st.one_of(
            st.from_regex(r"\Ahttps://[a-z]{1,6}\.test/[a-z0-9]{0,12}\Z"),
            st.text(st.characters(whitelist_categories=("Ll", "Nd", "Zs")), max_size=40),
            st.just("\n"),
        ),
        max_size=120,
    ),
    st.sampled_from([2, 3]),
    st.integers(20, 3000),
)
@settings(max_examples=200, deadline=None)
def test_compression_within_a_limit_keeps_every_url_the_list_has_room_for(
    parts: list[str], tier: int, limit: int
) -> None:
    text = " ".join(parts)
    out = C.compress(text, tier, limit)
    assert len(out) <= limit
    urls = C.urls_in(text)
    if sum(len(u) + 1 for u in urls) + 80 <= limit:
        shown = set(C.URL_RE.findall(out))
        assert all(u in shown for u in urls)
