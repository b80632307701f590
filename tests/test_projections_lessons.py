"""Lessons (seed 001) at their boundaries, and seed 001's three worked examples."""

from __future__ import annotations

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import DomainRecall, LessonRecorded
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.parameters import Thresholds
from memtape.projections.seeds import seed_lessons
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import CLICK_TEXT, T0, at, lesson, recall

CLICK_ID = lesson_id_for("click", "intercepts pointer events", None, CLICK_TEXT)


def view(store) -> MemoryView:  # type: ignore[no-untyped-def]
    return MemoryView.open(store)


def record_on(writer: MemoryWriter, domains: list[str], **kw) -> list[str]:  # type: ignore[no-untyped-def]
    types: list[str] = []
    for d in domains:
        types.extend(e.type for e in writer.append([lesson(domain=d, **kw)]))
    return types


# ---- promotion -------------------------------------------------------------------


def test_fifth_use_on_third_domain_promotes_and_fourth_does_not(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    types = record_on(w, ["google.com", "google.com", "bing.com", "amazon.com"])
    l4 = view(fresh_ledger).lesson(CLICK_ID)
    assert (l4.use_count, len(l4.triggered_domains), l4.category) == (4, 3, "error_recovery")
    assert "lesson_promoted" not in types
    types = record_on(w, ["google.com"])
    assert types == ["lesson_recorded", "lesson_deduplicated", "lesson_promoted"]
    l5 = view(fresh_ledger).lesson(CLICK_ID)
    assert (l5.use_count, l5.category, l5.tier) == (5, "best_practice", 1)
    assert l5 in view(fresh_ledger).tier1()


def test_five_uses_on_two_domains_do_not_promote(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    types = record_on(w, ["google.com", "bing.com", "google.com", "bing.com", "google.com", "bing.com"])
    assert "lesson_promoted" not in types
    assert view(fresh_ledger).lesson(CLICK_ID).category == "error_recovery"


def test_a_scoped_lesson_never_promotes(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    types = record_on(w, ["a.com", "b.com", "c.com", "d.com", "e.com", "f.com", "g.com"], scope="amazon.com")
    assert "lesson_promoted" not in types
    lid = lesson_id_for("click", "intercepts pointer events", "amazon.com", CLICK_TEXT)
    assert view(fresh_ledger).lesson(lid).use_count == 7
    assert view(fresh_ledger).lesson(lid).category == "error_recovery"


def test_only_error_recovery_promotes(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    types = record_on(w, ["a.com", "b.com", "c.com", "d.com", "e.com"], category="site_specific")
    assert "lesson_promoted" not in types


def test_recall_counts_as_a_use_and_can_promote(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    record_on(w, ["a.com", "b.com"])
    w.append([recall([CLICK_ID], "c.com")])
    l3 = view(fresh_ledger).lesson(CLICK_ID)
    assert (l3.use_count, l3.triggered_domains) == (3, ("a.com", "b.com", "c.com"))
    types = [
        e.type for e in w.append([NewEvent(DomainRecall(matched=1, lesson_ids=[CLICK_ID, CLICK_ID]), domain="d.com")])
    ]
    assert types == ["domain_recall"]  # listed twice, used once: 4 uses
    types = [e.type for e in w.append([recall([CLICK_ID], "a.com")])]
    assert types == ["error_recall", "lesson_promoted"]
    assert view(fresh_ledger).lesson(CLICK_ID).category == "best_practice"


def test_import_with_enough_uses_promotes_on_record(fresh_ledger):
    types = [
        e.type
        for e in MemoryWriter(fresh_ledger).append(
            [lesson(domain=None, use_count=6, triggered_domains=["a.com", "b.com", "c.com"])]
        )
    ]
    assert types == ["lesson_recorded", "lesson_promoted"]


def test_policy_thresholds_are_parameters(fresh_ledger):
    w = MemoryWriter(fresh_ledger, Thresholds(promotion_min_uses=2, promotion_min_domains=2))
    assert record_on(w, ["a.com", "b.com"])[-1] == "lesson_promoted"


# ---- pruning -------------------------------------------------------------------


def _stale(writer: MemoryWriter, uses: int, text: str = "stale lesson") -> str:
    writer.append([lesson(text, "a.com", fc=None, ep=None, when=T0, use_count=uses, last_used=T0)])
    return lesson_id_for(None, None, None, text)


def test_91_days_unused_with_4_uses_prunes(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    lid = _stale(w, 4)
    decisions = w.open_for_run("r1", at(91))
    pruned = [e for e in decisions if e.type == "lessons_pruned"]
    assert pruned and pruned[0].data["lesson_ids"] == [lid]
    assert view(fresh_ledger).lesson(lid) is None


def test_exactly_90_days_is_kept(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    lid = _stale(w, 4)
    assert not [e for e in w.open_for_run("r1", at(90)) if e.type == "lessons_pruned"]
    assert view(fresh_ledger).lesson(lid) is not None
    assert [e for e in w.open_for_run("r2", at(90, microseconds=1)) if e.type == "lessons_pruned"]


def test_five_uses_are_never_pruned(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    lid = _stale(w, 5)
    assert not [e for e in w.open_for_run("r1", at(400)) if e.type == "lessons_pruned"]
    assert view(fresh_ledger).lesson(lid) is not None


def test_seeds_are_never_pruned_and_seeded_once(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    first = w.open_for_run("r1", T0)
    assert [e.type for e in first] == ["lesson_seeded"] * 3
    assert not [e for e in w.open_for_run("r2", at(1000)) if e.type in ("lessons_pruned", "lesson_seeded")]
    assert len([l for l in view(fresh_ledger).lessons() if l.source == "seed"]) == 3


def test_a_recall_keeps_a_lesson_alive(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    lid = _stale(w, 3)
    w.append([recall([lid], "b.com", when=at(50))])
    assert not [e for e in w.open_for_run("r1", at(140)) if e.type == "lessons_pruned"]
    assert [e for e in w.open_for_run("r2", at(141)) if e.type == "lessons_pruned"]


# ---- dedup ---------------------------------------------------------------------


def test_dedup_key_is_command_and_pattern_case_insensitive(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([lesson("first wording", "a.com", fc="Click", ep="Intercepts Pointer Events")])
    types = [e.type for e in w.append([lesson("other wording", "b.com")])]
    assert types == ["lesson_recorded", "lesson_deduplicated"]
    assert len(view(fresh_ledger).lessons()) == 1


def test_lessons_without_command_or_pattern_are_not_lumped_together(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            lesson("Accept the cookie banner first.", "amazon.com", fc=None, ep=None, scope="amazon.com"),
            lesson("Use the search box, not the menu.", "amazon.com", fc=None, ep=None, scope="amazon.com"),
            lesson("Accept the cookie banner first.", "ebay.com", fc=None, ep=None, scope="ebay.com"),
        ]
    )
    assert len(view(fresh_ledger).lessons()) == 3
    types = [
        e.type
        for e in w.append(
            [lesson("accept the COOKIE banner first", "www.amazon.com", fc=None, ep=None, scope="amazon.com")]
        )
    ]
    assert types == ["lesson_recorded", "lesson_deduplicated"]
    assert len(view(fresh_ledger).lessons()) == 3


def test_lesson_ids_are_deterministic():
    assert lesson_id_for("fill", "too many arguments", None, "x") == lesson_id_for(
        "FILL", " Too many arguments", None, "y"
    )
    assert lesson_id_for(None, None, "a.com", "Hello, world") == lesson_id_for(None, None, "a.com", "hello world")
    assert lesson_id_for(None, None, "a.com", "hello") != lesson_id_for(None, None, "b.com", "hello")


def test_a_raw_duplicate_observation_changes_nothing_without_the_decision(fresh_ledger):
    fresh_ledger.append([lesson(domain="a.com"), lesson(domain="b.com")])
    only = view(fresh_ledger).lesson(CLICK_ID)
    assert (only.use_count, only.triggered_domains) == (1, ("a.com",))


# ---- recall ----------------------------------------------------------------------


def test_recall_on_error_scores_command_and_pattern(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            lesson("both", "a.com", fc="fill", ep="too many arguments", when=T0),
            lesson("command only", "a.com", fc="fill", ep="timeout", when=T0),
            lesson("pattern only", "a.com", fc="type", ep="Too Many", when=T0),
            lesson("neither", "a.com", fc="goto", ep="dns", when=T0),
        ]
    )
    v = view(fresh_ledger)
    got = v.error_matches("FILL", "Error: TOO MANY ARGUMENTS: expected 2, received 3")
    assert [(m.lesson.lesson, m.matched, m.score) for m in got] == [
        ("both", "pattern+command", 5.0),
        ("pattern only", "pattern", 3.0),
    ]
    assert [
        (m.lesson.lesson, m.matched, m.score, m.counts) for m in v.error_matches("fill", "Error: stale handle")
    ] == [("both", "command", 2.0, False), ("command only", "command", 2.0, False)]
    assert v.recall_on_error("scroll", "nothing matches") == []


def test_recall_on_error_top3_with_deterministic_ties(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([lesson(f"tip {i}", "a.com", fc="click", ep=f"pattern{i}", when=T0) for i in range(6)])
    w.append([recall([lesson_id_for("click", "pattern4", None, "")], "a.com")])
    got = view(fresh_ledger).recall_on_error("click", "some error")
    assert len(got) == 3 and got[0].lesson == "tip 4"
    assert [l.lesson for l in got[1:]] == ["tip 0", "tip 1"]  # equal keys: first recorded first


def test_site_lessons_are_recalled_on_error_only_on_their_site(fresh_ledger):
    MemoryWriter(fresh_ledger).append(
        [lesson("amazon only", "amazon.com", fc="click", ep="cookie", scope="amazon.com", category="site_specific")]
    )
    v = view(fresh_ledger)
    assert [l.lesson for l in v.recall_on_error("click", "cookie wall", "www.amazon.com")] == ["amazon only"]
    assert v.recall_on_error("click", "cookie wall", "ebay.com") == []
    assert v.recall_on_error("click", "cookie wall") == []


def test_recall_on_domain_matches_parents_on_a_dot_boundary_and_ranks(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append(
        [
            lesson(
                f"tip {i}",
                "amazon.com",
                fc=None,
                ep=None,
                scope="amazon.com",
                category="site_specific",
                use_count=u,
                when=at(i),
            )
            for i, u in enumerate([1, 3, 3, 2])
        ]
    )
    w.append([lesson("sub", "www.amazon.com", fc=None, ep=None, scope="www.amazon.com", category="site_specific")])
    w.append(
        [
            lesson(
                "other", "notamazon.com", fc=None, ep=None, scope="notamazon.com", category="site_specific", use_count=9
            )
        ]
    )
    v = view(fresh_ledger)
    assert [(m.lesson.lesson, m.matched, m.score) for m in v.domain_matches("www.amazon.com")] == [
        ("sub", "host", 2.0),
        ("tip 2", "domain", 1.0),
        ("tip 1", "domain", 1.0),
    ]
    assert [l.lesson for l in v.recall_on_domain("amazon.com")] == ["tip 2", "tip 1", "tip 3"]
    assert "sub" not in [l.lesson for l in v.recall_on_domain("amazon.com")]
    assert [l.lesson for l in v.recall_on_domain("notamazon.com")] == ["other"]
    assert v.recall_on_domain("ebay.com") == []


def test_tier1_by_use_count_seeds_first_only_on_equal_counts_capped_at_10(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.open_for_run("r1", T0)
    w.append(
        [lesson(f"practice {i}", "a.com", fc=None, ep=None, category="best_practice", use_count=i) for i in range(12)]
    )
    tier1 = view(fresh_ledger).tier1()
    assert len(tier1) == 10
    assert [l.use_count for l in tier1] == [11, 10, 9, 8, 7, 6, 5, 4, 3, 2]
    assert all(l.source == "learned" for l in tier1)  # unused seeds (use_count 0) no longer take 3 slots


def test_tier1_equal_counts_seeds_first_then_first_recorded(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    # learned lessons recorded in an order their ids (hashes) do not follow
    texts = [f"zz practice {i}" for i in range(4)]
    w.append([lesson(t, "a.com", fc=None, ep=None, category="best_practice", use_count=0) for t in texts])
    w.open_for_run("r1", T0)
    tier1 = view(fresh_ledger).tier1()
    assert [l.source for l in tier1] == ["seed"] * 3 + ["learned"] * 4
    assert [l.lesson for l in tier1[3:]] == texts
    assert [l.lesson for l in tier1[:3]] == [s.payload.lesson for s in seed_lessons()]  # type: ignore[attr-defined]


def test_recall_on_domain_equal_keys_keep_first_recorded_order(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    texts = ["tip c", "tip a", "tip b", "tip d"]
    w.append(
        [lesson(t, "shop.test", fc=None, ep=None, scope="shop.test", category="site_specific", when=T0) for t in texts]
    )
    assert [l.lesson for l in view(fresh_ledger).recall_on_domain("shop.test")] == texts[:3]


def test_experiment_and_view_rank_tier1_with_one_key():
    import inspect

    from memtape.analytics import experiment
    from memtape.projections import view as view_mod
    from memtape.projections.folds.lessons import tier1

    assert "tier1(" in inspect.getsource(experiment.Side.summary)
    assert inspect.getsource(view_mod.MemoryView.tier1).count("sort") == 0
    assert tier1 is view_mod.tier1


# ---- seed 001's worked examples ----------------------------------------------------


def test_seed_example_fill_fallback_dedups_onto_the_seed(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.open_for_run("run1", T0)
    v = view(fresh_ledger)
    tips = v.recall_on_error("fill", "too many arguments: expected 2, received 3", "www.google.com")
    assert [t.lesson for t in tips] == ["If fill fails, click(ref) to focus the input, then type(text) to enter text."]
    seed_id = tips[0].lesson_id
    w.append([recall([seed_id], "www.google.com", "fill", "too many arguments: expected 2, received 3")])
    before = view(fresh_ledger).lesson(seed_id).use_count
    recorded = w.append(
        [
            NewEvent(
                LessonRecorded(
                    lesson_id="",
                    lesson="fill failed; click then type worked",
                    category="error_recovery",
                    failed_command="fill",
                    error_pattern="too many arguments",
                    learned_from=["e1"],
                ),
                domain="www.google.com",
                run_id="run1",
            )
        ]
    )
    assert [e.type for e in recorded] == ["lesson_recorded", "lesson_deduplicated"]
    assert recorded[1].data["lesson_id"] == seed_id and recorded[1].data["new_use_count"] == before + 1
    after = view(fresh_ledger)
    assert after.lesson(seed_id).use_count == before + 1 and after.lesson(seed_id).source == "seed"
    assert len(after.lessons()) == 3


def test_seed_example_amazon_cookie_banner_recall(fresh_ledger):
    text = "Click the cookie acceptance banner before interacting with product elements."
    MemoryWriter(fresh_ledger).append(
        [lesson(text, "amazon.com", fc=None, ep=None, category="site_specific", scope="amazon.com", use_count=4)]
    )
    got = view(fresh_ledger).recall_on_domain("www.amazon.com")
    assert [l.lesson for l in got] == [text] and got[0].use_count == 4


def test_seed_example_promotion_google_bing_amazon_yahoo_reddit(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    seen = []
    for d in ["google.com", "bing.com", "amazon.com", "yahoo.com"]:
        seen += [e.type for e in w.append([lesson(domain=d)])]
        l = view(fresh_ledger).lesson(CLICK_ID)
        assert l.category == "error_recovery"
    assert l.use_count == 4
    promoted = [e for e in w.append([lesson(domain="reddit.com")]) if e.type == "lesson_promoted"]
    assert promoted and promoted[0].data["triggered_domains"] == [
        "google.com",
        "bing.com",
        "amazon.com",
        "yahoo.com",
        "reddit.com",
    ]
    final = view(fresh_ledger).lesson(CLICK_ID)
    assert (final.use_count, final.category) == (5, "best_practice")
    assert final in view(fresh_ledger).tier1()


def test_seed_lessons_are_the_three_of_seed_001():
    seeds = seed_lessons()
    assert [s.payload.category for s in seeds] == ["tool_fallback", "best_practice", "best_practice"]  # type: ignore[attr-defined]
    assert seeds[0].payload.failed_command == "fill"  # type: ignore[attr-defined]


# ---- the writer ----------------------------------------------------------------------


def test_observation_and_decisions_are_one_transaction_or_nothing(fresh_ledger):
    import pytest

    from memtape.ledger.errors import LedgerError

    w = MemoryWriter(fresh_ledger)
    w.append([lesson(domain="a.com")])
    head = fresh_ledger.head()
    with pytest.raises(LedgerError):
        w.append([lesson(domain="b.com"), "not an event"])  # type: ignore[list-item]
    assert fresh_ledger.head() == head
    from unittest import mock

    from memtape.projections import writer as writer_mod

    calls: list[int] = []
    real_decide = writer_mod.decide

    def failing(state, new, policy):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("crash between two observations")
        return real_decide(state, new, policy)

    with mock.patch.object(writer_mod, "decide", failing), pytest.raises(RuntimeError):
        w.append([lesson(domain="b.com"), lesson(domain="c.com")])
    assert len(calls) == 2
    assert fresh_ledger.head() == head  # the first observation and its decision were rolled back too
    recorded = w.append([lesson(domain="b.com")])
    assert [e.type for e in recorded] == ["lesson_recorded", "lesson_deduplicated"]
    assert recorded[1].seq == recorded[0].seq + 1 and recorded[1].recorded_at == recorded[0].recorded_at
    assert view(fresh_ledger).lesson(CLICK_ID).use_count == 2


def test_two_writers_on_one_ledger_see_each_others_lessons(fresh_ledger):
    a, b = MemoryWriter(fresh_ledger), MemoryWriter(fresh_ledger)
    a.append([lesson(domain="a.com")])
    assert [e.type for e in b.append([lesson(domain="b.com")])] == ["lesson_recorded", "lesson_deduplicated"]
    assert [e.type for e in a.append([lesson(domain="c.com")])] == ["lesson_recorded", "lesson_deduplicated"]
    assert view(fresh_ledger).lesson(CLICK_ID).use_count == 3


# ---- seeds carry the failures they answer (seed 001's walkthrough) ------------------------


def test_seeds_are_recalled_on_the_errors_they_answer(fresh_ledger):
    MemoryWriter(fresh_ledger).open_for_run("run1", T0)
    v = view(fresh_ledger)
    fill, enter, escape = [s.payload.lesson for s in seed_lessons()]  # type: ignore[attr-defined]
    assert [l.lesson for l in v.recall_on_error("fill", "too many arguments: expected 2, received 3")] == [fill]
    blocked = "locator.click: Timeout 1500ms exceeded. <ul> intercepts pointer events"
    assert [l.lesson for l in v.recall_on_error("click", blocked, "search.test")] == [enter, escape]
    # any command: the pattern alone (+3) finds both, equal scores keep the seeds' recorded order
    assert [l.lesson for l in v.recall_on_error("press", blocked.replace("click", "press"))] == [enter, escape]
    assert v.recall_on_error("press", "Timeout 1500ms exceeded") == []
    assert v.recall_on_error("goto", "net::ERR_NAME_NOT_RESOLVED") == []


# ---- a lesson id cannot hijack another lesson ------------------------------------------------


def test_a_taken_lesson_id_with_another_key_is_refused_and_promotes_nothing(fresh_ledger):
    import pytest

    from memtape.ledger.errors import InvalidEvent

    w = MemoryWriter(fresh_ledger)
    w.append([lesson(domain="a.com")])
    victim = view(fresh_ledger).lesson(CLICK_ID)
    head = fresh_ledger.head()
    hijack = NewEvent(
        LessonRecorded(
            lesson_id=CLICK_ID,
            lesson="something else entirely",
            category="error_recovery",
            failed_command="type",
            error_pattern="other",
            use_count=9,
            triggered_domains=["x.com", "y.com", "z.com"],
        ),
        domain="q.com",
    )
    with pytest.raises(InvalidEvent) as err:
        w.append([hijack])
    assert CLICK_ID in str(err.value) and "\n" not in str(err.value)
    assert fresh_ledger.head() == head
    after = view(fresh_ledger).lesson(CLICK_ID)
    assert (after.category, after.use_count, after.lesson) == ("error_recovery", victim.use_count, victim.lesson)


def test_decide_on_a_stored_hijack_attempt_promotes_nobody(fresh_ledger):
    from memtape.projections.decisions import decide
    from memtape.projections.folds.state import MemoryState, fold

    w = MemoryWriter(fresh_ledger)
    w.append([lesson(domain="a.com")])
    state = fold(MemoryState.empty(), fresh_ledger.read())
    hijack = NewEvent(
        LessonRecorded(
            lesson_id=CLICK_ID,
            lesson="other",
            category="error_recovery",
            failed_command="type",
            error_pattern="other",
            use_count=9,
            triggered_domains=["x.com", "y.com", "z.com"],
        ),
        domain="q.com",
    )
    assert decide(state, hijack) == []


def test_an_empty_lesson_id_is_the_hash_of_the_dedup_key(fresh_ledger):
    MemoryWriter(fresh_ledger).append([lesson(domain="a.com")])
    import hashlib

    key = '["cmd","click","intercepts pointer events"]'
    assert view(fresh_ledger).lesson("lsn_" + hashlib.sha256(key.encode()).hexdigest()[:16]) is not None


def test_append_refuses_a_hijacking_lesson_id_in_one_line(memory_path):
    from tests.cli_runner import run_cli

    mem = str(memory_path)
    first = (
        '{"type":"lesson_recorded","lesson_id":"l1","lesson":"Wait for the page","category":"error_recovery",'
        '"failed_command":"click","error_pattern":"timeout"}'
    )
    other = (
        '{"type":"lesson_recorded","lesson_id":"l1","lesson":"Something else","category":"error_recovery",'
        '"failed_command":"type","error_pattern":"x y z","use_count":9,"triggered_domains":["a.com","b.com","c.com"]}'
    )
    assert run_cli("--memory-dir", mem, "append", "-", stdin=(first + "\n").encode()).code == 0
    res = run_cli("--memory-dir", mem, "append", "-", stdin=(other + "\n").encode())
    assert res.code == 1 and res.err.count("\n") == 1 and "'l1'" in res.err
    out = run_cli("--memory-dir", mem, "events", "--json")
    assert out.out.count("lesson_recorded") == 1 and "lesson_promoted" not in out.out
