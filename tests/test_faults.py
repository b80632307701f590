"""Faults: crashes, disk trouble and a held lock end in one-line errors and an intact ledger."""

from __future__ import annotations

import multiprocessing
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import DiskFull, LedgerError
from memtape.ledger.events import LessonRecorded, RunProgress
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.ledger_samples import sample_event, sample_line
from tests.test_ledger_store import _damaged

MEMTAPE = [sys.executable, "-m", "memtape"]


def snapshot(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as c:
        return c.execute("SELECT seq, id, hash FROM events ORDER BY seq").fetchall()


def one_line_error(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


# ---- crash: SIGKILL while appending ---------------------------------------------------------


def _crash_writer(path: str, name: str, log: str, seed: int) -> None:
    """Append batches forever; log each batch only AFTER append returned (the crash may come anywhere)."""
    rng = random.Random(seed)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    store = SqliteStore.open(path, busy_timeout=30)
    b = 0
    while True:
        n = rng.randint(1, 25)
        tag = f"{name}-{b}"
        store.append(
            [
                *(
                    NewEvent(payload=RunProgress(turn=i, current_url=f"{tag}/{i}/{n + 1}"), run_id=name)
                    for i in range(n)
                ),
                NewEvent(
                    payload=LessonRecorded(
                        lesson_id=tag,
                        lesson=f"{tag}/{n}/{n + 1}",
                        category="site_specific",
                        scope_domain=f"{name}.example.com",
                    ),
                    domain=f"{name}.example.com",
                ),
            ]
        )
        os.write(fd, f"{tag} {n}\n".encode())
        b += 1


@pytest.mark.stress
def test_sigkilled_writers_lose_nothing_that_returned(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    SqliteStore.open(db).close()
    ctx = multiprocessing.get_context("fork")
    logs: dict[str, Path] = {}
    rng = random.Random(7)
    from memtape.projections.view import MemoryView

    projections = tmp_path / "projections.db"
    for rnd in range(6):
        procs = {}
        for w in range(3):
            name = f"w{w}r{rnd}"
            logs[name] = tmp_path / f"{name}.log"
            procs[name] = ctx.Process(target=_crash_writer, args=(str(db), name, str(logs[name]), rng.randrange(10**6)))
            procs[name].start()
        for p in procs.values():  # each writer dies at its own random moment
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(p.pid, signal.SIGKILL)
        for p in procs.values():
            p.join(10)
            assert p.exitcode == -signal.SIGKILL
        with SqliteStore.open(db) as store:  # projections catch up incrementally after every round of kills
            MemoryView.open(store, projections)
    with SqliteStore.open(db) as store:
        events = list(store.read())
        result = store.verify()
        incremental = MemoryView.open(store, projections)
        assert incremental.head == len(events)
        assert incremental.digests() == MemoryView.from_events(events).digests()  # rebuild == incremental
        assert {lesson.lesson_id for lesson in incremental.lessons()} == {
            e.data["lesson_id"] for e in events if e.type == "lesson_recorded"
        }
    assert result.ok, result
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    batches: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for e in events:
        tag, i, n = (e.data["current_url"] if e.type == "run_progress" else e.data["lesson"]).split("/")
        batches[tag].append((e.seq, int(i), int(n)))
    for tag, items in batches.items():  # no half batch: complete, in order, contiguous
        n = items[0][2]
        assert [i for _, i, _ in items] == list(range(n)), tag
        assert [s for s, _, _ in items] == list(range(items[0][0], items[0][0] + n)), tag
    logged_total = 0
    for name, log in logs.items():
        logged = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        logged_total += len(logged)
        for tag, n in logged:  # every append that returned is there
            assert tag in batches and len(batches[tag]) == int(n) + 1, tag
        present = sorted(int(t.split("-")[1]) for t in batches if t.startswith(f"{name}-"))
        # committed but killed before logging: at most the writer's last batch
        assert present in (list(range(len(logged))), list(range(len(logged) + 1))), (name, present, len(logged))
    assert logged_total > 20  # the writers really did work between kills


# ---- disk trouble ----------------------------------------------------------------------


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make `directory` read-only for this process: a read-only remount when root (who ignores modes), else chmod."""
    if os.geteuid() != 0:
        directory.chmod(0o500)
        try:
            yield
        finally:
            directory.chmod(0o700)
        return
    saved = {p.name: p.read_bytes() for p in directory.iterdir()}
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(directory)], check=True)
    try:
        for name, data in saved.items():
            (directory / name).write_bytes(data)
        subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def test_read_only_memory_directory(memory_path: Path, tmp_path: Path) -> None:
    with SqliteStore.open(memory_path / "ledger.db") as store:
        store.append([sample_event("lesson_seeded"), sample_event("run_started")])
    before = (memory_path / "ledger.db").read_bytes()
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(sample_line("lesson_seeded")) + b"\n")
    with read_only(memory_path):
        r = run_cli("--memory-dir", str(memory_path), "append", "--raw", str(src))
        assert r.code == 1 and one_line_error(r.err), r.err
        assert "read-only" in r.err or "cannot" in r.err
        assert (memory_path / "ledger.db").read_bytes() == before
        assert sorted(p.name for p in memory_path.iterdir()) == ["ledger.db"]
    r = run_cli("--memory-dir", str(memory_path), "verify")
    assert r.code == 0 and "2 events" in r.out


def test_read_only_parent_cannot_create_a_memory_directory(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    with read_only(parent):
        r = run_cli(
            "--memory-dir",
            str(parent / "mem"),
            "append",
            "--raw",
            "-",
            stdin=orjson.dumps(sample_line("lesson_seeded")),
        )
        assert r.code == 1 and one_line_error(r.err), r.err
        assert list(parent.iterdir()) == []


def test_full_disk_in_the_store_rolls_back(ledger_path: Path) -> None:
    """A size-limited database (max_page_count): the append that does not fit writes nothing."""
    store = SqliteStore.open(ledger_path)
    store.append([sample_event("lesson_seeded")])
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages + 8}")
    appended = 1
    with pytest.raises(DiskFull) as info:
        for _ in range(200):
            store.append([sample_event("step_recorded", text="x" * 3000) for _ in range(5)])
            appended += 5
    assert "disk full" in str(info.value) and "\n" not in str(info.value)
    assert store.head() == appended
    store.close()
    with SqliteStore.open(ledger_path) as again:
        assert again.verify().ok and again.head() == appended
        again.append([sample_event("lesson_seeded")])  # room again once the limit is gone
        assert again.verify().ok


def _limited(limit: int):  # type: ignore[no-untyped-def]
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_full_disk_from_the_cli(memory_path: Path, tmp_path: Path) -> None:
    """A size-limited file (RLIMIT_FSIZE, works without root): one-line error, exit 1, nothing written."""
    with SqliteStore.open(memory_path / "ledger.db") as store:
        store.append([sample_event("lesson_seeded")])
    before = snapshot(memory_path / "ledger.db")
    big = tmp_path / "big.jsonl"
    big.write_bytes(
        b"".join(orjson.dumps(sample_line("step_recorded", text=f"{i} " + "y" * 5000)) + b"\n" for i in range(200))
    )
    done = subprocess.run(
        [*MEMTAPE, "--memory-dir", str(memory_path), "append", "--raw", str(big)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited(256 * 1024),
    )
    assert done.returncode == 1 and one_line_error(done.stderr), done.stderr
    assert "disk" in done.stderr
    assert snapshot(memory_path / "ledger.db") == before
    r = run_cli("--memory-dir", str(memory_path), "verify")
    assert r.code == 0 and "1 events" in r.out


def test_lock_held_beyond_the_busy_timeout(memory_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = memory_path / "ledger.db"
    with SqliteStore.open(db) as store:
        store.append([sample_event("lesson_seeded")])
    before = snapshot(db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        monkeypatch.setenv("MEMTAPE_BUSY_TIMEOUT", "0.3")
        t0 = time.monotonic()
        r = run_cli(
            "--memory-dir", str(memory_path), "append", "--raw", "-", stdin=orjson.dumps(sample_line("lesson_seeded"))
        )
        assert time.monotonic() - t0 < 10
        assert r.code == 1 and one_line_error(r.err) and "locked" in r.err, r.err
        r = run_cli("--memory-dir", str(memory_path), "events", "--json")  # readers are not blocked (WAL)
        assert r.code == 0 and len(r.out.splitlines()) == 1
    finally:
        holder.kill()
        holder.wait()
    assert snapshot(db) == before
    monkeypatch.setenv("MEMTAPE_BUSY_TIMEOUT", "soon")
    r = run_cli("--memory-dir", str(memory_path), "verify")
    assert r.code == 1 and one_line_error(r.err) and "MEMTAPE_BUSY_TIMEOUT" in r.err
    monkeypatch.delenv("MEMTAPE_BUSY_TIMEOUT")
    assert run_cli("--memory-dir", str(memory_path), "verify").code == 0


def test_damaged_ledgers_from_the_cli(tmp_path: Path) -> None:
    cases = {
        "random": os.urandom(20000),
        "text": b"not a database\n" * 100,
        "empty-header": b"SQLite format 3\x00" + b"\x00" * 84,
    }
    for name, data in cases.items():
        d = tmp_path / name
        d.mkdir()
        (d / "ledger.db").write_bytes(data)
        for args in (["verify"], ["events"], ["stats"], ["append", "--raw", "-"]):
            r = run_cli("--memory-dir", str(d), *args, stdin=orjson.dumps(sample_line("lesson_seeded")))
            assert r.code == 1 and one_line_error(r.err), (name, args, r.err)
        assert (d / "ledger.db").read_bytes() == data
    for kind in ("truncated", "newer"):
        d = tmp_path / kind
        d.mkdir()
        data = _damaged(d, kind).read_bytes()
        for args in (["verify"], ["events"], ["stats"]):
            r = run_cli("--memory-dir", str(d), *args)
            assert r.code == 1 and one_line_error(r.err), (kind, args, r.err)
        assert (d / "ledger.db").read_bytes() == data
    done = subprocess.run(
        [*MEMTAPE, "--memory-dir", str(tmp_path / "random"), "verify"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and one_line_error(done.stderr), done.stderr


def test_interrupted_transaction_is_rolled_back(ledger_path: Path) -> None:
    with SqliteStore.open(ledger_path) as store:
        store.append([sample_event("lesson_seeded")])
        with pytest.raises(RuntimeError), store.atomic() as tx:
            tx.append([sample_event("run_started")])
            raise RuntimeError("the caller failed half way")
        assert store.head() == 1
        with pytest.raises(LedgerError), store.atomic() as tx:
            tx.append([sample_event("run_started")])
            tx.append([sample_event("lesson_seeded", id=next(store.read()).id)])
        assert store.head() == 1 and store.verify().ok


@contextmanager
def small_disk(directory: Path, size_kb: int) -> Iterator[bool]:
    """A real full disk: a small tmpfs mounted on `directory` (yields False where mounting is not allowed)."""
    directory.mkdir(exist_ok=True)
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0700", "tmpfs", str(directory)], capture_output=True
        ).returncode
        != 0
    ):
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def test_full_tmpfs_from_the_cli(tmp_path: Path) -> None:
    """ENOSPC on a real file system: one-line error, exit 1, the earlier events intact and verifiable.

    Without the right to mount, the same run goes through a size-limited file (RLIMIT_FSIZE) instead."""
    disk = tmp_path / "disk"
    with small_disk(disk, 320) as mounted:
        memory = disk / "mem"
        first = run_cli(
            "--memory-dir", str(memory), "append", "--raw", "-", stdin=orjson.dumps(sample_line("lesson_seeded"))
        )
        assert first.code == 0, first.err
        before = snapshot(memory / "ledger.db")
        big = tmp_path / "big.jsonl"
        big.write_bytes(
            b"".join(orjson.dumps(sample_line("fact_observed", text=f"{i} " + "v" * 8000)) + b"\n" for i in range(100))
        )
        limit = None if mounted else _limited(320 * 1024)
        done = subprocess.run(
            [*MEMTAPE, "--memory-dir", str(memory), "append", "--raw", str(big)],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limit,
        )
        assert done.returncode == 1 and one_line_error(done.stderr), done.stderr
        assert "disk" in done.stderr
        assert snapshot(memory / "ledger.db") == before
        r = run_cli("--memory-dir", str(memory), "verify")
        assert r.code == 0 and "1 events" in r.out, r.err
