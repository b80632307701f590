"""`memtape forget`: after it, nothing of the subject is in projections.db (tables, states,
snapshots, free pages, WAL), the analytics mirror (analytics.duckdb), any export format, the report or any audit answer — scanned
as bytes — while the ledger keeps its events and the chain verifies."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memtape.ledger.envelope import event
from memtape.ledger.events import LessonRecorded
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import materialize
from memtape.projections.forgetting import forget
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.security_support import overlay_run, play, produce_outputs, scan, step

#: subject -> the distinctive strings only it has
DOMAIN_NEEDLES = ["zebrafjord"]
RUN_NEEDLES = ["quokkaberry", "muffin of the day"]  # the goal, and a selector only that run used
SESSION_NEEDLES = ["narwhalpudding", "croissant"]
LESSON_NEEDLES = ["salamander"]
LESSON_ID = "lsn_axolotl_tip"
ALL = DOMAIN_NEEDLES + RUN_NEEDLES + SESSION_NEEDLES + LESSON_NEEDLES


def build_memory(memory_dir: Path) -> None:
    """Kept runs on bakery.test and news.test, plus one of each subject to forget."""
    store = SqliteStore.open(memory_dir / "ledger.db")
    proj = memory_dir / "projections.db"
    MemoryWriter(store).append(
        [
            event(
                LessonRecorded(
                    lesson_id=LESSON_ID,
                    lesson="When scroll fails with 'axolotl banner', wait for the Salamander mascot to leave.",
                    category="error_recovery",
                    failed_command="scroll",
                    error_pattern="axolotl banner",
                )
            )
        ]
    )
    mem = RecordingMemory(store, proj)
    for i in range(2):
        overlay_run(
            mem,
            f"run_keep_{i}",
            'Open "Rye Bread"',
            "http://bakery.test/",
            "Rye Bread",
            "Accept all cookies",
            page_text="Fresh bread every morning",
        )
    overlay_run(
        mem,
        "run_zebra",
        'Open "Zebrafjord Lantern"',
        "http://zebrafjord.test/",
        "Zebrafjord Lantern",
        "Accept zebrafjord cookies",
        page_text="Zebrafjord harbour lanterns",
    )
    overlay_run(
        mem,
        "run_quokka",
        'Open "Muffin of the day" and note "quokkaberry"',
        "http://bakery.test/",
        "Muffin of the day",
        "Accept all cookies",
        typed="quokkaberry-note",
    )
    for i in range(2):
        overlay_run(
            mem,
            f"run_narwhal_{i}",
            f'Open "Croissant" and note "narwhalpudding {i}"',
            "http://news.test/",
            "Croissant",
            "Close",
            session_id="sess_narwhal",
            typed=f"narwhalpudding-{i}",
        )
    play(
        mem,
        "run_scroll",
        'Scroll to "Prices"',
        "http://news.test/",
        [
            step(
                1,
                "scroll",
                "http://news.test/",
                ok=False,
                error="scroll failed: axolotl banner in the way",
                args={"direction": "down"},
            ),
            step(2, "wait", "http://news.test/", args={"seconds": 1}),
        ],
    )
    MemoryView.open(store, proj)  # catch projections.db up: snapshots every few events
    store.close()


@pytest.fixture
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot every 5 events (the default is every 10,000) so that pre-forget snapshots exist."""
    monkeypatch.setattr(materialize, "SNAPSHOT_EVERY", 5)
    monkeypatch.setattr(materialize, "SNAPSHOT_BYTES_PER_EVENT", 10**9)


def test_forget_each_kind_leaves_no_bytes_behind(tmp_path: Path, small_snapshots: None) -> None:
    mem_dir = tmp_path / "memory"
    mem_dir.mkdir(mode=0o700)
    build_memory(mem_dir)
    produce_outputs(mem_dir, tmp_path / "before")
    # the test can fail: every subject really is in projections.db (snapshots too) and in the outputs
    before = {n for _, n in scan(mem_dir / "projections.db", ALL)}
    assert before == set(ALL)
    # the analytics mirror (written by the report) holds them too, and a raw byte scan cannot tell:
    # DuckDB compresses its columns, so its values are scanned as well
    assert {n for _, n in scan(mem_dir / MIRROR_FILE, ALL)} == set(ALL)
    assert {n for _, n in scan(tmp_path / "before" / "exports", ALL)} == set(ALL)
    assert {n for _, n in scan(tmp_path / "before" / "audit", ALL)} >= set(DOMAIN_NEEDLES + RUN_NEEDLES)
    snaps_before = _snapshot_count(mem_dir)
    assert snaps_before > 10

    for flag, value in (
        ("--domain", "ZebraFjord.test"),
        ("--run", "run_quokka"),
        ("--session", "sess_narwhal"),
        ("--lesson", LESSON_ID),
    ):
        r = run_cli("--memory-dir", str(mem_dir), "forget", flag, value, "--reason", "user asked")
        assert r.code == 0, r.err
        assert r.out.startswith(f"forgot {flag[2:]} ") and "removed" in r.out and "scrubbed" in r.out
    assert _snapshot_count(mem_dir) < snaps_before
    # the analytics mirror held the subjects: forget drops it at once (not at the next analytics command)
    assert not [p.name for p in mem_dir.iterdir() if MIRROR_FILE in p.name]

    runs = produce_outputs(mem_dir, tmp_path / "after")
    assert set(runs) == {"run_keep_0", "run_keep_1", "run_scroll"}
    assert scan(mem_dir, ALL, skip=["ledger.db", "ledger.db-wal"]) == []
    assert (mem_dir / MIRROR_FILE).exists()  # rebuilt by the report after the forgets, without them
    assert scan(tmp_path / "after", ALL) == []
    # what stays: kept subjects are all there, the chain verifies, the events are still in the log
    assert {n for _, n in scan(tmp_path / "after" / "exports", ["rye bread"])} == {"rye bread"}
    assert run_cli("--memory-dir", str(mem_dir), "verify").code == 0
    with SqliteStore.open(mem_dir / "ledger.db") as store:  # a session's runs are resolved when it is forgotten
        by_kind = {e.data["subject_kind"]: e.data for e in store.read(types=["subject_forgotten"])}
    assert by_kind["session"]["run_ids"] == ["run_narwhal_0", "run_narwhal_1"] and by_kind["run"]["run_ids"] == []
    events = run_cli("--memory-dir", str(mem_dir), "events", "--run", "run_quokka", "--json")
    assert events.code == 0 and "quokkaberry" in events.out.lower()

    # a full rebuild takes no snapshot before the last forget, so the subject does not come back; a
    # later run's events put snapshots due after the forgets (the ledger's head may end on the last one)
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        later = RecordingMemory(store).start_run(goal="Buy rye bread", start_url="https://bakery.test/")
        for n in range(1, 7):
            later.record_step(step=n, action="scroll", args={"direction": "down"})
        later.finish(success=True, outcome="rye bread found")
    assert run_cli("--memory-dir", str(mem_dir), "rebuild").code == 0
    assert _snapshot_count(mem_dir) > 0
    assert scan(mem_dir / "projections.db", ALL) == []
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        head = store.head()
        last_forget = max(e.seq for e in store.read(types=["subject_forgotten"]))
        seqs = [r for r in _snapshot_seqs(mem_dir)]
        assert seqs and min(seqs) >= last_forget
        view = MemoryView.open(store, mem_dir / "projections.db")
        assert view.head == head and view.run("run_quokka") is None and view.lesson(LESSON_ID) is None
        assert not view.lessons("zebrafjord.test") and not view.facts("zebrafjord.test")
        assert view.runs(session_id="sess_narwhal") == []
        # documented: an as-of view before the forget, folded from the log, still shows the subject
        past = view.as_of(last_forget - 4)
        assert past.run("run_quokka") is not None


def _snapshot_seqs(mem_dir: Path) -> list[int]:
    import sqlite3

    conn = sqlite3.connect(mem_dir / "projections.db")
    try:
        return [r[0] for r in conn.execute("SELECT seq FROM _snapshots")]
    finally:
        conn.close()


def _snapshot_count(mem_dir: Path) -> int:
    return len(_snapshot_seqs(mem_dir))


def test_forget_library_counts_and_refusals(tmp_path: Path) -> None:
    mem_dir = tmp_path / "m"
    mem_dir.mkdir(mode=0o700)
    build_memory(mem_dir)
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        r = forget(store, "domain", "zebrafjord.test", projections_path=mem_dir / "projections.db")
        assert r.removed.get("lessons") == 1 and r.removed.get("runs") == 1 and r.removed.get("trajectories") == 1
        assert r.removed.get("facts", 0) >= 1 and r.projections_scrubbed
        ev = store.get(next(e.id for e in store.read(types=["subject_forgotten"])))
        assert ev is not None and ev.data == {
            "subject_kind": "domain",
            "subject": "zebrafjord.test",
            "reason": None,
            "run_ids": ["run_zebra"],
        }  # the runs started there
        again = forget(store, "domain", "zebrafjord.test", projections_path=mem_dir / "projections.db")
        assert again.total_removed == 0  # idempotent: nothing left to remove
    for args in (
        (),
        ("--domain", "a.test", "--run", "r1"),
        ("--domain", " "),
        ("--domain", "../../etc"),
        ("--run", "x\x01y"),
    ):
        r = run_cli("--memory-dir", str(mem_dir), "forget", *args)
        assert r.code == 1 and r.err.startswith("error: ") and r.err.count("\n") == 1, (args, r.err)
    with SqliteStore.open(mem_dir / "ledger.db") as store:
        assert sum(1 for _ in store.read(types=["subject_forgotten"])) == 2
    out = orjson.loads(run_cli("--memory-dir", str(mem_dir), "runs", "--json").out)
    assert "run_zebra" not in {row["run_id"] for row in out}
