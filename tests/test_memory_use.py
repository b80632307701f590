"""What memory costs the prompts and what of it the decisions used (analytics/memory_use.py), the same
in the library, in `memtape analytics memory-effect` and in the demo's table."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import memtape
from memtape.agent.browser import Element, Observation
from memtape.agent.policy import ScriptedPolicy
from memtape.analytics.answers import analyse
from memtape.analytics.memory_use import MemoryUse, memory_use, run_memory_use
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.events import ItemCredited
from tests.analytics_builders import names
from tests.cli_runner import run_cli
from tests.policy_support import asked

SHOP = "http://shop.example/"
T1 = 30  # tokens of the Tier 1 section, as the agent counted them


def _item(source: str, tokens: int, event_ids: list[str] | None = None) -> dict[str, Any]:
    return {"source": source, "text": f"({source})", "priority": 50, "tokens": tokens, "event_ids": event_ids or []}


def _run(mem: Any, think_first: str) -> str:
    """One run of the goal: a system prompt with Tier 1, two asked steps and a replayed one; `think_first`
    may name an item with `{tier1}` (the Tier 1 item's first event id)."""
    with mem.start_run(goal="Buy wool socks", start_url=SHOP, case_id="socks") as run:
        seed_ids = [e.id for e in mem.store.read(types=["lesson_seeded"])]  # written with the first run
        run.record_context(
            [_item("system", 200), _item("tier1", T1, seed_ids[:1])], step=0, prompt="system", counted_by="agent"
        )
        run.record_context(
            [_item("page_state", 900), _item("domain_tips", 40, seed_ids[1:2])], step=1, counted_by="agent"
        )
        run.record_step(1, "click", 'button "Accept"', SHOP, think=think_first.format(tier1=seed_ids[0]))
        run.record_context(
            [_item("page_state", 900), _item("session_history", 300, seed_ids[2:3])], step=2, counted_by="agent"
        )
        run.record_step(2, "click", 'link "Wool Socks"', SHOP, think="click 'Wool Socks' (goal step 1/1)")
        run.record_step(3, "finish", None, SHOP, decided_by="replay", think="replay: recorded trajectory complete")
        run.finish(success=True)
    return run.run_id


def _credited(mem: Any, run_id: str, step: int, sections: list[str]) -> None:
    """What `memtape credit` records: an item whose removal changed step `step`'s decision."""
    fields = {
        "item": f"lsn_{run_id[-6:]}",
        "kind": "lesson",
        "credited_run": run_id,
        "method": "exact",
        "shown": 2,
        "changed": 1,
        "changed_steps": [{"step": step, "sections": sections}],
    }
    mem.append([mem.event(ItemCredited, fields)])


def _ledger(tmp_path: Path) -> tuple[Any, list[str]]:
    """Two runs whose reasons name memory; credit says what memory changed: the cold run's step 1
    (its site tips), the warm run's step 2 (its session history), whatever the reasons name."""
    mem = memtape.open(tmp_path / "mem")
    cold = _run(mem, "memory (domain_tips): click button 'Accept' first on this site")
    warm = _run(mem, "the tip {tier1} says so")  # names the Tier 1 item by its event id
    _credited(mem, cold, 1, ["domain_tips"])
    _credited(mem, warm, 2, ["session_history"])
    return mem, [cold, warm]


def test_memory_tokens_by_source_what_was_used_and_which_decisions(tmp_path: Path) -> None:
    mem, (cold, warm) = _ledger(tmp_path)
    use = memory_use(mem.store, [cold])
    # the page and the agent's own instruction name no event: not memory; Tier 1 is read by both calls
    assert use.by_source == {"tier1": 2 * T1, "domain_tips": 40, "session_history": 300}
    assert use.used_by_source == {"domain_tips": 40}  # step 1's site tips changed its decision
    assert (use.decisions, use.decisions_using_memory) == (3, 2)  # step 1 changed by memory, step 3 replayed
    assert use.used_share == 40 / (2 * T1 + 340) and use.credited_runs == 1
    both = memory_use(mem.store, [cold, warm])
    # the warm run's step 1 names Tier 1's event, but only its step 2 changed without memory
    assert both.used_by_source == {"domain_tips": 40, "session_history": 300}
    assert both.tokens == 2 * use.tokens and both.decisions_using_memory == 4 and both.credited_runs == 2
    mem.close()


def test_a_run_never_credited_uses_memory_only_where_it_replayed(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        run_id = _run(mem, "memory (domain_tips): click button 'Accept' first on this site")
        use = memory_use(mem.store, [run_id])
        assert use.used_by_source == {} and (use.decisions_using_memory, use.credited_runs) == (1, 0)


def test_memory_effect_gives_the_same_figures(tmp_path: Path) -> None:
    mem, (cold, warm) = _ledger(tmp_path)
    expected = {cond: memory_use(mem.store, [rid]) for cond, rid in (("cold", cold), ("warm", warm))}
    report = analyse("memory-effect", mem.store)
    by_source = {
        (r["condition"], r["source"]): (r["tokens"], r["used_tokens"])
        for r in report.sections["memory_by_source"].records()
    }
    assert by_source == {
        (cond, s): (t, use.used_by_source.get(s, 0)) for cond, use in expected.items() for s, t in use.by_source.items()
    }
    decisions = {r["condition"]: r for r in report.sections["memory_decisions"].records()}
    for cond, use in expected.items():
        row = decisions[cond]
        assert (row["decisions"], row["replayed"], row["decisions_using_memory"]) == (
            use.decisions,
            1,
            use.decisions_using_memory,
        )
        assert (row["memory_tokens"], row["used_memory_tokens"]) == (use.tokens, use.used_tokens)
    mem.close()
    path = str(tmp_path / "mem")
    done = run_cli(
        "--memory-dir", path, "analytics", "memory-effect", "--section", "memory_by_source", "--format", "json"
    )
    assert done.code == 0, done.err
    rows = json.loads(done.out)
    assert {(r["condition"], r["source"], r["tokens"]) for r in rows} == {
        (c, s, t) for (c, s), (t, _) in by_source.items()
    }
    table = run_cli("--memory-dir", path, "analytics", "memory-effect", "--section", "memory_decisions")
    assert table.code == 0 and re.search(r"│ cold\s*│\s*3 │\s*1 │\s*2 │", table.out), (
        table.out
    )  # decisions, replayed, using


def test_an_empty_ledger_has_no_memory_figures(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        assert memory_use(mem.store, []) == MemoryUse()
        report = analyse("memory-effect", mem.store)
        assert report.sections["memory_by_source"].records() == []
        assert report.sections["memory_decisions"].records() == []


def test_a_reason_names_an_item_by_its_source_or_an_event_id() -> None:  # the tests' own reading of reasons
    tips = {"source": "domain_tips", "event_ids": ["ev_1"]}
    assert names("memory (domain_tips): click 'Accept' first", tips)
    assert names("as ev_1 says", tips)
    assert not names("memory (domain_tips_old): no", tips) and not names("my_domain_tips", tips)
    assert not names("click 'Accept' first", tips)


def _observation(*elements: Element) -> Observation:
    return Observation(url=SHOP, title="Shop", elements=elements, text="", summary="", page_type="content")


def test_the_scripted_policy_names_the_section_it_followed() -> None:
    accept, socks = Element("e1", "button", "Accept all cookies"), Element("e2", "link", "Wool Socks")
    goal = 'Open "Wool Socks"'
    decision = ScriptedPolicy().decide(
        asked(goal, _observation(socks, accept), domain_tips=['Click "Accept all cookies" first on this site.'])
    )
    assert decision.args == {"ref": "e1"} and names(decision.think, {"source": "domain_tips"})
    box = Element("e3", "combobox", "Search")
    policy = ScriptedPolicy()
    typed = policy.decide(asked('Search for "padel"', _observation(box)))
    decision = policy.decide(
        asked(
            'Search for "padel"', _observation(box), tier1=["Press Enter to submit searches."], replies=[typed.reply()]
        )
    )
    assert decision.command == "press" and names(decision.think, {"source": "tier1"})
    without = ScriptedPolicy().decide(asked(goal, _observation(socks, accept)))
    assert without.args == {"ref": "e2"} and "memory" not in without.think  # nothing read from memory, nothing named


_SOURCES = st.sampled_from(["page_state", "tier1", "domain_tips", "session_history", "app_knowledge"])


@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),
            st.lists(st.tuples(_SOURCES, st.integers(0, 500), st.booleans()), max_size=4),
            st.sampled_from(["policy", "replay", "approval", "backtrack"]),
            st.text(max_size=40),
        ),
        max_size=8,
    )
)
@settings(max_examples=80, deadline=None)
def test_what_was_used_never_exceeds_what_was_read(
    steps: list[tuple[int, list[tuple[str, int, bool]], str, str]],
) -> None:
    events: list[RecordedEvent] = []
    for n, (step, items, decided_by, reason) in enumerate(steps):
        data = {
            "prompt": "step",
            "items": [{"source": s, "tokens": t, "event_ids": ["e"] if mem else []} for s, t, mem in items],
        }
        events.append(
            RecordedEvent(2 * n + 1, f"c{n}", "run-r", n, "context_built", 1, "", "", "r", step, None, data, "", "", "")
        )
        events.append(
            RecordedEvent(
                2 * n + 2,
                f"s{n}",
                "run-r",
                n,
                "step_recorded",
                1,
                "",
                "",
                "r",
                step,
                None,
                {"decided_by": decided_by, "think": reason},
                "",
                "",
                "",
            )
        )
    use = run_memory_use(events)
    assert use.used_tokens <= use.tokens and 0 <= use.decisions_using_memory <= use.decisions
    assert set(use.used_by_source) <= set(use.by_source)
    assert use.tokens == sum(t for _, items, _, _ in steps for _, t, mem in items if mem)
