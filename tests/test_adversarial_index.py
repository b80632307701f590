"""projections.db edited by hand, row by row, against every reader of the as-of index.

Each edit is what someone with write access to the file (and no key) can do with sqlite3: delete,
duplicate or move a version, edit its value or its key, swap or renumber blocks, delete mentions,
edit the sealed checkpoint, add a trigger, a table or drop an index. Whatever the edit, memory as
of a seq (MemoryView.as_of, `IndexedMemory`, the catch-up after new events) is the fold of the
ledger: the file's stamp no longer holds, it is checked whole against its sealed digest, and the
edit is caught and the file rebuilt, never served, never sealed again as this memory's own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devtools.synthetic import build_ledger
from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import compression, intervals, materialize
from memtape.projections.cache.db import readable
from memtape.projections.folds import INDEXED
from memtape.projections.folds.state import MemoryState, digest_of, fold
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.projections_support import T0, fact, lesson, recall, run_started, step

Edit = Callable[[sqlite3.Connection, int], Any]
OPEN = intervals.OPEN


def _memory(mem: Path) -> tuple[SqliteStore, Path, int]:
    """A memory caught up twice (so some versions were closed by the second catch-up), and a seq
    before its head at which closed and current versions of knowledge and lessons are valid."""
    store = SqliteStore.open(mem / "ledger.db", clock=SteppingClock())
    writer = MemoryWriter(store)
    writer.open_for_run("r1", T0)
    writer.append(
        [
            run_started("r1", domain="a.com"),
            lesson(domain="a.com", fc="type"),
            fact("x", "a.com"),
            fact("y", "a.com", key="k2"),
            fact("z", "b.com"),
            step("r1", 1, domain="a.com"),
        ]
    )
    path = mem / "projections.db"
    materialize.caught_up(store, path)
    lid = next(l for l, v in MemoryView.open(store).state.lessons.lessons.items() if v.source != "seed")
    writer.append([recall([lid], "a.com"), fact("w", "a.com"), step("r1", 2, domain="a.com")])
    seq = store.head()
    writer.append([fact("v", "a.com", key="k2"), fact("u", "c.com"), step("r1", 3, domain="a.com")])
    materialize.caught_up(store, path)
    return store, path, seq


def _editor(path: Path) -> sqlite3.Connection:
    """projections.db opened as an editor without the key opens it: plain sqlite3."""
    return sqlite3.connect(path)


def _alive_version(conn: sqlite3.Connection, seq: int, projection: str = "knowledge") -> tuple[Any, ...]:
    return conn.execute(
        "SELECT rowid, k1, k2, valid_from, valid_to, block, slot FROM _intervals WHERE projection = ? "
        "AND block IS NOT NULL AND valid_from <= ? AND valid_to > ? ORDER BY valid_from, k2 LIMIT 1",
        (projection, seq, seq),
    ).fetchone()


def delete_a_valid_version(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _intervals WHERE rowid = ?", (_alive_version(conn, seq)[0],))


def delete_every_version_of_a_projection(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _intervals WHERE projection = 'knowledge'")


def delete_every_version_and_its_blocks(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _intervals WHERE projection = 'knowledge'")
    conn.execute("DELETE FROM _blocks WHERE projection = 'knowledge'")


def delete_the_closed_versions(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute(f"DELETE FROM _intervals WHERE valid_to <> {OPEN}")


def duplicate_a_version_under_another_seq(conn: sqlite3.Connection, seq: int) -> None:
    rowid = _alive_version(conn, seq)[0]
    conn.execute(
        "INSERT INTO _intervals SELECT projection, field, k1, k2, valid_from - 1, valid_to, o1, o2, facet, "
        "block, slot FROM _intervals WHERE rowid = ?",
        (rowid,),
    )


def duplicate_a_version_under_another_key(conn: sqlite3.Connection, seq: int) -> None:
    rowid = _alive_version(conn, seq)[0]
    conn.execute(
        "INSERT INTO _intervals SELECT projection, field, 'evil.com', k2, valid_from, valid_to, o1, o2, facet, "
        "block, slot FROM _intervals WHERE rowid = ?",
        (rowid,),
    )


def move_a_version_to_another_key(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("UPDATE _intervals SET k1 = 'evil.com' WHERE rowid = ?", (_alive_version(conn, seq)[0],))


def widen_a_closed_version(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute(f"UPDATE _intervals SET valid_to = {OPEN} WHERE valid_to <> {OPEN} AND valid_to > ?", (seq,))


def start_a_version_later(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("UPDATE _intervals SET valid_from = ? WHERE rowid = ?", (seq + 1, _alive_version(conn, seq)[0]))


def flip_a_bit_of_the_sealed_digest(conn: sqlite3.Connection, seq: int) -> None:
    ((digest,),) = conn.execute("SELECT digest FROM _seal").fetchall()
    conn.execute("UPDATE _seal SET digest = ?", (digest[:-1] + chr(ord(digest[-1]) ^ 1),))


def edit_a_value_in_its_block(conn: sqlite3.Connection, seq: int) -> None:
    _, _, _, _, _, block, _ = _alive_version(conn, seq)
    ((data,),) = conn.execute("SELECT data FROM _blocks WHERE id = ?", (block,)).fetchall()
    conn.execute("UPDATE _blocks SET data = ? WHERE id = ?", (bytes(data[:-1]) + bytes([data[-1] ^ 1]), block))


def swap_two_blocks(conn: sqlite3.Connection, seq: int) -> None:
    (a, da), (b, db) = conn.execute("SELECT id, data FROM _blocks ORDER BY id LIMIT 2").fetchall()
    conn.execute("UPDATE _blocks SET data = ? WHERE id = ?", (db, a))
    conn.execute("UPDATE _blocks SET data = ? WHERE id = ?", (da, b))


def renumber_two_blocks(conn: sqlite3.Connection, seq: int) -> None:
    (a,), (b,) = conn.execute("SELECT id FROM _blocks ORDER BY id LIMIT 2").fetchall()
    conn.execute("UPDATE _blocks SET id = -1 WHERE id = ?", (a,))
    conn.execute("UPDATE _blocks SET id = ? WHERE id = ?", (a, b))
    conn.execute("UPDATE _blocks SET id = ? WHERE id = -1", (b,))


def delete_every_block(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _blocks")


def delete_an_item(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _intervals WHERE projection = 'knowledge' AND k1 = 'a.com'")


def delete_a_mention(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _mentions WHERE seq = (SELECT MAX(seq) FROM _mentions)")


def delete_every_mention(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM _mentions")


def add_a_trigger_that_moves_new_versions(conn: sqlite3.Connection, seq: int) -> None:
    """Nothing served is edited now: the trigger would move every version a later catch-up files."""
    conn.execute(
        "CREATE TRIGGER later AFTER INSERT ON _intervals BEGIN "
        "UPDATE _intervals SET k1 = 'evil.com' WHERE rowid = NEW.rowid; END"
    )


def drop_an_index(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DROP INDEX _intervals_to")


def add_a_table(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("CREATE TABLE notes AS SELECT 'planted' AS x")


EDITS = [
    delete_a_valid_version,
    delete_every_version_of_a_projection,
    delete_every_version_and_its_blocks,
    delete_the_closed_versions,
    duplicate_a_version_under_another_seq,
    duplicate_a_version_under_another_key,
    move_a_version_to_another_key,
    widen_a_closed_version,
    start_a_version_later,
    edit_a_value_in_its_block,
    swap_two_blocks,
    renumber_two_blocks,
    delete_every_block,
    delete_an_item,
    delete_a_mention,
    delete_every_mention,
    flip_a_bit_of_the_sealed_digest,
    add_a_trigger_that_moves_new_versions,
    drop_an_index,
    add_a_table,
]


def _edited(mem: Path, edit: Edit) -> tuple[SqliteStore, Path, int]:
    store, path, seq = _memory(mem)
    conn = _editor(path)
    edit(conn, seq)
    conn.commit()
    conn.close()
    return store, path, seq


def _folded(store: SqliteStore, seq: int) -> MemoryState:
    return fold(MemoryState.empty(), store.read(1, seq), Thresholds())


@pytest.mark.parametrize("edit", EDITS)
def test_a_hand_edit_is_never_served_as_of(memory_path: Path, edit: Edit) -> None:
    store, path, seq = _edited(memory_path, edit)
    want = _folded(store, seq)
    view = MemoryView.open(store, path, as_of=seq)
    for name in INDEXED:
        assert digest_of(getattr(view.state, name)) == digest_of(getattr(want, name)), name
    store.close()


@pytest.mark.parametrize("edit", EDITS)
def test_a_hand_edit_is_never_served_by_the_index_an_audit_reads(memory_path: Path, edit: Edit) -> None:
    store, path, seq = _edited(memory_path, edit)
    want = _folded(store, seq)
    with materialize.indexed_memory(store, path, DEFAULT_POLICY, (seq, seq)) as memory:
        for name in ("lessons", "knowledge", "selectors", "trajectories", "runs", "step_memories"):
            assert digest_of(memory.projection(name, seq)) == digest_of(getattr(want, name)), name
    store.close()


@pytest.mark.parametrize("edit", EDITS)
def test_a_hand_edit_is_not_sealed_again_by_the_next_catch_up(memory_path: Path, edit: Edit) -> None:
    """New events touch the edited items: the catch-up closes their current versions and files
    new ones. It must not seal what it found (the edit would then pass as this memory's own)."""
    store, path, seq = _edited(memory_path, edit)
    MemoryWriter(store).append(
        [fact("x", "a.com"), fact("y", "a.com", key="k2"), fact("z", "b.com"), fact("t", "evil.com")]
    )
    materialize.caught_up(store, path)
    head = store.head()
    for at in (seq, head - 1, head):
        want = _folded(store, at)
        view = MemoryView.open(store, path, as_of=at)
        for name in INDEXED:
            assert digest_of(getattr(view.state, name)) == digest_of(getattr(want, name)), (name, at)
        materialize.caught_up(store, path)  # rebuilt if an edit was caught: the index serves again
        with readable(path) as cache:
            got = intervals.state_at(intervals.Blocks(cache.conn), "knowledge", at)
        assert digest_of(got) == digest_of(want.knowledge), at
    store.close()


def test_a_version_pointed_at_another_items_value_is_not_laundered_by_its_close(memory_path: Path) -> None:
    """The attack the re-seal allowed: the current version of a.com's fact pointed at b.com's value
    (its seal left stale), then a.com's fact confirmed — closing that version sealed it anew."""
    store, path, seq = _memory(memory_path)
    conn = _editor(path)
    ((ka, kb),) = conn.execute(
        f"SELECT a.rowid, b.slot FROM _intervals a JOIN _intervals b ON a.block = b.block "
        f"WHERE a.projection = 'knowledge' AND a.k1 = 'a.com' AND b.k1 <> 'a.com' "
        f"AND a.valid_to = {OPEN} AND b.valid_to = {OPEN} LIMIT 1"
    ).fetchall()
    conn.execute("UPDATE _intervals SET slot = ? WHERE rowid = ?", (kb, ka))
    conn.commit()
    conn.close()
    before = store.head()
    MemoryWriter(store).append([fact("x", "a.com"), fact("y", "a.com", key="k2"), fact("w", "a.com")])
    MemoryView.open(store, path)
    got = MemoryView.open(store, path, as_of=before).state.knowledge
    assert digest_of(got) == digest_of(_folded(store, before).knowledge)
    store.close()


#: one edit of each table the readers read (versions, the checkpoint, blocks, mentions): the command
#: line over each (the library tests above take every edit)
CLI_EDITS = [
    delete_a_valid_version,
    delete_an_item,
    flip_a_bit_of_the_sealed_digest,
    swap_two_blocks,
    delete_a_mention,
    delete_every_mention,
]


@pytest.mark.parametrize("edit", CLI_EDITS)
def test_audit_and_explain_on_the_command_line_answer_as_before(memory_path: Path, edit: Edit) -> None:
    store, path, seq = _memory(memory_path)
    lid = next(l for l, v in MemoryView.open(store, path).state.lessons.lessons.items() if v.source != "seed")
    store.close()
    commands = [
        ("audit", "r1", "--json"),
        ("audit", "r1", "--step", "2", "--json"),
        ("explain", lid, "--json"),
        ("explain", "k2", "--domain", "a.com", "--json"),
        ("state", "facts", "--as-of", str(seq), "--json"),
    ]
    before = {c: run_cli("--memory-dir", str(memory_path), *c) for c in commands}
    assert all(r.code == 0 for r in before.values()), {c: r.err for c, r in before.items()}
    conn = _editor(path)
    edit(conn, seq)
    conn.commit()
    conn.close()
    for c in commands:
        r = run_cli("--memory-dir", str(memory_path), *c)
        assert r.code == 0 and r.out == before[c].out, (c, r.err)
        assert "Traceback" not in r.err and all(line.startswith("warning: ") for line in r.err.splitlines()), r.err


def _lazy_memory(mem: Path) -> tuple[str, int]:
    """A memory whose last catch-up folded knowledge only: the other projections keep the state
    stored at an earlier seq (read when first used). Returns a lesson id and a seq before the head."""
    store, path, seq = _memory(mem)
    lid = next(l for l, v in MemoryView.open(store, path).state.lessons.lessons.items() if v.source != "seed")
    MemoryWriter(store).append([fact("late", "b.com")])
    MemoryView.open(store, path)
    store.close()
    conn = sqlite3.connect(path)
    lazy = conn.execute(
        "SELECT s.projection FROM _states s JOIN _checkpoints c ON c.projection = s.projection WHERE s.seq < c.seq"
    ).fetchall()
    conn.close()
    assert ("runs",) in lazy and ("lessons",) in lazy  # the test can fail: the states were left lazy
    return lid, seq


def _garble_a_lazy_state(path: Path) -> None:
    conn = _editor(path)
    ((blob,),) = conn.execute("SELECT state FROM _states WHERE projection = 'runs'").fetchall()
    state = compression.unpacker()(blob).replace(b'"a.com"', b'"evil.com"')
    conn.execute("UPDATE _states SET state = ? WHERE projection = 'runs'", (compression.packer()(state),))
    conn.commit()
    conn.close()


def _move_a_checkpoint(path: Path) -> None:
    conn = _editor(path)
    conn.execute("UPDATE _checkpoints SET seq = seq - 1 WHERE projection = 'knowledge'")
    conn.commit()
    conn.close()


def _truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 64)


def _text(path: Path) -> None:
    path.write_text("not a database\n" * 200)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("edit", [_garble_a_lazy_state, _move_a_checkpoint, _truncate, _garbage, _text, _empty])
def test_every_reader_answers_as_before_whatever_the_file_became(
    memory_path: Path, edit: Callable[[Path], Any]
) -> None:
    lid, seq = _lazy_memory(memory_path)
    path = memory_path / "projections.db"
    commands = [
        ("state", "runs", "--json"),
        ("state", "lessons", "--as-of", str(seq), "--json"),
        ("audit", "r1", "--step", "2", "--json"),
        ("explain", lid, "--json"),
    ]
    before = {c: run_cli("--memory-dir", str(memory_path), *c) for c in commands}
    assert all(r.code == 0 for r in before.values()), {c: r.err for c, r in before.items()}
    with SqliteStore.open(memory_path / "ledger.db") as store:
        head = store.head()
    for c in [*commands, ("rebuild",)]:
        for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            sidecar.unlink(missing_ok=True)
        edit(path)
        r = run_cli("--memory-dir", str(memory_path), *c)
        assert r.code == 0 and (c == ("rebuild",) or r.out == before[c].out), (c, r.err)
        assert all(line.startswith(("warning: ", "rebuilding projections")) for line in r.err.splitlines()), r.err
    with SqliteStore.open(memory_path / "ledger.db") as store:  # nothing of the ledger was lost
        assert store.head() == head and run_cli("--memory-dir", str(memory_path), "verify").code == 0


def test_a_lazily_kept_state_edited_in_place_is_caught_by_the_catch_up_that_loads_it(memory_path: Path) -> None:
    _lazy_memory(memory_path)
    path = memory_path / "projections.db"
    _garble_a_lazy_state(path)
    with SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock()) as store:
        MemoryWriter(store).append([run_started("r9", domain="a.com")])  # folds runs: its stored state is loaded
        state = MemoryView.open(store, path).state
        assert digest_of(state.runs) == digest_of(_folded(store, store.head()).runs)
        assert "evil.com" not in str(state.runs.runs)


def _another_applications_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()


def _a_directory(path: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("mine")


@pytest.mark.parametrize("put", [_another_applications_database, _a_directory])
def test_what_is_not_a_projections_database_is_refused_in_one_line_and_kept(
    memory_path: Path, put: Callable[[Path], Any]
) -> None:
    """Not ours (another application's database, a directory): neither read nor deleted."""
    _memory(memory_path)[0].close()
    path = memory_path / "projections.db"
    for sidecar in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        sidecar.unlink(missing_ok=True)
    put(path)
    for c in (("state", "lessons"), ("audit", "r1"), ("rebuild",)):
        r = run_cli("--memory-dir", str(memory_path), *c)
        assert r.code == 1 and r.err.count("\n") == 1 and r.err.startswith("error: "), r.err
        assert r.err.count(str(path)) == 1 and "not a memtape projections database" in r.err
    if path.is_dir():
        assert (path / "keep.txt").read_text() == "mine"
    else:
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
        conn.close()


#: what audits, explain and bench/projections.py ask by key
KEYED_FIELDS = [
    ("lessons", "lessons"),
    ("knowledge", "current"),
    ("selectors", "by_domain"),
    ("trajectories", "by_domain"),
    ("runs", "runs"),
    ("sessions", "by_domain"),
]


@pytest.mark.parametrize(("name", "field"), KEYED_FIELDS)
def test_an_item_read_by_key_is_selected_alone(memory_path: Path, name: str, field: str) -> None:
    """A keyed question reads that item's versions only (not its projection whole, which at a
    million events is tens of thousands of rows)."""
    store = build_ledger(memory_path / "ledger.db", 3000)  # every projection has items
    path, seq = memory_path / "projections.db", store.head() // 2
    materialize.caught_up(store, path)
    with readable(path) as cache:
        blocks = intervals.Blocks(cache.conn)
        keys = {
            k1
            for (k1,) in cache.conn.execute(
                "SELECT k1 FROM _intervals WHERE projection = ? AND field = ? AND valid_from <= ? AND valid_to > ?",
                (name, field, seq, seq),
            )
        }
        assert keys  # the memory holds items of this field: the test can fail
        for k1 in keys:
            rows = intervals.rows_at(blocks, name, seq, field, k1)
            assert rows and {(r[0], r[1]) for r in rows} == {(field, k1)}
    store.close()


def test_a_run_read_by_key_is_not_served_when_its_version_was_deleted(
    memory_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, path, seq = _memory(memory_path)
    conn = _editor(path)
    conn.execute("DELETE FROM _intervals WHERE projection = 'runs' AND field = 'runs' AND k1 = 'r1'")
    conn.commit()
    conn.close()
    want = _folded(store, seq).runs.runs["r1"]
    with materialize.indexed_memory(store, path, DEFAULT_POLICY, (seq, seq)) as memory:
        assert memory.projection("runs", seq, "runs", "r1").runs["r1"] == want
    assert any("discarded" in r.getMessage() for r in caplog.records)  # the file was distrusted and rebuilt
    store.close()
