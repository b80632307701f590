"""The schema and the door agree: `memtape schema` describes exactly the lines `append`
accepts (checked with the `jsonschema` package over a hypothesis corpus drawn from the schema itself,
and over hostile mutations of it), and any line `append --raw` accepts can afterwards be read by every
read path: folded, materialized, exported in every format, audited, reported, diffed, explained."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from memtape.ledger.errors import LedgerError
from memtape.ledger.event_schema import CROSS_FIELD_RULES
from memtape.ledger.events import EVENT_TYPES
from memtape.ledger.jsonl import parse_lines
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.schema_strategies import RUN_IDS, SCHEMA, any_line, dumps, mutated_line

VALIDATOR = Draft202012Validator(SCHEMA, format_checker=None)
Draft202012Validator.check_schema(SCHEMA)
CORPUS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def accepted(line: dict[str, object]) -> bool:
    """What `append --raw` does with the line: parse, validate, store (in a throw-away ledger)."""
    try:
        events = parse_lines(dumps(line))
    except LedgerError:
        return False
    with tempfile.TemporaryDirectory() as d, SqliteStore.open(Path(d) / "ledger.db") as store:
        try:
            store.append(events)
        except LedgerError:
            return False
    return True


@CORPUS
@given(any_line)
def test_every_schema_valid_line_is_accepted(line: dict[str, object]) -> None:
    assert VALIDATOR.is_valid(line), next(VALIDATOR.iter_errors(line)).message
    assert accepted(line), line


@CORPUS
@given(st.one_of(mutated_line(), any_line))
def test_append_accepts_a_line_exactly_when_the_schema_says_it_is_valid(line: dict[str, object]) -> None:
    valid = VALIDATOR.is_valid(line)
    assert accepted(line) == valid, (valid, line, [e.message for e in VALIDATOR.iter_errors(line)][:2])


def test_the_rules_the_schema_cannot_say_are_listed_in_its_description_and_enforced() -> None:
    assert all(rule in SCHEMA["description"] for rule in CROSS_FIELD_RULES)
    line = {
        "type": "lesson_seeded",
        "lesson_id": "l1",
        "lesson": "x",
        "category": "best_practice",
        "occurred_at": "2026-02-30",
    }
    assert VALIDATOR.is_valid(line) and not accepted(line)
    twice = {**line, "occurred_at": None, "id": "same"}
    events = parse_lines(dumps(twice) + b"\n" + dumps(twice))
    with (
        tempfile.TemporaryDirectory() as d,
        SqliteStore.open(Path(d) / "ledger.db") as store,
        pytest.raises(LedgerError),
    ):
        store.append(events)


def test_duplicate_keys_are_refused_though_a_parsed_object_cannot_show_them() -> None:
    with pytest.raises(LedgerError, match="duplicate key 'lesson'"):
        parse_lines(b'{"type":"lesson_seeded","lesson_id":"l1","lesson":"x","lesson":"y","category":"best_practice"}')
    with pytest.raises(LedgerError, match="duplicate key 'n'"):
        parse_lines(b'{"type":"run_started","run_id":"r","goal":"g","policy":{"n":1,"n":2}}')


def test_the_schema_marks_run_id_required_for_the_six_run_types_and_bounds_every_integer() -> None:
    needing = {t for t in EVENT_TYPES if "run_id" in SCHEMA["$defs"][f"line_{t}"]["required"]}
    assert needing == {t for t, cls in EVENT_TYPES.items() if cls.NEEDS_RUN}
    assert {"run_started", "run_progress", "run_completed", "step_recorded", "step_graded", "context_built"} <= needing
    unbounded: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("integer", "number") and (
                "maximum" not in node or ("minimum" not in node and "exclusiveMinimum" not in node)
            ):
                unbounded.append(path)
            for key, sub in node.items():
                walk(sub, f"{path}/{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}/{i}")

    walk(SCHEMA, "#")
    assert not unbounded, unbounded
    for name in ("id", "run_id", "step", "domain", "stream", "occurred_at"):
        assert name in SCHEMA["$defs"]["line_run_progress"]["properties"], name


# ---- any accepted line can be read by everything -----------------------------------------------

READ_EVERYTHING = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def without_ids(line: dict[str, object]) -> dict[str, object]:
    """Event ids must be unique in a ledger (the one rule across lines); let the store assign them."""
    return {k: v for k, v in line.items() if k != "id"}


@READ_EVERYTHING
@given(st.lists(any_line.map(without_ids), min_size=1, max_size=25))
def test_any_accepted_lines_can_be_read_by_every_read_path(lines: list[dict[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        memory = root / "mem"
        memory.mkdir()
        body = b"\n".join(dumps(line) for line in lines) + b"\n"
        r = run_cli("--memory-dir", str(memory), "append", "--raw", "-", stdin=body)
        assert r.code == 0, r.err
        head = len(lines)
        runs = sorted({str(line["run_id"]) for line in lines if line.get("run_id")} & set(RUN_IDS)) or ["r1"]
        lessons = sorted({str(line["lesson_id"]) for line in lines if line.get("lesson_id")})[:2]
        commands = [
            ["rebuild"],
            *(
                ["state", kind, "--json"]
                for kind in ("lessons", "tier1", "facts", "sessions", "selectors", "trajectories", "runs")
            ),
            ["state", "lessons", "--as-of", str(head // 2)],
            ["runs", "--json"],
            ["events", "--json"],
            ["events"],
            ["stats", "--json"],
            ["verify"],
            ["diff", "--from", "0", "--to", str(head), "--json"],
            ["diff", "--from", str(head // 2), "--to", str(head)],
            *(
                ["export", "--format", fmt, "--out", str(root / f"export-{fmt}")]
                for fmt in ("agent-memory", "memory-json", "json", "csv", "prompt")
            ),
            ["report", "--out", str(root / "report")],
            *(["audit", run, "--json"] for run in runs),
            *(["explain", lesson] for lesson in lessons),
            ["experiment", "--json"],
            ["analytics", "runs", "--format", "json"],
            ["analytics", "promotions", "--format", "parquet", "--out", str(root / "p.parquet")],
        ]
        for args in commands:
            r = run_cli("--memory-dir", str(memory), *args)
            if r.code != 0:  # a run or lesson the lines never created is a clean "no such" answer
                assert args[0] in ("audit", "explain") and r.err.startswith("error: no ") and r.err.count("\n") == 1, (
                    args,
                    r.err,
                )
        exported = json.loads((root / "export-json").read_text())
        assert isinstance(exported, (list, dict))
        assert orjson.loads(run_cli("--memory-dir", str(memory), "stats", "--json").out)["count"] == head
