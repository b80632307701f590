"""`memtape rebuild|state|runs|diff` end to end (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.projections_support import T0, fact, lesson, run_completed, run_started, session, trajectory


def _memory(memory_path: Path) -> str:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    w = MemoryWriter(store)
    w.open_for_run("r1", T0)
    w.append(
        [
            run_started("r1", domain="amazon.com", session_id="proj_123"),
            lesson(domain="google.com", fc="type"),
            lesson("cookie banner first", "amazon.com", fc=None, ep=None, scope="amazon.com", category="site_specific"),
            fact("shadow dom", "amazon.com"),
            session(1, "amazon.com"),
            trajectory("t1", "buy shoes", "amazon.com"),
            run_completed("r1", domain="amazon.com"),
            run_started("r2", domain="ebay.com"),
        ]
    )
    for d in ["bing.com", "yahoo.com", "reddit.com", "x.com"]:
        w.append([lesson(domain=d, fc="type")])  # not the Enter seed's (click, intercepts) key
    store.close()
    return str(memory_path)


def test_state_lessons_json_and_table(memory_path):
    mem = _memory(memory_path)
    res = run_cli("--memory-dir", mem, "state", "lessons", "--json")
    assert res.code == 0, res.err
    lessons = json.loads(res.out)
    assert {l["category"] for l in lessons} >= {"best_practice", "tool_fallback", "site_specific"}
    assert all("event_ids" in l and l["event_ids"] for l in lessons)
    res = run_cli("--memory-dir", mem, "state", "tier1")
    assert res.code == 0 and "tier1 at seq" in res.out and "intercepts" in res.out
    res = run_cli("--memory-dir", mem, "state", "lessons", "--domain", "www.amazon.com", "--json")
    assert [l["lesson"] for l in json.loads(res.out)] == ["cookie banner first"]


def test_state_as_of_seq_and_time(memory_path):
    mem = _memory(memory_path)
    early = json.loads(run_cli("--memory-dir", mem, "state", "lessons", "--as-of", "3", "--json").out)
    assert len(early) == 3 and all(l["source"] == "seed" for l in early)
    assert (
        json.loads(run_cli("--memory-dir", mem, "state", "lessons", "--as-of", "2025-01-01T00:00:00Z", "--json").out)
        == []
    )
    for kind in ("facts", "sessions", "selectors", "trajectories", "runs"):
        res = run_cli("--memory-dir", mem, "state", kind, "--json")
        assert res.code == 0, (kind, res.err)
    assert (
        json.loads(run_cli("--memory-dir", mem, "state", "facts", "--domain", "amazon.com", "--json").out)[0]["value"]
        == "shadow dom"
    )


def test_runs_filters(memory_path):
    mem = _memory(memory_path)
    runs = json.loads(run_cli("--memory-dir", mem, "runs", "--json").out)
    assert [r["run_id"] for r in runs] == ["r2", "r1"]
    assert [
        r["run_id"] for r in json.loads(run_cli("--memory-dir", mem, "runs", "--session-id", "proj_123", "--json").out)
    ] == ["r1"]
    assert [
        r["run_id"] for r in json.loads(run_cli("--memory-dir", mem, "runs", "--status", "running", "--json").out)
    ] == ["r2"]
    assert len(json.loads(run_cli("--memory-dir", mem, "runs", "--limit", "1", "--json").out)) == 1
    assert "r1" in run_cli("--memory-dir", mem, "runs", "--domain", "amazon.com").out


def test_diff_shows_the_promotion(memory_path):
    mem = _memory(memory_path)
    res = run_cli("--memory-dir", mem, "diff", "--from", "3", "--to", "100", "--json")
    assert res.code == 0, res.err
    changes = json.loads(res.out)
    kinds = {(c["change"], c["projection"]) for c in changes}
    assert ("promoted", "lessons") not in kinds  # recorded and promoted inside the window: gained as best_practice
    assert ("gained", "lessons") in kinds and ("gained", "facts") in kinds
    mid = json.loads(run_cli("--memory-dir", mem, "diff", "--from", "14", "--to", "100", "--json").out)
    assert any(c["change"] == "promoted" for c in mid)
    assert "memory changes" in run_cli("--memory-dir", mem, "diff", "--from", "14", "--to", "100").out


def test_rebuild_one_and_all(memory_path):
    mem = _memory(memory_path)
    res = run_cli("--memory-dir", mem, "rebuild", "--projection", "lessons")
    assert res.code == 0 and "lessons" in res.out and "runs" not in res.out
    res = run_cli("--memory-dir", mem, "rebuild")
    assert res.code == 0 and "short_term" in res.out
    bad = run_cli("--memory-dir", mem, "rebuild", "--projection", "nope")
    assert bad.code != 0


def test_bad_as_of_is_one_line_error(memory_path):
    mem = _memory(memory_path)
    res = run_cli("--memory-dir", mem, "state", "lessons", "--as-of", "yesterday")
    assert res.code == 1 and res.err.startswith("error: ") and len(res.err.strip().splitlines()) == 1


def test_append_goes_through_the_policy_writer(memory_path, tmp_path):
    mem = _memory(memory_path)
    src = tmp_path / "e.jsonl"
    src.write_text(
        json.dumps(
            {
                "type": "lesson_recorded",
                "lesson_id": "",
                "lesson": "again",
                "category": "error_recovery",
                "failed_command": "click",
                "error_pattern": "intercepts pointer",
                "domain": "q.com",
            }
        )
        + "\n"
    )
    res = run_cli("--memory-dir", mem, "append", str(src))
    assert res.code == 0, res.err
    assert "appended 2 events" in res.out
