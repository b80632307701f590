"""Hostile input to the ledger's commands: one-line error, non-zero exit, nothing written, no stray files."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.events import EVENT_TYPES
from memtape.ledger.field_rules import IDENT_RE, MAX_TEXT
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.ledger_samples import SAMPLES, sample_event, sample_line

FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def ledger_with_two_events() -> Iterator[tuple[Path, Path]]:
    """(workspace, memory dir) holding a two-event ledger; the cwd is the workspace."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        memory = root / "mem"
        memory.mkdir(mode=0o700)
        with SqliteStore.open(memory / "ledger.db") as store:
            store.append([sample_event("lesson_seeded"), sample_event("run_started")])
        old = os.getcwd()
        os.chdir(root)
        try:
            yield root, memory
        finally:
            os.chdir(old)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def assert_refused(root: Path, memory: Path, args: list[str], stdin: bytes | None = None) -> None:
    """The command fails with one line and exit != 0; the ledger and the workspace are unchanged."""
    before_files = tree(root) - {str(p.relative_to(root)) for p in memory.glob("ledger.db-*")}
    r = run_cli("--memory-dir", str(memory), *args, stdin=stdin)
    assert r.code != 0, (args, r)
    assert r.err.startswith("error: ") and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    with SqliteStore.open(memory / "ledger.db") as store:
        assert store.head() == 2 and store.verify().ok
    after = tree(root) - {str(p.relative_to(root)) for p in memory.glob("ledger.db-*")}
    assert after == before_files, after ^ before_files


def append_refused(lines: bytes) -> None:
    with ledger_with_two_events() as (root, memory):
        src = root / "input.jsonl"
        src.write_bytes(lines)
        for raw in (["--raw"], []):
            assert_refused(root, memory, ["append", *raw, str(src)])
        assert_refused(root, memory, ["append", "--raw", "-"], stdin=lines)


def good_lines(n: int) -> list[bytes]:
    return [orjson.dumps(sample_line(t)) for t in sorted(SAMPLES)[:n]]


def with_bad_line(bad: bytes, data: st.DataObject) -> bytes:
    lines = good_lines(data.draw(st.integers(0, 4)))
    lines.insert(data.draw(st.integers(0, len(lines))), bad)
    return b"\n".join(lines) + b"\n"


# ---- append ----------------------------------------------------------------------------------


@FUZZ
@given(st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b and b.strip() != b""), st.data())
def test_malformed_or_non_utf8_lines(bad: bytes, data: st.DataObject) -> None:
    try:
        obj = orjson.loads(bad)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict) and obj.get("type") in EVENT_TYPES:
        return  # a random valid event is not bad input
    append_refused(with_bad_line(bad, data))


@FUZZ
@given(st.sampled_from(sorted(SAMPLES)), st.data())
def test_wrong_types(type_: str, data: st.DataObject) -> None:
    line = sample_line(type_)
    keys = [k for k in line if k not in ("type", "run_id")]
    key = data.draw(st.sampled_from(keys))
    value = line[key]
    wrong: Any
    if isinstance(value, bool):
        wrong = data.draw(st.sampled_from(["yes", [True], {"a": 1}]))
    elif isinstance(value, (int, float)):
        wrong = data.draw(
            st.sampled_from(["many", [1], {"n": 1}, -1 if isinstance(value, int) and key != "priority" else "x"])
        )
    elif isinstance(value, str):
        wrong = data.draw(st.sampled_from([123, True, ["a"], {"s": "a"}]))
    elif isinstance(value, list):
        wrong = data.draw(st.sampled_from(["a", 5, {"k": [1]}]))
    else:
        wrong = data.draw(st.sampled_from(["a", 5, [1]]))
    bad = {**line, key: wrong}
    cls = EVENT_TYPES[type_]
    try:  # a few "wrong" values are still valid (e.g. a string where Any is allowed): skip those
        cls.model_validate({k: v for k, v in bad.items() if k not in ("type", "run_id", "domain", "step")})
        return
    except Exception:
        pass
    append_refused(with_bad_line(orjson.dumps(bad), data))


@FUZZ
@given(st.text(min_size=1, max_size=30).filter(lambda t: t not in EVENT_TYPES), st.data())
def test_unknown_types(type_: str, data: st.DataObject) -> None:
    append_refused(with_bad_line(orjson.dumps({"type": type_, "goal": "x"}), data))


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["lesson_seeded", "fact_observed", "run_started", "error_recall"]), st.data())
def test_huge_fields(type_: str, data: st.DataObject) -> None:
    line = sample_line(type_)
    key = next(
        k for k, v in line.items() if isinstance(v, str) and k not in ("type", "run_id", "category", "fact_type")
    )
    append_refused(with_bad_line(orjson.dumps({**line, key: "z" * (MAX_TEXT + 1)}), data))


hostile_names = st.one_of(
    st.sampled_from(
        [
            "../../etc",
            "../x",
            "/etc/passwd",
            "a/b",
            "exa mple.com",
            "a\x00b.com",
            "x.com\x00",
            ".",
            "..",
            "",
            "a..b",
            "-a.com",
            "a.com/../../x",
            "C:\\win",
            "a\nb",
            "a\tb.com",
            "\u202eevil.com",
        ]
    ),
    st.text(min_size=1, max_size=12).map(lambda t: f"../{t}"),
    st.text(min_size=1, max_size=12).map(lambda t: f"{t}\x00"),
)


@FUZZ
@given(hostile_names, st.sampled_from(["domain", "scope_domain", "run_id", "stream", "id"]), st.data())
def test_hostile_names_in_envelope_and_scope(name: str, key: str, data: st.DataObject) -> None:
    if key in ("run_id", "stream", "id") and IDENT_RE.match(name):
        return  # e.g. "a..b" is a fine identifier: no separator, cannot climb out of a directory
    type_ = "lesson_seeded" if key == "scope_domain" else "run_started"
    line = {**sample_line(type_), key: name}
    append_refused(with_bad_line(orjson.dumps(line), data))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([chr(c) for c in range(32) if c != 10]), st.data())
def test_raw_control_characters_inside_json_strings(ch: str, data: st.DataObject) -> None:
    line = orjson.dumps(sample_line("lesson_seeded", text="before AFTER")).replace(b"before", f"be{ch}fore".encode())
    append_refused(with_bad_line(line, data))


def test_escaped_control_characters_in_free_text_are_kept_verbatim(memory_path: Path) -> None:
    """Escaped control characters (other than NUL) are legitimate page text: stored exactly, printed escaped."""
    text = "tab\there bell\x07 esc\x1b[31m"
    r = run_cli(
        "--memory-dir",
        str(memory_path),
        "append",
        "--raw",
        "-",
        stdin=orjson.dumps(sample_line("lesson_seeded", text=text)),
    )
    assert r.code == 0, r.err
    out = run_cli("--memory-dir", str(memory_path), "events", "--json").out
    assert orjson.loads(out)["payload"]["lesson"] == text


def test_nul_anywhere_is_refused() -> None:
    for line in (
        b'{"type":"lesson_seeded","lesson_id":"l","lesson":"a\\u0000b","category":"best_practice"}',
        b'{"type":"run_started","run_id":"r\\u0000","goal":"g"}',
        b'{"type":"run_started","run_id":"r","goal":"g","policy":{"k":["\\u0000"]}}',
    ):
        append_refused(line + b"\n")


def test_bad_line_error_names_the_line() -> None:
    with ledger_with_two_events() as (root, memory):
        lines = b"\n".join([*good_lines(3), b"{oops", *good_lines(1)])
        r = run_cli("--memory-dir", str(memory), "append", "--raw", "-", stdin=lines)
        assert r.code == 1 and r.err.startswith("error: line 4: malformed JSON")


# ---- every option of the ledger commands ----------------------------------------------------------

option_values = st.one_of(
    hostile_names, st.text(max_size=20), st.sampled_from(["-1", "0", "1e9", "nan", "99999999999999999999999"])
)


@FUZZ
@given(
    st.sampled_from(
        [
            ["events", "--from-seq"],
            ["events", "--to-seq"],
            ["events", "--type"],
            ["events", "--run"],
            ["events", "--domain"],
            ["schema"],
            ["append"],
            ["stats", "--bogus"],
            ["verify", "--bogus"],
        ]
    ),
    option_values,
)
def test_every_option_with_hostile_values(args: list[str], value: str) -> None:
    with ledger_with_two_events() as (root, memory):
        # besides the ledger's own -wal/-shm, a read writes only the head it saw (ledger.head)
        before = tree(root) - {str(p.relative_to(root)) for p in memory.glob("ledger.db-*")} - {"mem/ledger.head"}
        r = run_cli("--memory-dir", str(memory), *args, value)
        assert "Traceback" not in r.err
        if r.code == 0:  # a value that happens to be valid: a read-only command, nothing written
            assert r.err == ""
        else:
            assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
        with SqliteStore.open(memory / "ledger.db") as store:
            assert store.head() == 2 and store.verify().ok
        after = tree(root) - {str(p.relative_to(root)) for p in memory.glob("ledger.db-*")} - {"mem/ledger.head"}
        assert after == before, after ^ before


@FUZZ
@given(st.one_of(st.text(max_size=8).map(lambda t: f"{t}\x00{t}"), st.just(""), st.just("   ")))
def test_hostile_memory_dir(value: str) -> None:
    with ledger_with_two_events() as (root, memory):
        before = tree(root)
        r = run_cli("--memory-dir", value, "events")
        assert r.code != 0 and r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
        assert tree(root) == before


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [
                b"{}",
                b'{"until": -1, "memory_isolation": "per-run"}',
                b'{"until": "x", "memory_isolation": "shared"}',
                b'{"until": 3, "memory_isolation": "everyone"}',
                b"[1, 2]",
                b"null",
            ]
        ),
    )
)
def test_damaged_fork_record_is_one_line(raw: bytes) -> None:
    """A hand-edited fork.json: `memtape run` refuses in one line before it starts anything."""
    with ledger_with_two_events() as (root, memory):
        (memory / "fork.json").write_bytes(raw)
        assert_refused(root, memory, ["run", "--goal", "g", "--url", "http://shop.test/"])
