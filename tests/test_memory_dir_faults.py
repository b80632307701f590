"""Faults at the memory directory are named as faults: a full disk, a damaged head write, links and
foreign files in the directory, and several ledgers used from one folder."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import memtape
from memtape.ledger.anchor import Anchor, HeadFile
from memtape.ledger.location import holds_memory_files, open_store, projections_file
from memtape.server import create_app
from tests.cli_runner import run_cli

SHOP = "https://shop.example/"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs of its own, so that filling it fills nothing else (the tests run as root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode:
        pytest.fail(f"cannot mount a tmpfs for the full-disk tests: {done.stderr.strip()}", pytrace=False)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk` (a file of zeros, grown until the write fails)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def one_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def record_run(memory_dir: Path, goal: str) -> None:
    mem = memtape.open(memory_dir)
    try:
        with mem.start_run(goal=goal, start_url=SHOP) as run:
            run.record_step(step=1, action="click", target='button "Add to cart"')
            run.finish(success=True, outcome="done")
    finally:
        mem.close()


def test_a_full_disk_is_one_line_keeps_projections_and_heals(small_disk: Path) -> None:
    memory = small_disk / "m"
    record_run(memory, "Buy wool socks")
    assert run_cli("--memory-dir", str(memory), "state", "runs").code == 0
    projections = memory / "projections.db"
    before = projections.read_bytes()
    filler = fill(small_disk)
    for args in (("start-run", "--goal", "Buy socks " + "x" * 3000, "--url", SHOP), ("state", "runs"), ("rebuild",)):
        result = run_cli("--memory-dir", str(memory), *args)
        assert result.code == 1, (args, result)
        assert "disk full" in one_line(result.err), result.err
        assert projections.exists(), f"{args}: projections.db was deleted on a full disk"
    assert "discarded" not in result.err
    filler.unlink()
    again = run_cli("--memory-dir", str(memory), "start-run", "--goal", "Buy socks", "--url", SHOP)
    assert again.code == 0, again.err
    assert run_cli("--memory-dir", str(memory), "verify").code == 0
    assert projections.read_bytes() != before or projections.exists()


def test_a_full_disk_is_507_over_http(small_disk: Path) -> None:
    memory = small_disk / "m"
    record_run(memory, "Buy wool socks")
    mem = memtape.open(memory)
    try:
        client = TestClient(create_app(mem), base_url="http://127.0.0.1")  # a Host the app answers to
        fill(small_disk)
        answer = client.post("/runs", json={"goal": "Buy socks " + "x" * 3000, "start_url": SHOP})
        assert answer.status_code == 507, answer.text
        assert "disk full" in answer.json()["error"]
    finally:
        mem.close()


def test_the_head_survives_a_full_disk_while_it_is_written(small_disk: Path) -> None:
    memory = small_disk / "m"
    record_run(memory, "Buy wool socks")
    head = memory / "ledger.head"
    seen = json.loads(head.read_text())
    mem = memtape.open(memory)
    with mem.start_run(goal="Buy more socks", start_url=SHOP) as run:  # the ledger moves on
        run.record_step(step=1, action="click", target='button "Add to cart"')
        run.finish(success=True, outcome="done")
    filler = fill(small_disk)
    try:
        mem.close()  # remembers the new head: rewrites the head file on a full disk
    except memtape.MemtapeError as exc:
        assert "disk full" in str(exc)
    assert json.loads(head.read_text())["seq"] >= seen["seq"], "the head was left empty or damaged"
    filler.unlink()
    assert run_cli("--memory-dir", str(memory), "verify").code == 0
    assert run_cli("--memory-dir", str(memory), "state", "runs").code == 0
    assert json.loads(head.read_text())["seq"] > seen["seq"]


def _small_files() -> None:
    """In the child: no file may grow past 16 bytes (a write past it fails, as on a full disk)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))


def test_a_head_write_that_fails_midway_leaves_the_old_head(tmp_path: Path) -> None:
    path = tmp_path / "ledger.head"
    HeadFile(path).save(Anchor(5, "a" * 64))
    code = (
        "import sys; from memtape.ledger.anchor import Anchor, HeadFile; "
        "HeadFile(sys.argv[1]).save(Anchor(9, 'b' * 64))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], preexec_fn=_small_files, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert HeadFile(path).load() == Anchor(5, "a" * 64, path.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.head"]


@pytest.mark.parametrize("name", ["ledger.db", "projections.db", "projections.key", "ledger.head"])
def test_a_link_in_the_memory_directory_is_refused(tmp_path: Path, name: str) -> None:
    memory = tmp_path / "m"
    record_run(memory, "Buy wool socks")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / name
    os.replace(memory / name, target)
    (memory / name).symlink_to(target)
    kept = target.read_bytes()
    result = run_cli("--memory-dir", str(memory), "state", "runs")
    assert result.code == 1
    assert "symbolic link" in one_line(result.err) and name in result.err
    assert target.read_bytes() == kept
    with pytest.raises(memtape.MemtapeError, match="symbolic link"):
        memtape.open(memory)


def test_a_link_to_a_missing_file_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    memory.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.db"
    (memory / "ledger.db").symlink_to(target)
    result = run_cli("--memory-dir", str(memory), "start-run", "--goal", "Buy socks", "--url", SHOP)
    assert result.code == 1 and "symbolic link" in one_line(result.err)
    assert not target.exists()


def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    record_run(memory, "Buy wool socks")
    os.chown(memory / "projections.db", 12345, 12345)
    result = run_cli("--memory-dir", str(memory), "state", "runs")
    assert result.code == 1
    assert "owned by another user" in one_line(result.err) and "projections.db" in result.err


def test_writable_by_others_is_warned_and_works(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    record_run(memory, "Buy wool socks")
    os.chmod(memory, 0o777)
    os.chmod(memory / "projections.key", 0o666)
    result = run_cli("--memory-dir", str(memory), "state", "runs")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if line.startswith("warning: ")]
    assert any("projections.key" in w and "writable" in w for w in warnings), result.err
    assert any(str(memory) in w and "writable" in w for w in warnings), result.err


@pytest.mark.postgres
def test_two_postgresql_ledgers_and_a_sqlite_one_share_a_folder(tmp_path: Path, pg_server) -> None:
    memory = tmp_path / ".agent-memory"
    record_run(memory, "Buy wool socks")  # the SQLite ledger of the folder, as after the demo
    urls = [pg_server.create_database(), pg_server.create_database()]
    for round_ in range(2):
        for url in urls:
            started = run_cli(
                "--memory-dir", str(memory), "--store", url, "start-run", "--goal", f"Buy socks {round_}", "--url", SHOP
            )
            assert started.code == 0, started.err
            runs = run_cli("--memory-dir", str(memory), "--store", url, "state", "runs")
            assert runs.code == 0, runs.err
            assert run_cli("--memory-dir", str(memory), "--store", url, "verify").code == 0
        local = run_cli("--memory-dir", str(memory), "state", "runs")
        assert local.code == 0, local.err
        assert run_cli("--memory-dir", str(memory), "verify").code == 0
    homes = set()
    for url in urls:
        store = open_store(memory, url)
        try:
            homes.add(projections_file(store).parent)
        finally:
            store.close()
    assert len(homes) == 2 and memory not in homes


def test_no_answer_is_written_into_a_server_ledgers_cache_home(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    memory.mkdir()
    assert holds_memory_files(memory / "postgresql-0123456789abcdef" / "projections.db", memory, url="")
    assert holds_memory_files(memory / "ledger.db", memory, url="")
    assert not holds_memory_files(memory / "reports" / "runs.html", memory, url="")
    assert not holds_memory_files(tmp_path / "runs.html", memory, url="")


@pytest.mark.parametrize("as_of", ["²", "１２", "9" * 5000, "NaN", "Infinity", "-1", "12abc"])
def test_any_as_of_string_is_one_line_on_every_face_of_the_library(tmp_path: Path, as_of: str) -> None:
    memory = tmp_path / "m"
    record_run(memory, "Buy wool socks")
    with memtape.open(memory) as mem, pytest.raises(memtape.MemtapeError) as caught:
        mem.state("runs", as_of=as_of)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200
    for args in (
        ("state", "runs", "--as-of", as_of),
        ("export", "--format", "memory-events", "--out", str(tmp_path / "x"), "--as-of", as_of),
    ):
        result = run_cli("--memory-dir", str(memory), *args)
        assert result.code in (1, 2) and "internal error" not in result.err, (args, result)
        one_line(result.err)
