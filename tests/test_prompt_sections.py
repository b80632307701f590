"""The bundled agent's prompts hold no section the decision cannot use, and record everything
the decision read: site memory in the system prompt (once per site), the step's message per
call, a warning for an action that already failed as a prompt of its own."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtape
from memtape.agent import prompt as P
from memtape.agent.browser import Element, Observation
from memtape.agent.conversation import Message, read_prompts
from memtape.agent.loop import run_task, site_sections
from memtape.agent.policy import Decision, ScriptedPolicy
from memtape.analytics.audit import audit_run
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import BudgetItem, truncate
from memtape.projections.folds.knowledge import Fact, fill_fails_key
from memtape.projections.folds.knowledge import for_prompt as prompt_facts
from memtape.projections.folds.patterns import Pattern, for_goal
from memtape.projections.folds.trajectories import Trajectory, TrajectoryStep
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.values import TrajectoryRecall
from memtape.projections.text import goal_names, goal_words
from memtape.projections.view import MemoryView
from tests.analytics_builders import names
from tests.fake_sites import ACCEPT, COOKIE_LINKS, COOKIE_PAGES, CookieSite, RunResult, cookie_runs
from tests.policy_support import asked

START = "http://cookies.test/"


@pytest.fixture(scope="module")
def cookies(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteStore, Path, list[RunResult]]:
    d = tmp_path_factory.mktemp("cookies")
    store, runs = cookie_runs(d)
    yield store, d / "projections.db", runs
    store.close()


def _prompts(store: SqliteStore, run: RunResult, kind: str | None = None) -> list[Any]:
    return [e for e in store.read(run_id=run.run_id, types=["context_built"]) if kind in (None, e.data["prompt"])]


def _item(event: Any, source: str) -> dict[str, Any] | None:
    return next((i for i in event.data["items"] if i["source"] == source), None)


def test_site_memory_is_in_the_system_prompt_once_and_every_call_reads_it(
    cookies: tuple[SqliteStore, Path, list[RunResult]],
) -> None:
    store, _, (_, second, _) = cookies
    (system,) = _prompts(store, second, "system")  # one site, one system prompt: at the first decision
    assert system.step == 1
    assert [i["source"] for i in system.data["items"]] == [
        "system",
        "tier1",
        "domain_tips",
        "learned_patterns",
        "session_history",
        "reference_trajectory",
        "goal",
    ]
    steps = _prompts(store, second, "step")
    assert len(steps) == second.outcome.policy_decisions == 4
    assert not {i["source"] for e in steps for i in e.data["items"]} & P.SYSTEM_SECTIONS
    audited = [p for s in audit_run(store, second.run_id)["steps"] for p in s["prompt"] if p["prompt"] == "step"]
    assert [(p["system_seq"], p["read_tokens"]) for p in audited] == [
        (system.seq, system.data["total_tokens"] + e.data["total_tokens"]) for e in steps
    ]


def test_the_bundled_agent_shows_no_known_selectors(cookies: tuple[SqliteStore, Path, list[RunResult]]) -> None:
    store, projections, runs = cookies
    assert MemoryView.open(store, projections).selectors("cookies.test")  # memory has them: its tools take refs
    assert not [
        i for r in runs for e in _prompts(store, r) for i in e.data["items"] if i["source"] == "known_selectors"
    ]


def test_a_fact_a_site_tip_restates_is_shown_once(cookies: tuple[SqliteStore, Path, list[RunResult]]) -> None:
    store, projections, (_, second, _) = cookies
    facts = MemoryView.open(store, projections).facts("cookies.test", min_confidence=0.5)
    assert [(f.key, f.value) for f in facts] == [("blocking overlay", f'button "{ACCEPT}" must be clicked first')]
    (system,) = _prompts(store, second, "system")
    tips = _item(system, "domain_tips")
    assert tips is not None and ACCEPT in tips["text"] and _item(system, "app_knowledge") is None


def test_a_trajectory_of_another_goal_shows_its_steps_as_far_as_they_apply(
    cookies: tuple[SqliteStore, Path, list[RunResult]],
) -> None:
    store, _, (first, second, _) = cookies
    (recalled,) = [e.data for e in store.read(run_id=second.run_id, types=["trajectory_recalled"])]
    assert recalled["matched_goal"] == first.goal and not recalled["replay"] and recalled["steps"] == 4
    (system,) = _prompts(store, second, "system")
    trajectory = _item(system, "reference_trajectory")
    assert trajectory is not None and "the first 2 of 4, as far as they apply to this goal" in trajectory["text"]
    assert 'click button "Go"' in trajectory["text"] and "Profile" not in trajectory["text"].split("Steps (", 1)[1]


def test_session_history_shows_only_the_runs_a_run_continues(
    cookies: tuple[SqliteStore, Path, list[RunResult]],
) -> None:
    store, projections, (first, second, third) = cookies
    assert len(MemoryView.open(store, projections).sessions("cookies.test")) == 3
    (system,) = _prompts(store, second, "system")
    history = _item(system, "session_history")  # the same session: its first rep
    assert history is not None and 'final URL: "http://cookies.test/profile"' in history["text"]
    assert not [e for e in _prompts(store, third) if _item(e, "session_history")]  # another session and goal


def test_step_memories_only_for_elements_on_the_page(tmp_path: Path) -> None:
    """A REPEAT of "Accept all cookies" matches the page once the banner is gone (4 of its 5
    elements): the prompt leaves it out there, and keeps the AVOID of "Go", which is on it."""
    page = [f"{role}:{name}" for role, name in [*COOKIE_PAGES["/"], ("button", ACCEPT)]]
    with memtape.open(tmp_path) as mem, mem.start_run(goal='Click "Go"', start_url=START, session_id="s9") as run:
        run.record_step(
            step=1,
            action="click",
            target='button "Go"',
            ok=False,
            error="intercepts pointer events",
            args={"ref": "e1"},
            page_before={"url": START, "elements": page},
        )
        run.record_step(
            step=2,
            action="click",
            target=f'button "{ACCEPT}"',
            args={"ref": "e5"},
            page_before={"url": START, "elements": page},
        )
        run.record_lesson(f'Click "{ACCEPT}" first.', category="site_specific", scope_domain="cookies.test")
        run.finish(success=True)
    store = SqliteStore.open(tmp_path / "ledger.db")
    second = run_task(
        CookieSite(COOKIE_PAGES, COOKIE_LINKS),
        RecordingMemory(store, tmp_path / "projections.db"),
        ScriptedPolicy(),
        goal='Click "Go" now',
        start_url=START,
        session_id="s9",
    )
    shown = {e.step: (_item(e, "step_memories") or {}).get("text", "") for e in _prompts(store, second, "step")}
    pages = {
        e.step: e.data["env_before"]["elements"] for e in store.read(run_id=second.run_id, types=["step_recorded"])
    }
    store.close()
    assert f"button:{ACCEPT}" in pages[1] and f"button:{ACCEPT}" not in pages[2]

    # with the banner both targets are on the page; without it, the REPEAT of its button is left out
    def lines(step: int) -> list[str]:
        return [
            line.split("]", 1)[0].split(" [")[0] + line.split("]", 1)[1]
            for line in shown[step].splitlines()
            if line[:1].isdigit()
        ]

    assert lines(1) == ['1. AVOID: click: "Go"', f'2. REPEAT: click: "{ACCEPT}"']
    assert lines(2) == ['1. AVOID: click: "Go"']


class Insisting:
    """A policy that clicks the first element every time, and keeps the prompts it was given."""

    name = "insisting"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def decide(self, messages: Sequence[Message]) -> Decision:
        self.prompts.append(messages[-1].content)
        return Decision("click", {"ref": "e1"})


def test_the_warning_for_an_action_that_already_failed_is_a_recorded_prompt(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    policy = Insisting()
    r = run_task(
        CookieSite(COOKIE_PAGES, COOKIE_LINKS),
        RecordingMemory(store, tmp_path / "projections.db"),
        policy,
        goal='Click "Go"',
        start_url=START,
    )
    steps = [e for e in store.read(run_id=r.run_id, types=["context_built"]) if e.data["prompt"] == "step"]
    store.close()
    assert r.outcome.reason == "repeated_action" and r.outcome.policy_decisions == 5
    # every call's prompt is recorded, the warned ones with their warning: steps 2 and 3 ask twice
    assert [e.step for e in steps] == [1, 2, 2, 3, 3]
    assert [bool(_item(e, "repeated_failure")) for e in steps] == [False, False, True, False, True]
    assert policy.prompts == [
        P.render_step([BudgetItem(i["source"], i["priority"], i["text"]) for i in e.data["items"]]) for e in steps
    ]
    assert P.REPEATED_FAILURE in policy.prompts[2]


def test_a_learned_pattern_reaches_the_policy_as_far_as_its_section_shows_it() -> None:
    fields = ["Name", "Street", "City", "Postcode", "Country", "Phone", "E-mail", "Company"]
    steps = tuple({"command": "fill", "role": "textbox", "name": f, "value": "{" + f.lower() + "}"} for f in fields)
    pattern = Pattern(
        "pat_1",
        "shop.test",
        "Fill the address form",
        "form_fill",
        steps,
        2,
        0,
        1.0,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        ("ev1",),
    )
    whole = P.learned_patterns([pattern])

    def shown(item: BudgetItem) -> list[Any]:
        return list(read_prompts(P.system_instruction("g", (), [item]), "").patterns)

    (full,) = shown(whole)
    assert full.steps == steps
    # a budget that cuts the section in the middle of its steps (head and tail kept): the policy
    # gets the steps under the header, up to the first one cut, never the whole flow; a line that
    # runs into the cut's marker may be cut short anywhere ("  3. fill" of a longer line), so it
    # is not read even where it happens to be whole
    cuts = [truncate(whole, n) for n in range(1, whole.tokens)]
    partial = [c for c in cuts if P.shows(c.text, P.pattern_block(pattern, 2))]
    assert partial
    for cut in partial:
        (seen,) = shown(cut)
        k = len(seen.steps)
        assert 1 <= k < len(steps) and seen.steps == steps[:k]
        assert P.shows(cut.text, P.pattern_block(pattern, k))
        assert not P.shows(cut.text, P.pattern_block(pattern, k + 1)) or re.search(
            rf"\n  {k + 1}\. [^\n]*\n\[\.\.\. \d+ characters trimmed", cut.text
        )
    header_only = [
        c
        for c in cuts
        if P.shows(c.text, P.pattern_block(pattern, 0)) and not P.shows(c.text, P.pattern_block(pattern, 1))
    ]
    assert header_only and all(shown(c)[0].steps == () for c in header_only)


# ---- memory about another goal, or that no decision can act on, stays out ---------------------------

PORTAL_GOAL = 'Log in as "demo" with password "[REDACTED]", open "Settings" and click "Save settings"'


def _pattern(pattern_id: str, pattern_type: str, steps: list[tuple[str, str, str]]) -> Pattern:
    return Pattern(
        pattern_id,
        "portal.test",
        pattern_id,
        pattern_type,
        tuple({"command": c, "role": r, "name": n, "value": None} for c, r, n in steps),
        1,
        0,
        1.0,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        (f"ev_{pattern_id}",),
    )


LOGIN = _pattern(
    "login",
    "login_flow",
    [("fill", "textbox", "Username"), ("fill", "textbox", "Password"), ("click", "button", "Sign in")],
)
ARCHIVE = _pattern(
    "archive",
    "navigation",
    [("click", "link", "Archive"), ("click", "link", "Next page"), ("click", "link", "Local bakery wins award")],
)


def _fact(fact_type: str, key: str, value: str) -> Fact:
    at = "2026-01-01T00:00:00Z"
    return Fact(f"f_{key}", "portal.test", fact_type, key, value, 0.6, 1, at, None, at, at, False, (f"ev_{key}",))


def test_learned_patterns_only_those_the_goal_can_follow() -> None:
    assert for_goal([ARCHIVE, LOGIN], PORTAL_GOAL) == [LOGIN]  # it names the "Password" field
    assert for_goal([ARCHIVE, LOGIN], 'Open "Election results are in"') == []  # another task's path
    assert for_goal([ARCHIVE, LOGIN], 'Open "Archive" and find "Local bakery wins award"') == [ARCHIVE]
    assert goal_names(PORTAL_GOAL, "Password") and not goal_names(PORTAL_GOAL, "Sign in")
    assert not goal_names(PORTAL_GOAL, "") and not goal_names(PORTAL_GOAL, None)


def test_app_knowledge_only_the_facts_a_decision_can_act_on() -> None:
    facts = [
        _fact("pattern", "auth flow", 'fill "Username" → fill "Password" → click "Sign in"'),
        _fact("quirk", fill_fails_key("Display name"), "click the field, then type"),
        _fact("quirk", fill_fails_key("Settings"), "click the field, then type"),
        _fact("quirk", "shadow DOM", "uses shadow DOM for modals"),
        _fact("timing", "load time /article/election-results", "page load takes about 1 s"),
        _fact("timing", "after submit", "the results appear 5 s after submit"),
        _fact("quirk", "blocking overlay", 'button "Close" must be clicked first'),
    ]
    shown = prompt_facts(facts, PORTAL_GOAL, [], [LOGIN])
    # the login flow restates the auth flow; Display name is another task's field; the browser reaches
    # into shadow roots and waits for every page it opens; an imported timing and an overlay stay
    assert [f.key for f in shown] == [fill_fails_key("Settings"), "after submit", "blocking overlay"]
    assert [f.key for f in prompt_facts(facts, PORTAL_GOAL, ['Click "Close" first.'], [])][:2] == [
        "auth flow",
        fill_fails_key("Settings"),
    ]
    assert "blocking overlay" not in [f.key for f in prompt_facts(facts, PORTAL_GOAL, ['Click "Close" first.'], [])]


def test_a_trajectory_a_shown_learned_pattern_lists_whole_is_left_out(tmp_path: Path) -> None:
    run = RecordingMemory(SqliteStore.open(tmp_path / "ledger.db"), None).start_run(
        goal=PORTAL_GOAL, start_url="http://portal.test/login"
    )
    login = tuple(
        TrajectoryStep(c, {"value": "x"}, r, n, url="http://portal.test/login")
        for c, r, n in (
            ("fill", "textbox", "Username"),
            ("fill", "textbox", "Password"),
            ("click", "button", "Sign in"),
        )
    )
    trajectory = Trajectory(
        "t1", "portal.test", "Log in and open Profile", "http://portal.test", login, "", "", 0, 3, None, ("ev_t",)
    )
    match = TrajectoryRecall(trajectory, 0.52, 0.52, False)
    with_pattern = [i.source for i in site_sections(run, [], [], match, login, [], [LOGIN])]
    assert with_pattern == ["learned_patterns"]  # the same three steps once: as the pattern the policy follows
    assert [i.source for i in site_sections(run, [], [], match, login, [], [])] == ["reference_trajectory"]
    more = (*login, TrajectoryStep("click", {}, "link", "Settings"))
    assert [i.source for i in site_sections(run, [], [], match, more, [], [LOGIN])] == [
        "learned_patterns",
        "reference_trajectory",
    ]


def test_another_goals_path_is_not_in_the_prompt(cookies: tuple[SqliteStore, Path, list[RunResult]]) -> None:
    """The third run opens "Help": the path Go → Profile learned on the site is another task's."""
    store, projections, (first, second, third) = cookies
    learned = MemoryView.open(store, projections).patterns("cookies.test")
    assert learned and {p.pattern_type for p in learned} == {"navigation"}  # paths through "Go"
    assert _item(_prompts(store, second, "system")[0], "learned_patterns") is not None  # it clicks "Go" too
    assert not [e for e in _prompts(store, third) if _item(e, "learned_patterns")]


def test_the_scripted_policy_names_every_section_that_told_it() -> None:
    """A search's Enter: Tier 1 says so and the learned pattern pressed it; the decision names both,
    and the pattern alone is enough to change it (without memory the policy clicks the button)."""
    box, button = Element("e3", "combobox", "Search"), Element("e4", "button", "Search")
    search = replace(
        _pattern("search", "form_fill", [("fill", "combobox", "Search"), ("press", "combobox", "Search")]),
        steps=(
            {"command": "fill", "role": "combobox", "name": "Search", "value": "{search}"},
            {"command": "press", "role": "combobox", "name": "Search", "value": "Enter"},
        ),
    )
    page = Observation(
        url="http://search.test/", title="", elements=(box, button), text="", summary="", page_type="search"
    )

    def decide(**memory: Any) -> Decision:
        policy = ScriptedPolicy()
        goal = 'Search for "padel"'
        typed = policy.decide(asked(goal, page, **memory))
        assert (typed.command, typed.args) == ("fill", {"ref": "e3", "value": "padel"})
        return policy.decide(asked(goal, page, replies=[typed.reply()], **memory))

    listed = [P.learned_patterns([search])]
    both = decide(tier1=["Press Enter to submit searches."], sections=listed)
    assert both.command == "press" and "memory (tier1, learned_patterns)" in both.think
    assert names(both.think, {"source": "tier1"}) and names(both.think, {"source": "learned_patterns"})
    alone = decide(sections=listed)
    assert alone.command == "press" and names(alone.think, {"source": "learned_patterns"})
    assert decide().target == button  # no memory: the submit button


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.!", min_size=2, max_size=12)


@given(name=st.lists(_WORD, min_size=1, max_size=4).map(" ".join), other=st.lists(_WORD, max_size=4).map(" ".join))
@settings(max_examples=150, deadline=None)
def test_a_pattern_is_offered_to_every_goal_that_names_one_of_its_steps(name: str, other: str) -> None:
    pattern = _pattern("p", "navigation", [("click", "link", name), ("click", "link", "Next page")])
    named = bool(goal_words(name))  # a name of one-character words only names nothing
    assert for_goal([pattern], f'Open "{name}" and {other}') == ([pattern] if named else [])
    if goal_words(other).isdisjoint(goal_words(f"{name} Next page")):  # another task's words only
        assert for_goal([pattern], other) == []
