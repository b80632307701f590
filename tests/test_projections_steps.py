"""Graded step memories (seed 002) and short-term memory (seed 003)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtape.agent import prompt as P
from memtape.projections.parameters import Thresholds
from memtape.projections.similarity import embedding_similarity, page_similarity, text_similarity
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.projections_support import graded, run_completed, run_started, step

CART = ["heading:Shopping Cart", "button:Delete", "textbox:Quantity", "button:Update cart", "link:Checkout"]
#: the same page reworded (Basket/Remove for Cart/Delete)
BASKET = ["heading:Shopping Basket", "button:Remove", "textbox:Quantity", "button:Update basket", "link:Checkout"]
LOGIN = ["heading:Sign in", "textbox:Email", "textbox:Password", "button:Sign in", "link:Forgot password"]
TICKETS = ["heading:Tickets", "combobox:Priority", "button:Delete", "button:Save", "link:Back"]
GOAL = "Remove the wireless mouse from the cart"
TICKET_GOAL = "Change the ticket priority to High"


def view(store, policy: Thresholds | None = None) -> MemoryView:  # type: ignore[no-untyped-def]
    return MemoryView.open(store, None, policy) if policy is not None else MemoryView.open(store)


def cart_memories(fresh_ledger, elements: list[str] = CART) -> None:  # type: ignore[no-untyped-def]
    """Rep 1 on the cart page: the Delete button worked, Update cart was the wrong move."""
    MemoryWriter(fresh_ledger).append(
        [
            step("r1", 1, elements=elements, intent=GOAL, think="click Delete next to the mouse", target_text="Delete"),
            graded("r1", 1, "success", "the mouse left the cart"),
            step("r1", 2, elements=elements, intent=GOAL, think="update the cart first", target_text="Update cart"),
            graded("r1", 2, "failure", "nothing was removed", "click Delete"),
        ]
    )


def test_the_same_page_and_goal_retrieve_one_repeat_and_one_avoid(fresh_ledger):
    cart_memories(fresh_ledger)
    got = view(fresh_ledger).step_memories(CART, GOAL)
    assert sorted((m.kind, m.target_text) for m in got) == [("AVOID", "Update cart"), ("REPEAT", "Delete")]
    assert all(m.page_similarity == pytest.approx(1.0) for m in got)
    assert [m.correction for m in got if m.kind == "AVOID"] == ["click Delete"]
    assert got == sorted(got, key=lambda m: -m.score)
    assert all(m.score == m.page_similarity**0.65 * m.intent_similarity**0.35 >= 0.65 for m in got)
    assert view(fresh_ledger).step_memories(CART, GOAL, exclude_run="r1") == []


def test_a_reworded_page_still_retrieves(fresh_ledger):
    cart_memories(fresh_ledger)
    got = view(fresh_ledger).step_memories(BASKET, GOAL)
    assert sorted(m.kind for m in got) == ["AVOID", "REPEAT"]
    assert all(0.7 < m.page_similarity < 1 for m in got)


def test_three_extra_links_on_a_five_element_page_still_retrieve(fresh_ledger):
    cart_memories(fresh_ledger)
    got = view(fresh_ledger).step_memories(CART + ["link:Home", "link:Help", "link:Contact us"], GOAL)
    assert sorted(m.kind for m in got) == ["AVOID", "REPEAT"]


def test_the_same_page_under_an_unrelated_goal_brings_back_no_avoid(fresh_ledger):
    """A mistake made for one task is no mistake for another: deleting a ticket was wrong when
    the task was its priority, and says nothing when the task is the newsletter."""
    MemoryWriter(fresh_ledger).append(
        [
            step("r1", 1, elements=TICKETS, intent=TICKET_GOAL, think="delete the ticket", target_text="Delete"),
            graded("r1", 1, "failure", "Wrong action — task was to change priority", "Select High"),
        ]
    )
    assert view(fresh_ledger).step_memories(TICKETS, "Subscribe to the newsletter with my email") == []
    assert [m.kind for m in view(fresh_ledger).step_memories(TICKETS, TICKET_GOAL)] == ["AVOID"]


def test_another_page_under_the_same_goal_retrieves_nothing(fresh_ledger):
    cart_memories(fresh_ledger)
    assert view(fresh_ledger).step_memories(LOGIN, GOAL) == []
    assert view(fresh_ledger).step_memories(CART, "") == []
    assert view(fresh_ledger).step_memories([], GOAL) == []


def test_two_actions_on_one_page_differ_by_their_target(fresh_ledger):
    """Steps that name their element only as the target (no ref among the arguments) are two
    actions, not one repeated: both successes are offered."""
    MemoryWriter(fresh_ledger).append(
        [
            step("r1", 1, elements=CART, intent=GOAL, target_text="Delete"),
            graded("r1", 1, "success"),
            step("r1", 2, elements=CART, intent=GOAL, target_text="Checkout"),
            graded("r1", 2, "success"),
        ]
    )
    got = view(fresh_ledger).step_memories(CART, GOAL)
    assert sorted(m.target_text for m in got) == ["Checkout", "Delete"]


def test_the_number_of_memories_is_a_policy_parameter(fresh_ledger):
    events = []
    for n, target in enumerate(["Delete", "Checkout", "Quantity", "Update cart"], 1):
        events += [step("r1", n, elements=CART, intent=GOAL, target_text=target), graded("r1", n, "success")]
    events += [step("r1", 5, elements=CART[:4], intent=GOAL, target_text="Back"), graded("r1", 5, "failure")]
    MemoryWriter(fresh_ledger).append(events)
    assert Thresholds().step_memory_count == 2  # seed 002's example: one REPEAT, one AVOID
    assert [m.kind for m in view(fresh_ledger).step_memories(CART, GOAL)] == ["REPEAT", "AVOID"]
    four = view(fresh_ledger, Thresholds(step_memory_count=4)).step_memories(CART, GOAL)
    assert [m.kind for m in four] == ["REPEAT", "REPEAT", "REPEAT", "AVOID"]
    assert [m.target_text for m in view(fresh_ledger, Thresholds(step_memory_count=1)).step_memories(CART, GOAL)] == [
        "Delete"
    ]
    assert view(fresh_ledger, Thresholds(step_memory_count=0)).step_memories(CART, GOAL) == []


def test_top_candidates_before_dedup(fresh_ledger):
    events = []
    for i in range(11):
        events += [step(f"r{i:02}", 1, args={"ref": "s"}, elements=CART, intent=GOAL), graded(f"r{i:02}", 1, "success")]
    events += [step("z", 1, args={"ref": "fail"}, elements=CART[:4], intent=GOAL), graded("z", 1, "failure")]
    MemoryWriter(fresh_ledger).append(events)
    assert [m.kind for m in view(fresh_ledger).step_memories(CART, GOAL)] == ["REPEAT"]
    assert [m.kind for m in view(fresh_ledger, Thresholds(step_memory_top=12)).step_memories(CART, GOAL)] == [
        "REPEAT",
        "AVOID",
    ]


def test_the_graders_reason_reaches_the_prompt_whole(fresh_ledger):
    reason = (
        "Wrong action: the task was to change the priority of the ticket, and deleting it removed the "
        "ticket together with its history, its attachments and every comment the customer had written so far"
    )
    MemoryWriter(fresh_ledger).append(
        [step("r1", 1, elements=TICKETS, intent=TICKET_GOAL, target_text="Delete"), graded("r1", 1, "failure", reason)]
    )
    got = view(fresh_ledger).step_memories(TICKETS, TICKET_GOAL)
    assert got[0].reason == reason and f'This failed: "{reason}"' in P.step_memories(got).text


def test_vectors_of_one_model_compare_intents(fresh_ledger):
    """With an embedding on both sides (same model), the intents compare by the vectors, not by
    words: a goal worded apart matches, a goal whose vector points elsewhere does not."""
    MemoryWriter(fresh_ledger).append(
        [
            step("r1", 1, elements=CART, intent=GOAL, target_text="Delete", embedding=[0.6, 0.8, 0.0], model="m1"),
            graded("r1", 1, "success"),
        ]
    )
    v = view(fresh_ledger)
    near = v.step_memories(CART, "Take the rodent out of my basket", embedding=[0.6, 0.8, 0.0], embedding_model="m1")
    assert [m.target_text for m in near] == ["Delete"] and near[0].intent_similarity == pytest.approx(1.0)
    assert v.step_memories(CART, GOAL, embedding=[0.0, 0.0, 1.0], embedding_model="m1") == []
    # another model's vector, or none, is not compared: the words decide
    assert [m.target_text for m in v.step_memories(CART, GOAL, embedding=[0.0, 0.0, 1.0], embedding_model="m2")] == [
        "Delete"
    ]
    assert v.step_memories(CART, "Take the rodent out of my basket") == []


@given(st.lists(st.text(max_size=30), max_size=8), st.lists(st.text(max_size=30), max_size=8))
def test_similarity_is_bounded_and_symmetric(a: list[str], b: list[str]) -> None:
    ab, ba = page_similarity(a, b), page_similarity(b, a)
    assert 0.0 <= ab <= 1.0 and ab == pytest.approx(ba, abs=1e-12)
    assert 0.0 <= text_similarity(a, b) <= 1.0
    same = page_similarity(a, a)
    assert same == pytest.approx(1.0) or same == 0.0


@given(
    st.lists(st.floats(min_value=-9e18, max_value=9e18), max_size=6),
    st.lists(st.floats(min_value=-9e18, max_value=9e18), max_size=6),
)
def test_embedding_similarity_takes_any_storable_vector(a: list[float], b: list[float]) -> None:
    got = embedding_similarity(a, b)
    assert got is None or 0.0 <= got <= 1.0
    if len(a) != len(b) or not a:
        assert got is None


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
    w.append(
        [
            step("r1", 1, command="goto", url="https://a.com/", after="https://a.com/p1"),
            step("r1", 2, ok=False, args={"ref": "e1"}, url="https://a.com/p1"),
            step("r1", 3, args={"ref": "e2"}, url="https://a.com/p1", after="https://a.com/p2"),
        ]
    )
    st = view(fresh_ledger).short_term("r1")
    assert st.navigation_path == ("https://a.com/", "https://a.com/p1", "https://a.com/p2")
    assert len(st.failed_signatures) == 1
    assert st.has_failed(st.recent[1]["signature"]) and not st.has_failed(st.recent[2]["signature"])
    w.append([run_completed("r1")])
    kept = view(fresh_ledger).short_term("r1")  # kept after the run, as every projection is
    assert kept.completed and kept.cycle_count == 3 and kept.failed_signatures == st.failed_signatures
