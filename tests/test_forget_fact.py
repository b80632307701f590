"""`memtape forget --fact F`: one fact of a domain goes from every projection, projections.db's
bytes, every export format, the report, the audit, credit and explain, while the domain's other
fact stays; an unknown fact id is refused with nothing written unless --force."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memtape.agent.records import record_prompt
from memtape.analytics.explain import credit_of
from memtape.ledger.envelope import event
from memtape.ledger.errors import LedgerError, UnknownItem
from memtape.ledger.events import ItemCredited
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import BudgetItem
from memtape.projections.forgetting import forget
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.security_support import produce_outputs, scan

GONE = "wombatgate"  # only the forgotten fact says it
KEPT = "otterslide"  # only the fact that stays says it


def build_memory(memory_dir: Path) -> tuple[str, str]:
    """Two runs on shop.test: the first observes both facts, the second confirms the one to
    forget and is shown it in a prompt; that fact is also credited. Returns (gone id, kept id)."""
    store = SqliteStore.open(memory_dir / "ledger.db")
    mem = RecordingMemory(store, memory_dir / "projections.db")
    first = mem.start_run(goal="Buy a lamp", start_url="https://shop.test/", run_id="run_first")
    first.observe_fact("quirk", "Wombatgate banner", "close the wombatgate banner before checkout")
    first.observe_fact("timing", "checkout", "the otterslide checkout takes 3 s to appear")
    first.finish(success=True, outcome="lamp bought")
    second = mem.start_run(goal="Buy a chair", start_url="https://shop.test/", run_id="run_second")
    second.observe_fact("quirk", "Wombatgate banner", "close the wombatgate banner before checkout")
    observed = [ev for ev in store.read(types=["fact_observed"]) if GONE in ev.payload_json]
    item = BudgetItem(
        source="app_knowledge",
        priority=60,
        text="- quirk: Wombatgate banner: close the wombatgate banner before checkout",
        content_type="text",
        event_ids=tuple(ev.id for ev in observed),
    )
    record_prompt(second, "step", 4000, [item], [], step=1, domain="shop.test")
    second.finish(success=True, outcome="chair bought")
    facts = {f.key: f.fact_id for f in MemoryView.open(store, memory_dir / "projections.db").facts("shop.test")}
    gone, kept = facts["Wombatgate banner"], facts["checkout"]
    MemoryWriter(store).append(
        [
            event(
                ItemCredited(
                    item=gone,
                    kind="fact",
                    text="quirk: Wombatgate banner: close the wombatgate banner before checkout",
                    credited_run="run_second",
                    method="exact",
                    shown=1,
                    changed=1,
                    turns_saved=2,
                ),
                domain="shop.test",
            )
        ]
    )
    MemoryView.open(store, memory_dir / "projections.db")
    store.close()
    return gone, kept


@pytest.fixture
def memory(tmp_path: Path) -> tuple[Path, str, str]:
    mem_dir = tmp_path / "memory"
    mem_dir.mkdir(mode=0o700)
    gone, kept = build_memory(mem_dir)
    return mem_dir, gone, kept


def _facts(mem_dir: Path) -> dict[str, str]:
    r = run_cli("--memory-dir", str(mem_dir), "state", "facts", "--json")
    assert r.code == 0, r.err
    return {row["fact_id"]: row["value"] for row in orjson.loads(r.out)}


def _events(mem_dir: Path) -> int:
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        return store.head()


def test_forget_one_fact_keeps_the_other_and_leaves_no_bytes(tmp_path: Path, memory: tuple[Path, str, str]) -> None:
    mem_dir, gone, kept = memory
    assert set(_facts(mem_dir)) == {gone, kept}
    table = run_cli("--memory-dir", str(mem_dir), "state", "facts")  # where a user finds the id
    assert table.code == 0 and gone in table.out and kept in table.out
    produce_outputs(mem_dir, tmp_path / "before")
    # the test can fail: the fact is everywhere it must vanish from
    assert scan(mem_dir / "projections.db", [GONE]) and scan(mem_dir / MIRROR_FILE, [GONE])
    assert {n for _, n in scan(tmp_path / "before" / "exports", [GONE])} == {GONE}
    assert {n for _, n in scan(tmp_path / "before" / "audit", [GONE])} == {GONE}
    explained = run_cli("--memory-dir", str(mem_dir), "explain", gone, "--json")
    assert explained.code == 0 and GONE in explained.out
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        assert credit_of(store, gone) is not None

    r = run_cli("--memory-dir", str(mem_dir), "forget", "--fact", gone, "--reason", "user asked")
    assert r.code == 0, r.err
    assert r.out.startswith(f"forgot fact {gone} ") and "removed 1 credit, 1 facts;" in r.out and "scrubbed" in r.out
    assert not [p.name for p in mem_dir.iterdir() if MIRROR_FILE in p.name]

    assert _facts(mem_dir) == {kept: "the otterslide checkout takes 3 s to appear"}
    runs = produce_outputs(mem_dir, tmp_path / "after")
    assert set(runs) == {"run_first", "run_second"}  # forgetting a fact forgets no run
    assert scan(mem_dir, [GONE], skip=["ledger.db", "ledger.db-wal"]) == []
    assert (mem_dir / MIRROR_FILE).exists()  # rebuilt by the report, without the fact
    assert scan(tmp_path / "after", [GONE]) == []
    assert {n for _, n in scan(tmp_path / "after" / "exports", [KEPT])} == {KEPT}
    for key in (gone, "Wombatgate banner"):
        refused = run_cli("--memory-dir", str(mem_dir), "explain", key)
        assert refused.code == 1 and refused.err.count("\n") == 1, refused.err
    assert run_cli("--memory-dir", str(mem_dir), "explain", kept).code == 0
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        assert credit_of(store, gone) is None
        forgets = [ev.data for ev in store.read(types=["subject_forgotten"])]
        view = MemoryView.open(store, mem_dir / "projections.db")
        assert [f.fact_id for f in view.facts("shop.test")] == [kept]
        # the log keeps the events, and a view before the forget still shows the fact
        assert gone in {f.fact_id for f in view.as_of(store.head() - 1).facts("shop.test")}
    assert forgets == [{"subject_kind": "fact", "subject": gone, "reason": "user asked", "run_ids": []}]
    assert run_cli("--memory-dir", str(mem_dir), "verify").code == 0
    search = run_cli("--memory-dir", str(mem_dir), "search", "wombatgate", "--json")
    assert search.code == 0 and GONE not in search.out.lower()


def test_a_fact_observed_again_after_its_forget_is_new_memory(memory: tuple[Path, str, str]) -> None:
    mem_dir, gone, _ = memory
    assert run_cli("--memory-dir", str(mem_dir), "forget", "--fact", gone).code == 0
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        run = RecordingMemory(store).start_run(goal="Buy a desk", start_url="https://shop.test/", run_id="run_third")
        run.observe_fact("quirk", "Wombatgate banner", "close the wombatgate banner before checkout")
        run.finish(success=True, outcome="desk bought")
    assert gone in _facts(mem_dir)
    life = orjson.loads(run_cli("--memory-dir", str(mem_dir), "explain", gone, "--json").out)
    assert {e["run_id"] for e in life["life"]} == {"run_third"}  # the life before the forget is not told


def test_unknown_fact_is_refused_with_nothing_written_unless_forced(memory: tuple[Path, str, str]) -> None:
    mem_dir, gone, kept = memory
    head = _events(mem_dir)
    for bad in ("fact_0000000000000000", gone.upper(), gone + "x", "Wombatgate banner"):
        r = run_cli("--memory-dir", str(mem_dir), "forget", "--fact", bad)
        assert r.code == 1 and r.err.startswith("error: no fact ") and r.err.count("\n") == 1, (bad, r.err)
        assert "nothing was written" in r.err
    for args in (("--fact", ""), ("--fact", " "), ("--fact", "fact_\x01"), ("--fact", gone, "--lesson", "lsn_x")):
        r = run_cli("--memory-dir", str(mem_dir), "forget", *args)
        assert r.code == 1 and r.err.startswith("error: ") and r.err.count("\n") == 1, (args, r.err)
    assert _events(mem_dir) == head and set(_facts(mem_dir)) == {gone, kept}

    r = run_cli("--memory-dir", str(mem_dir), "forget", "--fact", "fact_0000000000000000", "--force")
    assert r.code == 0 and "nothing was in memory" in r.out, r.err
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        assert [ev.data["subject"] for ev in store.read(types=["subject_forgotten"])] == ["fact_0000000000000000"]
    assert set(_facts(mem_dir)) == {gone, kept}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subject=st.text(max_size=300))
def test_library_refuses_any_fact_id_memory_does_not_hold(memory: tuple[Path, str, str], subject: str) -> None:
    mem_dir, gone, kept = memory
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        head = store.head()
        assume(subject.strip() not in (gone, kept))
        with pytest.raises((UnknownItem, LedgerError)):
            forget(store, "fact", subject, projections_path=mem_dir / "projections.db")
        assert store.head() == head
