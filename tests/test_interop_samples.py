"""Interop on hand-written samples of every seed format (tests/data/interop, from the seed
documents' own examples): import -> export gives the source back, export -> import -> export
is stable, a second import adds nothing, the CLI prints what happened, files are private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from memtape.ledger.clock import normalize_ts
from memtape.projections.interop.exporters import PromptItem, render_prompt
from memtape.projections.interop.importers import detect_format, import_source
from memtape.projections.view import MemoryView
from tests.cli_runner import run_cli
from tests.interop_support import (
    DATA,
    export_of,
    new_store,
    norm_agent_memory,
    norm_memory_json,
    norm_trayn,
    roundtrip,
)

MEMORY_JSON = DATA / "seed001" / "memory.json"
EVENT_LOGS = DATA / "seed001" / "runs"
AGENT_MEMORY = DATA / "seed000" / "agent-memory"
TRAYN = DATA / "seed002" / "memories.json"


def test_formats_are_detected() -> None:
    assert detect_format(MEMORY_JSON) == "memory-json"
    assert detect_format(EVENT_LOGS) == "memory-events"
    assert detect_format(AGENT_MEMORY) == "agent-memory"
    assert detect_format(TRAYN) == "trayn-json"


def test_memory_json_round_trip_keeps_every_lesson_field(tmp_path: Path) -> None:
    store, out = roundtrip(MEMORY_JSON, "memory-json", tmp_path / "memory.json")
    assert norm_memory_json(out) == norm_memory_json(MEMORY_JSON)
    # the lessons keep their counts, domains, dates and sources in the projection itself
    lessons = {les.lesson.split(",")[0]: les for les in MemoryView.open(store).lessons()}
    fill = lessons["If fill fails"]
    assert (fill.use_count, fill.source, fill.triggered_domains, fill.created_at) == (
        3,
        "seed",
        ("google.com", "amazon.com"),
        "2026-03-12",
    )
    assert (
        lessons["Click the cookie acceptance banner before interacting with product elements."].scope_domain
        == "amazon.com"
    )
    # a lesson promoted in the source stays promoted; nothing is re-decided on the way in
    assert lessons["When click fails with 'intercepts pointer events'"].category == "best_practice"


def test_agent_memory_round_trip(tmp_path: Path) -> None:
    store, out = roundtrip(AGENT_MEMORY, "agent-memory", tmp_path / "export")
    assert norm_agent_memory(out) == norm_agent_memory(AGENT_MEMORY)
    view = MemoryView.open(store)
    # the original times are the events' occurred time; the store set recorded time
    fact = next(f for f in view.facts("www.example.com") if f.key == "shadow-dom")
    assert fact.last_seen == normalize_ts("2026-03-15T10:20:30.000Z")
    assert fact.recorded_at.startswith("2026-01-01")
    assert [s.goal for s in view.sessions("www.example.com")] == ["Build a todo app", "Add auth to the app"]
    assert view.run("run_1710544500_f0rk01").status == "running"
    assert view.run("run_1710543999_def").parent_run_id == "run_1710543210_abc"
    # a directory named like seed 000 sanitizes a host with a port
    assert {e.domain for e in view.selectors()} >= {"localhost:5173", "www.example.com"}


def test_trayn_json_round_trip_and_grades(tmp_path: Path) -> None:
    store, out = roundtrip(TRAYN, "json", tmp_path / "memories.json")
    assert norm_trayn(out) == norm_trayn(TRAYN)
    graded = [e for e in store.read(types=["step_graded"])]
    assert [e.data["outcome"] for e in graded] == ["success", "failure"]
    assert graded[1].data["task_incomplete"] == "Ticket 42 was deleted instead of re-prioritised"
    recorded = list(store.read(types=["step_recorded"]))
    assert recorded[0].occurred_at == "2026-03-15T10:05:00.123000Z"
    assert len({e.run_id for e in recorded}) == 2  # rep 1 and rep 2 are two runs


@pytest.mark.parametrize(
    ("source", "fmt", "norm", "name"),
    [
        (MEMORY_JSON, "memory-json", norm_memory_json, "memory.json"),
        (AGENT_MEMORY, "agent-memory", norm_agent_memory, "agent-memory"),
        (TRAYN, "json", norm_trayn, "memories.json"),
    ],
)
def test_export_import_export_is_stable(tmp_path: Path, source: Path, fmt: str, norm, name: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, first = roundtrip(source, fmt, tmp_path / "a" / name)
    _, second = roundtrip(first, fmt, tmp_path / "b" / name)
    assert norm(second) == norm(first)
    if fmt != "agent-memory":  # one file: byte-identical the second time
        assert second.read_bytes() == first.read_bytes()


@pytest.mark.parametrize("source", [MEMORY_JSON, EVENT_LOGS, AGENT_MEMORY, TRAYN])
def test_second_import_adds_nothing(tmp_path: Path, source: Path) -> None:
    store = new_store(tmp_path / "mem")
    first = import_source(store, source)
    head = store.head()
    second = import_source(store, source)
    assert first.appended > 1 and head == first.last_seq
    assert second.appended == 0 and second.already_imported_seq == first.first_seq
    assert store.head() == head
    marker = store.get(next(store.read(types=["memory_imported"])).id)
    assert marker is not None and marker.data["source_digest"] == first.digest
    assert marker.data["counts"] == first.counts


def test_same_content_reformatted_is_the_same_source(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    import_source(store, MEMORY_JSON)
    compact = tmp_path / "memory.json"
    compact.write_bytes(orjson.dumps(orjson.loads(MEMORY_JSON.read_bytes())))
    assert import_source(store, compact).appended == 0


def test_memory_events_logs(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    import_source(store, MEMORY_JSON)
    result = import_source(store, EVENT_LOGS)
    assert result.counts["error_recall"] == 2 and result.counts["lessons_pruned"] == 1
    events = list(store.read(result.first_seq + 1))
    # the seed lessons memory.json did not hold (by dedup key: its Enter lesson has none, ours is
    # keyed click / "intercepts pointer") come first, as a run would write them
    seeded = [e for e in events if e.type == "lesson_seeded"]
    assert [e.data["lesson"][:13] for e in seeded] == ["After enterin", "If an overlay"] and events[
        : len(seeded)
    ] == seeded
    events = events[len(seeded) :]
    # the run directory names the run and its time
    assert {e.run_id for e in events} == {"run_20260312T143000Z", "run_20260313T091500Z"}
    assert events[0].occurred_at == "2026-03-12T14:30:00.000000Z"
    recall = next(e for e in events if e.type == "domain_recall")
    assert recall.domain == "www.google.com"
    # seed 001 named a lesson's scope `domain`: here it is scope_domain, not the envelope domain
    cookie = next(e for e in events if e.type == "lesson_recorded" and "cookie" in e.data["lesson"])
    assert cookie.data["scope_domain"] == "amazon.com" and cookie.domain is None
    # recall lists were resolved to lesson ids, so the fold counts them as uses
    err = next(e for e in events if e.type == "error_recall" and e.data["matched"] == 1)
    assert len(err.data["lesson_ids"]) == 1
    dedup = next(e for e in events if e.type == "lesson_deduplicated")
    assert dedup.data["category"] == "tool_fallback" and dedup.data["new_use_count"] == 4


def test_memory_events_resolve_the_seed_lessons_on_an_empty_ledger(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    log = tmp_path / "run_20260312T143000Z" / "memory_events.jsonl"
    log.parent.mkdir()
    log.write_bytes((EVENT_LOGS / "run_20260312T143000Z" / "memory_events.jsonl").read_bytes())
    result = import_source(store, log)
    assert result.counts["lesson_deduplicated"] == 1


def test_prompt_is_seed_002s_text_exactly() -> None:
    items = [
        PromptItem(
            "REPEAT",
            "https://desk.example.com/tickets",
            0.85,
            "click",
            "Priority dropdown",
            "Correctly opened the priority selector",
            None,
        ),
        PromptItem(
            "AVOID",
            "https://desk.example.com/tickets",
            0.72,
            "click",
            "Delete button",
            "Wrong action — task was to change priority",
            'Select "High" from the priority dropdown',
        ),
    ]
    assert render_prompt(items) == (DATA / "seed002" / "prompt.txt").read_text()


def test_prompt_export_lists_graded_memories(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    import_source(store, TRAYN)
    text = export_of(store, "prompt", tmp_path / "prompt.txt").read_text()
    expected = (DATA / "seed002" / "prompt.txt").read_text().replace("[/tickets 85%]", "[desk.example.com/tickets]")
    assert text == expected.replace("[/tickets 72%]", "[desk.example.com/tickets]")


def test_csv_export_has_one_row_per_memory(tmp_path: Path) -> None:
    import csv

    store = new_store(tmp_path / "mem")
    import_source(store, TRAYN)
    rows = list(csv.DictReader(export_of(store, "csv", tmp_path / "m.csv").open(newline="")))
    as_json = orjson.loads(export_of(store, "json", tmp_path / "m.json").read_bytes())
    assert [r["id"] for r in rows] == [str(e["id"]) for e in as_json]
    assert rows[1]["correction"] == 'Select "High" from the priority dropdown'
    assert orjson.loads(rows[0]["envPre"]) == as_json[0]["envPre"]


def test_export_as_of_a_seq(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    first = import_source(store, MEMORY_JSON)
    import_source(store, AGENT_MEMORY)
    early = export_of(store, "agent-memory", tmp_path / "early", as_of=first.last_seq)
    assert not any((early / "domains").iterdir()) and not any((early / "agent-runs").iterdir())
    late = export_of(store, "agent-memory", tmp_path / "late")
    assert norm_agent_memory(late) == norm_agent_memory(AGENT_MEMORY)
    lessons = orjson.loads(export_of(store, "memory-json", tmp_path / "m.json", as_of=first.first_seq).read_bytes())
    assert lessons == {"version": 1, "lessons": []}


def test_exported_files_are_private(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    import_source(store, AGENT_MEMORY)
    out = export_of(store, "agent-memory", tmp_path / "export")
    for dirpath, _dirnames, filenames in os.walk(out):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700
        for f in filenames:
            assert stat.S_IMODE(os.stat(Path(dirpath) / f).st_mode) == 0o600
    single = export_of(store, "memory-json", tmp_path / "m.json")
    assert stat.S_IMODE(single.stat().st_mode) == 0o600


def test_cli_import_and_export(tmp_path: Path) -> None:
    mem = str(tmp_path / "mem")
    r = run_cli("--memory-dir", mem, "import", str(AGENT_MEMORY))
    assert r.code == 0, r.err
    assert r.out.startswith("imported agent-memory ") and "appended 31 events" in r.out
    again = run_cli("--memory-dir", mem, "import", str(AGENT_MEMORY), "--format", "agent-memory")
    assert again.code == 0 and again.out.startswith("already imported") and "nothing appended" in again.out
    out = tmp_path / "export"
    r = run_cli("--memory-dir", mem, "export", "--format", "agent-memory", "--out", str(out))
    assert r.code == 0, r.err
    assert norm_agent_memory(out) == norm_agent_memory(AGENT_MEMORY)
    r = run_cli("--memory-dir", mem, "export", "--format", "agent-memory", "--out", str(out))
    assert r.code == 1 and r.err.startswith("error: ") and "not empty" in r.err
    r = run_cli(
        "--memory-dir", mem, "export", "--format", "memory-json", "--out", str(tmp_path / "m.json"), "--as-of", "1"
    )
    assert r.code == 0 and orjson.loads((tmp_path / "m.json").read_bytes()) == {"version": 1, "lessons": []}
    r = run_cli(
        "--memory-dir",
        mem,
        "export",
        "--format",
        "json",
        "--out",
        str(tmp_path / "t.json"),
        "--as-of",
        "2026-01-01T00:00:00Z",
    )
    assert r.code == 0 and orjson.loads((tmp_path / "t.json").read_bytes()) == []
    r = run_cli(
        "--memory-dir", mem, "export", "--format", "json", "--out", str(tmp_path / "t.json"), "--as-of", "yesterday"
    )
    assert r.code == 1 and r.err.startswith("error: --as-of 'yesterday'")


def test_cli_wrong_format_is_refused(tmp_path: Path) -> None:
    r = run_cli("--memory-dir", str(tmp_path / "mem"), "import", str(TRAYN), "--format", "memory-json")
    assert r.code == 1
    assert r.err.startswith("error: memories.json: ") and "nothing was written" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_digest_the_store_redacts_still_dedups(tmp_path: Path) -> None:
    """The store redacts secret-looking text in every payload string, digests included."""
    from memtape.ledger.clock import SteppingClock
    from memtape.ledger.envelope import NewEvent
    from memtape.ledger.events import MemoryImported
    from memtape.ledger.redact import Redactor
    from memtape.ledger.store import SqliteStore
    from memtape.projections.interop.importers import previous_import, stored_digest

    store = SqliteStore.open(
        tmp_path / "ledger.db", clock=SteppingClock(), redactor=Redactor(extra_patterns=["11076251501687"])
    )
    digest = "bcf3c1bc6b5363ea55ff339bd12a607f36eefc9153308a11076251501687d629"
    assert stored_digest(store, digest) != digest
    store.append([NewEvent(MemoryImported(source_format="memory-json", source_path="/x", source_digest=digest))])
    assert next(store.read()).data["source_digest"] != digest
    assert previous_import(store, digest) == 1


def test_forgotten_subjects_are_not_exported(tmp_path: Path) -> None:
    from memtape.ledger.envelope import NewEvent
    from memtape.ledger.events import SubjectForgotten

    store = new_store(tmp_path / "mem")
    import_source(store, AGENT_MEMORY)
    import_source(store, TRAYN)
    store.append(
        [
            NewEvent(SubjectForgotten(subject_kind="domain", subject="example.com")),
            NewEvent(SubjectForgotten(subject_kind="domain", subject="desk.example.com")),
        ]
    )
    am = norm_agent_memory(export_of(store, "agent-memory", tmp_path / "export"))
    assert set(am["domains"]) == {"aliexpress.com", "localhost:5173"} and am["runs"] == {}
    assert orjson.loads(export_of(store, "json", tmp_path / "t.json").read_bytes()) == []
    before = export_of(store, "agent-memory", tmp_path / "before", as_of=store.head() - 2)
    assert "www.example.com" in norm_agent_memory(before)["domains"]


def test_prompt_export_never_shows_an_empty_target_or_a_made_up_similarity() -> None:
    from types import SimpleNamespace

    from memtape.projections.interop.exporters import _what

    press = SimpleNamespace(target_text=None, action={"command": "press", "args": {"key": "Escape"}})
    assert _what(press) == "Escape"
    text = render_prompt(
        [
            PromptItem("REPEAT", "http://shop.test/", None, "press", _what(press), "closed it", None),
            PromptItem("AVOID", "", None, "back", "", "lost the form", None),
        ]
    )
    assert "1. REPEAT: [shop.test/] press: 'Escape'\n" in text and "2. AVOID: [/] back\n" in text
    assert "''" not in text and "%]" not in text
