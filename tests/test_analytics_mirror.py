"""The analytics mirror (analytics.duckdb): caught up incrementally, equal to a rebuild, rebuilt when
tampered with or stale, and its `memory_at_step` view equal to the projections folded in Python."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from memtape.analytics.answers import analyse_all
from memtape.analytics.audit import audit_run
from memtape.analytics.mirror import _row_key, _rows_digest, connect
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import FactObserved, LessonRecorded, SubjectForgotten
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.forgetting import forget
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.analytics_builders import Built, learning_ledger, memory_at_step_equals_the_fold


@pytest.fixture
def learned(tmp_path: Path) -> tuple[SqliteStore, Built, SteppingClock]:
    clock = SteppingClock()
    store = SqliteStore.open(tmp_path / "ledger.db", clock=clock)
    built = learning_ledger(store, clock, runs=6)
    yield store, built, clock
    store.close()


def _answers(store: SqliteStore) -> str:
    return orjson.dumps({name: report.as_json() for name, report in analyse_all(store).items()}).decode()


def _mirror_rows(store: SqliteStore) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    con = connect(store)
    try:
        return (
            con.execute("SELECT * FROM events ORDER BY seq").fetchall(),
            con.execute("SELECT * FROM intervals ORDER BY ALL").fetchall(),
            con.execute("SELECT * FROM step_as_of ORDER BY ALL").fetchall(),
            con.execute(
                "SELECT run_id, valid_from, valid_to, to_json(value) FROM short_term_intervals ORDER BY ALL"
            ).fetchall(),
        )
    finally:
        con.close()


def _rebuilt(store: SqliteStore) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    (Path(store.path).parent / MIRROR_FILE).unlink()
    return _mirror_rows(store)


def test_caught_up_incrementally_equals_a_rebuild(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    store, _, clock = learned
    first = _mirror_rows(store)
    mirror = Path(store.path).parent / MIRROR_FILE
    inode = mirror.stat().st_ino
    assert first[0] and first[1] and first[2] and first[3]  # events and intervals copied, steps placed
    more = learning_ledger(store, clock, runs=3, memory_off_first=False)  # versions close, new ones open
    incremental = _mirror_rows(store)
    assert mirror.stat().st_ino == inode  # caught up in place, not rebuilt
    assert len(incremental[0]) == store.head() and more.runs
    assert incremental[1] != first[1] and incremental[3] != first[3]
    held, rows = _digests(mirror)
    assert held == rows  # the digest the catch-up kept up to date is the one every row gives
    assert incremental == _rebuilt(store)
    held, rows = _digests(mirror)
    assert held == rows


def _digests(mirror: Path) -> tuple[str, str]:
    """The digest the mirror's checkpoint holds, and the one its rows give now."""
    con = duckdb.connect(str(mirror), read_only=True)
    try:
        return (
            str(con.execute("SELECT digest FROM _mirror").fetchone()[0]),
            str(_rows_digest(con, _row_key(mirror.with_name("projections.db")))),
        )
    finally:
        con.close()


def test_events_are_stored_clustered_by_type(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    """Each fill appends its events ordered by type, then seq (a question about a few types then
    reads only their row groups); the log's order is `ORDER BY seq`."""
    store, _, clock = learned
    connect(store).close()
    head = store.head()
    learning_ledger(store, clock, runs=2, memory_off_first=False)
    con = connect(store)
    try:
        stored = con.execute("SELECT type, seq FROM events ORDER BY rowid").fetchall()
    finally:
        con.close()
    built, caught_up = [r for r in stored if r[1] <= head], [r for r in stored if r[1] > head]
    assert stored == built + caught_up and len(stored) == store.head()
    assert built == sorted(built) and caught_up == sorted(caught_up)
    assert built != sorted(built, key=lambda r: r[1])  # several types: not the log's order


def test_a_forget_rebuilds_the_mirror_without_the_subject(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    store, _, _ = learned
    connect(store).close()
    mirror = Path(store.path).parent / MIRROR_FILE
    inode = mirror.stat().st_ino
    MemoryWriter(store).append([event(SubjectForgotten(subject_kind="domain", subject="b.test"))])
    rows = _mirror_rows(store)
    assert mirror.stat().st_ino != inode  # a new file: nothing of the old one's pages survives
    assert "b.test" not in orjson.dumps([list(map(str, r)) for r in rows[0] + rows[1] + rows[3]]).decode()
    assert rows == _rebuilt(store)


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE events SET payload = '{\"lesson\": \"forged\"}' WHERE type = 'lesson_recorded'",
        "DELETE FROM intervals WHERE projection = 'lessons'",
        "UPDATE short_term_intervals SET value = {'run_id': 'forged', 'goal': value.goal, 'domain': value.domain, "
        "'recent': value.recent, 'failed_signatures': [], 'action_frequency': value.action_frequency, "
        "'loop_warnings': value.loop_warnings, 'navigation_path': value.navigation_path, 'current_url': value.current_url, "
        "'cycle_count': value.cycle_count, 'event_ids': value.event_ids, 'session_id': value.session_id, "
        "'visited_urls': value.visited_urls, 'completed': value.completed} WHERE valid_to IS NULL",
        "UPDATE _mirror SET seq = seq - 3",
        "INSERT INTO events SELECT * FROM events LIMIT 1",
    ],
)
def test_a_tampered_mirror_is_rebuilt_with_a_warning(
    learned: tuple[SqliteStore, Built, SteppingClock], edit: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, _, _ = learned
    honest = _answers(store)
    rows = _mirror_rows(store)
    mirror = Path(store.path).parent / MIRROR_FILE
    con = duckdb.connect(str(mirror))
    con.execute(edit)
    con.close()
    with caplog.at_level(logging.WARNING, logger="memtape"):
        assert _answers(store) == honest
    assert any(
        f"{mirror}:" in r.getMessage() and "rebuilding from the ledger" in r.getMessage() for r in caplog.records
    )
    assert _mirror_rows(store) == rows


def test_a_mirror_that_is_not_a_database_is_rebuilt(
    learned: tuple[SqliteStore, Built, SteppingClock], caplog: pytest.LogCaptureFixture
) -> None:
    store, _, _ = learned
    honest = _answers(store)
    mirror = Path(store.path).parent / MIRROR_FILE
    mirror.write_bytes(b"not a duckdb file" * 100)
    with caplog.at_level(logging.WARNING, logger="memtape"):
        assert _answers(store) == honest
    assert any("rebuilding from the ledger" in r.getMessage() for r in caplog.records)


def test_another_memorys_mirror_is_not_trusted(tmp_path: Path) -> None:
    """A mirror copied in from another memory directory carries another key's seal: rebuilt."""
    stores = []
    for name, runs in (("a", 2), ("b", 4)):
        (tmp_path / name).mkdir()
        clock = SteppingClock()
        store = SqliteStore.open(tmp_path / name / "ledger.db", clock=clock)
        learning_ledger(store, clock, runs=runs)
        stores.append(store)
    honest = _answers(stores[0])
    _answers(stores[1])
    (tmp_path / "a" / MIRROR_FILE).write_bytes((tmp_path / "b" / MIRROR_FILE).read_bytes())
    assert _answers(stores[0]) == honest
    for store in stores:
        store.close()


def test_memory_at_step_is_what_the_projections_held(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    store, built, clock = learned
    MemoryWriter(store).append([event(FactObserved(fact_type="timing", key="load", value="2s"), domain="a.test")])
    assert memory_at_step_equals_the_fold(store, built.step_seq) == sum(len(s) for s in built.step_seq.values())
    con = connect(store)
    run, step = built.runs[-1], max(built.step_seq[built.runs[-1]])
    lessons = con.execute(
        "SELECT item, value ->> 'use_count' FROM memory_at_step WHERE run_id = ? AND step = ? "
        "AND projection = 'lessons' AND field = 'lessons'",
        (run, step),
    ).fetchall()
    con.close()
    seq = built.step_seq[run][step]
    used = MemoryView.from_events(store.read(to_seq=seq - 1)).lesson(built.lesson_id)
    assert used is not None and used.use_count > 1  # the learned lesson, used by earlier runs
    assert (built.lesson_id, str(used.use_count)) in lessons


def test_each_step_is_read_at_the_seq_the_audit_reads_it(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    """`step_as_of` (what `memory_at_step` joins) holds the audit's seq for every step of every run,
    steps without an action (the prompt before step 1 is step 0) included, also after a catch-up."""
    store, _, clock = learned
    before = _mirror_rows(store)[2]
    learning_ledger(store, clock, runs=2, memory_off_first=False)  # caught up, not rebuilt
    rows = _mirror_rows(store)[2]
    runs = sorted({ev.run_id for ev in store.read(types=["run_started"]) if ev.run_id})
    audited = sorted((rid, s["step"], s["as_of_seq"]) for rid in runs for s in audit_run(store, rid)["steps"])
    assert rows == audited and rows != before
    assert any(step == 0 for _, step, _ in rows)


def test_a_lesson_without_an_id_gets_the_projections_id(tmp_path: Path) -> None:
    """The mirror fills an empty lesson id in Python, as the lessons projection does (no SQL copy of the hash)."""
    clock = SteppingClock()
    with SqliteStore.open(tmp_path / "ledger.db", clock=clock) as store:
        MemoryWriter(store).append(
            [
                event(
                    LessonRecorded(
                        lesson_id="",
                        lesson="Wait for the list",
                        category="error_recovery",
                        failed_command="click",
                        error_pattern="detached",
                    ),
                    domain="a.test",
                )
            ]
        )
        clock.advance(timedelta(hours=1))
        con = connect(store)
        got = con.execute("SELECT lesson_id FROM lesson_recorded").fetchall()
        con.close()
        assert got == [(MemoryView.from_events(store.read()).lessons()[0].lesson_id,)]


def test_a_mirror_another_process_holds_is_not_waited_for(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    """DuckDB locks its file to one writing process: the answer then comes from a private mirror in memory."""
    store, _, _ = learned
    honest = _answers(store)
    mirror = Path(store.path).parent / MIRROR_FILE
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('holding', flush=True); sys.stdin.read()",
            str(mirror),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(duckdb.IOException, match="lock"):
            duckdb.connect(str(mirror)).close()
        assert _answers(store) == honest
    finally:
        holder.communicate("")


def test_a_current_mirror_is_read_in_place_and_a_touched_one_checked_whole(
    learned: tuple[SqliteStore, Built, SteppingClock], caplog: pytest.LogCaptureFixture
) -> None:
    """Untouched since this memory wrote it (its sealed stamp holds): opened read-only, the file left as it
    was. Touched (its ctime moved, rows intact): its rows' digest is checked, it is kept and sealed again."""
    store, _, _ = learned
    honest = _answers(store)
    mirror = Path(store.path).parent / MIRROR_FILE
    seal = mirror.with_name(MIRROR_FILE + ".seal")
    before, stamp = os.stat(mirror), seal.read_text()
    con = connect(store)
    with pytest.raises(duckdb.Error):  # read-only
        con.execute("DELETE FROM events")
    con.close()
    after = os.stat(mirror)
    assert (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )
    assert seal.read_text() == stamp
    os.utime(mirror)  # rows unchanged, the file's times not
    with caplog.at_level(logging.WARNING, logger="memtape"):
        assert _answers(store) == honest
    assert not caplog.records and os.stat(mirror).st_ino == before.st_ino  # kept, not rebuilt
    assert seal.read_text() != stamp


def test_a_library_forget_drops_the_mirror_at_once(learned: tuple[SqliteStore, Built, SteppingClock]) -> None:
    """Not only the command: `projections.forgetting.forget` itself deletes every file of the mirror
    (a half-built copy of a process that died too), so no forgotten byte waits for the next answer."""
    store, _, _ = learned
    _mirror_rows(store)
    mem = Path(store.path).parent
    (mem / f".{MIRROR_FILE}.4242").write_bytes(b"half-built by a process that died")
    assert {p.name for p in mem.iterdir() if MIRROR_FILE in p.name} >= {MIRROR_FILE, f"{MIRROR_FILE}.seal"}
    result = forget(store, "domain", "a.test", projections_path=mem / "projections.db")
    assert result.mirror_dropped
    assert not [p.name for p in mem.iterdir() if MIRROR_FILE in p.name]
    again = forget(store, "domain", "b.test", projections_path=mem / "projections.db")
    assert not again.mirror_dropped  # nothing was there to drop


def test_the_docs_memory_at_step_example_prints_what_the_docs_say(tmp_path: Path) -> None:
    """The `memory_at_step` example of docs/cli.md (lessons, then the run's short-term memory) prints,
    line by line, the `code` spans of the paragraph that follows it."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    found = re.search(r"^```python\n((?:(?!^```).)*?memory_at_step.*?)^```\n\nIt prints (.*?)\n\n", docs, re.S | re.M)
    assert found is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    done = subprocess.run(
        [sys.executable, "-"], input=found.group(1), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    promised = re.findall(r"`([^`]+)`", found.group(2))
    assert len(promised) == 3 and "short_term" in found.group(1)
    assert done.stdout.splitlines() == promised
