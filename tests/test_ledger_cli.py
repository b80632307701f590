"""The ledger's commands: append, events, verify, stats, schema (in-process, a few end-to-end)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from memtape.ledger.events import EVENT_TYPES
from memtape.ledger.store import SqliteStore
from memtape.projections.pin import DOOR_ONLY
from tests.cli_runner import run_cli
from tests.ledger_samples import SAMPLES, sample_event, sample_line

MEMTAPE = [sys.executable, "-m", "memtape"]


def jsonl(*objs: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def count(memory: Path) -> int:
    db = memory / "ledger.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT COUNT(*) FROM events").fetchone()[0])


# ---- append --------------------------------------------------------------------------


def test_append_raw_writes_exactly_the_lines(memory_path: Path, tmp_path: Path) -> None:
    """Every type but those only their own door writes (issue 38: a pin, a server's answer)."""
    lines = [sample_line(t) for t in sorted(SAMPLES) if t not in DOOR_ONLY]
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(*lines))
    r = run_cli("--memory-dir", str(memory_path), "append", "--raw", str(src))
    assert r.code == 0, r.err
    assert r.out.strip() == f"appended {len(lines)} events (seq 1..{len(lines)})"
    with SqliteStore.open(memory_path / "ledger.db") as store:
        assert [e.type for e in store.read()] == [line["type"] for line in lines]


def test_append_from_stdin_with_envelope_fields(memory_path: Path) -> None:
    line = sample_line("lesson_seeded", id="my-id-1", domain="Example.COM", recorded_at="2025-01-02T03:04:05Z")
    r = run_cli("--memory-dir", str(memory_path), "append", "--raw", "-", stdin=jsonl(line))
    assert r.code == 0, r.err
    with SqliteStore.open(memory_path / "ledger.db") as store:
        (ev,) = store.read()
    assert (ev.id, ev.domain, ev.occurred_at) == ("my-id-1", "example.com", "2025-01-02T03:04:05.000000Z")
    assert ev.recorded_at != ev.occurred_at  # recorded time is the store's


@pytest.mark.parametrize("raw", [True, False])
def test_append_bad_line_writes_nothing(memory_path: Path, tmp_path: Path, raw: bool) -> None:
    lines = jsonl(
        sample_line("lesson_seeded"),
        sample_line("run_started"),
        {"type": "fact_observed", "fact_type": "quirk", "key": "k"},
        sample_line("run_progress"),
    )
    src = tmp_path / "in.jsonl"
    src.write_bytes(lines)
    r = run_cli("--memory-dir", str(memory_path), "append", *(["--raw"] if raw else []), str(src))
    assert r.code == 1
    assert r.err.count("\n") == 1 and r.err.startswith("error: line 3: ") and "value" in r.err
    assert "Traceback" not in r.err
    assert count(memory_path) == 0


def test_append_through_the_default_writer(memory_path: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(sample_line("run_started", run_id="r9", domain="shop.test")))
    r = run_cli("--memory-dir", str(memory_path), "append", str(src))
    assert r.code == 0, r.err
    with SqliteStore.open(memory_path / "ledger.db") as store:
        types = [e.type for e in store.read()]
    assert "run_started" in types  # the policy writer may add its decisions, never drop the observation


# ---- events ----------------------------------------------------------------------------


@pytest.fixture
def filled(memory_path: Path) -> Path:
    with SqliteStore.open(memory_path / "ledger.db") as store:
        store.append(
            [
                sample_event("run_started", run_id="r1", domain="a.com"),
                sample_event("lesson_seeded", text="seed lesson"),
                sample_event("step_recorded", run_id="r1", step=1, domain="a.com"),
                sample_event("run_started", run_id="r2", domain="b.com"),
                sample_event("run_completed", run_id="r2", domain="b.com"),
            ]
        )
    return memory_path


def test_events_filters_and_json_envelope(filled: Path) -> None:
    def seqs(*args: str) -> list[int]:
        r = run_cli("--memory-dir", str(filled), "events", "--json", *args)
        assert r.code == 0, r.err
        return [orjson.loads(line)["seq"] for line in r.out.splitlines()]

    assert seqs() == [1, 2, 3, 4, 5]
    assert seqs("--type", "run_started") == [1, 4]
    assert seqs("--type", "run_started", "--type", "lesson_seeded") == [1, 2, 4]
    assert seqs("--run", "r1") == [1, 3]
    assert seqs("--domain", "b.com") == [4, 5]
    assert seqs("--from-seq", "2", "--to-seq", "4") == [2, 3, 4]
    line = orjson.loads(run_cli("--memory-dir", str(filled), "events", "--json", "--to-seq", "1").out)
    assert set(line) == {
        "seq",
        "id",
        "stream",
        "stream_version",
        "type",
        "schema_version",
        "recorded_at",
        "occurred_at",
        "run_id",
        "step",
        "domain",
        "prev_hash",
        "hash",
        "payload",
    }
    assert line["payload"]["goal"] == "sample text" and line["run_id"] == "r1"
    text = run_cli("--memory-dir", str(filled), "events", "--type", "lesson_seeded").out
    assert "lesson_seeded" in text and "seed lesson" in text and len(text.splitlines()) == 1


def test_events_follow_picks_up_another_process(filled: Path) -> None:
    proc = subprocess.Popen(
        [*MEMTAPE, "--memory-dir", str(filled), "events", "--follow", "--json", "--from-seq", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines and orjson.loads(lines[0])["seq"] == 5
        time.sleep(0.3)
        with SqliteStore.open(filled / "ledger.db") as store:
            store.append([sample_event("lesson_seeded", text="appended later")])
        deadline = time.monotonic() + 20
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(lines) >= 2
        late = orjson.loads(lines[1])
        assert late["seq"] == 6 and late["payload"]["lesson"] == "appended later"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, 130), proc.stderr.read()  # type: ignore[union-attr]
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


# ---- verify, stats, schema ------------------------------------------------------------------


def test_verify_ok_and_broken(filled: Path) -> None:
    r = run_cli("--memory-dir", str(filled), "verify")
    assert r.code == 0 and r.out.startswith("ok: 5 events, chain intact; head 5:")
    with sqlite3.connect(filled / "ledger.db") as c:
        c.execute("DROP TRIGGER events_no_update")
        c.execute("UPDATE events SET payload = replace(payload, 'sample', 'simple') WHERE seq = 3")
    r = run_cli("--memory-dir", str(filled), "verify")
    assert r.code == 1 and r.err.startswith("error: chain broken at seq 3:") and r.err.count("\n") == 1


def test_verify_without_a_ledger_creates_nothing(tmp_path: Path) -> None:
    r = run_cli("--memory-dir", str(tmp_path / "none"), "verify")
    assert r.code == 1 and r.err == f"error: no memory at {tmp_path / 'none'}\n"
    assert not (tmp_path / "none").exists()


def test_stats(filled: Path) -> None:
    r = run_cli("--memory-dir", str(filled), "stats", "--json")
    assert r.code == 0
    st = orjson.loads(r.out)
    assert st["count"] == 5 and st["by_type"]["run_started"] == 2
    assert st["by_domain"] == {"a.com": 2, "b.com": 2} and st["by_run"] == {"r1": 2, "r2": 2}
    assert st["file_bytes"] > 0 and st["first_recorded_at"] <= st["last_recorded_at"]
    text = run_cli("--memory-dir", str(filled), "stats").out
    assert "│      5 │" in text and "run_started" in text and "a.com" in text and "r2" in text


@pytest.mark.parametrize("type_", sorted(EVENT_TYPES))
def test_schema_of_each_type_is_valid_and_describes_whole_lines(type_: str) -> None:
    r = run_cli("schema", type_)
    assert r.code == 0
    schema = orjson.loads(r.out)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    good = sample_line(
        type_, run_id="r1", step=1, domain="example.com", id="e-1", stream="s-1", occurred_at="2026-01-01T00:00:00Z"
    )
    assert validator.is_valid(good), list(validator.iter_errors(good))[:1]
    assert not validator.is_valid({**good, "unexpected_field": 1})
    assert not validator.is_valid({**good, "type": "something_else"})
    for required in schema["required"]:
        assert not validator.is_valid({k: v for k, v in good.items() if k != required}), required
    assert ("run_id" in schema["required"]) == EVENT_TYPES[type_].NEEDS_RUN


def test_schema_of_the_union_lists_every_type() -> None:
    r = run_cli("schema")
    schema = orjson.loads(r.out)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    assert len(schema["oneOf"]) == len(EVENT_TYPES)
    for type_ in EVENT_TYPES:
        good = sample_line(type_, run_id="r1")
        assert validator.is_valid(good), type_
    needing = sorted(t for t in EVENT_TYPES if "run_id" in schema["$defs"][f"line_{t}"]["required"])
    assert needing == sorted(t for t, cls in EVENT_TYPES.items() if cls.NEEDS_RUN) and len(needing) >= 6
    assert run_cli("schema", "no_such_type").code == 2


def test_cli_end_to_end_in_a_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "MEMTAPE_DIR": str(tmp_path / "mem")}
    data = jsonl(sample_line("lesson_seeded"), sample_line("run_started"))
    done = subprocess.run([*MEMTAPE, "append", "--raw", "-"], input=data, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*MEMTAPE, "verify"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.decode().startswith("ok: 2 events, chain intact; head 2:")
