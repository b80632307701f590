"""The search index a memory keeps up to date as its head moves (issue 35 item 4) answers exactly
as one built afresh at the same point: same items, order, scores, texts and event ids, for random
ledgers (lessons, facts that contradict, selectors, runs that finish, recalls, pins, forgets) and
random queries (empty of words, huge, unicode, FTS5 operators). A forgotten lesson or fact is
never found again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from memtape.ledger.events import MAX_QUERY
from memtape.projections.forgetting import forget
from memtape.projections.pin import pin, unpin
from memtape.projections.search import MAX_LIMIT, SEARCH_KINDS, SearchIndex
from memtape.projections.view import MemoryView

DOMAINS = ("a.example", "shop.a.example", "c.example")
WORDS = (
    "banner",
    "cookie",
    "cookies",
    "login",
    "token",
    "submit",
    "submitting",
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    '"',
    "*",
    "ünïcödé",
    "日本語",
    "naïve",
    "x" * 40,
)
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
queries = st.one_of(
    texts,
    st.text(min_size=1, max_size=40).filter(lambda q: q.strip() and "\x00" not in q),
    st.just(("banner " * MAX_QUERY)[:MAX_QUERY]),
    st.just('*** NEAR( " ) AND OR'),
).filter(lambda q: not any("\ud800" <= c <= "\udfff" for c in q))
#: texts many items share, so that scores tie and the order of ties is checked
alike = st.one_of(st.sampled_from(("cookie banner", "login token", "submit * banner")), texts)
searches = st.tuples(
    queries,
    st.one_of(st.none(), st.lists(st.sampled_from(SEARCH_KINDS), min_size=1, max_size=3, unique=True)),
    st.one_of(st.none(), st.sampled_from(DOMAINS)),
    st.sampled_from((1, 3, 10, MAX_LIMIT)),
)
ops = st.one_of(
    st.tuples(st.just("lesson"), alike, st.sampled_from(("click", "fill", None))),
    st.tuples(st.just("fact"), st.sampled_from(("quirk", "timing")), st.sampled_from(("login", "banner")), alike),
    st.tuples(st.just("selector"), texts, st.sampled_from(("#a", "#b", ".cookie")), st.booleans()),
    st.tuples(st.just("finish"), st.booleans(), texts),
    st.tuples(st.just("visit"), st.sampled_from(DOMAINS)),
    st.tuples(st.just("recall"), st.sampled_from(DOMAINS)),
    st.tuples(st.just("pin"), st.integers(0, 20)),
    st.tuples(st.just("forget"), st.sampled_from(("lesson", "fact", "run")), st.integers(0, 20)),
    st.tuples(st.just("search"), searches),
)


class Scenario:
    """A memory driven by random operations, checking after each that the index it keeps answers
    as one built afresh (from its own view, and from projections.db opened anew)."""

    def __init__(self, mem: Any):
        self.mem = mem
        self.domain = DOMAINS[0]
        self.run: Any = None
        self.lessons: list[str] = []
        self.runs: list[str] = []
        self.forgotten: list[str] = []

    def live_run(self) -> Any:
        if self.run is None:
            self.run = self.mem.start_run(goal="Accept the cookie banner", start_url=f"https://{self.domain}/login")
            self.runs.append(self.run.run_id)
        return self.run

    def do(self, op: tuple[Any, ...]) -> None:
        mem, name = self.mem, op[0]
        if name == "lesson":
            run = self.live_run()
            scope = None if op[2] else self.domain  # a lesson without a command is the site's: recalled there
            self.lessons.append(
                run.record_lesson(
                    op[1], failed_command=op[2], error_pattern=op[1] if op[2] else None, scope_domain=scope
                )
            )
        elif name == "fact":
            self.live_run().observe_fact(kind=op[1], key=op[2], value=op[3])
        elif name == "selector":
            self.live_run().selector_result(element=f'button "{op[1]}"', selector=op[2], ok=op[3])
        elif name == "finish" and self.run is not None:
            self.run.finish(success=op[1], outcome=op[2])
            self.run = None
        elif name == "visit":
            if self.run is not None:
                self.run.finish(success=True)
            self.run, self.domain = None, op[1]
        elif name == "recall":
            mem.recall_domain(op[1])
        elif name == "pin":  # a Tier 1 lesson (a seed, a pinned one) is unpinned, another pinned
            held = mem.state("lessons")
            if held:
                lesson = held[op[1] % len(held)]
                if lesson.tier == 1:
                    unpin(
                        mem.store,
                        lesson.lesson_id,
                        unpinned_by="ada",
                        reason="r",
                        projections_path=mem.projections_path,
                    )
                else:
                    pin(mem.store, lesson.lesson_id, pinned_by="ada", reason="r", projections_path=mem.projections_path)
        elif name == "forget":
            self.forget(op[1], op[2])
        elif name == "search":
            self.compare(*op[1])

    def forget(self, kind: str, n: int) -> None:
        mem = self.mem
        if kind == "lesson":
            held = [l.lesson_id for l in mem.state("lessons")]
        elif kind == "fact":
            held = [f.fact_id for f in mem.state("facts")]
        else:
            finished = {r.run_id for r in mem.state("runs") if r.status != "running"}
            held = [r for r in self.runs if r in finished]
        if held:
            subject = held[n % len(held)]
            forget(mem.store, kind, subject, "asked", projections_path=mem.projections_path)
            self.forgotten.append(subject)

    def compare(self, query: str, kinds: list[str] | None, domain: str | None, limit: int) -> None:
        mem = self.mem
        hits = mem.search(query, kinds=kinds, domain=domain, limit=limit)
        chosen = None if kinds is None else tuple(k for k in SEARCH_KINDS if k in kinds)
        rebuilt = SearchIndex.of(mem.current().state).search(query, chosen, domain, limit)
        assert hits == rebuilt
        reopened = MemoryView.open(mem.store, mem.projections_path).search_index()
        assert hits == reopened.search(query, chosen, domain, limit)
        assert not {h.item_id for h in hits} & set(self.forgotten)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(st.tuples(ops, searches), min_size=1, max_size=12))
def test_an_index_kept_up_to_date_answers_as_one_built_afresh(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[tuple[Any, ...], tuple[Any, ...]]]
) -> None:
    with memtape.open(tmp_path_factory.mktemp("mem")) as mem:
        scenario = Scenario(mem)
        for op, search in steps:
            scenario.do(op)
            scenario.compare(*search)


def test_a_forgotten_fact_and_lesson_leave_the_kept_index(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="g", start_url="https://a.example/") as run:
            lesson = run.record_lesson("Close the cookie banner before the wizard")
            run.observe_fact(kind="quirk", key="wizard", value="cookie banner covers the wizard")
            run.finish(success=True)
        found = {h.kind: h.item_id for h in mem.search("wizard banner", limit=50)}
        assert found["lessons"] == lesson and "facts" in found
        index = mem._search_index
        forget(mem.store, "lesson", lesson, "asked", projections_path=mem.projections_path)
        forget(mem.store, "fact", found["facts"], "asked", projections_path=mem.projections_path)
        after = mem.search("wizard banner", limit=50)
        assert mem._search_index is index  # brought up to date, not rebuilt
        assert {h.kind for h in after} & {"lessons", "facts"} == set()
        assert not any("wizard" in d.text for d, _ in index.docs.values() if d.kind in ("lessons", "facts"))


def test_a_write_indexes_only_what_it_changed(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="g", start_url="https://a.example/") as run:
            for n in range(50):
                run.record_lesson(f"Lesson number {n} about the cookie banner")
            run.finish(success=True)
        mem.search("banner")
        index = mem._search_index
        assert index is not None
        before = dict(index.docs)
        with mem.start_run(goal="g2", start_url="https://a.example/") as run:
            run.record_lesson("A new lesson about the login wizard")
            run.finish(success=True)
        assert mem.search("wizard")[0].text == "A new lesson about the login wizard"
        kept = [rowid for rowid in before if index.docs.get(rowid) == before[rowid]]
        assert len(kept) >= 50  # the lessons the write did not touch were not indexed again


def test_equal_scores_keep_the_listing_order_after_a_pin(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="g", start_url="https://a.example/") as run:
            first = run.record_lesson("Accept the cookie banner")
            second = run.record_lesson("Dismiss the cookie banner")
            run.finish(success=True)
        assert [h.item_id for h in mem.search("cookie", kinds=["lessons"])] == [first, second]
        pin(mem.store, second, pinned_by="ada", reason="r", projections_path=mem.projections_path)
        hits = mem.search("cookie", kinds=["lessons"])
        assert hits[0].score == hits[1].score
        assert [h.item_id for h in hits] == [second, first]  # Tier 1 first, as `state("lessons")` lists them
        assert hits == SearchIndex.of(mem.current().state).search("cookie", ("lessons",))
        unpin(mem.store, second, unpinned_by="ada", reason="r", projections_path=mem.projections_path)
        assert [h.item_id for h in mem.search("cookie", kinds=["lessons"])] == [first, second]
