"""Properties over random memory histories (written through the real policy step):
replaying with the default policy reproduces the log exactly, and the DuckDB answers (and the
mirror's `memory_at_step`) equal the projections folded in Python."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.analytics.answers import analyse_all
from memtape.analytics.audit import audit_run
from memtape.analytics.experiment import run_experiment
from memtape.analytics.forget_filter import lesson_id_of
from memtape.analytics.mirror import connect
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import (
    Action,
    EnvState,
    ErrorRecall,
    FactObserved,
    LessonRecorded,
    RunCompleted,
    RunStarted,
    SelectorFailed,
    SelectorSucceeded,
    StepRecorded,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.store import SqliteStore
from memtape.projections.forgetting import forget
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.analytics_builders import memory_at_step_equals_the_fold

DOMS = ("a.test", "b.test", "c.test", "d.test")
op = st.one_of(
    st.tuples(
        st.just("fact"),
        st.sampled_from(DOMS[:2]),
        st.sampled_from(("load", "modal")),
        st.sampled_from(("1s", "2s", "3s")),
    ),
    st.tuples(st.just("lesson"), st.sampled_from(("click", "fill", "")), st.sampled_from(DOMS)),
    st.tuples(st.just("recall"), st.sampled_from(("click", "fill")), st.sampled_from(DOMS)),
    st.tuples(st.just("selector"), st.sampled_from(DOMS[:2]), st.booleans()),
    st.tuples(st.just("run"), st.sampled_from(DOMS), st.integers(min_value=0, max_value=50)),
    st.tuples(st.just("step"), st.sampled_from(DOMS), st.booleans()),
)


def build(store: SqliteStore, clock: SteppingClock, ops: list[tuple]) -> dict[str, dict[int, int]]:
    """Write the ops; returns the seq of each step recorded (run -> step -> seq)."""
    writer = MemoryWriter(store, check_runs=False)  # steps of a finished run, as old logs hold them
    n = 0
    steps: dict[str, dict[int, int]] = {}
    for o in ops:
        kind = o[0]
        if kind == "fact":
            writer.append([event(FactObserved(fact_type="timing", key=o[2], value=o[3]), domain=o[1])])
        elif kind == "lesson":
            cmd, dom = o[1], o[2]
            writer.append(
                [
                    event(
                        LessonRecorded(
                            lesson_id="",
                            lesson=f"when {cmd or 'it'} fails, wait",
                            category="error_recovery",
                            failed_command=cmd or None,
                            error_pattern="timeout" if cmd else None,
                        ),
                        domain=dom,
                    )
                ]
            )
        elif kind == "recall":
            hits = MemoryView.from_events(store.read()).recall_on_error(o[1], "timeout exceeded", o[2])
            writer.append(
                [
                    event(
                        ErrorRecall(
                            command=o[1],
                            error_snippet="timeout exceeded",
                            matched=len(hits),
                            lesson_ids=[l.lesson_id for l in hits],
                        ),
                        domain=o[2],
                    )
                ]
            )
        elif kind == "step":  # a step of the latest run (or of a run whose start is not in the log)
            rid = f"r{n}"
            k = len(steps.get(rid, {})) + 1
            (rec,) = writer.append(
                [
                    event(
                        StepRecorded(
                            action=Action(command="click"),
                            ok=o[2],
                            error=None if o[2] else "timeout exceeded",
                            env_before=EnvState(url=f"http://{o[1]}/"),
                        ),
                        run_id=rid,
                        step=k,
                        domain=o[1],
                    )
                ]
            )
            steps.setdefault(rid, {})[k] = rec.seq
        elif kind == "selector":
            cls = SelectorSucceeded if o[2] else SelectorFailed
            writer.append([event(cls(role="button", name="Go", selector="#go"), domain=o[1])])
        else:
            n += 1
            rid = f"r{n}"
            clock.advance(timedelta(days=o[2]))
            writer.open_for_run(rid, clock.now.isoformat())
            writer.append(
                [
                    event(RunStarted(goal="find the thing", case_id="c"), run_id=rid, domain=o[1]),
                    event(
                        TrajectoryRecorded(
                            trajectory_id=f"t{n}", goal="find the thing", steps=[TrajectoryStep(command="click")]
                        ),
                        run_id=rid,
                        domain=o[1],
                    ),
                    event(RunCompleted(success=o[2] % 2 == 0, turns=o[2] % 7), run_id=rid, domain=o[1]),
                ]
            )
    return steps


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=16))
def test_default_replay_and_duckdb_agree_with_projections(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = SteppingClock()
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=clock)
        try:
            steps = build(store, clock, ops)
            result = run_experiment(store, {})
            assert result.differences == 0, result
            view = MemoryView.from_events(store.read())
            answers = analyse_all(store)
            facts = {(r["domain"], r["key"], r["value"]): r for r in answers["decay"].sections["facts"].records()}
            current = {(f.domain, f.key, f.value): f.confidence for d in DOMS for f in view.facts(d)}
            assert {k for k, r in facts.items() if r["status"] == "current"} == set(current)
            for k, c in current.items():
                assert abs(facts[k]["confidence"] - c) < 1e-9
            promoted = {r["lesson_id"] for r in answers["promotions"].sections["time_to_promotion"].records()}
            assert promoted == {
                l.lesson_id for l in view.lessons() if l.source == "learned" and l.category == "best_practice"
            }
            runs = {r["run_id"]: r for r in answers["runs"].sections["runs"].records()}
            assert {rid: (r["status"], r["turns"]) for rid, r in runs.items()} == {
                m.run_id: (m.status, m.turn_count) for m in view.runs()
            }
            # what the agent knew at each step: the mirror's view equals the projections folded there,
            # each step read at the seq the audit reads it at
            assert memory_at_step_equals_the_fold(store, steps) == sum(len(s) for s in steps.values())
            con = connect(store)
            placed = con.execute("SELECT run_id, step, as_of_seq FROM step_as_of ORDER BY ALL").fetchall()
            con.close()
            assert placed == sorted(
                (rid, s["step"], s["as_of_seq"]) for rid in steps for s in audit_run(store, rid)["steps"]
            )
        finally:
            store.close()


DOMAINS = ("a.test", "www.a.test", "b.test")
lesson_op = st.tuples(
    st.sampled_from(("click", "fill", "")),
    st.sampled_from(DOMAINS),
    st.sampled_from((None, *DOMAINS)),
    st.sampled_from(("r1", "r2", "r3")),
)
forget_op = st.one_of(
    st.tuples(st.just("domain"), st.sampled_from(("a.test", "b.test"))),
    st.tuples(st.just("run"), st.sampled_from(("r1", "r2"))),
    st.tuples(st.just("lesson"), st.integers(min_value=0, max_value=7)),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lesson_op, min_size=1, max_size=8), st.lists(forget_op, max_size=3))
def test_after_forgets_analytics_shows_the_lessons_the_projection_holds(
    lessons: list[tuple], forgets: list[tuple]
) -> None:
    """What forget removes is one rule (`lessons.removed_by`, `runs.covered`): after any forgets, the
    lessons the mirror's events still show are exactly the ones the lessons projection holds, and no
    forgotten domain is left in a shown `triggered_domains`."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        try:
            writer = MemoryWriter(store)
            recorded = []
            for cmd, dom, scope, rid in lessons:
                (ev, *_) = writer.append(
                    [
                        event(
                            LessonRecorded(
                                lesson_id="",
                                lesson=f"when {cmd or 'it'} fails on {scope or 'any site'}, wait",
                                category="site_specific" if scope else "error_recovery",
                                failed_command=cmd or None,
                                error_pattern="timeout" if cmd else None,
                                scope_domain=scope,
                            ),
                            run_id=rid,
                            domain=dom,
                        )
                    ]
                )
                recorded.append(ev)
            for kind, subject in forgets:
                if kind == "lesson":
                    subject = lesson_id_of(recorded[subject % len(recorded)])
                forget(store, kind, subject, force=True)
            con = connect(store)
            shown = con.execute(
                "SELECT DISTINCT lesson_id FROM events WHERE type IN ('lesson_recorded', "
                "'lesson_seeded') AND lesson_id NOT IN (SELECT lesson_id FROM lessons_pruned)"
            ).fetchall()
            domains = con.execute("SELECT DISTINCT unnest(triggered_domains) FROM lesson_recorded").fetchall()
            con.close()
            assert {lid for (lid,) in shown} == {l.lesson_id for l in MemoryView.open(store).lessons()}
            gone = {s for k, s in forgets if k == "domain"}
            assert not any(d == g or d.endswith("." + g) for (d,) in domains for g in gone)
        finally:
            store.close()
