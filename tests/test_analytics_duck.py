"""DuckDB over the analytics mirror (and the offline attach of the ledger itself): typed views, and answers equal to the same computation
over `projections` in Python (on hand-built ledgers)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from memtape.analytics.answers import analyse, analyse_all
from memtape.analytics.duck import attach
from memtape.analytics.mirror import connect
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import FactObserved, RunCompleted, RunStarted, SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.analytics_builders import Built, learning_ledger


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteStore, Built]:
    path = tmp_path_factory.mktemp("learned") / "ledger.db"
    clock = SteppingClock()
    store = SqliteStore.open(path, clock=clock)
    built = learning_ledger(store, clock, runs=6)
    yield store, built
    store.close()


def test_views_count_every_event_type(learned: tuple[SqliteStore, Built]) -> None:
    store, _ = learned
    con = connect(store)
    by_type = dict(con.sql("SELECT type, count(*) FROM ev GROUP BY type").fetchall())
    assert by_type == store.stats().by_type
    # typed views carry typed columns
    assert con.sql("SELECT count(*) FROM step_recorded WHERE NOT ok").fetchone()[0] == 6
    assert con.sql("SELECT sum(turns) FROM run_completed").fetchone()[0] == sum(
        e.data["turns"] for e in store.read(types=["run_completed"])
    )
    con.close()


def test_attach_is_read_only(learned: tuple[SqliteStore, Built]) -> None:
    """The offline recipe (analytics.duck) attaches the ledger itself read-only, scanner loaded from its
    package; the mirror is a file of its own, so analytics never writes the ledger."""
    import duckdb

    store, _ = learned
    con, events = attach(store.path)
    assert con.execute(f"SELECT count(*) FROM {events}").fetchone()[0] == store.head()
    with pytest.raises(duckdb.Error):
        con.execute(f"INSERT INTO {events} (seq) VALUES (999999)")
    con.close()
    before = Path(store.path).read_bytes()
    connect(store).close()
    assert Path(store.path).read_bytes() == before and store.verify().ok


def test_runs_equal_the_runs_projection(learned: tuple[SqliteStore, Built]) -> None:
    store, _ = learned
    view = MemoryView.from_events(store.read())
    rows = {r["run_id"]: r for r in analyse("runs", store).sections["runs"].records()}
    manifests = {m.run_id: m for m in view.runs()}
    assert set(rows) == set(manifests)
    for rid, m in manifests.items():
        r = rows[rid]
        assert (r["status"], r["success"], r["turns"], r["mode"], r["session_id"], r["memory_enabled"]) == (
            m.status,
            m.success,
            m.turn_count,
            m.mode,
            m.session_id,
            m.memory_enabled,
        )
        assert r["tokens_in"] == m.tokens_in and r["duration_ms"] == m.duration_ms
    outcomes = {r["domain"]: r for r in analyse("runs", store).sections["outcomes"].records()}
    by_dom = Counter(m.domain for m in manifests.values())
    assert {d: r["runs"] for d, r in outcomes.items()} == dict(by_dom)
    assert sum(r["passed"] for r in outcomes.values()) == sum(1 for m in manifests.values() if m.success)


def test_promotions_equal_the_lessons_projection(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    view = MemoryView.from_events(store.read())
    rep = analyse("promotions", store)
    learned_lessons = [l for l in view.lessons() if l.source == "learned"]
    promoted = {l.lesson_id for l in learned_lessons if l.category == "best_practice"}
    funnel = {r["stage"]: r["lessons"] for r in rep.sections["funnel"].records()}
    assert funnel == {"recorded": len(learned_lessons), "deduplicated": 1, "promoted": len(promoted)}
    ttp = rep.sections["time_to_promotion"].records()
    assert [r["lesson_id"] for r in ttp] == sorted(promoted) == [built.lesson_id]
    assert ttp[0]["promoted_seq"] == built.promoted_seq
    assert ttp[0]["recorded_seq"] == built.record_seq[built.first_record_run]
    assert ttp[0]["use_count"] == 5 and ttp[0]["domains"] == 3


def test_recall_equals_a_python_count_over_the_log(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    view = MemoryView.from_events(store.read())
    rep = analyse("recall", store)
    hr = {r["kind"]: r for r in rep.sections["hit_rate"].records()}
    errs = list(store.read(types=["error_recall"]))
    doms = list(store.read(types=["domain_recall"]))
    assert hr["error"]["recalls"] == len(errs) and hr["error"]["hits"] == sum(1 for e in errs if e.data["lesson_ids"])
    assert hr["domain"]["recalls"] == len(doms) and hr["domain"]["hits"] == 0
    recalled = {lid for e in errs + doms for lid in e.data["lesson_ids"]}
    never = {r["lesson_id"] for r in rep.sections["never_recalled"].records()}
    assert never == {l.lesson_id for l in view.lessons()} - recalled
    assert built.lesson_id not in never and len(never) == 1  # the fill seed: the other two answer "intercepts"


def test_memory_effect_equals_python_over_run_manifests(learned: tuple[SqliteStore, Built]) -> None:
    store, _ = learned
    view = MemoryView.from_events(store.read())
    runs = sorted(view.runs(), key=lambda m: m.started_at)
    cond = {}
    seen_on: set[str] = set()
    for m in runs:
        key = m.case_id or m.goal
        if not m.memory_enabled:
            cond[m.run_id] = "off"
        else:
            cond[m.run_id] = "warm" if key in seen_on else "cold"
            seen_on.add(key)
    rows = {r["run_id"]: r for r in analyse("memory-effect", store).sections["runs"].records()}
    assert {rid: r["condition"] for rid, r in rows.items()} == cond
    summary = {
        (r["comparison"], r["condition"]): r for r in analyse("memory-effect", store).sections["summary"].records()
    }
    on = [m for m in runs if m.memory_enabled]
    assert summary[("off vs on", "on")]["runs"] == len(on)
    assert summary[("off vs on", "on")]["avg_turns"] == pytest.approx(sum(m.turn_count for m in on) / len(on), abs=0.01)
    warm = [m for m in runs if cond[m.run_id] == "warm"]
    assert summary[("cold vs warm", "warm")]["pass_rate"] == pytest.approx(
        sum(1 for m in warm if m.success) / len(warm), abs=1e-4
    )


def _contradicting_ledger(path: Path) -> SqliteStore:
    """Facts confirmed, contradicted until pruned, and observed again after pruning."""
    clock = SteppingClock()
    store = SqliteStore.open(path, clock=clock)
    writer = MemoryWriter(store)
    obs = [
        ("shop.test", "load", "5s"),
        ("shop.test", "load", "5s"),
        ("shop.test", "load", "8s"),
        ("shop.test", "load", "5s"),
        ("shop.test", "load", "9s"),
        ("shop.test", "load", "5s"),
        ("shop.test", "modal", "shadow dom"),
        ("news.test", "load", "1s"),
        ("shop.test", "load", "9s"),
        ("shop.test", "load", "2s"),
        ("shop.test", "load", "3s"),
        ("shop.test", "load", "8s"),
    ]
    for dom, key, value in obs:
        clock.advance(timedelta(hours=1))
        writer.append([event(FactObserved(fact_type="timing", key=key, value=value), domain=dom)])
    writer.append(
        [
            event(RunStarted(goal="g"), run_id="r1", domain="shop.test"),
            event(RunCompleted(success=True), run_id="r1", domain="shop.test"),
        ]
    )
    writer.open_for_run("r2", "2026-02-01T00:00:00Z")
    return store


@pytest.mark.parametrize("policy", [DEFAULT_POLICY, Thresholds(fact_initial_confidence=0.3, fact_confirm_rate=0.5)])
def test_fact_decay_walk_equals_the_knowledge_projection(tmp_path: Path, policy: Thresholds) -> None:
    """The walk is the knowledge fold under the answer's policy (its confidence parameters included)."""
    store = _contradicting_ledger(tmp_path / "ledger.db")
    rep = analyse("decay", store, policy)
    assert rep.sections["contradictions"].rows, "the ledger must hold contradictions"
    assert rep.sections["pruned"].rows, "the ledger must hold pruned facts"
    facts = {(r["domain"], r["fact_type"], r["key"], r["value"]): r for r in rep.sections["facts"].records()}
    view = MemoryView.from_events(store.read(), policy)
    current = {
        (f.domain, f.fact_type, f.key, f.value): f for dom in ("shop.test", "news.test") for f in view.facts(dom)
    }
    for key, f in current.items():
        assert facts[key]["status"] == "current"
        assert facts[key]["confidence"] == pytest.approx(f.confidence, abs=1e-12)
    assert {k for k, r in facts.items() if r["status"] == "current"} == set(current)
    # the timeline equals the projection folded event by event
    by_seq: dict[int, dict] = {}
    for r in rep.sections["timeline"].records():
        by_seq.setdefault(r["seq"], {})[(r["domain"], r["fact_type"], r["key"], r["value"])] = r
    for seq, rows in by_seq.items():
        at = MemoryView.from_events(store.read(to_seq=seq), policy)
        now = {
            (f.domain, f.fact_type, f.key, f.value): f.confidence
            for dom in ("shop.test", "news.test")
            for f in at.facts(dom)
        }
        for key, r in rows.items():
            if r["alive"]:
                assert now[key] == pytest.approx(r["confidence"], abs=1e-6), (seq, key)
            else:
                assert key not in now
    store.close()


def test_forgotten_subjects_appear_in_no_answer(tmp_path: Path) -> None:
    clock = SteppingClock()
    store = SqliteStore.open(tmp_path / "ledger.db", clock=clock)
    learning_ledger(store, clock, runs=6, forget_domain="b.test")
    MemoryWriter(store).append([event(SubjectForgotten(subject_kind="run", subject="run3"))])
    text = orjson.dumps({n: r.as_json() for n, r in analyse_all(store).items()}).decode()
    assert "b.test" not in text and "run1" not in text and "run3" not in text
    assert "a.test" in text and "run2" in text
    # the universal lesson survives, as in the projection, without the forgotten domain
    view = MemoryView.from_events(store.read())
    lesson = next(l for l in view.lessons() if l.source == "learned")
    assert "b.test" not in lesson.triggered_domains
    rows = analyse("promotions", store).sections["time_to_promotion"].records()
    assert [r["lesson_id"] for r in rows] == [lesson.lesson_id]
    store.close()


@pytest.mark.postgres
def test_the_same_answers_over_a_postgresql_ledger(learned: tuple[SqliteStore, Built], pg_url: str) -> None:
    from memtape.ledger.copy import copy_ledger
    from memtape.ledger.pgstore import PostgresStore

    store, _ = learned
    copy_ledger(store.url, pg_url)
    with PostgresStore.open(pg_url) as pg:
        for name in ("promotions", "recall", "runs"):
            assert analyse(name, pg).as_json() == analyse(name, store).as_json()
