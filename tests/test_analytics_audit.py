"""Audit and explain against a hand-built ledger: a known sequence of events, a known answer per step."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memtape.analytics.audit import audit_run
from memtape.analytics.explain import explain_item
from memtape.analytics.forget_filter import FORGOTTEN_TEXT
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.errors import UnknownItem
from memtape.ledger.events import SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.view import MemoryView
from tests.analytics_builders import hand_ledger
from tests.cli_runner import run_cli


@pytest.fixture
def hand(memory_path: Path) -> tuple[SqliteStore, dict[int, str]]:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    ids = hand_ledger(store)
    yield store, ids
    store.close()


def _where(o: dict | None) -> tuple | None:
    return None if o is None else (o["run_id"], o["step"], o["seq"], o["type"])


def test_audit_answers_every_step(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    store, ids = hand
    a = audit_run(store, "r2")
    assert a["run"]["parent_run_id"] == "r1" and a["run"]["mode"] == "resume"
    assert a["outcome"]["completed_seq"] == 21
    assert [s["step"] for s in a["steps"]] == [0, 1, 2]
    s0, s1, s2 = a["steps"]

    # step 0: the system prompt (no action): memory as of that prompt
    assert s0["as_of_seq"] == 13 and s0["action"] is None
    assert s0["tier1_loaded"] == ["seed1"]
    assert [(l["lesson_id"], l["use_count"]) for l in s0["memory"]["tier1"]] == [("seed1", 1)]
    assert _where(s0["memory"]["tier1"][0]["taught_by"]) == (None, None, 1, "lesson_seeded")
    (p,) = s0["prompt"]
    assert (p["seq"], p["prompt"], p["budget"], p["total_tokens"]) == (13, "system", 100, 8)
    assert [_where(o) for o in p["items"][0]["origins"]] == [(None, None, 1, "lesson_seeded")]

    # step 1: memory just before its action (seq 17)
    assert s1["as_of_seq"] == 16
    mem = s1["memory"]
    assert [l["lesson_id"] for l in mem["tier1"]] == ["seed1"]
    (recall,) = mem["recalled"]
    assert (recall["kind"], recall["seq"], [l["lesson_id"] for l in recall["lessons"]]) == ("domain", 14, ["L1"])
    assert _where(recall["lessons"][0]["taught_by"]) == ("r1", 2, 6, "lesson_recorded")
    assert mem["trajectory"]["trajectory_id"] == "T1" and mem["trajectory"]["seq"] == 15
    assert _where(mem["trajectory"]["taught_by"]) == ("r1", None, 9, "trajectory_recorded")
    assert [(f["key"], f["value"], f["confidence"]) for f in mem["facts"]] == [("load", "3s", 0.6)]
    assert _where(mem["facts"][0]["taught_by"]) == ("r1", None, 7, "fact_observed")
    assert [(x["selector"], x["successes"]) for x in mem["selectors"]] == [("#buy", 1)]
    assert _where(mem["selectors"][0]["taught_by"]) == ("r1", 2, 8, "selector_succeeded")
    (p,) = s1["prompt"]
    assert [(i["source"], [_where(o) for o in i["origins"]]) for i in p["items"]] == [
        ("domain_recall", [("r1", 2, 6, "lesson_recorded")]),
        ("trajectory", [("r1", None, 9, "trajectory_recorded")]),
        ("knowledge", [("r1", None, 7, "fact_observed")]),
    ]
    assert [(i["source"], i["tokens"], [_where(o) for o in i["origins"]]) for i in p["trimmed"]] == [
        ("selectors", 12, [("r1", 2, 8, "selector_succeeded")])
    ]
    assert (s1["action"]["seq"], s1["action"]["command"], s1["action"]["ok"]) == (17, "click", True)

    # step 2: the fact was confirmed at seq 18 (0.6 + 0.2 * 0.4); the error recall names the seed
    assert s2["as_of_seq"] == 18
    assert [f["confidence"] for f in s2["memory"]["facts"]] == [pytest.approx(0.68)]
    (recall,) = s2["memory"]["recalled"]
    assert (recall["kind"], recall["command"], [l["lesson_id"] for l in recall["lessons"]]) == (
        "error",
        "fill",
        ["seed1"],
    )
    assert (s2["action"]["command"], s2["action"]["ok"], s2["action"]["error"]) == ("fill", False, "too many arguments")


def test_memory_per_step_equals_memoryview_as_of(hand: tuple[SqliteStore, dict[int, str]], memory_path: Path) -> None:
    store, _ = hand
    view = MemoryView.open(store, memory_path / "projections.db")
    for s in audit_run(store, "r2")["steps"]:
        at = view.as_of(s["as_of_seq"])
        assert [l["lesson_id"] for l in s["memory"]["tier1"]] == [l.lesson_id for l in at.tier1()]
        assert [(f["fact_id"], f["confidence"]) for f in s["memory"]["facts"]] == [
            (f.fact_id, round(f.confidence, 6)) for f in at.facts("x.test")
        ]
        assert [x["selector"] for x in s["memory"]["selectors"]] == [x.selector for x in at.selectors("x.test")]


def test_audit_of_one_step_and_unknowns(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    store, _ = hand
    (s,) = audit_run(store, "r2", step=2)["steps"]
    assert s["step"] == 2 and s["as_of_seq"] == 18
    with pytest.raises(UnknownItem, match="no step 7"):
        audit_run(store, "r2", step=7)
    with pytest.raises(UnknownItem, match="no run"):
        audit_run(store, "nope")


def test_forgotten_run_leaves_no_trace_in_audits(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    store, _ = hand
    store.append([event(SubjectForgotten(subject_kind="run", subject="r1"))])
    with pytest.raises(UnknownItem):
        audit_run(store, "r1")
    a = audit_run(store, "r2")
    text = orjson.dumps(a).decode()
    assert '"r1"' not in text
    s1 = a["steps"][1]
    assert s1["memory"]["trajectory"] is None  # it was taught by the forgotten run
    assert s1["memory"]["recalled"][0]["lessons"][0]["taught_by"]["seq"] == 6  # provenance kept, run masked


def test_forgotten_lesson_is_masked_in_prompts(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    store, _ = hand
    store.append([event(SubjectForgotten(subject_kind="lesson", subject="L1"))])
    s1 = audit_run(store, "r2", step=1)["steps"][0]
    assert s1["prompt"][0]["items"][0]["text"] == FORGOTTEN_TEXT and s1["prompt"][0]["items"][0]["origins"] == []
    assert s1["memory"]["recalled"][0]["lessons"] == []
    assert "Accept cookies" not in orjson.dumps(s1).decode()
    with pytest.raises(UnknownItem):
        explain_item(store, "L1")


def test_explain_each_kind_of_item(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    store, _ = hand
    seed = explain_item(store, "seed1")
    assert seed["kind"] == "lesson" and seed["status"].startswith("Tier 1")
    assert [(e["seq"], e["stage"]) for e in seed["life"]] == [
        (1, "seeded"),
        (4, "recalled"),
        (12, "in Tier 1"),
        (20, "recalled"),
    ]
    assert seed["recalled_in_runs"] == ["r1", "r2"] and seed["now"]["use_count"] == 2
    fact = explain_item(store, "load")
    assert fact["kind"] == "fact" and fact["status"] == "current"
    assert [(e["seq"], e["stage"], e["confidence"]) for e in fact["life"]] == [
        (7, "recorded", 0.6),
        (18, "confirmed", pytest.approx(0.68)),
    ]
    assert explain_item(store, fact["fact_ids"][0])["life"] == fact["life"]
    sel = explain_item(store, "#buy")
    assert sel["kind"] == "selector" and [(e["seq"], e["stage"], e["run_id"]) for e in sel["life"]] == [
        (8, "succeeded", "r1")
    ]
    traj = explain_item(store, "T1")
    assert traj["kind"] == "trajectory" and traj["recalled_in_runs"] == ["r2"]
    assert [(e["seq"], e["stage"]) for e in traj["life"]] == [(9, "recorded"), (15, "recalled")]
    with pytest.raises(UnknownItem):
        explain_item(store, "no-such-thing")


def test_explain_reads_now_from_the_intervals_with_the_folds_answer(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    """With projections.db, each item as it stands now is read by key from the intervals: the
    same answer as folding the whole log."""
    from memtape.projections.cache import materialize

    store, _ = hand
    path = Path(store.path).with_name("projections.db")
    reads: list[str] = []
    projection = materialize.IndexedMemory.projection
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            materialize.IndexedMemory,
            "projection",
            lambda self, name, *a: reads.append(name) or projection(self, name, *a),
        )
        for item in ("L1", "seed1", "load", "#buy", "T1"):
            assert explain_item(store, item, projections_path=path) == explain_item(store, item), item
    assert {"lessons", "knowledge", "selectors", "trajectories"} <= set(reads)


def test_audit_and_explain_commands(
    hand: tuple[SqliteStore, dict[int, str]], memory_path: Path, tmp_path: Path
) -> None:
    m = str(memory_path)
    res = run_cli("--memory-dir", m, "audit", "r2", "--json")
    assert res.code == 0, res.err
    assert [s["as_of_seq"] for s in orjson.loads(res.out)["steps"]] == [13, 16, 18]
    res = run_cli("--memory-dir", m, "audit", "r2", "--step", "1")
    assert res.code == 0 and "r1#2 seq 6 (lesson_recorded)" in res.out and "trimmed" in res.out
    out = tmp_path / "a.html"
    res = run_cli("--memory-dir", m, "audit", "r2", "--html", "--out", str(out))
    assert res.code == 0 and out.read_text().startswith("<!doctype html>") and "Step 1" in out.read_text()
    res = run_cli("--memory-dir", m, "audit", "zz")
    assert res.code == 1 and res.err == "error: no run 'zz' in the ledger\n"
    res = run_cli("--memory-dir", m, "explain", "seed1", "--json")
    assert res.code == 0 and orjson.loads(res.out)["kind"] == "lesson"
    res = run_cli("--memory-dir", m, "explain", "T1")
    assert res.code == 0 and "recalled in runs: r2" in res.out


def test_runs_lineage_from_the_hand_ledger(hand: tuple[SqliteStore, dict[int, str]]) -> None:
    from memtape.analytics.answers import analyse

    store, _ = hand
    rep = analyse("runs", store)
    assert rep.sections["lineage"].records() == [
        {
            "parent_run_id": "r1",
            "run_id": "r2",
            "mode": "resume",
            "session_id": None,
            "parent_session_id": None,
            "root_run_id": "r1",
            "depth": 1,
            "goal": "buy milk",
        }
    ]
    assert [(r["run_id"], r["status"], r["started_seq"]) for r in rep.sections["runs"].records()] == [
        ("r1", "completed", 2),
        ("r2", "completed", 11),
    ]


def test_audit_from_intervals_equals_audit_from_seq_1(
    hand: tuple[SqliteStore, dict[int, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading each step's memory by key from projections.db's intervals gives the same answer
    as folding from seq 1 (and the intervals really answered)."""
    from memtape.projections.cache import materialize

    reads: list[int] = []
    indexed_at = materialize.IndexedMemory.at
    monkeypatch.setattr(
        materialize.IndexedMemory, "at", lambda self, seq, *a: reads.append(seq) or indexed_at(self, seq, *a)
    )
    store, _ = hand
    runs = sorted({e.run_id for e in store.read() if e.run_id})
    assert len(runs) >= 2
    for run_id in runs:
        fast = audit_run(store, run_id)
        assert fast == audit_run(store, run_id, indexed=False), run_id
        for s in fast["steps"]:
            assert audit_run(store, run_id, s["step"]) == audit_run(store, run_id, s["step"], indexed=False)
    assert sorted(set(reads)) == sorted({s["as_of_seq"] for r in runs for s in audit_run(store, r)["steps"]})


def test_audit_and_explain_as_tables(
    hand: tuple[SqliteStore, dict[int, str]], memory_path: Path, tmp_path: Path
) -> None:
    """`--format table|json|csv|parquet` flattens the audit (steps, prompt items, memory) and a life."""
    import csv
    import io

    import pyarrow.parquet as pq

    m = str(memory_path)
    full = orjson.loads(run_cli("--memory-dir", m, "audit", "r2", "--json").out)
    tables = orjson.loads(run_cli("--memory-dir", m, "audit", "r2", "--format", "json").out)
    assert set(tables) == {"steps", "prompt_items", "memory"}
    assert [r["step"] for r in tables["steps"]] == [s["step"] for s in full["steps"]]
    assert [r["as_of_seq"] for r in tables["steps"]] == [13, 16, 18]
    kept = [(s["step"], i["source"], i["text"]) for s in full["steps"] for p in s["prompt"] for i in p["items"]]
    assert [(r["step"], r["source"], r["text"]) for r in tables["prompt_items"] if r["kept"]] == kept
    assert any(not r["kept"] for r in tables["prompt_items"])  # the trimmed items are rows too
    tier1 = [(s["step"], l["lesson_id"]) for s in full["steps"] for l in s["memory"]["tier1"]]
    assert [(r["step"], r["item"]) for r in tables["memory"] if r["kind"] == "tier1"] == tier1
    assert all(r["taught_by_seq"] for r in tables["memory"] if r["kind"] == "tier1")
    res = run_cli("--memory-dir", m, "audit", "r2", "--format", "csv", "--section", "memory")
    rows = list(csv.DictReader(io.StringIO(res.out)))
    assert res.code == 0 and len(rows) == len(tables["memory"]) and rows[0]["kind"] == "tier1"
    out = tmp_path / "steps.parquet"
    assert run_cli("--memory-dir", m, "audit", "r2", "--format", "parquet", "--out", str(out)).code == 0
    assert pq.read_table(out).num_rows == 3
    res = run_cli("--memory-dir", m, "audit", "r2", "--json", "--format", "csv")
    assert res.code == 2 and "choose one of" in res.err
    life = orjson.loads(run_cli("--memory-dir", m, "explain", "seed1", "--format", "json").out)
    assert set(life) == {"life", "now", "recalled_in_runs"} and life["now"][0]["lesson_id"] == "seed1"
    assert [r["seq"] for r in life["life"]] == [
        e["seq"] for e in orjson.loads(run_cli("--memory-dir", m, "explain", "seed1", "--json").out)["life"]
    ]
