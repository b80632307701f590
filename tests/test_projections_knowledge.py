"""Facts, sessions, selectors and trajectories at their boundaries."""

from __future__ import annotations

import dataclasses

import pytest

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import SelectorFailed, SelectorSucceeded, SubjectForgotten
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.text import goal_words
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import T0, at, fact, lesson, run_completed, run_started, session, trajectory


def view(store, policy: Thresholds = DEFAULT_POLICY) -> MemoryView:  # type: ignore[no-untyped-def]
    return MemoryView.open(store, policy=policy)


# ---- facts ---------------------------------------------------------------------


def test_a_new_fact_starts_at_0_6_and_confirmation_moves_20_percent_toward_1(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([fact("shadow dom")])
    assert [f.confidence for f in view(fresh_ledger).facts("example.com")] == [0.6]
    types = [e.type for e in w.append([fact("shadow dom")])]
    assert types == ["fact_observed"]
    facts = view(fresh_ledger).facts("example.com")
    assert len(facts) == 1 and facts[0].confidence == pytest.approx(0.68) and facts[0].sources == 2


def test_a_different_value_halves_the_current_fact_and_adds_the_new_one(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([fact("shadow dom"), fact("shadow dom", key="other")])
    recorded = w.append([fact("iframe")])
    assert [e.type for e in recorded] == ["fact_observed", "fact_contradicted"]
    assert recorded[1].data["old_values"] == ["shadow dom"] and recorded[1].data["factor"] == 0.5
    got = {(f.key, f.value): f.confidence for f in view(fresh_ledger).facts("example.com")}
    assert got == {("modal", "iframe"): 0.6, ("modal", "shadow dom"): pytest.approx(0.3), ("other", "shadow dom"): 0.6}
    assert [f.value for f in view(fresh_ledger).facts("example.com", min_confidence=0.5)] == ["iframe", "shadow dom"]


def test_exactly_0_1_is_kept_and_below_is_pruned_and_closed(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([fact("a", confidence=0.2, key="k1"), fact("b", confidence=0.19, key="k2")])
    assert [e.type for e in w.append([fact("a2", key="k1")])] == ["fact_observed", "fact_contradicted"]
    recorded = w.append([fact("b2", key="k2", when=at(3))])
    assert [e.type for e in recorded] == ["fact_observed", "fact_contradicted", "facts_pruned"]
    v = view(fresh_ledger)
    current = {(f.key, f.value): f.confidence for f in v.facts("example.com")}
    assert current[("k1", "a")] == pytest.approx(0.1)
    assert ("k2", "b") not in current
    closed = [f for f in v.facts("example.com", include_closed=True) if f.closed]
    assert [(f.value, f.valid_to) for f in closed] == [("b", at(3))]


def test_open_for_run_prunes_facts_below_the_floor(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([fact("weak", confidence=0.05), fact("fine", key="k", confidence=0.1)])
    decisions = [e for e in w.open_for_run("r1", at(1)) if e.type == "facts_pruned"]
    assert [f["value"] for f in decisions[0].data["facts"]] == ["weak"]
    assert [f.value for f in view(fresh_ledger).facts("example.com")] == ["fine"]


def test_facts_keep_both_clocks(fresh_ledger):
    MemoryWriter(fresh_ledger).append([fact("slow", key="load", fact_type="timing", when="2025-06-01T00:00:00Z")])
    f = view(fresh_ledger).facts("example.com")[0]
    assert f.valid_from == "2025-06-01T00:00:00.000000Z"
    assert f.recorded_at.startswith("2026-01-01")


# ---- sessions ------------------------------------------------------------------


def test_the_sixth_session_pushes_out_the_oldest(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([session(i, success=i % 2 == 0) for i in range(1, 6)])
    assert [s.session_id for s in view(fresh_ledger).sessions("example.com")] == ["s1", "s2", "s3", "s4", "s5"]
    w.append([session(6)])
    got = view(fresh_ledger).sessions("example.com")
    assert [s.session_id for s in got] == ["s2", "s3", "s4", "s5", "s6"]
    assert [s.success for s in got] == [True, False, True, False, True]
    assert view(fresh_ledger).sessions("other.com") == []


def test_sessions_follow_log_order_not_timestamps(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([session(9), session(1)])
    assert [s.session_id for s in view(fresh_ledger).sessions("example.com")] == ["s9", "s1"]


# ---- selectors -----------------------------------------------------------------


def test_selectors_ranked_by_successes_with_failures_counted(fresh_ledger):
    def ok(sel: str) -> NewEvent:
        return NewEvent(SelectorSucceeded(role="button", name="Search", selector=sel), domain="example.com")

    def bad(sel: str) -> NewEvent:
        return NewEvent(SelectorFailed(role="button", name="Search", selector=sel), domain="example.com")

    MemoryWriter(fresh_ledger).append([ok("#a"), ok("#b"), ok("#b"), bad("#a"), bad("#c")])
    got = [(s.selector, s.successes, s.failures) for s in view(fresh_ledger).selectors("example.com")]
    assert got == [("#b", 2, 0), ("#a", 1, 1), ("#c", 0, 1)]


# ---- trajectories --------------------------------------------------------------


def test_jaccard_exactly_half_matches_and_below_does_not(fresh_ledger):
    MemoryWriter(fresh_ledger).append([trajectory("t1", "Search watch", when=T0)])
    v = view(fresh_ledger)
    m = v.match_trajectory("search WATCH reviews online", "example.com", at(1))
    assert m is not None and m.similarity == 0.5 and m.trajectory.trajectory_id == "t1"
    assert v.match_trajectory("search watch reviews online now", "example.com", at(1)) is None
    assert v.match_trajectory("!!! ???", "example.com", at(1)) is None


def test_goal_words_are_tokenized_as_seed_000s_agent_does(fresh_ledger):
    assert goal_words("Find a Hotel in N.Y.!") == {"find", "hotel", "in", "ny"}
    assert goal_words("Sign up by e-mail") == {"sign", "up", "by", "email"}
    assert goal_words("a b c ! ?") == frozenset()
    MemoryWriter(fresh_ledger).append(
        [
            trajectory("t1", "Find a Hotel in N.Y.!", when=T0),
            trajectory("t2", "e-mail the host", domain="b.com", when=T0),
        ]
    )
    v = view(fresh_ledger)
    m = v.match_trajectory("find hotel in ny", "example.com", at(1))
    assert m is not None and m.similarity == 1.0 and m.trajectory.trajectory_id == "t1"
    half = v.match_trajectory("email host now", "b.com", at(1))
    assert half is not None and half.similarity == 0.5
    assert v.match_trajectory("a . I !", "example.com", at(1)) is None
    assert v.match_trajectory("find hotel in ny", "b.com", at(1)) is None


def test_a_trajectory_exactly_30_days_old_is_kept_and_a_moment_older_expires(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([trajectory("t1", "search smart watch reviews", when=T0)])
    v = view(fresh_ledger)
    assert v.match_trajectory("search smart watch reviews", "example.com", at(30)) is not None
    assert v.match_trajectory("search smart watch reviews", "example.com", at(30, microseconds=1)) is None
    assert not [e for e in w.open_for_run("r1", at(30)) if e.type == "trajectories_expired"]
    expired = [e for e in w.open_for_run("r2", at(30, seconds=1)) if e.type == "trajectories_expired"]
    assert expired[0].data["trajectory_ids"] == ["t1"]
    assert view(fresh_ledger).trajectories() == []


def test_trajectories_are_scoped_by_host_and_failures_are_not_kept(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([trajectory("t1", "buy shoes", domain="www.shop.com", when=T0)])
    from memtape.ledger.events import TrajectoryRecorded

    w.append(
        [NewEvent(TrajectoryRecorded(trajectory_id="t2", goal="buy shoes", steps=[], success=False), domain="shop.com")]
    )
    v = view(fresh_ledger)
    assert v.match_trajectory("buy shoes", "shop.com", at(1)) is None
    assert v.match_trajectory("buy shoes", "www.shop.com", at(1)) is not None


def test_filter_then_rank_and_trace_scoring(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            trajectory("old-fast", "search smart watch reviews", when=T0, duration_ms=1000, verified=2),
            trajectory("new-slow", "search smart watch reviews", when=at(20), duration_ms=4000, verified=0),
            trajectory("closer", "search smart watch", when=T0),
        ]
    )
    plain = view(fresh_ledger)
    m = plain.match_trajectory("search smart watch", "example.com", at(21))
    assert m.trajectory.trajectory_id == "closer" and m.score == m.similarity == 1.0
    ranked = plain.match_trajectories("search smart watch reviews", "example.com", at(21))
    assert [x.trajectory.trajectory_id for x in ranked] == ["new-slow", "old-fast", "closer"]  # ties: newest first
    scored = view(fresh_ledger, Thresholds(trace_scoring=True)).match_trajectories(
        "search smart watch reviews", "example.com", at(21)
    )
    by_id = {x.trajectory.trajectory_id: x for x in scored}
    import math

    # speed is absolute: 1 / (1 + minutes)
    assert by_id["old-fast"].score == pytest.approx(0.6 + 0.2 * math.exp(-21 / 14) + 0.1 / (1 + 1 / 60) + 0.1 * 1.0)
    assert by_id["new-slow"].score == pytest.approx(0.6 + 0.2 * math.exp(-1 / 14) + 0.1 / (1 + 4 / 60) + 0.0)
    assert scored[0].trajectory.trajectory_id == "new-slow"  # 4 s is not 4x worse than 1 s: recency decides


def test_trace_scoring_speed_is_absolute_a_lone_candidate_gets_no_full_credit(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            trajectory("slow", "search smart watch", when=T0, duration_ms=180_000, verified=2),
            trajectory("fast", "search smart watch", domain="b.com", when=T0, duration_ms=0, verified=2),
        ]
    )
    v = view(fresh_ledger, Thresholds(trace_scoring=True))
    (slow,) = v.match_trajectories("search smart watch", "example.com", at(0))
    (fast,) = v.match_trajectories("search smart watch", "b.com", at(0))
    assert slow.score == pytest.approx(0.6 + 0.2 + 0.1 * 0.25 + 0.1)  # three minutes: a quarter of the speed term
    assert fast.score == pytest.approx(1.0) and fast.score > slow.score  # comparable across queries


def test_many_trajectories_use_the_word_index_and_agree_with_a_scan(fresh_ledger):
    words_ = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    events = [
        trajectory(f"t{i}", " ".join(words_[j] for j in range(8) if (i >> j) & 1 or j == i % 8), when=T0)
        for i in range(150)
    ]
    MemoryWriter(fresh_ledger).append(events)
    v = view(fresh_ledger)
    from memtape.projections.folds.trajectories import rank

    for goal in ["alpha beta", "gamma delta eps", "theta", "alpha beta gamma delta"]:
        assert v.match_trajectories(goal, "example.com", at(1)) == rank(
            v.trajectories("example.com"), goal, at(1), v.policy
        )


# ---- runs ------------------------------------------------------------------------


def test_runs_are_listed_newest_updated_first(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([run_started("a", when=T0), run_started("b", when=at(1)), run_started("c", when=at(2))])
    assert [r.run_id for r in view(fresh_ledger).runs()] == ["c", "b", "a"]
    w.append([run_completed("a", when=at(3))])
    assert [r.run_id for r in view(fresh_ledger).runs()] == ["a", "c", "b"]  # completing a run moves it up
    w.append([run_completed("b", when=at(3))])  # same time: the later update first
    assert [r.run_id for r in view(fresh_ledger).runs()] == ["b", "a", "c"]
    assert [r.run_id for r in view(fresh_ledger).runs(limit=1)] == ["b"]


def test_runs_registry_list_resume_fork(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            run_started("r1", session_id="proj_123", when=T0),
            run_completed("r1", when=at(0.5)),
            run_started("r2", session_id="proj_123", when=at(1), parent_run_id="r1", mode="resume"),
            run_started("r3", domain="other.com", when=at(2)),
            run_completed("r3", success=False, domain="other.com", when=at(2.5)),
        ]
    )
    v = view(fresh_ledger)
    assert [r.run_id for r in v.runs()] == ["r3", "r2", "r1"]
    assert [r.run_id for r in v.runs(session_id="proj_123")] == ["r2", "r1"]
    assert [r.run_id for r in v.runs(status="failed")] == ["r3"]
    assert [r.run_id for r in v.runs(domain="example.com", status="completed", limit=5)] == ["r1"]
    assert [r.run_id for r in v.runs(limit=1)] == ["r3"]
    r1 = v.run("r1")
    assert (r1.status, r1.success, r1.final_url, r1.turn_count) == ("completed", True, "https://example.com/end", 3)
    assert v.run("r2").parent_run_id == "r1" and v.run("r2").status == "running"
    assert v.resume_scenario("r1", "Add dark mode") == {
        "goal": "Add dark mode",
        "startUrl": "https://example.com/end",
        "sessionId": "proj_123",
        "parentRunId": "r1",
    }
    fork = v.fork_scenario("r1", "Build auth instead")
    assert fork["sessionId"].startswith("fork_") and fork["parentRunId"] == "r1"
    from memtape.ledger.errors import UnknownItem

    with pytest.raises(UnknownItem):
        v.resume_scenario("nope", "x")


# ---- forgetting ------------------------------------------------------------------


def test_subject_forgotten_removes_a_domain_from_every_projection(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            lesson("amazon tip", "amazon.com", fc=None, ep=None, scope="amazon.com"),
            lesson(domain="www.amazon.com"),
            fact("x", domain="www.amazon.com"),
            session(1, domain="amazon.com"),
            NewEvent(SelectorSucceeded(role="button", name="Buy", selector="#buy"), domain="amazon.com"),
            trajectory("t1", "buy", domain="amazon.com"),
            run_started("r1", domain="amazon.com"),
            fact("y", domain="ebay.com"),
        ]
    )
    w.append([NewEvent(SubjectForgotten(subject_kind="domain", subject="amazon.com"))])
    v = view(fresh_ledger)
    learned = [l for l in v.lessons() if l.source != "seed"]  # run_started r1 brought the seeds
    assert [l.lesson for l in learned] == [lesson().payload.lesson]  # type: ignore[attr-defined]
    assert learned[0].triggered_domains == ()
    assert v.facts("www.amazon.com") == [] and v.sessions("amazon.com") == [] and v.selectors("amazon.com") == []
    assert v.trajectories() == [] and v.runs() == []
    assert [f.value for f in v.facts("ebay.com")] == ["y"]


def test_subject_forgotten_run_session_and_lesson(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            run_started("r1", session_id="s"),
            trajectory("t1", "buy", run_id="r1"),
            run_started("r2"),
            lesson(domain="a.com", fc="type"),
        ]
    )  # not a seed's key (click / intercepts is the Enter seed's)
    (lid,) = [l.lesson_id for l in view(fresh_ledger).lessons() if l.source != "seed"]  # r1 brought the seeds
    w.append(
        [
            NewEvent(SubjectForgotten(subject_kind="session", subject="s")),
            NewEvent(SubjectForgotten(subject_kind="lesson", subject=lid)),
        ]
    )
    v = view(fresh_ledger)
    assert [r.run_id for r in v.runs()] == ["r2"] and v.trajectories() == []
    assert [l.source for l in v.lessons()] == ["seed"] * 3
    w.append([NewEvent(SubjectForgotten(subject_kind="run", subject="r2"))])
    assert view(fresh_ledger).runs() == []


def test_forgetting_a_run_or_session_drops_the_facts_and_selectors_it_introduced(fresh_ledger):
    """A fact or selector first seen in a forgotten run came from that run's pages: it goes. One
    another run introduced stays, even where the forgotten run confirmed it."""
    w = MemoryWriter(fresh_ledger)

    def in_run(ev: NewEvent, run_id: str) -> NewEvent:
        return dataclasses.replace(ev, run_id=run_id)

    def sel(name: str, run_id: str) -> NewEvent:
        return NewEvent(
            SelectorSucceeded(role="button", name=name, selector=f"#{name}"), domain="shop.com", run_id=run_id
        )

    w.append(
        [
            in_run(fact("kept", domain="shop.com"), "r0"),
            sel("Kept", "r0"),
            in_run(fact("secret-a", domain="shop.com", key="a"), "ra"),
            sel("Secret A", "ra"),
            in_run(fact("kept", domain="shop.com"), "ra"),
            sel("Kept", "ra"),
            in_run(fact("secret-s", domain="shop.com", key="s"), "rs1"),
            sel("Secret S", "rs2"),
        ]
    )
    w.append([NewEvent(SubjectForgotten(subject_kind="run", subject="ra"))])
    v = view(fresh_ledger)
    assert {f.value for f in v.facts("shop.com")} == {"kept", "secret-s"}
    assert next(f for f in v.facts("shop.com") if f.value == "kept").sources == 2  # confirmed by ra, still r0's
    assert {s.name for s in v.selectors("shop.com")} == {"Kept", "Secret S"}
    w.append([NewEvent(SubjectForgotten(subject_kind="session", subject="s9", run_ids=["rs1", "rs2"]))])
    v = view(fresh_ledger)
    assert [f.value for f in v.facts("shop.com")] == ["kept"] and [s.name for s in v.selectors("shop.com")] == ["Kept"]
