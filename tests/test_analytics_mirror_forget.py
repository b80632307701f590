"""Forget and the analytics mirror: after a run, a session, a domain and a lesson are forgotten, none
of their strings (the goals and selectors only they had, their ids) is in analytics.duckdb — its bytes,
its WAL, its values — nor in any `memtape analytics ...` answer (JSON and tables), whether the mirror was
dropped by `memtape forget` and rebuilt, caught up after later runs, or met a forget recorded by
another writer. A later run's prompt that quoted a forgotten subject (its session history) is shown
with that item's text forgotten, as `memtape audit` shows it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import orjson
import pytest

from memtape.agent import prompt as P
from memtape.agent.records import finish_run, record_prompt
from memtape.analytics.forget_filter import FORGOTTEN_TEXT
from memtape.analytics.mirror import connect
from memtape.analytics.queries import ANALYSES
from memtape.ledger.envelope import event
from memtape.ledger.events import ContextBuilt, ContextItem, RunCompleted
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import BudgetItem
from memtape.projections.forgetting import forget
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.security_support import scan
from tests.test_security_forget import ALL, LESSON_ID, build_memory

#: the subjects' ids, beside the strings only they had
IDS = ["run_quokka", "run_zebra", "run_narwhal_0", "run_narwhal_1", "sess_narwhal", LESSON_ID]
NEEDLES = ALL + IDS
FORGETS = (
    ("--domain", "zebrafjord.test"),
    ("--run", "run_quokka"),
    ("--session", "sess_narwhal"),
    ("--lesson", LESSON_ID),
)


def later_run(
    memory: Path,
    run_id: str,
    url: str,
    domain: str,
    goal: str = "Open the page again",
    parent_run_id: str | None = None,
) -> None:
    """A run whose prompt quotes what memory holds for its site: session history, facts, selectors
    (as an agent whose tools take selectors lists them); it recalls a reference trajectory for its
    goal, and may resume another run."""
    with SqliteStore.open(memory / "ledger.db") as store:
        run = RecordingMemory(store, memory / "projections.db").start_run(
            goal=goal,
            start_url=url,
            run_id=run_id,
            parent_run_id=parent_run_id,
            mode="resume" if parent_run_id else "new",
            agent="scripted",
        )
        run.recall_trajectory(1, url)
        items = [P.session_history(s) for s in [run.sessions(domain)] if s]
        items += [P.app_knowledge(f) for f in [run.facts(domain)] if f]
        items += [
            BudgetItem(
                "known_selectors",
                25,
                "\n".join(f"{s.role} {s.name} -> {s.selector}" for s in known),
                event_ids=tuple(i for s in known for i in s.event_ids[-2:]),
            )
            for known in [run.selectors(domain)]
            if known
        ]
        record_prompt(run, "step", 4000, items, [], step=1, domain=domain)
        finish_run(
            run,
            RunCompleted(
                success=True,
                summary="done",
                final_url=url,
                turns=1,
                tokens_in=10,
                tokens_out=1,
                duration_ms=5.0,
                policy_decisions=0,
                replayed_steps=0,
            ),
        )


def _analytics_outputs(memory: Path, out: Path) -> None:
    """Every analysis as files under `out`: JSON (every section, every column) and the table people read
    (csv and parquet write one section of the same values; parquet's compressed bytes could not be scanned)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ANALYSES:
        for fmt in ("json", "table"):
            r = run_cli(
                "--memory-dir", str(memory), "analytics", name, "--format", fmt, "--out", str(out / f"{name}.{fmt}")
            )
            assert r.code == 0, (name, fmt, r.err)


def _left(memory: Path, out: Path) -> list[tuple[str, str]]:
    """Needles in the mirror (bytes, WAL, every value) and in the analytics outputs."""
    files = [p for p in memory.iterdir() if p.name.startswith(MIRROR_FILE) and p.is_file()]
    return [hit for f in files for hit in scan(f, NEEDLES)] + scan(out, NEEDLES)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memory every test starts from (copied: each test forgets in its own)."""
    mem = tmp_path_factory.mktemp("forget") / "memory"
    mem.mkdir(mode=0o700)
    build_memory(mem)
    later_run(mem, "run_bread_again", "http://bakery.test/", "bakery.test")
    # recalls run_quokka's trajectory (a goal of the same words but its secret one), and resumes it
    later_run(
        mem,
        "run_muffin_again",
        "http://bakery.test/",
        "bakery.test",
        "Note the day of muffin and open",
        parent_run_id="run_quokka",
    )
    later_run(mem, "run_news_again", "http://news.test/", "news.test")
    later_run(mem, "run_lantern_again", "http://zebrafjord.test/", "zebrafjord.test")
    return mem


@pytest.fixture
def memory(built: Path, tmp_path: Path) -> Path:
    mem = tmp_path / "memory"
    shutil.copytree(built, mem)
    return mem


def test_forgotten_subjects_leave_the_mirror_and_every_answer(memory: Path, tmp_path: Path) -> None:
    _analytics_outputs(memory, tmp_path / "before")
    # the test can fail: every needle is in the mirror and in the answers before the forgets
    assert {n for _, n in _left(memory, tmp_path / "before")} == set(NEEDLES)

    for flag, subject in FORGETS:
        r = run_cli("--memory-dir", str(memory), "forget", flag, subject)
        assert r.code == 0, r.err
    _analytics_outputs(memory, tmp_path / "rebuilt")
    assert _left(memory, tmp_path / "rebuilt") == []

    # a later run's session history quoted the forgotten run and session: shown forgotten, as the audit shows it
    con = duckdb.connect(str(memory / MIRROR_FILE), read_only=True)
    items = [
        item
        for (payload,) in con.execute(
            "SELECT payload FROM events WHERE type = 'context_built' AND run_id = 'run_bread_again'"
        ).fetchall()
        for item in orjson.loads(payload)["items"]
    ]
    con.close()
    history = [item for item in items if item["source"] == "session_history"]
    assert history and all(item["text"] == FORGOTTEN_TEXT and item["event_ids"] == [] for item in history)
    audit = orjson.loads(run_cli("--memory-dir", str(memory), "audit", "run_bread_again", "--json").out)
    audited = [i for s in audit["steps"] for p in s["prompt"] for i in p["items"] if i["source"] == "session_history"]
    assert [i["text"] for i in audited] == [i["text"] for i in history]
    # the run that recalled the forgotten run's trajectory and resumed it: the recall stays, the trajectory
    # and the run it resumed are not named (as the audit names neither)
    con = duckdb.connect(str(memory / MIRROR_FILE), read_only=True)
    recalled = con.execute(
        "SELECT trajectory_id, matched_goal, similarity FROM trajectory_recalled WHERE run_id = 'run_muffin_again'"
    ).fetchall()
    resumed = con.execute("SELECT mode, parent_run_id FROM run_started WHERE run_id = 'run_muffin_again'").fetchall()
    con.close()
    assert [(t, g) for t, g, _ in recalled] == [(None, FORGOTTEN_TEXT)] and recalled[0][2] >= 0.5
    assert resumed == [("resume", None)]

    # caught up in place after more runs (their prompts may quote what memory still holds)
    inode = (memory / MIRROR_FILE).stat().st_ino
    later_run(memory, "run_bread_third", "http://bakery.test/", "bakery.test")
    later_run(memory, "run_news_third", "http://news.test/", "news.test")
    _analytics_outputs(memory, tmp_path / "caught_up")
    assert (memory / MIRROR_FILE).stat().st_ino == inode
    assert _left(memory, tmp_path / "caught_up") == []


def test_a_forget_another_writer_recorded_is_honoured(memory: Path, tmp_path: Path) -> None:
    """A forget recorded through the library by a writer that does not scrub the memory directory
    (`forget` without `projections_path`) leaves the mirror where it is: the next answer finds the
    forget since its checkpoint and rebuilds it, and catches up the runs after it."""
    _analytics_outputs(memory, tmp_path / "before")
    with SqliteStore.open(memory / "ledger.db") as store:
        for flag, subject in FORGETS:
            forget(store, flag[2:], subject)
    assert (memory / MIRROR_FILE).exists()  # nobody dropped it
    later_run(memory, "run_bread_third", "http://bakery.test/", "bakery.test")
    inode = (memory / MIRROR_FILE).stat().st_ino
    _analytics_outputs(memory, tmp_path / "after")
    assert (memory / MIRROR_FILE).stat().st_ino != inode  # a new file: no page of the old one survives
    assert not os.path.exists(f"{memory / MIRROR_FILE}.wal")
    assert _left(memory, tmp_path / "after") == []


def test_a_prompt_after_the_forget_is_masked_alike_caught_up_or_rebuilt(memory: Path) -> None:
    """A prompt recorded after the mirror last caught up, quoting an event a forget before it hides:
    caught up (the origin looked up) the mirror shows it as a rebuild (the origin met in order) does."""
    r = run_cli("--memory-dir", str(memory), "forget", "--run", "run_quokka")
    assert r.code == 0, r.err
    with SqliteStore.open(memory / "ledger.db") as store:
        connect(store).close()
        inode = (memory / MIRROR_FILE).stat().st_ino
        quoted = next(ev for ev in store.read(types=["step_recorded"]) if ev.run_id == "run_quokka")
        kept = next(ev for ev in store.read(types=["step_recorded"]) if ev.run_id == "run_keep_0")
        MemoryWriter(store).append(
            [
                event(
                    ContextBuilt(
                        budget=100,
                        total_tokens=20,
                        items=[
                            ContextItem(
                                source="app_knowledge",
                                priority=30,
                                tokens=10,
                                text="quokkaberry muffins sell out",
                                event_ids=[kept.id, quoted.id],
                            ),
                            ContextItem(
                                source="known_selectors",
                                priority=25,
                                tokens=10,
                                text="Rye Bread link",
                                event_ids=[kept.id],
                            ),
                        ],
                    ),
                    run_id="run_late",
                    domain="bakery.test",
                )
            ]
        )
        caught_up = _context_items(store)
        assert (memory / MIRROR_FILE).stat().st_ino == inode
        (memory / MIRROR_FILE).unlink()
        assert _context_items(store) == caught_up
    assert caught_up[-1] == [(FORGOTTEN_TEXT, []), ("Rye Bread link", [kept.id])]


def _context_items(store: SqliteStore) -> list[list[tuple[str, list[str]]]]:
    con = connect(store)
    try:
        return [
            [(i["text"], i["event_ids"]) for i in orjson.loads(p)["items"]]
            for (p,) in con.execute("SELECT payload FROM events WHERE type = 'context_built' ORDER BY seq").fetchall()
        ]
    finally:
        con.close()


def test_a_forget_deletes_every_mirror_file_it_can_and_names_the_one_it_cannot(memory: Path, tmp_path: Path) -> None:
    """A directory in the mirror's place cannot be deleted: the forget is recorded, every other file of
    the mirror (its seal, a half-built copy holding the subject) is gone, and one error line says so."""
    _analytics_outputs(memory, tmp_path / "before")
    (memory / MIRROR_FILE).unlink()
    (memory / MIRROR_FILE).mkdir()
    half_built = memory / f".{MIRROR_FILE}.4242"
    half_built.write_text("quokkaberry, half built")
    r = run_cli("--memory-dir", str(memory), "forget", "--run", "run_quokka")
    assert r.code == 1 and not r.out and r.err.count("\n") == 1, r.err
    assert (
        r.err.startswith("error: forgotten, but the analytics mirror could not be deleted: ") and MIRROR_FILE in r.err
    )
    assert not half_built.exists() and not (memory / f"{MIRROR_FILE}.seal").exists()
    with SqliteStore.open(memory / "ledger.db") as store:
        assert [ev.data["subject"] for ev in store.read(types=["subject_forgotten"])] == ["run_quokka"]
