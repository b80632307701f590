"""Malformed sources are refused whole (one line naming the file and the field, nothing
written), and exports never write outside --out, whatever the names in memory contain."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.projections.folds.state import MemoryState, fold
from memtape.projections.interop.exporters import export_memory
from memtape.projections.interop.files import ExportTree, safe_name
from memtape.projections.interop.importers import import_source
from memtape.projections.interop.sources import SourceError
from tests.cli_runner import run_cli
from tests.interop_support import DATA, new_store


def _memory_json(tmp_path: Path, mutate: Any) -> Path:
    doc = orjson.loads((DATA / "seed001" / "memory.json").read_bytes())
    mutate(doc)
    path = tmp_path / "memory.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def _refused(tmp_path: Path, source: Path, fmt: str = "auto") -> str:
    """Import into a ledger that already holds events; the refusal must leave it as it was."""
    store = new_store(tmp_path / "mem")
    import_source(store, DATA / "seed002" / "memories.json")
    head = store.head()
    with pytest.raises(SourceError) as info:
        import_source(store, source, fmt)
    assert store.head() == head
    message = str(info.value)
    assert "\n" not in message and message.endswith("; nothing was written")
    return message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["lessons"][2].__setitem__("category", "wisdom"),
            "memory.json: lessons[2].category: Input should be",
        ),
        (lambda d: d.__setitem__("version", 2), "memory.json: version: Input should be 1"),
        (lambda d: d["lessons"][1].pop("lesson"), "memory.json: lessons[1].lesson: Field required"),
        (
            lambda d: d["lessons"][0].__setitem__("use_count", "3"),
            "memory.json: lessons[0].use_count: Input should be a valid integer",
        ),
        (
            lambda d: d["lessons"][3].__setitem__("use_count", -1),
            "memory.json: lessons[3].use_count: Input should be greater than or equal to 0",
        ),
        (lambda d: d["lessons"][0].__setitem__("colour", "red"), "memory.json: lessons[0].colour: unknown field"),
        (
            lambda d: d["lessons"][2].__setitem__("domain", "../../etc"),
            "memory.json: lessons[2].domain: invalid domain",
        ),
        (
            lambda d: d["lessons"][1].__setitem__("created_at", "last tuesday"),
            "memory.json: lessons[1].created_at: not an ISO date",
        ),
        (
            lambda d: d["lessons"][1].__setitem__("triggered_domains", "google.com"),
            "memory.json: lessons[1].triggered_domains: Input should be a valid list",
        ),
        (lambda d: d["lessons"].append(dict(d["lessons"][0])), "memory.json: lessons[4]: same lesson as lessons[0]"),
        (
            lambda d: d["lessons"][0].__setitem__("lesson", "tab\x00nul"),
            "memory.json: lessons[0].lesson: text contains a NUL character",
        ),
    ],
)
def test_malformed_memory_json_is_refused(tmp_path: Path, mutate: Any, expected: str) -> None:
    assert _refused(tmp_path, _memory_json(tmp_path, mutate)).startswith(expected)


def test_malformed_json_and_bad_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "memory.json"
    bad.write_bytes(b'{"version": 1, "lessons": [')
    assert _refused(tmp_path, bad, "memory-json").startswith("memory.json: malformed JSON")
    bad.write_bytes(b'{"version": 1, "lessons": [], "x": "\xff"}')
    assert _refused(tmp_path, bad, "memory-json").startswith("memory.json: not valid UTF-8")


def _event_logs(tmp_path: Path, second_run_lines: list[bytes]) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(DATA / "seed001" / "runs", root)
    (root / "run_20260313T091500Z" / "memory_events.jsonl").write_bytes(b"\n".join(second_run_lines) + b"\n")
    return root


def test_a_bad_line_in_any_log_refuses_every_log(tmp_path: Path) -> None:
    root = _event_logs(
        tmp_path,
        [
            b'{"event": "domain_recall", "domain": "www.google.com", "matched": 0, "lessons": []}',
            b"",
            b'{"event": "lesson_recorded", "lesson": "x", "category": "clever", "domain": null}',
        ],
    )
    message = _refused(tmp_path, root)
    assert message.startswith("run_20260313T091500Z/memory_events.jsonl: line 3: lesson_recorded.category: ")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"event": "lesson_forgotten", "lesson": "x"}', "line 1: event: Input tag 'lesson_forgotten'"),
        (
            b'{"event": "error_recall", "command": "fill", "matched": 1, "lessons": []}',
            "line 1: error_recall.error_snippet: Field required",
        ),
        (b'{"event": "domain_recall", "domain": "a b", "matched": 0}', "line 1: domain_recall.domain: invalid domain"),
        (b"[1, 2]", "line 1: Input should be a valid dictionary"),
        (b'{"event": "tier1_loaded", "count": 1', "line 1: malformed JSON"),
    ],
)
def test_malformed_event_lines(tmp_path: Path, line: bytes, expected: str) -> None:
    message = _refused(tmp_path, _event_logs(tmp_path, [line]))
    assert message.startswith(f"run_20260313T091500Z/memory_events.jsonl: {expected}"), message


def _agent_memory(tmp_path: Path) -> Path:
    root = tmp_path / "agent-memory"
    shutil.copytree(DATA / "seed000" / "agent-memory", root)
    return root


def _edit(path: Path, mutate: Any) -> None:
    doc = orjson.loads(path.read_bytes())
    mutate(doc)
    path.write_bytes(orjson.dumps(doc))


@pytest.mark.parametrize(
    ("rel", "mutate", "expected"),
    [
        (
            "domains/www.example.com/knowledge.json",
            lambda d: d["facts"][1].__setitem__("confidence", 1.5),
            "facts[1].confidence: Input should be less than or equal to 1",
        ),
        (
            "domains/www.example.com/knowledge.json",
            lambda d: d["facts"][0].__setitem__("type", "rumour"),
            "facts[0].type: Input should be",
        ),
        (
            "domains/www.example.com/knowledge.json",
            lambda d: d["sessions"][1].pop("success"),
            "sessions[1].success: Field required",
        ),
        ("domains/www.example.com/knowledge.json", lambda d: d.__setitem__("domain", "/etc"), "domain: invalid domain"),
        (
            "domains/www.example.com/knowledge.json",
            lambda d: d["facts"].append(dict(d["facts"][0])),
            "facts[5] repeats facts[0]",
        ),
        (
            "domains/www.example.com/selectors.json",
            lambda d: d["entries"]['button "Search"'].__setitem__("successCount", 0),
            "entries['button \"Search\"']: successCount + failureCount must be at least 1",
        ),
        (
            "domains/www.example.com/selectors.json",
            lambda d: d["entries"]['link "Sign in"'].__setitem__("lastRef", "#id"),
            "entries['link \"Sign in\"']: lastRef must be an @ref",
        ),
        (
            "domains/aliexpress.com/trajectories/traj_1773400000000_ab12cd.json",
            lambda d: d["steps"][3]["action"].pop("action"),
            "steps[3].action.action: Field required",
        ),
        (
            "domains/aliexpress.com/trajectories/traj_1773400000000_ab12cd.json",
            lambda d: d.__setitem__("timestamp", "soon"),
            "timestamp: not an ISO date",
        ),
        ("agent-runs/run_1710543999_def.json", lambda d: d.__setitem__("status", "done"), "status: Input should be"),
        (
            "agent-runs/run_1710543999_def.json",
            lambda d: d.__setitem__("success", True),
            "success=True contradicts status 'failed'",
        ),
        (
            "agent-runs/run_1710544500_f0rk01.json",
            lambda d: d.__setitem__("runId", "../../etc/passwd"),
            "runId: invalid id",
        ),
    ],
)
def test_malformed_agent_memory_names_the_file_and_field(tmp_path: Path, rel: str, mutate: Any, expected: str) -> None:
    root = _agent_memory(tmp_path)
    _edit(root / rel, mutate)
    message = _refused(tmp_path, root)
    assert message.startswith(f"{rel}: {expected}"), message


def test_symlinks_in_a_source_are_refused(tmp_path: Path) -> None:
    root = _agent_memory(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    os.symlink(secret, root / "agent-runs" / "run_link.json")
    assert _refused(tmp_path, root).startswith("agent-runs/run_link.json: is a symbolic link")


def test_trayn_entries(tmp_path: Path) -> None:
    doc = orjson.loads((DATA / "seed002" / "memories.json").read_bytes())
    doc[1]["outcome"] = "meh"
    path = tmp_path / "memories.json"
    path.write_bytes(orjson.dumps(doc))
    assert _refused(tmp_path, path, "trayn-json").startswith("memories.json: [1].outcome: Input should be")
    doc[1]["outcome"] = "failure"
    doc[2]["id"] = 1
    path.write_bytes(orjson.dumps(doc))
    assert _refused(tmp_path, path, "trayn-json").startswith("memories.json: [2].id: 1 repeats [0].id")
    doc[2]["id"] = 3
    doc[0]["envPre"]["screenshot"] = "..."
    path.write_bytes(orjson.dumps(doc))
    assert _refused(tmp_path, path, "trayn-json").startswith("memories.json: [0].envPre.screenshot: unknown field")


def test_cli_refusal_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    source = _memory_json(tmp_path, lambda d: d["lessons"][2].__setitem__("category", "wisdom"))
    r = run_cli("--memory-dir", str(mem), "import", str(source))
    assert r.code == 1
    assert r.err.startswith("error: memory.json: lessons[2].category: ") and r.err.count("\n") == 1
    r = run_cli("--memory-dir", str(mem), "stats", "--json")
    assert orjson.loads(r.out)["count"] == 0


# ---- exports stay under --out -------------------------------------------------------

HOSTILE = [
    "../../evil",
    "/etc/cron.d/x",
    "a/../../b",
    "..",
    ".",
    ".hidden",
    "x\x00y",
    "ü/../ß",
    "c:\\windows",
    "a" * 400,
    "~root",
    "$(touch pwned)",
    "domains",
    "agent-runs",
]


def _rec(
    seq: int, type_: str, data: dict[str, Any], domain: str | None = None, run_id: str | None = None
) -> RecordedEvent:
    ts = f"2026-02-01T00:00:{seq % 60:02d}.000000Z"
    return RecordedEvent(
        seq,
        f"ev{seq}",
        "memory",
        seq,
        type_,
        1,
        ts,
        ts,
        run_id,
        None,
        domain,
        data,
        orjson.dumps(data).decode(),
        "0" * 64,
        "0" * 64,
    )


def _hostile_state() -> MemoryState:
    events: list[RecordedEvent] = []
    for name in HOSTILE:
        n = len(events) + 1
        events += [
            _rec(n, "fact_observed", {"fact_type": "quirk", "key": name, "value": name}, domain=name),
            _rec(
                n + 1,
                "session_recorded",
                {"session_id": name, "goal": name, "success": True, "timestamp": "2026-02-01"},
                domain=name,
            ),
            _rec(n + 2, "selector_succeeded", {"role": name, "name": name, "selector": name}, domain=name),
            _rec(n + 3, "trajectory_recorded", {"trajectory_id": name, "goal": name, "steps": []}, domain=name),
            _rec(n + 4, "run_started", {"goal": name}, domain=name, run_id=name),
        ]
    return fold(MemoryState.empty(), events)


def _all_files(root: Path) -> set[Path]:
    return {Path(d) / f for d, _, fs in os.walk(root) for f in fs} | {Path(d) for d, _, _ in os.walk(root)}


def test_hostile_names_never_leave_out(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    before = _all_files(tmp_path)
    out = sandbox / "deep" / "out"
    (sandbox / "deep").mkdir()
    result = export_memory(_hostile_state(), store, "agent-memory", out)
    after = _all_files(tmp_path)
    created = after - before
    real_out = Path(os.path.realpath(out))
    assert created and all(
        p == real_out.parent or p == real_out or real_out in Path(os.path.realpath(p)).parents
        for p in created - {sandbox / "deep"}
    )
    # one directory per domain, one file per run and trajectory: nothing collapsed, nothing lost
    assert len(list((out / "domains").iterdir())) == len(HOSTILE)
    assert len(list((out / "agent-runs").iterdir())) == len(HOSTILE)
    assert result.counts["trajectories"] == len(HOSTILE)
    for path in result.files:
        assert all(part not in ("..", ".") and not part.startswith(".") for part in path.relative_to(out).parts)


@pytest.mark.parametrize("raw", HOSTILE)
def test_safe_name_is_one_harmless_component(raw: str) -> None:
    name = safe_name(raw)
    assert name and "/" not in name and "\x00" not in name and not name.startswith(".") and len(name) <= 180


def test_export_tree_refuses_escapes(tmp_path: Path) -> None:
    tree = ExportTree(tmp_path / "out")
    tree.prepare_root(must_be_empty=True)
    for parts in (["..", "x.json"], ["a", "../b.json"], ["/abs", "x"], ["ok", ""], [".", "x"]):
        with pytest.raises(LedgerError):
            tree.write(parts, b"{}")
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "b.json").exists()


def test_symlinked_out_is_refused(tmp_path: Path) -> None:
    store = new_store(tmp_path / "mem")
    import_source(store, DATA / "seed000" / "agent-memory")
    from tests.interop_support import export_of

    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, tmp_path / "link")
    with pytest.raises(LedgerError, match="symbolic link"):
        export_of(store, "agent-memory", tmp_path / "link")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, tmp_path / "m.json")
    with pytest.raises(LedgerError, match="symbolic link"):
        export_of(store, "memory-json", tmp_path / "m.json")
    assert victim.read_text() == "keep me" and not any(target.iterdir())
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(LedgerError, match="plain/deeper: cannot create"):
        export_of(store, "json", tmp_path / "plain" / "deeper" / "m.json")
    export_of(store, "json", tmp_path / "missing" / "m.json")  # missing parents are created, 0700
    assert (tmp_path / "missing").stat().st_mode & 0o777 == 0o700 and (tmp_path / "missing" / "m.json").exists()


def test_a_domain_folder_that_names_no_host_is_refused(tmp_path: Path) -> None:
    root = _agent_memory(tmp_path)
    odd = root / "domains" / "not a host!"
    odd.mkdir()
    (odd / "selectors.json").write_bytes((root / "domains" / "localhost_5173" / "selectors.json").read_bytes())
    assert _refused(tmp_path, root).startswith("domains/not a host!: directory name is not a host name")
    # with a knowledge.json naming the domain, the folder name does not matter
    (odd / "knowledge.json").write_bytes(orjson.dumps({"domain": "shop.test", "facts": [], "sessions": []}))
    store = new_store(tmp_path / "other")
    result = import_source(store, root)
    assert result.counts["selectors"] == 5
    assert {e.domain for e in store.read(types=["selector_succeeded"])} >= {"shop.test"}
