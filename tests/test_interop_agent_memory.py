"""Seed 000's `.agent-memory` folder from memory the agent wrote: each selector keeps its own
counts, runs/ holds a suite summary per finished run, hints.json the feedback the folder supports,
and export -> import into a fresh memory -> export is byte-identical."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.api import Memory
from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.projections.interop.importers import import_source
from memtape.projections.interop.sources import SourceError
from memtape.projections.view import MemoryView
from tests.interop_support import export_of, files_of, memory_at

SITE = "shop.test"


def _round_trip(store: SqliteStore, tmp: Path) -> tuple[dict[str, bytes], dict[str, bytes], SqliteStore]:
    first = export_of(store, "agent-memory", tmp / "first")
    again, _clock = memory_at(tmp / "again", start="2030-01-01T00:00:00Z")
    import_source(again.store, first)
    return files_of(first), files_of(export_of(again.store, "agent-memory", tmp / "second")), again.store


def _selector_counts(store: SqliteStore) -> dict[str, tuple[int, int]]:
    return {e.selector: (e.successes, e.failures) for e in MemoryView.open(store).selectors(SITE)}


def test_each_selector_keeps_its_own_counts(tmp_path: Path) -> None:
    mem, _clock = memory_at(tmp_path / "a")
    with mem.start_run(goal="send the form", start_url=f"https://{SITE}/", case_id="form-1") as run:
        for selector, ok in (("#s1", True), ("#s1", True), ("#s2", True), ("#s2", False), ("#s2", False)):
            run.selector_result('button "Send"', selector, ok, error=None if ok else "timeout")
        run.finish(success=True, outcome="sent", duration_ms=1500)
    first, second, again = _round_trip(mem.store, tmp_path)
    assert second == first
    entry = orjson.loads(first[f"domains/{SITE}/selectors.json"])["entries"]['button "Send"']
    assert (entry["stableSelector"], entry["successCount"], entry["failureCount"]) == ("#s1", 3, 2)
    assert {k: (v["successCount"], v.get("failureCount", 0)) for k, v in entry["selectors"].items()} == {
        "#s1": (2, 0),
        "#s2": (1, 2),
    }
    # the imported memory credits each selector with its own uses, not the best one with all
    assert _selector_counts(again) == _selector_counts(mem.store) == {"#s1": (2, 0), "#s2": (1, 2)}
    run_id = orjson.loads(first[next(k for k in first if k.startswith("agent-runs/"))])["runId"]
    summary = orjson.loads(first[f"runs/{run_id}.json"])
    assert summary == {
        "id": run_id,
        "model": "external",
        "timestamp": summary["timestamp"],
        "total": 1,
        "passed": 1,
        "failed": 0,
        "passRate": 1,
        "avgTurns": 0,
        "avgDurationMs": 1500,
        "totalDurationMs": 1500,
        "tests": [{"id": "form-1", "name": "send the form", "verified": True, "turnsUsed": 0, "durationMs": 1500}],
    }
    # #s2 failed 2 of 3 times: the hint seed 000's analyzer gives for a failing action
    hints = orjson.loads(first["hints.json"])
    assert hints["hints"] == (
        'FEEDBACK FROM PREVIOUS RUNS:\n- HIGH-FAILURE SELECTORS: button "Send" on "#s2" fails '
        "67% of the time (2/3). Try alternative approaches."
    )


def test_seed_000s_own_files_still_import(tmp_path: Path) -> None:
    """A selectors.json entry without `selectors` (seed 000's) and a suite of several tests (seed
    000's runs/) import: the entry by its total, the suite checked and counted as not kept."""
    root = tmp_path / ".agent-memory"
    (root / "domains" / SITE).mkdir(parents=True)
    (root / "runs").mkdir()
    (root / "domains" / SITE / "selectors.json").write_bytes(
        orjson.dumps(
            {
                "entries": {
                    'button "Go"': {
                        "element": 'button "Go"',
                        "stableSelector": "#go",
                        "successCount": 2,
                        "lastUsed": "2026-03-10T10:00:00.000Z",
                    }
                },
                "updatedAt": "2026-03-10T10:00:00.000Z",
            }
        )
    )
    (root / "runs" / "run_1710543210000_ab12.json").write_bytes(
        orjson.dumps(
            {
                "id": "run_1710543210000_ab12",
                "model": "gpt-4o",
                "timestamp": "2026-03-10T10:00:00.000Z",
                "total": 2,
                "passed": 1,
                "failed": 1,
                "passRate": 0.5,
                "avgTurns": 7,
                "avgDurationMs": 900.5,
                "totalDurationMs": 1801,
                "tests": [
                    {"id": "a", "name": "A", "verified": True, "turnsUsed": 5, "durationMs": 800},
                    {"id": "b", "name": "B", "verified": False, "turnsUsed": 9, "durationMs": 1001},
                ],
            }
        )
    )
    (root / "hints.json").write_bytes(
        orjson.dumps(
            {"hints": "FEEDBACK FROM PREVIOUS RUNS:\n- STUCK LOOPS DETECTED", "updatedAt": "2026-03-10T10:00:00.000Z"}
        )
    )
    mem, _clock = memory_at(tmp_path / "a")
    result = import_source(mem.store, root)
    assert (result.counts["selectors"], result.counts["suites_not_kept"], result.counts["derived_files"]) == (1, 1, 1)
    assert _selector_counts(mem.store) == {"#go": (2, 0)}


@pytest.mark.parametrize(
    ("rel", "obj", "expected"),
    [
        (
            f"domains/{SITE}/selectors.json",
            {
                "entries": {
                    'button "Go"': {
                        "element": 'button "Go"',
                        "stableSelector": "#go",
                        "successCount": 3,
                        "lastUsed": "2026-03-10T10:00:00Z",
                        "selectors": {"#go": {"successCount": 2, "lastUsed": "2026-03-10T10:00:00Z"}},
                    }
                }
            },
            "entries['button \"Go\"']: selectors: their counts do not add up",
        ),
        (
            "runs/run_x.json",
            {
                "id": "run_x",
                "timestamp": "2026-03-10T10:00:00Z",
                "total": 2,
                "passed": 1,
                "failed": 0,
                "passRate": 0.5,
                "avgTurns": 1,
                "avgDurationMs": 1,
                "totalDurationMs": 2,
                "tests": [],
            },
            "total, passed and failed do not match tests",
        ),
        ("hints.json", {"hints": 3, "updatedAt": "2026-03-10T10:00:00Z"}, "hints.json: hints: "),
    ],
)
def test_bad_new_files_are_refused(tmp_path: Path, rel: str, obj: Any, expected: str) -> None:
    root = tmp_path / ".agent-memory"
    (root / "domains").mkdir(parents=True)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(orjson.dumps(obj))
    mem, _clock = memory_at(tmp_path / "a")
    with pytest.raises(SourceError) as info:
        import_source(mem.store, root)
    assert expected in str(info.value) and str(info.value).startswith(rel), str(info.value)
    assert mem.store.head() == 0


# ---- generated runs ----------------------------------------------------------------------

ELEMENTS = ('button "Buy"', 'textbox "Search"', "link")
SELECTORS = ("#buy", "@e3", "[data-testid='q']", "@e9")
step = st.one_of(
    st.tuples(st.just("selector"), st.sampled_from(ELEMENTS), st.sampled_from(SELECTORS), st.booleans()),
    st.tuples(
        st.just("fact"),
        st.sampled_from(["timing", "quirk"]),
        st.sampled_from(["cart", "modal"]),
        st.sampled_from(["2s", "4s", "shadow DOM"]),
    ),
    st.tuples(st.just("step"), st.sampled_from(["click", "type", "press"]), st.sampled_from(ELEMENTS), st.booleans()),
)
runs = st.lists(
    st.tuples(
        st.sampled_from(["buy a lamp", "search for socks"]),
        st.lists(step, max_size=6),
        st.booleans(),
        st.sampled_from([0, 1, 40]),
        st.none() | st.sampled_from(["c1", "c2"]),
    ),
    min_size=1,
    max_size=4,
)


def _run(
    mem: Memory, clock: SteppingClock, goal: str, plan: list[Any], success: bool, gap: int, case_id: str | None
) -> None:
    clock.advance(timedelta(days=gap))
    with mem.start_run(goal=goal, start_url=f"https://{SITE}/", case_id=case_id) as run:
        n = 0
        for kind, a, b, c in plan:
            n += 1
            if kind == "selector":
                run.selector_result(a, b, c, step=n, error=None if c else "timeout")
            elif kind == "fact":
                run.observe_fact(a, b, f"{b} takes {c}" if a == "timing" else c, step=n)
            else:
                run.record_step(
                    step=n,
                    action=a,
                    target=b if b != "link" else None,
                    ok=c,
                    error=None if c else "Timeout 5000ms exceeded",
                    selector="#buy" if b != "link" else None,
                    url_after=f"https://{SITE}/{n}",
                    duration_ms=12.5,
                )
        run.finish(success=success, outcome="done" if success else "the cart never loaded", duration_ms=1000.0 + n)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(runs)
def test_generated_memory_round_trips_byte_for_byte(tmp_path_factory: pytest.TempPathFactory, plan: list[Any]) -> None:
    tmp = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    mem, clock = memory_at(tmp / "a")
    for goal, run_steps, success, gap, case_id in plan:
        _run(mem, clock, goal, run_steps, success, gap, case_id)
    first, second, again = _round_trip(mem.store, tmp)
    assert second == first
    assert sum(k.startswith("runs/") for k in first) == len(plan)
    if any(kind == "selector" for _g, steps_, *_ in plan for kind, *_x in steps_):
        assert _selector_counts(again) == _selector_counts(mem.store)
