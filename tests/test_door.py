"""What the door admits, every read survives: no storable event breaks a read, no traceback on a
read path, and the smaller holes (diff backwards, refused files touched, forget's leftovers, policy
ranges, decisions appended as observations), each reproduced as the crash it once was."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from memtape.ledger.store import APPLICATION_ID, SqliteStore, chain_hash
from tests.cli_runner import CliResult, run_cli

TURN_U64 = '{"type":"run_progress","run_id":"r1","turn":18446744073709551615,"current_url":"u"}'
START = '{"type":"run_started","run_id":"r1","goal":"buy socks","start_url":"https://a.com/","domain":"a.com"}'
LESSON = '{"type":"lesson_recorded","lesson_id":"L1","lesson":"x","category":"error_recovery"'
SEED = '{"type":"lesson_seeded","lesson_id":"L1","lesson":"x","category":"error_recovery"'


def cli(memory: Path, *args: str, stdin: str | None = None) -> CliResult:
    return run_cli("--memory-dir", str(memory), *args, stdin=stdin.encode() if stdin is not None else None)


def one_line(r: CliResult) -> str:
    """The error's one line (a progress bar drawn before it may precede it on stderr)."""
    assert r.code != 0, r
    errors = [line for line in r.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and r.err.rstrip("\n").endswith(errors[0]) and "Traceback" not in r.err, r.err
    return errors[0]


#: every read a hostile event once broke, as commands (the memory dir is prepended)
def reads(tmp: Path) -> list[list[str]]:
    return [
        ["state", "runs"],
        ["state", "lessons"],
        ["runs"],
        ["rebuild"],
        ["events"],
        ["events", "--json"],
        ["export", "--format", "agent-memory", "--out", str(tmp / "exp")],
        ["audit", "r1"],
        ["report", "--out", str(tmp / "report")],
        ["diff", "--from", "0", "--to", "9"],
        ["stats"],
        ["verify"],
    ]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Path]:
    m = tmp_path / "mem"
    m.mkdir()
    yield m


# ---- item 1: the crashes of "Why", each refused at the door --------------------------------------


@pytest.mark.parametrize(
    "line, reason",
    [
        (TURN_U64, "turn"),
        (LESSON + ',"use_count":9223372036854775808}', "64-bit"),
        (SEED + ',"step":9223372036854775808}', "step"),
        (SEED + ',"schema_version":-1}', "schema_version -1"),
        (SEED + ',"schema_version":0}', "schema_version 0"),
        (SEED + ',"schema_version":99}', "written by a newer memtape"),
        (SEED + ',"occurred_at":"0001-01-01"}', "occurred_at"),
        (SEED + ',"occurred_at":"9999-12-31T23:59:59-05:00"}', "occurred_at"),
        ('{"type":"run_progress","run_id":"r1","turn":true,"current_url":"u"}', "turn"),
        ('{"type":"run_progress","run_id":"r1","turn":"3","current_url":"u"}', "turn"),
        ('{"type":"run_progress","run_id":"r1","turn":3,"turn":4,"current_url":"u"}', "duplicate key 'turn'"),
        (SEED + ',"domain":"a.com:99999"}', "domain"),
        (SEED + ',"scope_domain":"a.com:99999"}', "scope_domain"),
        (SEED + ',"domain":"a.com:0"}', "domain"),
        (SEED + ',"run_id":"r1\\n"}', "run_id"),
        (SEED + ',"policy_note":{"n":1}}', "policy_note"),
        ('{"type":"run_started","run_id":"r1","goal":"g","policy":{"n":18446744073709551615}}', "64-bit"),
        ('{"type":"run_completed","run_id":"r1","success":true,"duration_ms":1e300}', "duration_ms"),
        ('{"type":"run_completed","run_id":"r1","success":true,"memory_ms":9223372036854775807}', "memory_ms"),
        ('{"type":"run_completed","run_id":"r1","success":1}', "success"),
        ('{"type":"run_completed","run_id":"r1","success":true,"duration_ms":"5"}', "duration_ms"),
        (SEED + ',"recorded_at":"yesterday","occurred_at":null}', "recorded_at"),
        ('{"type":"step_recorded","run_id":"r1","ok":true,"action":{"command":"x","args":{"\\u0000":1}}}', "NUL"),
    ],
)
def test_bad_lines_are_refused_in_one_line_and_reads_still_work(
    memory: Path, tmp_path: Path, line: str, reason: str
) -> None:
    assert cli(memory, "append", "--raw", "-", stdin=START + "\n").code == 0
    for raw in (["--raw"], []):
        err = one_line(cli(memory, "append", *raw, "-", stdin=line + "\n"))
        assert reason in err and "nothing was written" in err, err
    with SqliteStore.open(memory / "ledger.db") as store:
        assert store.head() == 1
    for args in reads(tmp_path):
        r = cli(memory, *args)
        assert r.code == 0, (args, r.err)


def test_the_extremes_the_door_admits_can_be_read_by_everything(memory: Path, tmp_path: Path) -> None:
    big = 2**63 - 1
    lines = [
        START,
        f'{{"type":"run_progress","run_id":"r1","turn":{big},"current_url":"u","step":{big}}}',
        f'{{"type":"lesson_recorded","lesson_id":"L1","lesson":"x","category":"error_recovery",'
        f'"use_count":{big},"failed_command":"click","error_pattern":"blocked","domain":"a.com:65535"}}',
        '{"type":"lesson_recorded","lesson_id":"L2","lesson":"x","category":"error_recovery",'
        '"failed_command":"click","error_pattern":"blocked","occurred_at":"1970-01-01"}',
        '{"type":"error_recall","command":"click","error_snippet":"blocked","matched":1,"lesson_ids":["L1"],'
        '"run_id":"r1","step":3.0,"domain":"A.COM"}',
        f'{{"type":"fact_observed","fact_type":"quirk","key":"k","value":"v","sources":{big},"domain":"a.com"}}',
        '{"type":"fact_observed","fact_type":"quirk","key":"k","value":"w","domain":"a.com",'
        '"occurred_at":"8999-12-31T23:59:59.999999+00:00"}',
        f'{{"type":"run_completed","run_id":"r1","success":true,"turns":{big},"tokens_in":{big},'
        f'"tokens_out":{big},"duration_ms":9e18,"policy_decisions":{big},"replayed_steps":{big},"memory_ms":0}}',
    ]
    for line in lines:  # one at a time through the policy, so dedup and recall add to the extremes
        r = cli(memory, "append", "-", stdin=line + "\n")
        assert r.code == 0, (line, r.err)
    for args in [
        *reads(tmp_path),
        ["explain", "L1"],
        ["experiment", "--set", "promotion_min_uses=1"],
        ["analytics", "runs"],
        ["analytics", "recall"],
        ["analytics", "memory-effect"],
        ["analytics", "promotions"],
        ["analytics", "decay"],
    ]:
        r = cli(memory, *args)
        assert r.code == 0, (args, r.err)
    lessons = orjson.loads(cli(memory, "state", "lessons", "--json").out)
    assert {row["lesson_id"]: row["use_count"] for row in lessons}["L1"] == big  # saturates, never overflows


# ---- item 2: no traceback on a read path --------------------------------------------------------


def insert_row(path: Path, type_: str, payload: str, schema_version: int = 1) -> int:
    """A row written behind the door's back (INSERT is not guarded; the chain is kept linked)."""
    conn = sqlite3.connect(path)
    seq, prev = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    body = (
        seq + 1,
        f"forged-{seq + 1}",
        "memory",
        seq + 1000,
        type_,
        schema_version,
        "2026-01-01T00:00:00.000000Z",
        "2026-01-01T00:00:00.000000Z",
        None,
        None,
        None,
        payload,
        prev,
    )
    conn.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (*body, chain_hash(prev, body)))
    conn.commit()
    conn.close()
    return seq + 1


@pytest.mark.parametrize(
    "type_, payload, version",
    [
        ("lesson_seeded", "{not json", 1),
        ("lesson_seeded", "[1, 2]", 1),
        ("lesson_seeded", '{"lesson_id":"L9","lesson":"x","category":"best_practice"}', 99),
        ("lesson_seeded", '{"lesson_id":"L9","lesson":"x","category":"best_practice"}', 0),
        ("lesson_promoted", '{"lesson_id":"L9","use_count":"many"}', 1),
        ("fact_observed", '{"fact_type":"quirk"}', 1),
    ],
)
def test_an_unreadable_stored_event_is_named_by_its_seq(
    memory: Path, tmp_path: Path, type_: str, payload: str, version: int
) -> None:
    assert cli(memory, "append", "--raw", "-", stdin=START + "\n").code == 0
    seq = insert_row(memory / "ledger.db", type_, payload, version)
    failed = 0
    for args in reads(tmp_path):
        r = cli(memory, *args)
        if r.code != 0:
            failed += 1
            assert f"seq {seq}" in one_line(r), (args, r.err)
    assert failed or type_ == "lesson_promoted"  # a promotion of a lesson nobody holds changes nothing


def test_audit_of_a_run_with_no_steps(memory: Path) -> None:
    assert cli(memory, "append", "--raw", "-", stdin=START + "\n").code == 0
    r = cli(memory, "audit", "r1", "--json")
    assert r.code == 0, r.err
    answer = orjson.loads(r.out)
    assert answer["steps"] == [] and answer["run"]["goal"] == "buy socks"
    assert cli(memory, "audit", "r1").code == 0


def test_an_unexpected_exception_is_one_line(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtape.commands import ledger as commands

    def boom(*_: object) -> None:
        raise IndexError("list index out of range")

    monkeypatch.setattr(commands, "format_line", boom)
    assert cli(memory, "append", "--raw", "-", stdin=START + "\n").code == 0
    err = one_line(cli(memory, "events"))
    assert "IndexError" in err and "MEMTAPE_DEBUG" in err


# ---- item 8: the smaller ones -----------------------------------------------------------------


def two_runs_then_forget(memory: Path, *subjects: str) -> None:
    lines = [START, '{"type":"run_started","run_id":"r2","goal":"find hats","domain":"b.com"}']
    assert cli(memory, "append", "--raw", "-", stdin="\n".join(lines) + "\n").code == 0
    for run in subjects:
        assert cli(memory, "forget", "--run", run).code == 0


def test_diff_backwards_is_refused(memory: Path) -> None:
    two_runs_then_forget(memory)
    err = one_line(cli(memory, "diff", "--from", "2", "--to", "1"))
    assert "seq 2" in err and "seq 1" in err and "swap" in err


@pytest.mark.parametrize(
    "args",
    [
        ["--from", "99999999999999999999", "--to", "1"],
        ["--from", "1", "--to", "99999999999999999999"],
        ["--from", "9223372036854775808", "--to", "9223372036854775808"],
    ],
)
def test_diff_at_a_seq_no_ledger_holds_is_one_line(memory: Path, args: list[str]) -> None:
    two_runs_then_forget(memory)
    err = one_line(cli(memory, "diff", *args))
    seq = args[1] if int(args[1]) > 2**63 - 1 else args[3]
    assert f"seq {seq}" in err and "2**63-1" in err


def test_diff_past_the_head_is_memory_now(memory: Path) -> None:
    """A seq after the ledger's head is the head: memory now (what `state --as-of` answers too)."""
    two_runs_then_forget(memory)
    with SqliteStore.open(memory / "ledger.db") as store:
        head = store.head()
    past = orjson.loads(cli(memory, "diff", "--from", "1", "--to", str(head + 1000), "--json").out)
    assert past == orjson.loads(cli(memory, "diff", "--from", "1", "--to", str(head), "--json").out)


@pytest.mark.parametrize("forgotten", [("r1",), ("r1", "r2")])
def test_diff_names_each_lost_run_with_its_own_goal(memory: Path, forgotten: tuple[str, ...]) -> None:
    two_runs_then_forget(memory, *forgotten)
    r = cli(memory, "diff", "--from", "2", "--to", str(2 + len(forgotten)), "--json")
    assert r.code == 0, r.err
    lost = {c["item"]: c["detail"] for c in orjson.loads(r.out) if c["change"] == "lost" and c["projection"] == "runs"}
    goals = {"r1": "buy socks", "r2": "find hats"}
    assert lost == {run: goals[run] for run in forgotten}


def test_a_file_with_the_mark_but_no_events_table_is_refused_and_untouched(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    memory.mkdir()
    conn = sqlite3.connect(memory / "ledger.db")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    before = (memory / "ledger.db").read_bytes()
    for args in (["stats"], ["events"], ["verify"], ["append", "--raw", "-"], ["state", "lessons"]):
        err = one_line(cli(memory, *args, stdin=SEED + "}\n"))
        assert "not a memtape ledger" in err, err
        assert (memory / "ledger.db").read_bytes() == before
        assert sorted(p.name for p in memory.iterdir()) == ["ledger.db"]


@pytest.mark.parametrize("forget", [["--domain", "shop.test"], ["--session", "s1"], ["--run", "r1"]])
def test_forget_leaves_no_forgotten_run_in_lesson_provenance(memory: Path, forget: list[str]) -> None:
    lines = [
        '{"type":"run_started","run_id":"r1","session_id":"s1","goal":"g","domain":"shop.test"}',
        '{"type":"lesson_recorded","lesson_id":"L1","lesson":"Accept the banner first","category":"error_recovery",'
        '"failed_command":"click","error_pattern":"intercepts","run_id":"r1","step":2,"domain":"cdn.other.test"}',
    ]
    assert cli(memory, "append", "-", stdin="\n".join(lines) + "\n").code == 0
    before = orjson.loads(cli(memory, "state", "lessons", "--json").out)
    assert {row["lesson_id"]: row["taught_by_run"] for row in before}["L1"] == "r1"
    assert cli(memory, "forget", *forget).code == 0
    after = orjson.loads(cli(memory, "state", "lessons", "--json").out)
    assert "L1" in [row["lesson_id"] for row in after]  # a universal lesson stays
    assert "r1" not in orjson.dumps(after).decode()
    assert cli(memory, "rebuild").code == 0
    assert "r1" not in cli(memory, "state", "lessons", "--json").out


@pytest.mark.parametrize(
    "setting",
    [
        "promotion_min_uses=-5",
        "promotion_min_uses=0",
        "fact_decay=0",
        "fact_decay=1.5",
        "trace_ttl_days=-1",
        "trace_ttl_days=1e9",
        "prune_max_age_days=nan",
        "loop_window=0",
        "tier1_cap=-1",
        "promotion_min_uses=99999999999999999999",
    ],
)
def test_experiment_settings_are_range_checked(memory: Path, setting: str) -> None:
    two_runs_then_forget(memory)
    err = one_line(cli(memory, "experiment", "--set", setting))
    assert setting.split("=")[0] in err


@pytest.mark.parametrize(
    "decision",
    [
        "lesson_seeded",
        "lesson_promoted",
        "lesson_deduplicated",
        "lessons_pruned",
        "fact_contradicted",
        "facts_pruned",
        "trajectories_expired",
    ],
)
def test_decisions_are_refused_by_append_without_raw(memory: Path, decision: str) -> None:
    from tests.ledger_samples import sample_line

    line = orjson.dumps(sample_line(decision)).decode()
    err = one_line(cli(memory, "append", "-", stdin=line + "\n"))
    # a seed or a promotion is Tier 1 text too, and that is the first reason given
    reason = "Tier 1" if decision in ("lesson_seeded", "lesson_promoted") else "--raw"
    assert decision in err and reason in err
    assert not (memory / "ledger.db").exists() or SqliteStore.open(memory / "ledger.db").head() == 0
    assert cli(memory, "append", "--raw", "-", stdin=line + "\n").code == 0


def test_the_docs_append_example_keeps_the_experiment_reproducing_the_log(memory: Path) -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    section = docs.split("## `memtape append`", 1)[1].split("\n## ", 1)[0]
    example = section.split("```bash\n", 1)[1].split("```", 1)[0]
    line = example.split("echo '", 1)[1].split("'", 1)[0]
    assert "| memtape append -" in example and "--raw" not in example
    for _ in range(3):
        assert cli(memory, "append", "-", stdin=line + "\n").code == 0
    r = cli(memory, "experiment", "--json")
    assert r.code == 0, r.err
    result = orjson.loads(r.out)
    assert result["differences"] == 0 and result["first_divergence_seq"] is None
