"""Graded step memories (seed 002) and short-term memory (seed 003)."""
from __future__ import annotations

from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import graded, run_completed, run_started, step

PAGE = [f"button:b{i}" for i in range(10)]


def view(store) -> MemoryView:  # type: ignore[no-untyped-def]
    return MemoryView.open(store)


def test_retrieval_needs_iou_of_at_least_0_7(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([step("r1", 1, args={"ref": "a"}, elements=PAGE[:7], intent="open priority"), graded("r1", 1, "success"),
              step("r1", 2, args={"ref": "b"}, elements=PAGE[:6], intent="open priority"), graded("r1", 2, "success")])
    got = view(fresh_ledger).step_memories(PAGE, "open priority")
    assert [(m.step, m.page_similarity) for m in got] == [(1, 0.7)]
    assert got[0].score == 0.65 * 0.7 + 0.35 * 1.0 and got[0].kind == "REPEAT"


def test_one_repeat_and_one_avoid_when_both_exist(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([step("r1", 1, args={"ref": "ok1"}, elements=PAGE, intent="change priority"), graded("r1", 1, "success"),
              step("r1", 2, args={"ref": "ok2"}, elements=PAGE, intent="change priority"), graded("r1", 2, "success"),
              step("r1", 3, args={"ref": "bad"}, elements=PAGE[:8], intent="delete ticket"),
              graded("r1", 3, "failure", "wrong action", "select High"),
              step("r1", 4, args={"ref": "pending"}, elements=PAGE, intent="change priority")])
    got = view(fresh_ledger).step_memories(PAGE, "change priority")
    assert [m.kind for m in got] == ["REPEAT", "AVOID"]
    assert got[1].correction == "select High" and got[1].reason == "wrong action"
    assert view(fresh_ledger).step_memories(PAGE, "change priority", exclude_run="r1") == []


def test_dedup_by_action_signature_and_two_of_one_kind(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    events = []
    for run in ("r1", "r2", "r3"):
        events += [step(run, 1, args={"ref": "same"}, elements=PAGE, intent="x"), graded(run, 1, "success")]
    events += [step("r4", 1, args={"ref": "other"}, elements=PAGE[:9], intent="x"), graded("r4", 1, "success")]
    w.append(events)
    got = view(fresh_ledger).step_memories(PAGE, "x", exclude_run="r9")
    assert [(m.run_id, m.action["args"]["ref"]) for m in got] == [("r1", "same"), ("r4", "other")]


def test_top_ten_before_dedup(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    events = []
    for i in range(11):
        events += [step(f"r{i:02}", 1, args={"ref": "s"}, elements=PAGE, intent="x"), graded(f"r{i:02}", 1, "success")]
    events += [step("z", 1, args={"ref": "fail"}, elements=PAGE[:8], intent="x"), graded("z", 1, "failure")]
    w.append(events)
    assert [m.kind for m in view(fresh_ledger).step_memories(PAGE, "x")] == ["REPEAT"]


def test_loop_warnings_same_action_three_times_in_last_ten(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([run_started("r1", goal="find prices")])
    w.append([step("r1", 1, args={"selector": "#submit"}), step("r1", 2, args={"selector": "#submit"})])
    assert view(fresh_ledger).short_term("r1").loop_warnings == ()
    w.append([step("r1", 3, args={"selector": "#submit"})])
    st = view(fresh_ledger).short_term("r1")
    assert st.loop_warnings == ('Warning: click({"selector":"#submit"}) repeated 3 times in last 10 actions!',)
    assert st.action_frequency == {'click({"selector":"#submit"})': 3} and st.goal == "find prices"
    w.append([step("r1", 4 + i, command="scroll", args={"n": i}) for i in range(8)])
    st = view(fresh_ledger).short_term("r1")
    assert st.loop_warnings == ()  # only one #submit left in the last 10
    assert st.action_frequency['click({"selector":"#submit"})'] == 3 and st.cycle_count == 11


def test_failure_signatures_and_navigation_path(fresh_ledger):
    w = MemoryWriter(fresh_ledger)
    w.append([step("r1", 1, command="goto", url="https://a.com/", after="https://a.com/p1"),
              step("r1", 2, ok=False, args={"ref": "e1"}, url="https://a.com/p1"),
              step("r1", 3, args={"ref": "e2"}, url="https://a.com/p1", after="https://a.com/p2")])
    st = view(fresh_ledger).short_term("r1")
    assert st.navigation_path == ("https://a.com/", "https://a.com/p1", "https://a.com/p2")
    assert len(st.failed_signatures) == 1
    assert st.has_failed(st.recent[1]["signature"]) and not st.has_failed(st.recent[2]["signature"])
    w.append([run_completed("r1")])
    kept = view(fresh_ledger).short_term("r1")  # kept after the run, as every projection is
    assert kept.completed and kept.cycle_count == 3 and kept.failed_signatures == st.failed_signatures


def test_many_memories_use_the_element_index_and_agree_with_a_scan(fresh_ledger):
    import random
    rng = random.Random(1)
    events = []
    pool = [f"button:b{i}" for i in range(14)]
    for r in range(40):
        for n in range(3):
            events += [step(f"r{r}", n, args={"ref": f"e{rng.randrange(4)}"}, elements=rng.sample(pool, 9),
                            intent=rng.choice(["open menu", "change priority", "delete"])),
                       graded(f"r{r}", n, rng.choice(["success", "failure"]))]
    MemoryWriter(fresh_ledger).append(events)
    v = view(fresh_ledger)
    from memtape.projections.steps import retrieve
    all_mems = [m for steps in v.state.step_memories.by_run.values() for m in steps.values()]
    hits = 0
    for _ in range(20):
        page, intent = rng.sample(pool, 10), rng.choice(["open the menu", "priority", "delete it"])
        got = v.step_memories(page, intent, "r3")
        assert got == retrieve(all_mems, page, intent, "r3", v.policy)
        hits += bool(got)
    assert hits >= 5
