"""Hypothesis over generated seed sources: every valid source round-trips (import ->
export gives an equivalent source; export -> import -> export is stable), and any
corruption of one field of one record is refused whole, naming the file and the field,
with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memtape.ledger.redact import redact
from memtape.projections.folds.lessons import dedup_key
from memtape.projections.interop.files import safe_name
from memtape.projections.interop.importers import import_source
from memtape.projections.interop.sources import SourceError, join_element, js_time, ms_to_ts
from tests.interop_support import export_of, new_store, norm_agent_memory, norm_memory_json, norm_trayn

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BAD = {"bad": 1}  # no field of any seed format accepts this object

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
word_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=24)
domains = st.sampled_from(
    [
        "example.com",
        "www.example.com",
        "shop.test",
        "a.b.c",
        "localhost:5173",
        "amazon.com",
        "news.local",
        "x-y.example.org",
    ]
)
dates = st.dates(
    min_value=__import__("datetime").date(2020, 1, 1), max_value=__import__("datetime").date(2030, 12, 31)
).map(lambda d: d.isoformat())
ms = st.integers(min_value=1_577_836_800_000, max_value=1_924_991_999_999)
js_times = ms.map(lambda m: js_time(ms_to_ts(m)))
urls = st.sampled_from(["https://example.com", "https://www.example.com/a?b=1", "http://localhost:5173/x", ""])


# ---- seed 001 ----------------------------------------------------------------------------

lessons = st.fixed_dictionaries(
    {
        "lesson": word_text,
        "category": st.sampled_from(["tool_fallback", "best_practice", "error_recovery", "site_specific"]),
        "failed_command": st.none() | st.sampled_from(["fill", "click", "press", "goto"]),
        "error_pattern": st.none() | text,
        "domain": st.none() | domains,
        "use_count": st.integers(0, 99),
        "created_at": dates,
        "last_used": dates,
        "source": st.sampled_from(["seed", "learned"]),
        "triggered_domains": st.lists(domains, unique=True, max_size=4),
    }
)
memory_docs = st.lists(
    lessons,
    max_size=8,
    unique_by=lambda d: dedup_key(d["failed_command"], d["error_pattern"], d["domain"], d["lesson"]),
).map(lambda ls: {"version": 1, "lessons": ls})


def _tmp(factory: pytest.TempPathFactory) -> Path:
    return factory.mktemp("interop")


def secret_free(source: Any) -> None:
    """Round trips are drawn from sources the store keeps as given: it redacts a secret in any event
    (a Luhn-valid run of digits, a key's header), tested in tests/test_secrets_at_rest.py."""
    assume(redact(source) == source)


@SETTINGS
@given(memory_docs)
def test_memory_json_round_trips(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any]) -> None:
    secret_free(doc)
    tmp = _tmp(tmp_path_factory)
    src = tmp / "memory.json"
    src.write_bytes(orjson.dumps(doc))
    store = new_store(tmp / "a")
    import_source(store, src)
    first = export_of(store, "memory-json", tmp / "first.json")
    assert norm_memory_json(first) == norm_memory_json(src)
    again = new_store(tmp / "b")
    import_source(again, first)
    assert export_of(again, "memory-json", tmp / "second.json").read_bytes() == first.read_bytes()


@SETTINGS
@given(memory_docs.filter(lambda d: d["lessons"]), st.data())
def test_corrupted_memory_json_is_refused(
    tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(doc["lessons"]) - 1))
    field = data.draw(st.sampled_from(sorted(doc["lessons"][i])))
    doc["lessons"][i][field] = BAD
    tmp = _tmp(tmp_path_factory)
    src = tmp / "memory.json"
    src.write_bytes(orjson.dumps(doc))
    store = new_store(tmp / "a")
    with pytest.raises(SourceError) as info:
        import_source(store, src)
    assert str(info.value).startswith(f"memory.json: lessons[{i}].{field}")
    assert store.head() == 0


# ---- seed 000 ----------------------------------------------------------------------------

facts = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["timing", "selector", "pattern", "quirk"]),
            "key": word_text,
            "value": word_text,
            "confidence": st.floats(0, 1, allow_nan=False),
            "sources": st.integers(1, 20),
            "lastSeen": js_times,
        }
    ),
    max_size=4,
    unique_by=lambda f: (f["type"], f["key"], f["value"]),
)
sessions = st.lists(
    st.fixed_dictionaries(
        {
            "id": word_text,
            "goal": text,
            "outcome": text,
            "success": st.booleans(),
            "finalUrl": urls,
            "timestamp": js_times,
            "turnsUsed": st.integers(0, 50),
            "durationMs": st.integers(0, 10**6),
        }
    ),
    max_size=5,
)


@st.composite
def selector_entries(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 3))):
        element = join_element(draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True)), draw(text))
        ref = draw(st.none() | st.from_regex(r"@[a-z0-9]{1,6}", fullmatch=True))
        stable = draw(st.none() | st.from_regex(r"[\[#.a-z][a-z0-9=\]'-]{0,12}", fullmatch=True))
        if ref is None and stable is None:
            ref = "@e1"
        low = 2 if (ref and stable) else 1
        successes = draw(st.integers(0, 9))
        failures = draw(st.integers(max(0, low - successes), 4))
        entry = {"element": element, "successCount": successes, "lastUsed": draw(js_times)}
        if failures:
            entry["failureCount"] = failures
        if ref:
            entry["lastRef"] = ref
        if stable:
            entry["stableSelector"] = stable
        out[element] = entry
    return out


actions = st.fixed_dictionaries(
    {"action": st.sampled_from(["click", "type", "press", "scroll", "navigate", "wait", "select"])},
    optional={
        "selector": st.from_regex(r"@[a-z0-9]{1,5}", fullmatch=True),
        "text": text,
        "key": text,
        "ms": st.integers(0, 5000),
        "direction": st.sampled_from(["up", "down"]),
        "url": urls,
    },
)
steps = st.fixed_dictionaries(
    {"url": urls, "action": actions, "verified": st.booleans()},
    optional={"snapshotHash": st.from_regex(r"[0-9]{1,8}", fullmatch=True)},
)


@st.composite
def trajectories(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.from_regex(r"traj_[0-9]{4}_[a-z0-9]{3}", fullmatch=True), unique=True, max_size=2))
    out = []
    for tid in ids:
        t = {
            "id": tid,
            "goal": draw(text),
            "steps": draw(st.lists(steps, max_size=4)),
            "success": True,
            "durationMs": draw(st.integers(0, 10**6)),
            "timestamp": draw(js_times),
        }
        origin = draw(st.none() | st.sampled_from(["https://example.com", "http://localhost:5173"]))
        if origin:
            t["origin"] = origin
        if draw(st.booleans()):
            t["model"] = "gpt-5.4"
        out.append(t)
    return out


@st.composite
def runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.from_regex(r"run_[0-9]{6}_[a-z0-9]{4}", fullmatch=True), unique=True, max_size=3))
    out = []
    for rid in ids:
        started = draw(ms)
        status = draw(st.sampled_from(["running", "completed", "failed"]))
        m: dict[str, Any] = {
            "runId": rid,
            "status": status,
            "goal": draw(text),
            "domain": draw(domains),
            "startedAt": js_time(ms_to_ts(started)),
            "artifactPaths": [],
        }
        for key, strat in (("sessionId", word_text), ("startUrl", urls), ("parentRunId", st.just("run_000000_root"))):
            if draw(st.booleans()):
                m[key] = draw(strat)
        current = draw(st.none() | urls)
        later = js_time(ms_to_ts(started + draw(st.integers(0, 10**7))))
        m["turnCount"] = draw(st.integers(0, 40)) if current is not None or status != "running" else 0
        if current is not None:
            m["currentUrl"] = current
        m["updatedAt"] = later if (current is not None or status != "running") else m["startedAt"]
        if status != "running":
            m.update(completedAt=later, success=status == "completed", artifactPaths=draw(st.lists(text, max_size=2)))
            for key in ("finalUrl", "summary", "result", "reason"):
                if draw(st.booleans()):
                    m[key] = draw(word_text if key != "finalUrl" else urls)
        out.append(m)
    return out


@st.composite
def agent_memories(draw: st.DrawFn) -> dict[str, Any]:
    doms = draw(st.lists(domains, unique=True, max_size=3))
    tree: dict[str, Any] = {}
    for d in doms:
        folder = f"domains/{safe_name(d)}"
        k = {"domain": d, "facts": draw(facts), "sessions": draw(sessions), "updatedAt": draw(js_times)}
        if draw(st.booleans()) or not _dir_name_round_trips(d):
            tree[f"{folder}/knowledge.json"] = k
        entries = draw(selector_entries())
        if entries:
            tree[f"{folder}/selectors.json"] = {"entries": entries, "updatedAt": draw(js_times)}
        for t in draw(trajectories()):
            tree[f"{folder}/trajectories/{t['id']}.json"] = t
    for m in draw(runs()):
        tree[f"agent-runs/{m['runId']}.json"] = m
    return tree


def _dir_name_round_trips(domain: str) -> bool:
    from memtape.projections.interop.importers import _dir_domain

    return _dir_domain(safe_name(domain)) == domain


def _write_tree(root: Path, tree: dict[str, Any]) -> None:
    for rel, obj in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2))


@SETTINGS
@given(agent_memories().filter(bool))
def test_agent_memory_round_trips(tmp_path_factory: pytest.TempPathFactory, tree: dict[str, Any]) -> None:
    secret_free(tree)
    tmp = _tmp(tmp_path_factory)
    _write_tree(tmp / "src", tree)
    store = new_store(tmp / "a")
    import_source(store, tmp / "src")
    first = export_of(store, "agent-memory", tmp / "first")
    assert norm_agent_memory(first) == norm_agent_memory(tmp / "src")
    again = new_store(tmp / "b")
    import_source(again, first)
    assert norm_agent_memory(export_of(again, "agent-memory", tmp / "second")) == norm_agent_memory(first)


@SETTINGS
@given(agent_memories().filter(bool), st.data())
def test_corrupted_agent_memory_is_refused(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, Any], data: st.DataObject
) -> None:
    rel = data.draw(st.sampled_from(sorted(tree)))
    obj = tree[rel]
    lists = [k for k in ("facts", "sessions", "steps") if obj.get(k)]
    if lists and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(lists))
        i = data.draw(st.integers(0, len(obj[key]) - 1))
        field = data.draw(st.sampled_from(sorted(obj[key][i])))
        obj[key][i][field] = BAD
        where = f"{key}[{i}].{field}"
    else:
        field = data.draw(st.sampled_from(sorted(obj)))
        obj[field] = BAD
        where = field
    tmp = _tmp(tmp_path_factory)
    _write_tree(tmp / "src", tree)
    store = new_store(tmp / "a")
    with pytest.raises(SourceError) as info:
        import_source(store, tmp / "src", "agent-memory")
    assert str(info.value).startswith(f"{rel}: {where}"), str(info.value)
    assert store.head() == 0


# ---- seed 002 ----------------------------------------------------------------------------

envs = st.fixed_dictionaries(
    {
        "url": urls,
        "title": text,
        "pageType": st.sampled_from(["", "list", "form"]),
        "elements": st.lists(st.sampled_from(["button:A", "link:B", "textbox:C", "option:D"]), unique=True, max_size=4),
    }
)


@st.composite
def trayn_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(st.integers(0, 10**6), unique=True, max_size=6))
    out = []
    for i in ids:
        outcome = draw(st.sampled_from(["pending", "success", "failure"]))
        e: dict[str, Any] = {
            "id": i,
            "envPre": draw(envs),
            "internalState": draw(text),
            "internalStateEmbedding": draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=4)),
            "action": draw(st.sampled_from(["click('42')", "fill('7', 'x')", "press('Enter')", "scroll down"])),
            "actionElementText": draw(text),
            "envPost": draw(envs),
            "outcome": outcome,
            "createdAt": draw(ms),
            "stepNum": draw(st.integers(0, 5)),
            "rep": draw(st.integers(1, 3)),
        }
        if draw(st.booleans()):
            e["stepId"] = draw(word_text)
        if draw(st.booleans()):
            e["think"] = draw(text)
        if outcome != "pending":
            for key in ("outcomeReason", "correction", "taskIncomplete"):
                if draw(st.booleans()):
                    e[key] = draw(text)
        out.append(e)
    return out


@SETTINGS
@given(trayn_entries())
def test_trayn_json_round_trips(tmp_path_factory: pytest.TempPathFactory, entries: list[dict[str, Any]]) -> None:
    secret_free(entries)
    tmp = _tmp(tmp_path_factory)
    src = tmp / "memories.json"
    src.write_bytes(orjson.dumps(entries))
    store = new_store(tmp / "a")
    import_source(store, src, "trayn-json")
    first = export_of(store, "json", tmp / "first.json")
    assert norm_trayn(first) == norm_trayn(src)
    again = new_store(tmp / "b")
    import_source(again, first, "trayn-json")
    assert export_of(again, "json", tmp / "second.json").read_bytes() == first.read_bytes()


@SETTINGS
@given(trayn_entries().filter(bool), st.data())
def test_corrupted_trayn_json_is_refused(
    tmp_path_factory: pytest.TempPathFactory, entries: list[dict[str, Any]], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(entries) - 1))
    field = data.draw(st.sampled_from(sorted(entries[i])))
    entries[i][field] = BAD
    tmp = _tmp(tmp_path_factory)
    src = tmp / "memories.json"
    src.write_bytes(orjson.dumps(entries))
    store = new_store(tmp / "a")
    with pytest.raises(SourceError) as info:
        import_source(store, src, "trayn-json")
    assert str(info.value).startswith(f"memories.json: [{i}].{field}")
    assert store.head() == 0


# ---- seed 001's event logs (import only: the ledger's own log is the export) ----------------

KNOWN = "If fill fails, click(ref) to focus the input, then type(text) to enter text."
log_lines = st.one_of(
    st.fixed_dictionaries(
        {
            "event": st.just("tier1_loaded"),
            "count": st.integers(0, 9),
            "lessons": st.lists(st.sampled_from([KNOWN, "unknown tip"]), max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {
            "event": st.just("error_recall"),
            "command": word_text,
            "error_snippet": text,
            "matched": st.integers(0, 3),
            "lessons": st.lists(st.just(KNOWN), max_size=1),
        }
    ),
    st.fixed_dictionaries(
        {
            "event": st.just("domain_recall"),
            "domain": domains,
            "matched": st.integers(0, 3),
            "lessons": st.lists(st.just(KNOWN), max_size=1),
        }
    ),
    st.fixed_dictionaries(
        {
            "event": st.just("lesson_recorded"),
            "lesson": word_text,
            "category": st.sampled_from(["error_recovery", "site_specific"]),
            "failed_command": st.none() | word_text,
            "error_pattern": st.none() | text,
            "domain": st.none() | domains,
        }
    ),
    st.fixed_dictionaries(
        {"event": st.just("lesson_deduplicated"), "lesson": st.just(KNOWN), "new_use_count": st.integers(1, 9)}
    ),
    st.fixed_dictionaries(
        {"event": st.just("lessons_pruned"), "pruned_count": st.integers(0, 3), "remaining_count": st.integers(0, 9)}
    ),
)
logs = st.lists(st.lists(log_lines, min_size=1, max_size=6), min_size=1, max_size=3)


def _write_logs(root: Path, runs_: list[list[dict[str, Any]]]) -> list[str]:
    rels = []
    for n, lines in enumerate(runs_):
        rel = f"run_2026031{n}T143000Z/memory_events.jsonl"
        (root / rel).parent.mkdir(parents=True)
        (root / rel).write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
        rels.append(rel)
    return rels


@SETTINGS
@given(logs)
def test_event_logs_import_every_line(
    tmp_path_factory: pytest.TempPathFactory, runs_: list[list[dict[str, Any]]]
) -> None:
    tmp = _tmp(tmp_path_factory)
    _write_logs(tmp / "src", runs_)
    store = new_store(tmp / "a")
    result = import_source(store, tmp / "src")
    lines = [line for lines in runs_ for line in lines]
    # the marker, the three seed lessons an empty ledger gets first, then every line in order
    assert result.appended == 1 + 3 + len(lines)
    assert [e.type for e in store.read(2, to_seq=4)] == ["lesson_seeded"] * 3
    assert [e.type for e in store.read(5)] == [line["event"] for line in lines]
    assert import_source(store, tmp / "src").appended == 0


@SETTINGS
@given(logs, st.data())
def test_corrupted_event_logs_are_refused(
    tmp_path_factory: pytest.TempPathFactory, runs_: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    f = data.draw(st.integers(0, len(runs_) - 1))
    i = data.draw(st.integers(0, len(runs_[f]) - 1))
    field = data.draw(st.sampled_from(sorted(k for k in runs_[f][i] if k != "event")))
    runs_[f][i][field] = BAD
    tmp = _tmp(tmp_path_factory)
    rels = _write_logs(tmp / "src", runs_)
    store = new_store(tmp / "a")
    with pytest.raises(SourceError) as info:
        import_source(store, tmp / "src")
    assert str(info.value).startswith(f"{rels[f]}: line {i + 1}: {runs_[f][i]['event']}.{field}"), str(info.value)
    assert store.head() == 0
