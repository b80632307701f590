"""Forget parity: after any forgets (runs, sessions, domains, lessons), at any point of a history,
every analytics answer that has a projection counterpart equals the projection folded in Python —
decay's facts (status and confidence) equal projections.folds.knowledge, the lessons the mirror shows
equal projections.folds.lessons, and the runs answer equals projections.folds.runs. What a forget removes is
decided once, by the projections' own rules."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memtape.analytics.answers import analyse_all
from memtape.analytics.explain import explain_item
from memtape.analytics.forget_filter import lesson_id_of
from memtape.analytics.mirror import connect
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import RecordedEvent, event
from memtape.ledger.events import FactObserved, LessonRecorded, RunCompleted, RunStarted
from memtape.ledger.store import SqliteStore
from memtape.projections.folds.knowledge import fact_id_for
from memtape.projections.forgetting import forget
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter

DOMAINS = ("a.test", "www.a.test", "b.test")
SESSIONS = ("s1", "s2")
op = st.one_of(
    st.tuples(st.just("run"), st.sampled_from(DOMAINS), st.sampled_from((None, *SESSIONS))),
    st.tuples(st.just("end"), st.booleans()),
    # a fact seen on a domain by the current run (or by no run), its value one of a few: new
    # values contradict the old ones, and three contradictions prune a fact
    st.tuples(
        st.just("fact"),
        st.sampled_from(DOMAINS),
        st.sampled_from(("load", "modal")),
        st.sampled_from(("1s", "2s", "3s")),
        st.booleans(),
    ),
    st.tuples(st.just("lesson"), st.sampled_from(("click", "fill")), st.sampled_from((None, *DOMAINS))),
    st.tuples(st.just("forget"), st.sampled_from(("run", "session", "domain", "lesson", "fact")), st.integers(0, 9)),
)


def _write(store: SqliteStore, ops: list[tuple[Any, ...]]) -> None:
    writer = MemoryWriter(store)
    runs: list[str] = []
    current: tuple[str, str] | None = None  # the run events are recorded in, and its domain
    lessons: list[RecordedEvent] = []
    facts: list[str] = []  # the ids of the facts observed, in order
    for o in ops:
        kind = o[0]
        if kind == "run":
            rid = f"r{len(runs) + 1}"
            runs.append(rid)
            current = (rid, o[1])
            writer.append([event(RunStarted(goal="find the thing", session_id=o[2]), run_id=rid, domain=o[1])])
        elif kind == "end" and current is not None:
            writer.append([event(RunCompleted(success=o[1], turns=1), run_id=current[0], domain=current[1])])
            current = None
        elif kind == "fact":
            rid = current[0] if current is not None and o[4] else None
            writer.append([event(FactObserved(fact_type="timing", key=o[2], value=o[3]), run_id=rid, domain=o[1])])
            facts.append(fact_id_for(o[1], "timing", o[2], o[3]))
        elif kind == "lesson":
            (ev, *_) = writer.append(
                [
                    event(
                        LessonRecorded(
                            lesson_id="",
                            lesson=f"when {o[1]} fails on {o[2] or 'any site'}, wait",
                            category="site_specific" if o[2] else "error_recovery",
                            failed_command=o[1],
                            error_pattern="timeout",
                            scope_domain=o[2],
                        ),
                        run_id=current[0] if current else None,
                        domain=current[1] if current else DOMAINS[0],
                    )
                ]
            )
            lessons.append(ev)
        elif kind == "forget":
            subjects: dict[str, list[str]] = {
                "run": runs,
                "session": list(SESSIONS),
                "domain": ["a.test", "b.test"],
                "lesson": [lid for ev in lessons if (lid := lesson_id_of(ev))],
                "fact": facts,
            }
            if subjects[o[1]]:
                forget(store, o[1], subjects[o[1]][o[2] % len(subjects[o[1]])], force=True)


def _facts(records: list[dict[str, Any]], status: str) -> dict[tuple[str, str, str], float]:
    return {(r["domain"], r["key"], r["value"]): round(r["confidence"], 9) for r in records if r["status"] == status}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=24))
# a forgotten run confirmed a fact another run first saw: the fact stays, confirmed
@example(
    [
        ("run", "a.test", None),
        ("fact", "a.test", "load", "1s", True),
        ("end", True),
        ("run", "b.test", "s1"),
        ("fact", "a.test", "load", "1s", True),
        ("forget", "run", 1),
    ]
)
# a forgotten run first saw a fact another run confirmed, then contradicted: the fact goes, the other value stays
@example(
    [
        ("run", "a.test", "s1"),
        ("fact", "a.test", "load", "1s", True),
        ("end", True),
        ("run", "b.test", None),
        ("fact", "a.test", "load", "1s", True),
        ("fact", "a.test", "load", "2s", True),
        ("forget", "session", 0),
    ]
)
# what is learned after a forget is new: a fact and a run on the forgotten domain
@example(
    [
        ("fact", "a.test", "load", "1s", False),
        ("forget", "domain", 0),
        ("run", "www.a.test", None),
        ("fact", "a.test", "load", "1s", True),
        ("fact", "a.test", "load", "2s", True),
    ]
)
# one fact forgotten, contradicted before by the fact that stays, then seen again: new memory
@example(
    [
        ("run", "a.test", None),
        ("fact", "a.test", "load", "1s", True),
        ("fact", "a.test", "load", "2s", True),
        ("forget", "fact", 0),
        ("fact", "a.test", "load", "1s", False),
    ]
)
# a universal lesson merged into one scoped to the forgotten domain goes with it
@example([("lesson", "click", "a.test"), ("lesson", "click", None), ("forget", "domain", 0)])
def test_after_any_forgets_analytics_answers_equal_the_projections(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        try:
            _write(store, ops)
            state = MemoryView.from_events(store.read()).state
            answers = analyse_all(store)
            # decay is the knowledge fold: the facts it calls current, and the ones it calls closed
            facts = answers["decay"].sections["facts"].records()
            current = {
                (f.domain, f.key, f.value): round(f.confidence, 9)
                for held in state.knowledge.current.values()
                for f in held.values()
            }
            closed = {
                (f.domain, f.key, f.value): round(f.confidence, 9)
                for held in state.knowledge.closed.values()
                for f in held
            }
            assert _facts(facts, "current") == current
            assert _facts(facts, "closed") == {k: c for k, c in closed.items() if k not in current}
            # the lessons the mirror's events show
            con = connect(store)
            shown = con.execute(
                "SELECT DISTINCT lesson_id FROM events WHERE type IN ('lesson_recorded', "
                "'lesson_seeded') AND lesson_id NOT IN (SELECT lesson_id FROM lessons_pruned)"
            ).fetchall()
            con.close()
            assert {lid for (lid,) in shown} == set(state.lessons.lessons)
            # the runs answer
            runs = {r["run_id"]: r["status"] for r in answers["runs"].sections["runs"].records()}
            assert runs == {rid: m.status for rid, m in state.runs.runs.items()}
        finally:
            store.close()


def _contradictions_shown(store: SqliteStore) -> list[dict[str, Any]]:
    """The payloads of the `fact_contradicted` events analytics shows, in log order."""
    con = connect(store)
    try:
        return [
            orjson.loads(p)
            for (p,) in con.execute(
                "SELECT payload FROM events WHERE type = 'fact_contradicted' ORDER BY seq"
            ).fetchall()
        ]
    finally:
        con.close()


def test_a_contradiction_that_stays_shows_no_value_a_forget_removed(tmp_path: Path) -> None:
    """A contradiction of two values, one first seen by a run later forgotten: it still changed
    the other fact, so it stays — without the forgotten fact's value in its `old_values`."""
    with SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock()) as store:
        _write(
            store,
            [
                ("run", "a.test", None),
                ("fact", "a.test", "load", "1s", True),
                ("end", True),
                ("fact", "a.test", "load", "2s", False),
                ("run", "a.test", None),
                ("fact", "a.test", "load", "3s", True),
                ("end", True),
            ],
        )
        contradictions = [e.data for e in store.read(types=["fact_contradicted"])]
        assert ["1s", "2s"] in [sorted(d["old_values"]) for d in contradictions]  # what the ledger keeps
        forget(store, "run", "r1")
        shown = _contradictions_shown(store)
    assert shown and all("1s" not in d["old_values"] for d in shown)
    assert ["2s"] in [d["old_values"] for d in shown]


def test_a_contradiction_by_a_forgotten_runs_value_does_not_show_that_value(tmp_path: Path) -> None:
    """A forgotten run's value contradicted a fact that survives it: the contradiction stays (the
    fact's confidence fell), but neither analytics nor `explain` names the forgotten value."""
    with SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock()) as store:
        _write(
            store,
            [
                ("fact", "a.test", "load", "1s", False),
                ("run", "a.test", None),
                ("fact", "a.test", "load", "2s", True),
                ("end", True),
            ],
        )
        assert [e.data["new_value"] for e in store.read(types=["fact_contradicted"])] == ["2s"]
        forget(store, "run", "r1")
        shown = _contradictions_shown(store)
        life = explain_item(store, "load", domain="a.test")
    assert [(d["old_values"], d["new_value"]) for d in shown] == [(["1s"], "")]
    assert "2s" not in orjson.dumps(life).decode()
    assert any(entry["stage"] == "decayed" for entry in life["life"])
