"""A tamper-evident head and verified reads.

Every tamper case below is named: `verify` exits 1 naming exactly the seq that was edited, removed
or cut, and every other command refuses (or stops) with one line instead of serving or rebuilding.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from memtape.ledger.anchor import HeadFile, parse_anchor
from memtape.ledger.errors import ChainBroken, LedgerError
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.trust_support import behind_the_back, payload_editor, rehash, rows, small_memory


def cli(mem: Path, *args: str, stdin: bytes | None = None) -> Any:
    return run_cli("--memory-dir", str(mem), *args, stdin=stdin)


def named(r: Any, seq: int) -> bool:
    """Exit 1 and one error line naming `seq` (rebuild's progress bar may precede it)."""
    errors = [line for line in r.err.splitlines() if line.startswith("error: ")]
    return (
        r.code == 1
        and len(errors) == 1
        and r.err.endswith(errors[0] + "\n")
        and f"seq {seq}" in errors[0]
        and "Traceback" not in r.err
    )


@pytest.fixture
def mem(memory_path: Path) -> Path:
    small_memory(memory_path)
    r = cli(memory_path, "verify")  # this memory has now seen the head
    assert r.code == 0, r.err
    return memory_path


def head_of(mem: Path) -> int:
    return len(rows(mem / "ledger.db"))


# ---- the tamper cases, each named exactly by verify --------------------------------------------


def _set(col: int, value: Any) -> Any:
    def edit(row: list[Any]) -> None:
        row[col] = value

    return edit


TAMPER_CASES: dict[str, Any] = {
    "payload edited": lambda led, n: behind_the_back(
        led, f"UPDATE events SET payload = replace(payload, '}}', ',\"forged\":1}}') WHERE seq = {n}"
    ),
    "payload edited and the row re-hashed": lambda led, n: rehash(led, n, payload_editor),
    "envelope edited": lambda led, n: behind_the_back(led, f"UPDATE events SET domain = 'evil.com' WHERE seq = {n}"),
    "envelope edited and the row re-hashed": lambda led, n: rehash(led, n, _set(10, "evil.com")),
    "recorded time edited and the row re-hashed": lambda led, n: rehash(led, n, _set(6, "2020-01-01T00:00:00.000000Z")),
    "prev_hash rewritten and the row re-hashed": lambda led, n: rehash(led, n, _set(12, "f" * 64)),
    "payload made not JSON and the row re-hashed": lambda led, n: rehash(led, n, _set(11, "{not json")),
    "row removed": lambda led, n: behind_the_back(led, f"DELETE FROM events WHERE seq = {n}"),
}
TAIL_CASES: dict[str, Any] = {
    "last row removed": lambda led, h: (behind_the_back(led, f"DELETE FROM events WHERE seq = {h}"), h)[1],
    "last 5 rows removed": lambda led, h: (behind_the_back(led, f"DELETE FROM events WHERE seq > {h - 5}"), h - 4)[1],
    "last row edited and re-hashed": lambda led, h: (rehash(led, h, payload_editor), h)[1],
    "every row from seq 5 re-hashed to the end": lambda led, h: (rehash(led, 5, payload_editor, through_tail=True), h)[
        1
    ],
    "ledger emptied": lambda led, h: (behind_the_back(led, "DELETE FROM events"), 1)[1],
}


@pytest.mark.parametrize("case", sorted(TAMPER_CASES))
def test_verify_names_exactly_the_edited_seq(mem: Path, case: str) -> None:
    TAMPER_CASES[case](mem / "ledger.db", 6)
    r = cli(mem, "verify")
    assert named(r, 6), (case, r)
    assert r.err.startswith("error: chain broken at seq 6:")


@pytest.mark.parametrize("case", sorted(TAIL_CASES))
def test_a_cut_or_rewritten_tail_is_named_by_the_remembered_head(mem: Path, case: str) -> None:
    expected = TAIL_CASES[case](mem / "ledger.db", head_of(mem))
    r = cli(mem, "verify")
    assert named(r, expected), (case, r)


@pytest.mark.parametrize("case", sorted(TAIL_CASES))
def test_every_other_command_refuses_a_cut_ledger_instead_of_rebuilding(mem: Path, case: str) -> None:
    assert cli(mem, "state", "tier1").code == 0  # projections.db saw the head too
    before = (mem / "projections.db").read_bytes()
    expected = TAIL_CASES[case](mem / "ledger.db", head_of(mem))
    line = b'{"type":"run_progress","run_id":"r9","turn":1,"current_url":"http://a.com/"}\n'
    for args in (
        ["state", "tier1"],
        ["events"],
        ["rebuild"],
        ["runs"],
        ["stats"],
        ["export", "--format", "memory-json", "--out", str(mem.parent / "x.json")],
    ):
        r = cli(mem, *args)
        assert named(r, expected) and "cut or rewritten" in r.err, (args, r)
    r = cli(mem, "append", "-", stdin=line)
    assert named(r, expected), r
    assert (mem / "projections.db").read_bytes() == before  # not rebuilt around the cut
    assert not (mem.parent / "x.json").exists()


def test_the_head_file_is_private_and_only_moves_forward(mem: Path) -> None:
    path = mem / "ledger.head"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert saved["seq"] == head_of(mem)
    HeadFile(path).save(parse_anchor(f"3:{'a' * 64}"))  # a process that saw less never lowers it
    assert json.loads(path.read_text()) == saved


def test_projections_db_remembers_the_head_when_the_head_file_is_gone(mem: Path) -> None:
    assert cli(mem, "state", "tier1").code == 0
    h = head_of(mem)
    os.unlink(mem / "ledger.head")
    behind_the_back(mem / "ledger.db", f"DELETE FROM events WHERE seq = {h}")
    assert named(cli(mem, "verify"), h)
    assert named(cli(mem, "state", "lessons"), h)


def test_verify_prints_the_head_and_checks_an_anchor_kept_elsewhere(mem: Path) -> None:
    r = cli(mem, "verify")
    h = head_of(mem)
    last = rows(mem / "ledger.db")[-1][13]
    assert r.code == 0 and r.out.strip().endswith(f"head {h}:{last}")
    anchor = f"{h}:{last}"
    for f in ("ledger.head", "projections.db"):
        if (mem / f).exists():
            os.unlink(mem / f)
    behind_the_back(mem / "ledger.db", f"DELETE FROM events WHERE seq > {h - 2}")
    assert cli(mem, "verify").code == 0  # nothing here remembers the old head any more...
    assert named(cli(mem, "verify", "--head", anchor), h - 1)  # ...but the anchor kept elsewhere does
    r = cli(mem, "verify", "--head", "12:nothex")
    assert r.code == 2 and "SEQ:HASH" in r.err and r.err.count("\n") == 1


def test_a_longer_ledger_is_fine_and_moves_the_head(mem: Path) -> None:
    line = b'{"type":"run_progress","run_id":"r9","turn":1,"current_url":"http://a.com/"}\n'
    assert cli(mem, "append", "--raw", "-", stdin=line).code == 0
    assert json.loads((mem / "ledger.head").read_text())["seq"] == head_of(mem)


# ---- verified reads ------------------------------------------------------------------------------

READS = (
    ["events"],
    ["events", "--json"],
    ["state", "lessons"],
    ["state", "tier1", "--json"],
    ["rebuild"],
    ["runs"],
    ["diff", "--from", "1", "--to", "20"],
)


@pytest.mark.parametrize("rehashed", [False, True], ids=["edited", "edited-and-re-hashed"])
def test_reads_stop_at_an_edited_event_naming_it(mem: Path, tmp_path: Path, rehashed: bool) -> None:
    seq = 6
    if rehashed:
        rehash(mem / "ledger.db", seq, payload_editor)
    else:
        TAMPER_CASES["payload edited"](mem / "ledger.db", seq)
    for args in READS:
        r = cli(mem, *args)
        assert named(r, seq), (args, r)
        assert "forged" not in r.out
    out = tmp_path / "export"
    for fmt in ("memory-json", "agent-memory", "json", "csv", "prompt"):
        r = cli(mem, "export", "--format", fmt, "--out", str(out / fmt))
        assert named(r, seq), (fmt, r)
        assert not (out / fmt).exists()


def test_allow_broken_reads_an_edited_ledger_for_forensics(mem: Path) -> None:
    rehash(mem / "ledger.db", 6, payload_editor)
    before = (mem / "projections.db").stat().st_mtime_ns if (mem / "projections.db").exists() else None
    r = cli(mem, "events", "--json", "--allow-broken")
    assert r.code == 0 and "forged" in r.out
    r = cli(mem, "state", "lessons", "--json", "--allow-broken")
    assert r.code == 0, r.err
    after = (mem / "projections.db").stat().st_mtime_ns if (mem / "projections.db").exists() else None
    assert after == before  # nothing read from a broken ledger is materialized
    assert named(cli(mem, "events"), 6)  # and without the flag it still stops


def test_store_reads_check_links_and_content(fresh_ledger: SqliteStore, ledger_path: Path) -> None:
    small_memory(ledger_path.parent)
    with SqliteStore.open(ledger_path) as store:
        n = store.head()
    rehash(ledger_path, 4, payload_editor)
    with SqliteStore.open(ledger_path) as store:
        with pytest.raises(ChainBroken) as caught:
            list(store.read())
        assert caught.value.seq == 4
        with pytest.raises(ChainBroken) as caught:  # a range starting after the edit still links to it
            list(store.read(5, n))
        assert caught.value.seq == 4
        assert [e.seq for e in store.read(6, n)] == list(range(6, n + 1))
    with SqliteStore.open(ledger_path, verify_reads=False) as store:
        assert len(list(store.read())) == n


def test_parse_anchor_refuses_bad_text() -> None:
    for bad in ("", "12", "0:" + "a" * 64, "x:" + "a" * 64, "12:" + "A" * 63, f"{2**63}:" + "a" * 64):
        with pytest.raises(LedgerError):
            parse_anchor(bad)
    assert parse_anchor(" 7:" + "b" * 64 + "\n").seq == 7


def test_the_trust_page_counts_these_cases() -> None:
    """docs/trust.md quotes how many tamper cases are named."""
    trust = (Path(__file__).resolve().parent.parent / "docs" / "trust.md").read_text().split("\n## Secrets\n", 1)[0]
    flat = " ".join(trust.split())
    assert f"{len(TAMPER_CASES) + len(TAIL_CASES)} ledger tamper cases, each named exactly by `verify`" in flat
    assert f"For the {len(TAIL_CASES)} tail cases" in flat


# ---- the same on PostgreSQL ----------------------------------------------------------------------


def test_postgresql_cut_tail_and_edited_payload_are_named(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    mem = tmp_path / "memory"
    lines = b"".join(
        b'{"type":"run_progress","run_id":"r1","turn":%d,"current_url":"http://a.com/"}\n' % i for i in range(8)
    )
    pg = ("--store", pg_url)
    assert run_cli("--memory-dir", str(mem), *pg, "append", "--raw", "-", stdin=lines).code == 0
    assert run_cli("--memory-dir", str(mem), *pg, "state", "runs").code == 0
    heads = list(mem.glob("postgresql-*.head"))
    assert len(heads) == 1 and stat.S_IMODE(heads[0].stat().st_mode) == 0o600
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        conn.execute("DELETE FROM events WHERE seq > 6")
    assert named(run_cli("--memory-dir", str(mem), *pg, "verify"), 7)
    for args in (["events"], ["state", "runs"], ["append", "--raw", "-"]):
        r = run_cli("--memory-dir", str(mem), *pg, *args, stdin=lines.split(b"\n")[0] + b"\n")
        assert named(r, 7) and "cut or rewritten" in r.err, (args, r)
    shutil.rmtree(mem)  # forget every remembered head: the chain check alone still holds
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE events SET payload = payload || ' ' WHERE seq = 3")
    assert named(run_cli("--memory-dir", str(mem), *pg, "verify"), 3)
    assert named(run_cli("--memory-dir", str(mem), *pg, "events"), 3)
    assert named(run_cli("--memory-dir", str(mem), *pg, "state", "runs"), 3)


def test_the_python_api_remembers_and_checks_the_head(tmp_path: Path) -> None:
    import memtape

    mem = tmp_path / "memory"
    with memtape.open(mem) as m, m.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.finish(success=True, outcome="bought")
    h = head_of(mem)
    assert json.loads((mem / "ledger.head").read_text())["seq"] == h
    behind_the_back(mem / "ledger.db", f"DELETE FROM events WHERE seq = {h}")
    with pytest.raises(memtape.MemtapeError, match=f"seq {h} is missing"):
        memtape.open(mem)
