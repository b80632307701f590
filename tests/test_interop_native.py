"""Memory the agent wrote itself (through the policy writer) exports to every seed format,
and export -> import -> export gives the same files back."""

from __future__ import annotations

from pathlib import Path

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    Action,
    ElementRef,
    EnvState,
    ErrorRecall,
    FactObserved,
    LessonRecorded,
    RunCompleted,
    RunProgress,
    RunStarted,
    SelectorFailed,
    SelectorSucceeded,
    SessionRecorded,
    StepGraded,
    StepRecorded,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.interop.importers import import_source
from memtape.projections.writer import MemoryWriter
from tests.interop_support import export_of, new_store, norm_agent_memory, norm_memory_json, norm_trayn

SHOP = "www.shop.test"
PAGE = EnvState(
    url="http://www.shop.test/lamps",
    title="Lamps",
    page_type="list",
    elements=["button:Buy", "link:Home", "textbox:Search"],
)


def _native_ledger(root: Path):  # type: ignore[no-untyped-def]
    store = new_store(root)
    writer = MemoryWriter(store)
    writer.open_for_run("run_a", "2026-01-01T00:00:00Z")
    lid = lesson_id_for("fill", "not an input", None, "If fill fails on a div, click then type.")
    lesson = dict(
        lesson_id=lid,
        lesson="If fill fails on a div, click then type.",
        category="error_recovery",
        failed_command="fill",
        error_pattern="not an input",
    )
    writer.append(
        [
            NewEvent(
                RunStarted(goal="buy a desk lamp", start_url="http://www.shop.test/"), run_id="run_a", domain=SHOP
            ),
            NewEvent(
                StepRecorded(
                    env_before=PAGE,
                    env_after=PAGE,
                    internal_state="find the buy button",
                    think="it is a list",
                    action=Action(command="click", args={"ref": "e3"}),
                    target=ElementRef(role="button", name="Buy"),
                    target_text="Buy",
                    ok=True,
                ),
                run_id="run_a",
                step=0,
                domain=SHOP,
            ),
            NewEvent(
                StepRecorded(
                    env_before=PAGE,
                    env_after=PAGE,
                    action=Action(command="fill", args={"ref": "e9", "value": "x"}),
                    target_text="Search",
                    ok=False,
                    error="not an input",
                ),
                run_id="run_a",
                step=1,
                domain=SHOP,
            ),
            NewEvent(StepGraded(outcome="success", reason="opened the cart"), run_id="run_a", step=0, domain=SHOP),
            NewEvent(
                StepGraded(
                    outcome="failure",
                    reason="wrong box",
                    correction="click, then type",
                    task_incomplete="no lamp bought",
                ),
                run_id="run_a",
                step=1,
                domain=SHOP,
            ),
            NewEvent(RunProgress(turn=3, current_url="http://www.shop.test/cart"), run_id="run_a", domain=SHOP),
            NewEvent(LessonRecorded(**lesson), run_id="run_a", step=1, domain=SHOP),
            NewEvent(LessonRecorded(**lesson), domain="www.other.test"),
            NewEvent(
                ErrorRecall(
                    command="fill",
                    error_snippet="not an input",
                    matched=1,
                    lessons=[lesson["lesson"]],
                    lesson_ids=[lid],
                ),
                run_id="run_a",
                domain=SHOP,
            ),
            NewEvent(FactObserved(fact_type="timing", key="cart", value="cart loads in 2s"), domain=SHOP),
            NewEvent(FactObserved(fact_type="timing", key="cart", value="cart loads in 2s"), domain=SHOP),
            NewEvent(FactObserved(fact_type="timing", key="cart", value="cart loads in 4s"), domain=SHOP),
            NewEvent(SelectorSucceeded(role="button", name="Buy", selector="@e3"), domain=SHOP),
            NewEvent(SelectorSucceeded(role="button", name="Buy", selector="#buy"), domain=SHOP),
            NewEvent(SelectorSucceeded(role="button", name="Buy", selector="#buy"), domain=SHOP),
            NewEvent(SelectorFailed(role="button", name="Buy", selector="button.buy", error="timeout"), domain=SHOP),
            NewEvent(
                TrajectoryRecorded(
                    trajectory_id="traj_run_a",
                    goal="buy a desk lamp",
                    origin="http://www.shop.test",
                    steps=[
                        TrajectoryStep(
                            command="click",
                            args={"ref": "e3"},
                            role="button",
                            name="Buy",
                            selector="#buy",
                            url="http://www.shop.test/lamps",
                            verified=True,
                            effect="url changed",
                        )
                    ],
                    duration_ms=1234.5,
                    turns=3,
                ),
                run_id="run_a",
                domain=SHOP,
            ),
            NewEvent(
                SessionRecorded(
                    session_id="s1",
                    goal="buy a desk lamp",
                    outcome="bought",
                    success=True,
                    final_url="http://www.shop.test/done",
                    timestamp="2026-01-01T00:01:00.000Z",
                    turns_used=3,
                    duration_ms=1234.5,
                ),
                run_id="run_a",
                domain=SHOP,
            ),
            NewEvent(
                RunCompleted(success=True, summary="bought", final_url="http://www.shop.test/done", turns=3),
                run_id="run_a",
                domain=SHOP,
            ),
            NewEvent(RunStarted(goal="look around", session_id="s1", parent_run_id="run_a"), run_id="run_b"),
        ]
    )
    return store


def test_native_memory_exports_and_comes_back(tmp_path: Path) -> None:
    store = _native_ledger(tmp_path / "native")
    formats = {
        "agent-memory": ("am", norm_agent_memory),
        "memory-json": ("m.json", norm_memory_json),
        "json": ("t.json", norm_trayn),
    }
    for fmt, (name, norm) in formats.items():
        first = export_of(store, fmt, tmp_path / f"first-{name}")
        again = new_store(tmp_path / f"ledger-{name}")
        import_source(again, first)
        second = export_of(again, fmt, tmp_path / f"second-{name}")
        assert norm(second) == norm(first), fmt
        if fmt != "agent-memory":
            assert second.read_bytes() == first.read_bytes()
    am = norm_agent_memory(tmp_path / "first-am")
    shop = am["domains"][SHOP]
    # the contradicted fact was halved by the policy, the new one added; both are current
    assert sorted((f["value"], round(f["confidence"], 3)) for f in shop["facts"]) == [
        ("cart loads in 2s", 0.34),
        ("cart loads in 4s", 0.6),
    ]
    # one entry per element: its @ref, its best stable selector, every success
    assert shop["selectors"]['button "Buy"']["successCount"] == 3
    assert shop["selectors"]['button "Buy"']["stableSelector"] == "#buy"
    assert am["runs"]["run_a"]["currentUrl"] == "http://www.shop.test/cart"
    assert am["runs"]["run_b"]["domain"] == "" and am["runs"]["run_b"]["status"] == "running"
    lessons = norm_memory_json(tmp_path / "first-m.json")
    learned = next(les for les in lessons if les["failed_command"] == "fill" and les["source"] == "learned")
    assert learned["use_count"] == 3 and learned["triggered_domains"] == [SHOP, "www.other.test"]
    assert {les["source"] for les in lessons} == {"seed", "learned"}
    trayn = norm_trayn(tmp_path / "first-t.json")
    assert [(e["action"], e["outcome"]) for e in trayn] == [("click('e3')", "success"), ("fill('e9', 'x')", "failure")]
    assert trayn[0]["think"] == "it is a list" and trayn[1]["taskIncomplete"] == "no lamp bought"
    prompt = export_of(store, "prompt", tmp_path / "p.txt").read_text()
    assert "1. REPEAT: [www.shop.test/lamps] click: 'Buy'\n   This worked: opened the cart\n" in prompt
    assert (
        "2. AVOID: [www.shop.test/lamps] fill: 'Search'\n   This failed: wrong box\n   Do this instead: click, then type\n"
        in prompt
    )
    assert "100%" not in prompt and "''" not in prompt


def test_selectors_json_round_trip_keeps_failures_and_zero_success_entries(tmp_path: Path) -> None:
    store = _native_ledger(tmp_path / "native")
    MemoryWriter(store).append(
        [
            NewEvent(SelectorFailed(role="link", name="Never", selector="#never", error="timeout"), domain=SHOP),
            NewEvent(SelectorFailed(role="link", name="Never", selector="#never", error="timeout"), domain=SHOP),
        ]
    )
    first = export_of(store, "agent-memory", tmp_path / "first")
    shop = norm_agent_memory(first)["domains"][SHOP]["selectors"]
    assert shop['button "Buy"']["successCount"] == 3 and shop['button "Buy"']["failureCount"] == 1
    assert shop['link "Never"']["successCount"] == 0 and shop['link "Never"']["failureCount"] == 2
    again = new_store(tmp_path / "again")
    import_source(again, first)
    assert norm_agent_memory(export_of(again, "agent-memory", tmp_path / "second")) == norm_agent_memory(first)
    from memtape.projections.view import MemoryView

    entries = {(e.name, e.selector): (e.successes, e.failures) for e in MemoryView.open(again).selectors(SHOP)}
    assert entries[("Never", "#never")] == (0, 2) and sum(f for _, f in entries.values()) == 3


def test_known_selectors_lists_only_selectors_that_succeeded(tmp_path: Path) -> None:
    from memtape.projections.recording.memory import RecordingMemory

    store = _native_ledger(tmp_path / "native")
    MemoryWriter(store).append(
        [NewEvent(SelectorFailed(role="link", name="Never", selector="#never", error="timeout"), domain=SHOP)]
    )
    shown = RecordingMemory(store).start_run(goal="buy a lamp", start_url="http://www.shop.test/").selectors(SHOP)
    assert shown and all(s.successes > 0 for s in shown)
    assert "#never" not in {s.selector for s in shown} and "button.buy" not in {s.selector for s in shown}


def test_memory_events_export_per_run_and_import_back(tmp_path: Path) -> None:
    import orjson

    store = _native_ledger(tmp_path / "native")
    out = export_of(store, "memory-events", tmp_path / "events")
    files = sorted(out.rglob("memory_events.jsonl"))
    assert [f.parent.name for f in files] == ["run_a"]
    lines = [orjson.loads(x) for x in files[0].read_bytes().splitlines()]
    assert [x["event"] for x in lines] == ["lesson_recorded", "error_recall"]
    assert lines[0]["failed_command"] == "fill" and lines[0]["error_pattern"] == "not an input"
    assert lines[1] == {
        **lines[1],
        "command": "fill",
        "matched": 1,
        "lessons": ["If fill fails on a div, click then type."],
    }
    again = new_store(tmp_path / "again")
    result = import_source(again, out)
    assert result.counts["lesson_recorded"] == 1 and result.counts["error_recall"] == 1
    assert {e.run_id for e in again.read(types=["error_recall"])} == {"run_a"}
