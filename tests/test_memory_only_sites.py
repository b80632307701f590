"""records.test: tasks whose needed knowledge is not on the page (issue 34 item 2).

Memory off, a competent reader fails where the page cannot tell it what to do (a hidden deep
page, a dead control named exactly as the goal says, a login behind a footer link); memory on,
the lessons, facts and patterns earlier tasks of the same pass taught carry it through, and
every such decision names the prompt section that told it."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtape.agent.browser import Element
from memtape.agent.conversation import Reading, ShownPattern
from memtape.agent.decisions import ask_again, recorded_decisions, same_call
from memtape.agent.policy import _learned_route, _worked_before
from memtape.agent.runner import run_pass
from memtape.agent.sites import CASES_FILE, SitesServer, load_cases
from memtape.agent.sites.server import ROOT as SITES_ROOT
from memtape.agent.sites.server import _resolve
from memtape.analytics.explain import explain_item
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import UnknownItem
from memtape.ledger.events import PatternLearned, PatternStep, PatternUsed
from memtape.ledger.store import SqliteStore

ORIGINAL = [
    "shop-add-shoes", "shop-view-socks", "shop-cart-jacket", "search-padel", "search-weather", "news-bakery",
    "news-election", "portal-login", "portal-profile", "portal-settings", "news-river",
]  # fmt: skip


def _records() -> list[dict[str, object]]:
    return [c for c in load_cases(CASES_FILE) if c["site"] == "records.test"]


def test_the_suite_keeps_its_eleven_tasks_and_adds_six_that_say_what_the_page_hides() -> None:
    ids = [c["id"] for c in load_cases(CASES_FILE)]
    assert ids[:11] == ORIGINAL
    new = _records()
    assert len(new) >= 6
    for case in new:
        assert len(str(case["description"])) > 60, case["id"]
    told = " ".join(str(c["description"]) for c in new).lower()
    for quirk in ("deep page", "two plausible controls", "rejects fill", "learned in another run", "changed", "escape"):
        assert quirk in told


def _get(port: int, path: str, cookie: str = "") -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": "records.test", **({"Cookie": cookie} if cookie else {})})
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    return resp.status, resp.getheader("Set-Cookie") or "", body


def test_a_release_replaces_pages_and_parts_only_where_it_has_them() -> None:
    with SitesServer() as sites:
        status, cookie, home = _get(sites.port, "/?release=2")
        assert status == 200 and cookie.startswith("release=2")
        assert "staff entrance has moved here" in home and "Staff entrance</a>" in home  # the old link stays
        _, again, old_home = _get(sites.port, "/")
        assert again == "" and "to your resident account" in old_home
        _, _, moved = _get(sites.port, "/staff", "release=2")
        assert "This page has moved" in moved
        _, _, desk = _get(sites.port, "/staff/desk", "release=2")
        assert "Staff desk" in desk  # the release's staff.html never stands in for staff/desk
        _, _, staff = _get(sites.port, "/staff")
        assert "Resident accounts do not work here" in staff
        for hidden in ("/_parts/footer.html", "/_release2/staff.html"):
            assert _get(sites.port, hidden)[0] == 404


def _reading(elements: list[Element], steps: list[tuple[str, str]], dead: tuple[tuple[str, str], ...] = ()) -> Reading:
    pattern = ShownPattern(0, "navigation", tuple({"command": "click", "role": r, "name": n} for r, n in steps))
    return Reading(elements=tuple(elements), patterns=(pattern,), dead_ends=dead)


PATH = [("link", "Library"), ("link", "Board papers"), ("link", "Annual summary 2025"), ("link", "Download PDF")]


def test_a_learned_path_is_followed_from_its_latest_step_this_page_shows() -> None:
    page = [Element("e1", "link", "Library"), Element("e2", "link", "Board papers"), Element("e3", "link", "Older")]
    assert _learned_route(_reading(page, PATH), "Annual summary 2025") == ("learned_patterns", page[1])
    assert _learned_route(_reading(page[:1], PATH), "Annual summary 2025") == ("learned_patterns", page[0])
    # a step that led to a dead end is not taken again; a path that never reached the target says nothing
    dead = (("link", "Board papers"), ("link", "Library"))
    assert _learned_route(_reading(page, PATH, dead), "Annual summary 2025") is None
    assert _learned_route(_reading(page, PATH), "Annual summary 2024") is None
    assert _learned_route(Reading(elements=tuple(page)), "Annual summary 2025") is None


def test_of_two_plausible_controls_the_one_that_worked_is_chosen_and_only_then_memory_is_named() -> None:
    button, link = Element("e1", "button", "Download"), Element("e2", "link", "Download PDF")
    seen = _reading([button, link], PATH)
    assert _worked_before(seen, "Download", button) == ("learned_patterns", link)
    assert _worked_before(seen, "Download PDF", link) is None  # the reader picks it anyway: memory changed nothing
    assert _worked_before(_reading([link], PATH), "Download", link) is None  # one control: nothing to choose
    assert _worked_before(Reading(elements=(button, link)), "Download", button) is None
    # "Open Rain Jacket, click Add to cart, then open Cart": the trajectory's "Add to cart" is another step's
    cart, add = Element("e3", "link", "Cart"), Element("e4", "button", "Add to cart")
    added = _reading([cart, add], [("link", "Rain Jacket"), ("button", "Add to cart"), ("link", "Cart")])
    assert _worked_before(added, "Cart", cart, ["Rain Jacket", "Add to cart"]) is None


@pytest.mark.browser
def test_memory_off_fails_where_the_page_is_silent_and_memory_on_passes_them_all(tmp_path: Path) -> None:
    cases = _records()
    with SqliteStore.open(tmp_path / "ledger.db") as store:
        off = run_pass(store, tmp_path / "projections.db", cases, memory=False)
        on = run_pass(store, tmp_path / "projections.db", cases, memory=True)
        by_case_off = {r.case_id: r for r in off}
        failed_off = {c for c, r in by_case_off.items() if not r.outcome.success}
        assert {"records-find-summary", "records-download", "records-staff-rota"} <= failed_off
        assert (
            by_case_off["records-find-summary"].outcome.reason == "max_turns"
        )  # it explored, it did not give up early
        assert all(r.outcome.success for r in on), [(r.case_id, r.outcome.reason) for r in on]
        assert sum(r.outcome.turns for r in on) <= 0.75 * sum(r.outcome.turns for r in off)
        assert sum(r.outcome.tokens_in for r in off) / sum(r.outcome.turns for r in off) >= 1500  # a real page's weight
        thinks = {
            r.case_id: [e.data["think"] for e in store.read(run_id=r.run_id, types=["step_recorded"])] for r in on
        }
        assert any("memory (learned_patterns): the way to" in t for t in thinks["records-find-summary"])
        assert any("memory (learned_patterns): of the controls" in t for t in thinks["records-download"])
        assert any("memory (learned_patterns)" in t for t in thinks["records-staff-rota"])
        # the moved login: the stale flow is tried once, then the page is read, never the flow again
        moved = [e.data for e in store.read(run_id=on[-1].run_id, types=["step_recorded"])]
        entrance = [s for s in moved if (s.get("target") or {}).get("name") == "Staff entrance"]
        assert len(entrance) == 1
        # Escape "succeeded" on the survey strip and changed nothing: no lesson teaches it
        lessons = [e.data["lesson"] for e in store.read(types=["lesson_recorded"])]
        assert any("Continue to site" in text for text in lessons)
        assert not any("Escape" in text for text in lessons)
        # every decision is made again from the ledger alone: the notes of a reply that failed to click a
        # "Log in" button survive the scrubber whole (no run of empty strings for it to misread)
        asked = [d for r in off + on for d in recorded_decisions(store, r.run_id)]
        assert [(d.run_id, d.step) for d in asked if not same_call(ask_again(d), d)] == []


def test_cases_file_is_valid_json_with_a_success_check_for_every_task() -> None:
    for case in json.loads(Path(CASES_FILE).read_text()):
        assert case["success"] and case["goal"], case["id"]


@given(
    path=st.lists(
        st.sampled_from(["..", ".", "_parts", "_release2", "staff", "desk", "x.html", "%2e%2e", ""]), max_size=4
    ),
    release=st.one_of(st.none(), st.sampled_from(["2", "3", "99", "../2"])),
)
def test_no_path_or_release_reaches_a_file_outside_the_site_or_its_parts(path: list[str], release: str | None) -> None:
    found = _resolve("records.test", "/" + "/".join(path), release)
    site = SITES_ROOT / "records"
    if found is not None:
        assert site in found.resolve().parents
        assert not any(p.startswith(("_parts", ".")) for p in found.relative_to(site).parts)
        assert found.parent.name != "_parts"


def test_explain_tells_a_learned_pattern_s_life_and_credit(tmp_path: Path) -> None:
    """The top item of the demo's credit is a learned path: `explain` tells its life and its credit."""
    steps = [PatternStep(command="click", role="link", name=n) for n in ("Library", "Board papers")]
    learned = PatternLearned(
        pattern_id="pat_1", description="Navigate records.test", pattern_type="navigation", steps=steps
    )
    with SqliteStore.open(tmp_path / "ledger.db") as store:
        store.append(
            [
                NewEvent(learned, run_id="run_a", domain="records.test"),
                NewEvent(PatternUsed(pattern_id="pat_1", success=True), run_id="run_b", domain="records.test"),
            ]
        )
        life = explain_item(store, "pat_1")
        assert life["kind"] == "pattern" and life["status"] == "current" and life["now"]["uses"] == 1
        assert [e["stage"] for e in life["life"]] == ["learned", "used"] and life["recalled_in_runs"] == ["run_b"]
        assert life["credit"] is None  # not measured yet
        with pytest.raises(UnknownItem):
            explain_item(store, "pat_2")
