"""Which lessons a recall offers and which it counts as a use, through the public API, and seed
001's three walkthroughs (the fill fallback, the Amazon cookie banner, a promotion) end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memtape
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import DomainRecall, ErrorRecall
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.records import ListedLesson
from memtape.projections.seeds import SEEDS
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import T0, lesson

TIMEOUT = "locator.selectOption: Timeout 30000ms exceeded."
INTERCEPT = "locator.click: Timeout 1500ms exceeded. <div class=promo> intercepts pointer events"
FILL_ERROR = "too many arguments: expected 2, received 3"
SITES = ["google.com", "bing.com", "amazon.com", "yahoo.com", "reddit.com"]


def events(mem: Any, kind: str) -> list[Any]:
    return list(mem.store.read(types=[kind]))


def recall_then_clear(run: Any, step: int, command: str, error: str) -> list[Any]:
    """A failed step, the recall on its error, a recovery and the failed command succeeding on its
    target: the outcome under which a run's recall counts as a use (`lessons_used`)."""
    run.record_step(step, command, 'button "Continue"', ok=False, error=error)
    got = run.recall_error(command=command, error=error, step=step)
    run.record_step(step + 1, "press", args={"key": "Escape"})
    run.record_step(step + 2, command, 'button "Continue"')
    return list(got)


def lesson_state(mem: Any, lesson_id: str) -> ListedLesson:
    (row,) = [l for l in mem.state("lessons") if l.lesson_id == lesson_id]
    return row


def test_a_command_only_match_is_offered_only_when_nothing_else_matches_and_never_counts(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="Pick a size", start_url="https://shop0.test/") as run:
        select = run.record_lesson(
            "When select fails with 'option list collapsed', open the list first.",
            failed_command="select",
            error_pattern="option list collapsed",
            step=1,
        )
        run.finish(success=True)
    for i in range(1, 6):
        with mem.start_run(goal="Pick a size", start_url=f"https://shop{i}.test/") as run:
            (offered,) = run.recall_error(command="select", error=TIMEOUT, step=1)
            assert (offered.lesson_id, offered.matched, offered.score) == (select, "command", 2.0)
            run.finish(success=True)
    row = lesson_state(mem, select)
    assert (row.use_count, row.triggered_domains, row.category) == (1, ("shop0.test",), "error_recovery")
    assert events(mem, "lesson_promoted") == []
    assert all(e.data["lesson_ids"] == [select] and e.data["counted_ids"] == [] for e in events(mem, "error_recall"))
    with mem.start_run(goal="Pick a size", start_url="https://shop6.test/") as run:
        timeout = run.record_lesson(
            "When select times out, wait for the page first.", failed_command="click", error_pattern="Timeout", step=1
        )
        got = recall_then_clear(run, 2, "select", TIMEOUT)
        assert [(l.lesson_id, l.matched, l.score) for l in got] == [(timeout, "pattern", 3.0)]
        run.finish(success=True)
    assert lesson_state(mem, timeout).use_count == 2 and lesson_state(mem, select).use_count == 1
    mem.close()


def test_pattern_matches_recalled_on_three_domains_promote_without_any_prompt_recorded(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="Open the offer", start_url="https://google.com/") as run:
        learned = run.record_lesson(
            "When click fails with 'intercepts pointer events', press Escape first.",
            failed_command="click",
            error_pattern="intercepts pointer events",
            step=1,
        )
        run.finish(success=True)
    for site in ["bing.com", "amazon.com", "bing.com", "yahoo.com"]:
        with mem.start_run(goal="Open the offer", start_url=f"https://{site}/") as run:
            got = recall_then_clear(run, 1, "click", INTERCEPT)
            assert [(l.matched, l.score) for l in got] == [("pattern+command", 5.0)] * 2 + [("pattern", 3.0)]
            run.finish(success=True)
    (promoted,) = events(mem, "lesson_promoted")
    assert promoted.data["lesson_id"] == learned and promoted.data["use_count"] == 5
    assert promoted.data["triggered_domains"] == ["google.com", "bing.com", "amazon.com", "yahoo.com"]
    assert lesson_state(mem, learned).category == "best_practice"
    assert "context_built" not in [e.type for e in mem.store.read()]
    mem.close()


def test_recall_on_domain_puts_a_tip_for_the_host_before_its_parent_domains_tips(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with mem.start_run(goal="Browse", start_url="https://www.amazon.com/") as run:
        parent = [
            run.record_lesson(f"Amazon tip {i}", category="site_specific", scope_domain="amazon.com", step=i)
            for i in range(3)
        ]
        host = run.record_lesson(
            "Use the search box on www.", category="site_specific", scope_domain="www.amazon.com", step=3
        )
        for step in range(4, 8):
            run.recall_domain(step=step, domain="amazon.com")
        got = run.recall_domain(step=8)
        assert [(l.lesson_id, l.matched, l.score) for l in got] == [
            (host, "host", 2.0),
            (parent[0], "domain", 1.0),
            (parent[1], "domain", 1.0),
        ]
        run.finish(success=True)
    assert lesson_state(mem, host).use_count == 2 and lesson_state(mem, parent[0]).use_count == 6
    assert events(mem, "domain_recall")[-1].data["counted_ids"] == [host, parent[0], parent[1]]
    mem.close()


def test_a_recall_written_before_counted_ids_counts_every_lesson_it_lists(fresh_ledger: Any) -> None:
    w = MemoryWriter(fresh_ledger)
    w.append([lesson(domain="a.com", when=T0)])
    (lid,) = [l.lesson_id for l in MemoryView.open(fresh_ledger).lessons()]
    w.append(
        [
            NewEvent(ErrorRecall(command="click", error_snippet="boom", matched=1, lesson_ids=[lid]), domain="b.com"),
            NewEvent(DomainRecall(matched=1, lesson_ids=[lid]), domain="c.com"),
            NewEvent(
                ErrorRecall(command="click", error_snippet="boom", matched=1, lesson_ids=[lid], counted_ids=[]),
                domain="d.com",
            ),
        ]
    )
    only = MemoryView.open(fresh_ledger).lesson(lid)
    assert (only.use_count, only.triggered_domains) == (3, ("a.com", "b.com", "c.com"))


# ---- seed 001's walkthroughs -----------------------------------------------------------------


def test_walkthrough_fill_fails_the_seed_answers_and_post_run_learning_dedups_onto_it(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    fill_seed = lesson_id_for("fill", "too many arguments", None, SEEDS[0][0])
    with mem.start_run(goal='Search "padel rackets" on Google', start_url="https://www.google.com/") as run:
        run.record_step(
            step=3,
            action="fill",
            target='combobox "Search"',
            ok=False,
            error=FILL_ERROR,
            args={"ref": "e37", "value": "padel rackets"},
        )
        (tip,) = run.recall_error(command="fill", error=FILL_ERROR, step=3)
        assert (tip.lesson_id, tip.text, tip.matched, tip.score) == (fill_seed, SEEDS[0][0], "pattern+command", 5.0)
        run.record_step(step=4, action="click", target='combobox "Search"')
        run.record_step(step=5, action="type", args={"text": "padel rackets"})
        run.record_step(step=6, action="press", args={"key": "Enter"})
        learned = run.finish(success=True, outcome="search submitted")
    (recorded,) = learned.lessons
    assert (recorded.failed_command, recorded.error_pattern) == ("fill", "too many arguments")
    assert (
        recorded.lesson == f"When fill fails with '{FILL_ERROR}', try click(ref) to focus the element, then type(text)."
    )
    (dedup,) = events(mem, "lesson_deduplicated")
    assert dedup.data["lesson_id"] == fill_seed and dedup.data["new_use_count"] == 1
    # one use for one cleared failure: the recall waited for the outcome, and the run's own
    # relearning of the seed (its dedup) is that use, so no `lessons_used` counts it again
    assert events(mem, "lessons_used") == []
    seed = lesson_state(mem, fill_seed)
    assert (seed.use_count, seed.source, seed.triggered_domains) == (1, "seed", ("www.google.com",))
    assert len(mem.state("lessons")) == 3
    mem.close()


def test_walkthrough_amazon_cookie_banner_is_recalled_on_the_subdomain(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    text = "Click the cookie acceptance banner before interacting with product elements."
    with mem.start_run(goal="Find a kettle", start_url="https://amazon.com/") as run:
        tip_id = run.record_lesson(text, category="site_specific", scope_domain="amazon.com", step=1)
        run.finish(success=True)
    with mem.start_run(goal="Find a kettle", start_url="https://www.amazon.com") as run:
        (tip,) = run.recall_domain(step=2)
        assert (tip.lesson_id, tip.text, tip.matched, tip.score) == (tip_id, text, "domain", 1.0)
        run.finish(success=True)
    assert lesson_state(mem, tip_id).use_count == 2
    mem.close()


def test_walkthrough_a_recovery_learned_on_five_sites_is_promoted_on_the_fifth(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    lesson_id = ""
    for n, site in enumerate(SITES, start=1):
        with mem.start_run(goal="Open the offer", start_url=f"https://{site}/") as run:
            run.record_step(step=1, action="click", target='link "Offer"', ok=False, error=INTERCEPT)
            run.record_step(step=2, action="press", args={"key": "Escape"})
            run.record_step(step=3, action="click", target='link "Offer"', url_after=f"https://{site}/offer")
            (learned,) = run.finish(success=True, outcome="offer open").lessons
        lesson_id = learned.lesson_id
        row = lesson_state(mem, lesson_id)
        assert (row.use_count, list(row.triggered_domains)) == (n, SITES[:n])
        assert row.category == ("best_practice" if n == 5 else "error_recovery")
    assert (learned.failed_command, learned.error_pattern) == ("click", "intercepts pointer events")
    assert learned.lesson == f"When click fails with '{INTERCEPT[:60]}', try press(key='Escape')."
    (promoted,) = events(mem, "lesson_promoted")
    assert promoted.data["lesson_id"] == lesson_id and promoted.data["triggered_domains"] == SITES
    with mem.start_run(goal="Open the offer", start_url="https://duckduckgo.com/") as run:
        tier1 = run.tier1()
        assert lesson_id in [l.lesson_id for l in tier1] and {(l.matched, l.score) for l in tier1} == {(None, 0.0)}
        run.finish(success=True)
    assert {l.error_pattern for l in mem.state("lessons") if l.source == "seed"} == {
        "too many arguments",
        "intercepts pointer",
    }
    mem.close()
