"""Import the seed systems' memory into the ledger.

An import reads and validates the whole source first (any problem refuses
it whole, naming the file and the field), turns it into the events that
rebuild the same memory, and appends them in ONE transaction after a
`memory_imported` event (source format, path, digest, counts). The events
carry the source's own times as `occurred_at`; the store sets `recorded_at`.

Imports append their events as given (no policy step): a source is a record
of memory that already went through its own system's rules, so a lesson with
use_count 7 on three domains stays where the source had it instead of being
promoted on the way in. A lesson whose dedup key is already in the ledger is
left alone and counted as `lessons_existing`. The one exception: seed 001's
event logs replay a run's memory, and a run starts with the seed lessons, so
a memory without them gets them first (see `plan_memory_events`).

Importing the same content twice (same digest: canonical JSON, so
whitespace and key order do not matter) appends nothing the second time.

Usage::

    result = import_source(store, Path("~/.browser_agent/memory.json").expanduser())
    print(result.appended, result.counts)
"""

from __future__ import annotations

import copy
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter

from memtape.ledger.clock import normalize_ts, parse_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import (
    Action,
    DomainRecall,
    EnvState,
    ErrorRecall,
    FactObserved,
    LessonDeduplicated,
    LessonRecorded,
    LessonsPruned,
    MemoryImported,
    RunCompleted,
    RunProgress,
    RunStarted,
    SelectorFailed,
    SelectorSucceeded,
    SessionRecorded,
    StepGraded,
    StepRecorded,
    Tier1Loaded,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.field_rules import IDENT_RE, check_domain
from memtape.ledger.jsonl import read_source
from memtape.ledger.store import Store
from memtape.projections.decisions import decide
from memtape.projections.folds import lessons as lessons_projection
from memtape.projections.folds.lessons import LessonEntry, LessonsState, dedup_key, key_in, lesson_id_for
from memtape.projections.folds.state import MemoryState, fold
from memtape.projections.interop.files import digest_of
from memtape.projections.interop.sources import (
    SEED001_EVENTS,
    SEED001_LINE,
    DomainRecallLine,
    ErrorRecallLine,
    LessonDeduplicatedLine,
    LessonPromotedLine,
    LessonRecordedLine,
    LessonsPrunedLine,
    Seed000Hints,
    Seed000Knowledge,
    Seed000RunManifest,
    Seed000RunSummary,
    Seed000Selectors,
    Seed000Trajectory,
    Seed001Memory,
    Tier1LoadedLine,
    TraynEntry,
    TraynExport,
    load_json,
    ms_to_ts,
    parse_model,
    refuse,
    split_element,
)
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.pin import tier1_refusal
from memtape.projections.seeds import seed_lessons
from memtape.projections.text import domain_matches, older_than
from memtape.projections.view import MemoryView

FORMATS = ("memory-json", "memory-events", "agent-memory", "trayn-json")
MAX_SOURCE_BYTES = 512 * 1024 * 1024
RUN_DIR_TIME_RE = re.compile(r"(\d{8}T\d{6}(?:\.\d+)?Z)")
HOST_PORT_RE = re.compile(r"^(.*)_(\d{1,5})$")


@dataclass
class ImportPlan:
    """A validated source turned into events, before anything is written."""

    source_format: str
    source_path: str
    digest: str
    events: list[NewEvent]
    counts: dict[str, int]


@dataclass(frozen=True)
class ImportResult:
    source_format: str
    source_path: str
    digest: str
    appended: int
    first_seq: int | None
    last_seq: int | None
    counts: dict[str, int]
    #: seq of the earlier `memory_imported` of the same content (then nothing was appended)
    already_imported_seq: int | None = None


@dataclass(frozen=True)
class KnownLesson:
    lesson_id: str
    lesson: str
    category: str
    failed_command: str | None
    error_pattern: str | None
    scope_domain: str | None


@dataclass
class LessonIndex:
    """Lessons an import can refer to by text (seed 001's events name lessons only by text), and
    the ledger's lessons as they stand (an import of event logs folds its own events into them)."""

    by_text: dict[str, list[KnownLesson]] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)
    state: LessonsState = field(default_factory=LessonsState)
    #: lessons lines named that neither the log, the ledger nor the seeds hold
    unseen: int = 0

    def add(self, known: KnownLesson) -> None:
        self.by_text.setdefault(known.lesson, []).append(known)
        self.keys.add(dedup_key(known.failed_command, known.error_pattern, known.scope_domain, known.lesson))

    def pick(self, text: str, fits: Callable[[LessonEntry], bool] = lambda les: True) -> KnownLesson | None:
        """The lesson a line names by `text`: of the lessons with that text (lessons may share a
        text under different keys or scopes), the first memory still holds that `fits` the line,
        else the first memory holds, else the first known."""
        candidates = self.by_text.get(text, [])
        held = [k for k in candidates if k.lesson_id in self.state.lessons]
        return next(
            (k for k in held if fits(self.state.lessons[k.lesson_id])),
            held[0] if held else (candidates[0] if candidates else None),
        )

    def has_key(self, failed_command: str | None, error_pattern: str | None, scope: str | None, text: str) -> bool:
        return dedup_key(failed_command, error_pattern, scope, text) in self.keys


#: builds the LessonIndex on demand: only after a source validated, and only for formats that need it
IndexSource = Callable[[], LessonIndex]


# ---- reading files -------------------------------------------------------------


def _read(path: Path, rel: str) -> bytes:
    """A source file whole, bounded: a regular file of at most `MAX_SOURCE_BYTES` (a device such as
    /dev/zero or a pipe has no size to trust and may never end, so it is refused before any read),
    its lines at most `MAX_LINE_BYTES` each, as `memtape append` and HTTP take them."""
    try:
        if path.is_symlink():
            raise refuse(rel, "is a symbolic link; refusing to follow it")
        # not blocking: opening a pipe without a writer would wait forever (regular files ignore it)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as source:
            info = os.fstat(source.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise refuse(rel, "is not a regular file (a device, a pipe or a socket); give a file")
            if info.st_size > MAX_SOURCE_BYTES:
                raise refuse(rel, f"larger than {MAX_SOURCE_BYTES} bytes")
            return read_source(source, rel)
    except OSError as exc:
        raise LedgerError(f"{rel}: cannot read ({exc.strerror})") from exc


def detect_format(path: Path) -> str:
    """Tell the format from the path and, for a file, from its content."""
    if path.is_dir():
        if (path / "domains").is_dir() or (path / "agent-runs").is_dir():
            return "agent-memory"
        if any(path.rglob("memory_events.jsonl")):
            return "memory-events"
        if (path / "memory.json").is_file():
            return "memory-json"
        raise LedgerError(
            f"{path}: no seed memory found (domains/, agent-runs/, memory_events.jsonl or memory.json); name its format"
        )
    if not path.exists():
        raise LedgerError(f"{path}: no such file or directory")
    if path.name.endswith(".jsonl"):
        return "memory-events"
    obj = load_json(_read(path, path.name), path.name)
    if isinstance(obj, dict) and "lessons" in obj and "version" in obj:
        return "memory-json"
    if isinstance(obj, list) or (isinstance(obj, dict) and "memories" in obj):
        return "trayn-json"
    raise LedgerError(f"{path.name}: cannot tell its format; name the format")


def _time_of(ts: str) -> str:
    return normalize_ts(ts)


# ---- seed 001: memory.json -------------------------------------------------------


def plan_memory_json(path: Path, lessons: IndexSource) -> ImportPlan:
    if path.is_dir():
        path = path / "memory.json"
    rel = path.name
    obj = load_json(_read(path, rel), rel)
    memory: Seed001Memory = parse_model(Seed001Memory, obj, rel)
    seen: dict[str, int] = {}
    for i, les in enumerate(memory.lessons):
        key = dedup_key(les.failed_command, les.error_pattern, les.domain, les.lesson)
        if key in seen:
            raise refuse(
                rel,
                f"lessons[{i}]: same lesson as lessons[{seen[key]}] "
                "(same failed_command and error_pattern, or same domain and text)",
            )
        seen[key] = i
    index = lessons()
    events: list[NewEvent] = []
    existing = 0
    for les in memory.lessons:
        if index.has_key(les.failed_command, les.error_pattern, les.domain, les.lesson):
            existing += 1
            continue
        lid = lesson_id_for(les.failed_command, les.error_pattern, les.domain, les.lesson)
        events.append(
            NewEvent(
                LessonRecorded(
                    lesson_id=lid,
                    lesson=les.lesson,
                    category=les.category,
                    failed_command=les.failed_command,
                    error_pattern=les.error_pattern,
                    scope_domain=les.domain,
                    source=les.source,
                    use_count=les.use_count,
                    triggered_domains=list(les.triggered_domains),
                    created_at=les.created_at,
                    last_used=les.last_used,
                ),
                occurred_at=_time_of(les.created_at),
            )
        )
    counts = {"lessons": len(events), "lessons_existing": existing}
    return ImportPlan(
        "memory-json", str(path.resolve()), digest_of("memory-json", [("memory.json", obj)]), events, counts
    )


# ---- seed 001: memory_events.jsonl -------------------------------------------------


def _run_dir_time(path: Path) -> str | None:
    m = RUN_DIR_TIME_RE.search(path.parent.name)
    if not m:
        return None
    raw = m.group(1)
    try:
        return normalize_ts(f"{raw[0:4]}-{raw[4:6]}-{raw[6:8]}T{raw[9:11]}:{raw[11:13]}:{raw[13:]}")
    except ValueError:
        return None


def _run_dir_id(path: Path) -> str | None:
    name = path.parent.name
    return name if name.startswith("run") and IDENT_RE.match(name) else None


def _pattern_in(lesson: LessonEntry | None, error: str) -> bool:
    """Did a recall on `error` (lower-cased) match `lesson` by its error pattern (the rule a recall
    counts a use by, as `MemoryView.error_matches` applies it)?"""
    pattern = lesson.error_pattern if lesson is not None else None
    return bool(pattern) and str(pattern).lower() in error


def _lesson_ids(texts: list[str], index: LessonIndex, fits: Callable[[LessonEntry], bool]) -> list[str]:
    """Ids for the lessons a read listed, only when every one is known (the lists are parallel)."""
    known = [index.pick(t, fits) for t in texts]
    if all(k is not None for k in known):
        return [k.lesson_id for k in known if k is not None]
    return []


def selector_plan(entry: Any) -> list[tuple[type, str, str]]:
    """The selector events (class, selector, time) that rebuild one seed 000 selectors.json entry.

    With memtape's `selectors`, each selector gets its own successes and failures at its own last
    use. Seed 000's own entry has only the element's total: with both a stable selector and an
    @ref, the @ref gets one use (a success when there is one, else a failure) and the stable
    selector the rest; with one, it gets every success and failure."""
    if entry.selectors is not None:
        return [
            (cls, name, _time_of(use.lastUsed))
            for name, use in entry.selectors.items()
            for cls, n in ((SelectorSucceeded, use.successCount), (SelectorFailed, use.failureCount))
            for _ in range(n)
        ]
    when = _time_of(entry.lastUsed)
    return [(cls, selector, when) for cls, selector in _total_plan(entry)]


def _total_plan(entry: Any) -> list[tuple[type, str]]:
    stable, ref = entry.stableSelector, entry.lastRef
    successes, failures = entry.successCount, entry.failureCount
    last: list[tuple[type, str]] = []
    if stable is not None and ref is not None:
        if successes:
            last.append((SelectorSucceeded, ref))
            successes -= 1
        else:
            last.append((SelectorFailed, ref))
            failures -= 1
    only = stable if stable is not None else ref or ""
    return [(SelectorSucceeded, only)] * successes + [(SelectorFailed, only)] * failures + last


def plan_memory_events(path: Path, lessons: IndexSource) -> ImportPlan:
    """Seed 001's per-run logs, replayed into the ledger as they happened.

    Lines are taken in time order across the files (`ts`, else the run folder's time; a stable
    sort, so lines of one time keep their file order), when every line has a time; else in file
    order. A ledger without the seed lessons gets them first, as a run would (so a line that
    deduplicates onto a seed lands on it). A `lessons_pruned` line names no lesson: the lessons it
    pruned are those the default pruning rule takes at that time, when their number is the line's.
    A dedup naming a lesson nothing holds (learned in a run since forgotten, or imported from
    memory.json) brings it back as the fold does, an error_recovery lesson with the line's count
    (seed 001's post-run learning records error_recovery lessons only)."""
    root = path if path.is_dir() else path.parent
    files = sorted(path.rglob("memory_events.jsonl")) if path.is_dir() else [path]
    if not files:
        raise LedgerError(f"{path}: no memory_events.jsonl found")
    parts: list[tuple[str, Any]] = []
    parsed: list[tuple[Any, str | None, str | None, str]] = []  # (line, when, run_id, where)
    for file in files:  # validate every line of every file before anything else
        rel = file.relative_to(root).as_posix() if path.is_dir() else file.name
        if file.is_symlink():
            raise refuse(rel, "is a symbolic link; refusing to follow it")
        data = _read(file, rel)
        run_time = _run_dir_time(file)
        run_id = _run_dir_id(file)
        lines: list[Any] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            where = f"{rel}: line {number}"
            obj = load_json(raw, where)
            lines.append(obj)
            tag = obj.get("event") if isinstance(obj, dict) else None
            line = parse_model(SEED001_LINE, obj, where, prefix=f"{tag}." if tag in SEED001_EVENTS else "")
            refusal = tier1_refusal(line.category) if isinstance(line, LessonRecordedLine) else None
            if refusal is not None:  # a run learns caller categories only; Tier 1 comes from seeds, promotion, pins
                raise refuse(where, f"lesson_recorded.{refusal}")
            parsed.append((line, _time_of(line.ts) if line.ts else run_time, run_id, where))
        parts.append((rel, lines))
    if all(when is not None for _line, when, _run, _where in parsed):
        parsed.sort(key=lambda p: parse_ts(p[1] or ""))
    index = lessons()
    events: list[NewEvent] = []
    counts: dict[str, int] = {"files": len(files), "skipped_lessons_pruned": 0}
    if not index.state.seeded:  # the seeds a run would write first (not those memory already holds)
        first = next((when for _line, when, _run, _where in parsed if when is not None), None)
        for seed in seed_lessons():
            d = seed.payload.model_dump()
            if dedup_key(d["failed_command"], d["error_pattern"], None, d["lesson"]) not in index.state.by_key:
                events.append(NewEvent(seed.payload, occurred_at=first))
                _fold_planned(index.state, events[-1])
        counts["seed_lessons"] = len(events)
    counts["given_promotions"] = counts["promotions_decided"] = 0
    for line, when, run_id, where in parsed:
        if isinstance(line, LessonPromotedLine):  # the log's say-so is a note: the policy decides below
            counts["given_promotions"] += 1
            continue
        new = _line_event(line, index, when, where)
        if new is None:
            counts["skipped_lessons_pruned"] += 1
            continue
        events.append(NewEvent(new[0], run_id=run_id, domain=new[1], occurred_at=when))
        decided = _promotions(index.state, events[-1])
        _fold_planned(index.state, events[-1])
        counts[line.event] = counts.get(line.event, 0) + 1
        for promotion in decided:
            events.append(promotion)
            _fold_planned(index.state, promotion)
            counts["promotions_decided"] += 1
    if index.unseen:
        counts["lessons_not_in_log"] = index.unseen
    return ImportPlan("memory-events", str(path.resolve()), digest_of("memory-events", parts), events, counts)


def _promotions(state: LessonsState, new: NewEvent) -> list[NewEvent]:
    """The promotions the default policy decides on `new` (memory as `state` holds it before): an
    imported log's own `lesson_promoted` lines are not taken as given (Tier 1 text comes only from
    seeds, the policy or a person's pin). A lesson recorded again is promoted on the log's dedup
    line that follows it, as the writer decides it then."""
    if new.type == "lesson_recorded" and key_in(new.payload.model_dump(mode="json")) in state.by_key:
        return []
    memory = MemoryState.empty(["lessons"])
    memory.lessons = state
    return [ev for ev in decide(memory, new, DEFAULT_POLICY) if ev.type == "lesson_promoted"]


def _fold_planned(state: LessonsState, new: NewEvent) -> None:
    """Fold an event that is not stored yet into the import's running lessons state."""
    data = new.payload.model_dump(mode="json")
    data.pop("type", None)
    when = normalize_ts(new.occurred_at) if new.occurred_at is not None else ""
    lessons_projection.apply(
        state,
        RecordedEvent(
            seq=0,
            id="",
            stream="",
            stream_version=0,
            type=new.type,
            schema_version=new.payload.schema_version,
            recorded_at=when,
            occurred_at=when,
            run_id=new.run_id,
            step=new.step,
            domain=new.domain,
            data=data,
            payload_json="",
            prev_hash="",
            hash="",
        ),
    )


def _pruned_at(state: LessonsState, when: str, pruned: int, remaining: int) -> list[str]:
    """The lessons seed 001's pruning takes at `when` (learned, unused for more than 90 days, fewer
    than 5 uses), when they are as many as the log says; else none (another rule pruned them)."""
    policy = DEFAULT_POLICY
    stale = sorted(
        les.lesson_id
        for les in state.lessons.values()
        if les.source != "seed"
        and les.use_count < policy.prune_min_uses
        and les.last_used
        and older_than(les.last_used, when, policy.prune_max_age_days)
    )
    if len(stale) == pruned and len(state.lessons) - pruned == remaining:
        return stale
    return []


def _line_event(line: Any, index: LessonIndex, when: str | None, where: str) -> tuple[Any, str | None] | None:
    """The ledger payload (and envelope domain) of one seed 001 memory event."""
    if isinstance(line, Tier1LoadedLine):
        return Tier1Loaded(
            count=line.count,
            lessons=line.lessons,
            lesson_ids=_lesson_ids(line.lessons, index, lambda les: les.tier == 1),
        ), None
    if isinstance(line, ErrorRecallLine):
        ids = _lesson_ids(line.lessons, index, lambda les: bool(les.failed_command or les.error_pattern))
        snippet = line.error_snippet.lower()
        return ErrorRecall(
            command=line.command,
            error_snippet=line.error_snippet,
            matched=line.matched,
            lessons=line.lessons,
            lesson_ids=ids,
            counted_ids=[i for i in ids if _pattern_in(index.state.lessons.get(i), snippet)]  # a pattern match
            if line.counted is None
            else [i for i, text in zip(ids, line.lessons) if text in line.counted],
        ), None
    if isinstance(line, DomainRecallLine):
        return DomainRecall(
            matched=line.matched,
            lessons=line.lessons,
            lesson_ids=_lesson_ids(line.lessons, index, lambda les: domain_matches(line.domain, les.scope_domain)),
        ), line.domain
    if isinstance(line, LessonRecordedLine):
        lid = lesson_id_for(line.failed_command, line.error_pattern, line.domain, line.lesson)
        index.add(KnownLesson(lid, line.lesson, line.category, line.failed_command, line.error_pattern, line.domain))
        return LessonRecorded(
            lesson_id=lid,
            lesson=line.lesson,
            category=line.category,
            failed_command=line.failed_command,
            error_pattern=line.error_pattern,
            scope_domain=line.domain,
            source="learned",
        ), None
    if isinstance(line, LessonDeduplicatedLine):
        new_count = line.new_use_count
        known = index.pick(line.lesson, lambda les: les.use_count + 1 == new_count)
        if known is None:  # learned where this log does not show (a forgotten run, memory.json)
            known = KnownLesson(
                lesson_id_for(None, None, None, line.lesson), line.lesson, "error_recovery", None, None, None
            )
            index.add(known)
            index.unseen += 1
        return LessonDeduplicated(
            lesson_id=known.lesson_id,
            lesson=known.lesson,
            category=known.category,  # type: ignore[arg-type]
            failed_command=known.failed_command,
            error_pattern=known.error_pattern,
            scope_domain=known.scope_domain,
            new_use_count=line.new_use_count,
        ), None
    assert isinstance(line, LessonsPrunedLine)
    if when is None:  # which lessons went is not in the log; without a time there is nothing to keep
        return None
    return LessonsPruned(
        lesson_ids=_pruned_at(index.state, when, line.pruned_count, line.remaining_count),
        pruned_count=line.pruned_count,
        remaining_count=line.remaining_count,
        as_of=when,
    ), None


# ---- seed 000: the .agent-memory folder ----------------------------------------------


def _dir_domain(name: str) -> str | None:
    """A seed 000 domain directory name back to a host (`localhost_5173` -> `localhost:5173`)."""
    candidates = [name.lower()]
    m = HOST_PORT_RE.match(name)
    if m:
        candidates.insert(0, f"{m.group(1)}:{m.group(2)}".lower())
    for cand in candidates:
        try:
            return check_domain(cand)
        except ValueError:
            continue
    return None


def plan_agent_memory(path: Path, lessons: IndexSource) -> ImportPlan:
    parts: list[tuple[str, Any]] = []
    events: list[NewEvent] = []
    counts = {
        "facts": 0,
        "sessions": 0,
        "selectors": 0,
        "trajectories": 0,
        "runs": 0,
        "run_summaries": 0,
        "suites_not_kept": 0,
        "derived_files": 0,
        "ignored_files": 0,
    }
    domains_dir = path / "domains"
    if domains_dir.is_symlink():
        raise refuse("domains", "is a symbolic link; refusing to follow it")
    if domains_dir.is_dir():
        for ddir in sorted(domains_dir.iterdir()):
            rel_dir = f"domains/{ddir.name}"
            if ddir.is_symlink():
                raise refuse(rel_dir, "is a symbolic link; refusing to follow it")
            if not ddir.is_dir():
                counts["ignored_files"] += 1
                continue
            events.extend(_plan_domain(ddir, rel_dir, parts, counts))
    summaries = _run_summaries(path, parts, counts)
    hints_file = path / "hints.json"
    if hints_file.exists():  # derived from the rest of the folder (see exporters.hints_json): checked, not kept
        parts.append(
            (
                "hints.json",
                parse_model(
                    Seed000Hints, load_json(_read(hints_file, "hints.json"), "hints.json"), "hints.json"
                ).model_dump(),
            )
        )
        counts["derived_files"] += 1
    runs_dir = path / "agent-runs"
    if runs_dir.is_symlink():
        raise refuse("agent-runs", "is a symbolic link; refusing to follow it")
    if runs_dir.is_dir():
        manifests: list[Seed000RunManifest] = _json_folder(
            runs_dir, "agent-runs", Seed000RunManifest, "runId", "run", parts, counts
        )
        manifests.sort(key=lambda m: (_time_of(m.startedAt), m.runId))
        for manifest in manifests:
            summary = summaries.pop(manifest.runId, None)
            events.extend(_run_events(manifest, summary))
            counts["runs"] += 1
            counts["run_summaries"] += summary is not None
    counts["suites_not_kept"] += len(summaries)
    if not parts and not domains_dir.is_dir() and not runs_dir.is_dir():
        raise LedgerError(f"{path}: no domains/ or agent-runs/ folder (not a seed 000 .agent-memory folder)")
    return ImportPlan("agent-memory", str(path.resolve()), digest_of("agent-memory", parts), events, counts)


def _plan_domain(ddir: Path, rel_dir: str, parts: list[tuple[str, Any]], counts: dict[str, int]) -> list[NewEvent]:
    events: list[NewEvent] = []
    domain = _dir_domain(ddir.name)
    knowledge_file = ddir / "knowledge.json"
    if knowledge_file.exists():
        rel = f"{rel_dir}/knowledge.json"
        obj = load_json(_read(knowledge_file, rel), rel)
        knowledge: Seed000Knowledge = parse_model(Seed000Knowledge, obj, rel)
        parts.append((rel, obj))
        domain = knowledge.domain
        for fact in knowledge.facts:
            events.append(
                NewEvent(
                    FactObserved(
                        fact_type=fact.type,
                        key=fact.key,
                        value=fact.value,
                        confidence=fact.confidence,
                        sources=fact.sources,
                    ),
                    domain=domain,
                    occurred_at=_time_of(fact.lastSeen),
                )
            )
            counts["facts"] += 1
        for s in knowledge.sessions:
            events.append(
                NewEvent(
                    SessionRecorded(
                        session_id=s.id,
                        goal=s.goal,
                        outcome=s.outcome,
                        success=s.success,
                        final_url=s.finalUrl,
                        timestamp=s.timestamp,
                        turns_used=s.turnsUsed,
                        duration_ms=s.durationMs,
                    ),
                    domain=domain,
                    occurred_at=_time_of(s.timestamp),
                )
            )
            counts["sessions"] += 1
    selectors_file = ddir / "selectors.json"
    traj_dir = ddir / "trajectories"
    if domain is None and (selectors_file.exists() or traj_dir.exists()):
        raise refuse(rel_dir, "directory name is not a host name and there is no knowledge.json naming the domain")
    if selectors_file.exists():
        rel = f"{rel_dir}/selectors.json"
        obj = load_json(_read(selectors_file, rel), rel)
        selectors: Seed000Selectors = parse_model(Seed000Selectors, obj, rel)
        parts.append((rel, obj))
        for entry in selectors.entries.values():
            role, name = split_element(entry.element)
            events.extend(
                NewEvent(cls(role=role, name=name, selector=selector), domain=domain, occurred_at=when)
                for cls, selector, when in selector_plan(entry)
            )
            counts["selectors"] += 1
    if traj_dir.is_symlink():
        raise refuse(f"{rel_dir}/trajectories", "is a symbolic link; refusing to follow it")
    if traj_dir.is_dir():
        trajectories: list[Seed000Trajectory] = _json_folder(
            traj_dir, f"{rel_dir}/trajectories", Seed000Trajectory, "id", "trajectory", parts, counts
        )
        trajectories.sort(key=lambda t: (_time_of(t.timestamp), t.id))
        for traj in trajectories:
            steps = []
            for st in traj.steps:
                args = dict(st.action.model_extra or {})
                steps.append(
                    TrajectoryStep(
                        command=st.action.action,
                        args=args,
                        selector=st.action.selector,
                        url=st.url,
                        verified=st.verified,
                    )
                )
            events.append(
                NewEvent(
                    TrajectoryRecorded(
                        trajectory_id=traj.id,
                        goal=traj.goal,
                        origin=traj.origin or "",
                        steps=steps,
                        success=traj.success,
                        duration_ms=traj.durationMs,
                        turns=len(steps),
                    ),
                    domain=domain,
                    occurred_at=_time_of(traj.timestamp),
                )
            )
            counts["trajectories"] += 1
    for other in sorted(ddir.iterdir()):
        if other.name not in ("knowledge.json", "selectors.json", "trajectories"):
            counts["ignored_files"] += 1
    return events


def _json_folder(
    folder: Path,
    rel_dir: str,
    model: Any,
    id_field: str,
    what: str,
    parts: list[tuple[str, Any]],
    counts: dict[str, int],
) -> list[Any]:
    """Every `*.json` of a seed 000 folder (agent-runs/, trajectories/) parsed as `model`, in file
    name order; other entries are counted as ignored; a second file with the same id is refused."""
    items: list[Any] = []
    seen: dict[str, str] = {}
    for file in sorted(folder.iterdir()):
        rel = f"{rel_dir}/{file.name}"
        if not file.name.endswith(".json") or file.is_dir():  # seed 000 lists every .json there
            counts["ignored_files"] += 1
            continue
        obj = load_json(_read(file, rel), rel)
        item = parse_model(model, obj, rel)
        key = getattr(item, id_field)
        if key in seen:
            raise refuse(rel, f"{id_field}: {key!r} is also the {what} of {seen[key]}")
        seen[key] = rel
        parts.append((rel, obj))
        items.append(item)
    return items


def _run_summaries(path: Path, parts: list[tuple[str, Any]], counts: dict[str, int]) -> dict[str, Seed000RunSummary]:
    """runs/*.json by id. A summary of one test whose id is a run's (what memtape writes) tells
    that run's duration, case and model; a suite of several is seed 000's own and is not kept."""
    folder = path / "runs"
    if folder.is_symlink():
        raise refuse("runs", "is a symbolic link; refusing to follow it")
    if not folder.is_dir():
        return {}
    summaries: list[Seed000RunSummary] = _json_folder(folder, "runs", Seed000RunSummary, "id", "suite", parts, counts)
    return {s.id: s for s in summaries}


def _run_events(m: Seed000RunManifest, summary: Seed000RunSummary | None = None) -> list[NewEvent]:
    domain = m.domain or None
    mode = "new"
    if m.parentRunId:
        mode = "fork" if (m.sessionId or "").startswith("fork_") else "resume"
    test = summary.tests[0] if summary is not None and len(summary.tests) == 1 else None
    case_id = test.id if test is not None and test.id != m.runId else None
    policy = {"decision_policy": summary.model} if summary is not None and summary.model is not None else {}
    out = [
        NewEvent(
            RunStarted(
                session_id=m.sessionId,
                parent_run_id=m.parentRunId,
                mode=mode,  # type: ignore[arg-type]
                goal=m.goal,
                start_url=m.startUrl,
                case_id=case_id,
                policy=policy,
            ),
            run_id=m.runId,
            domain=domain,
            occurred_at=_time_of(m.startedAt),
        )
    ]
    if m.currentUrl is not None:
        out.append(
            NewEvent(
                RunProgress(turn=m.turnCount, current_url=m.currentUrl),
                run_id=m.runId,
                domain=domain,
                occurred_at=_time_of(m.updatedAt),
            )
        )
    if m.status != "running":
        out.append(
            NewEvent(
                RunCompleted(
                    success=m.status == "completed",
                    summary=m.summary or "",
                    result=m.result,
                    reason=m.reason,
                    final_url=m.finalUrl,
                    turns=m.turnCount,
                    artifact_paths=list(m.artifactPaths),
                    duration_ms=test.durationMs if test is not None else 0.0,
                ),
                run_id=m.runId,
                domain=domain,
                occurred_at=_time_of(m.completedAt or m.updatedAt),
            )
        )
    return out


# ---- seed 002: Trayn JSON export -------------------------------------------------------

TRAYN_LIST: TypeAdapter[list[TraynEntry]] = TypeAdapter(list[TraynEntry])
CALL_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\(")


def plan_trayn_json(path: Path, lessons: IndexSource) -> ImportPlan:
    rel = path.name
    obj = load_json(_read(path, rel), rel)
    if isinstance(obj, list):  # what exportMemories(memories, "json") writes: a bare array
        entries: list[TraynEntry] = parse_model(TRAYN_LIST, obj, rel)
    else:
        entries = parse_model(TraynExport, obj, rel).memories
    digest = digest_of("trayn-json", [(rel, obj)])
    events: list[NewEvent] = []
    counts = {"steps": 0, "graded": 0, "runs": 0}
    # one run per (rep, sequence of distinct step numbers): a repeated stepNum starts the next run
    current: dict[int, tuple[str, set[int]]] = {}
    runs = 0
    seen_ids: dict[int, int] = {}
    for i, e in enumerate(entries):
        if e.id in seen_ids:
            raise refuse(rel, f"[{i}].id: {e.id} repeats [{seen_ids[e.id]}].id")
        seen_ids[e.id] = i
        run = current.get(e.rep)
        if run is None or e.stepNum in run[1]:
            runs += 1
            run = (f"trayn_{digest[:12]}_{runs}", set())
            current[e.rep] = run
        run[1].add(e.stepNum)
        run_id = run[0]
        m = CALL_RE.match(e.action)
        args: dict[str, Any] = {"call": e.action, "record_id": e.id}
        if e.stepId is not None:
            args["step_id"] = e.stepId
        when = ms_to_ts(e.createdAt)
        events.append(
            NewEvent(
                StepRecorded(
                    env_before=_env(e.envPre),
                    env_after=_env(e.envPost),
                    think=e.think,
                    internal_state=e.internalState,
                    internal_state_embedding=list(e.internalStateEmbedding),
                    action=Action(command=m.group(1) if m else e.action, args=args),
                    target_text=e.actionElementText,
                    ok=True,
                    rep=e.rep,
                ),
                run_id=run_id,
                step=e.stepNum,
                domain=_host(e.envPre.url),
                occurred_at=when,
            )
        )
        counts["steps"] += 1
        if e.outcome != "pending":
            events.append(
                NewEvent(
                    StepGraded(
                        outcome=e.outcome,
                        reason=e.outcomeReason,
                        correction=e.correction,
                        task_incomplete=e.taskIncomplete,
                        grader="import",
                    ),
                    run_id=run_id,
                    step=e.stepNum,
                    domain=_host(e.envPre.url),
                    occurred_at=when,
                )
            )
            counts["graded"] += 1
    counts["runs"] = runs
    return ImportPlan("trayn-json", str(path.resolve()), digest, events, counts)


def _env(env: Any) -> EnvState:
    return EnvState(url=env.url, title=env.title, page_type=env.pageType, elements=list(env.elements))


def _host(url: str) -> str | None:
    try:
        host = urlsplit(url).netloc.rsplit("@", 1)[-1]
        return check_domain(host) if host else None
    except ValueError:
        return None


# ---- the import ----------------------------------------------------------------------

PLANNERS: dict[str, Callable[[Path, IndexSource], ImportPlan]] = {
    "memory-json": plan_memory_json,
    "memory-events": plan_memory_events,
    "agent-memory": plan_agent_memory,
    "trayn-json": plan_trayn_json,
}


def lesson_index(store: Store, seeds: Iterable[NewEvent] = (), projections_path: Path | None = None) -> LessonIndex:
    """Lessons the ledger holds now (by text and dedup key), then the seed lessons (by text only).

    With projections.db, its caught-up state; without, only the lessons projection is folded,
    from the lesson events alone.
    """
    if projections_path is not None:
        lessons_state = MemoryView.open(store, projections_path).state.lessons
    else:
        lessons_state = fold(
            MemoryState.empty(["lessons"]), store.read(types=lessons_projection.TYPES), names=["lessons"]
        ).lessons
    index = LessonIndex(state=copy.deepcopy(lessons_state))
    for les in lessons_state.lessons.values():
        index.add(
            KnownLesson(
                les.lesson_id, les.lesson, les.category, les.failed_command, les.error_pattern, les.scope_domain
            )
        )
    for new in seeds:
        d = new.payload.model_dump()
        index.by_text.setdefault(d["lesson"], []).append(
            KnownLesson(
                d["lesson_id"],
                d["lesson"],
                d["category"],
                d.get("failed_command"),
                d.get("error_pattern"),
                d.get("scope_domain"),
            )
        )
    return index


def plan_import(store: Store, path: Path, fmt: str = "auto", projections_path: Path | None = None) -> ImportPlan:
    """Validate a source and build its events; writes nothing to the ledger."""
    path = Path(path)
    if not path.exists():
        raise LedgerError(f"{path}: no such file or directory")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in PLANNERS:
        raise LedgerError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    return PLANNERS[fmt](path, lambda: lesson_index(store, seed_lessons(), projections_path))


def stored_digest(store: Store, digest: str) -> str:
    """The digest as the ledger stores it: the store's secret redaction also sees payload strings,
    and a hex digest may hold a run of digits that looks like a card number to it."""
    return store.redactor.text(digest)


def previous_import(store: Store, digest: str) -> int | None:
    """The seq of an earlier `memory_imported` of the same content, if any."""
    wanted = {digest, stored_digest(store, digest)}
    for ev in store.read(types=["memory_imported"]):
        if ev.data.get("source_digest") in wanted:
            return ev.seq
    return None


def import_source(store: Store, path: Path, fmt: str = "auto", projections_path: Path | None = None) -> ImportResult:
    """Import one source (see the module docstring); returns what was appended."""
    plan = plan_import(store, path, fmt, projections_path)
    head = store.head()
    earlier = previous_import(store, plan.digest)
    if earlier is not None:
        return ImportResult(plan.source_format, plan.source_path, plan.digest, 0, None, None, plan.counts, earlier)
    marker = NewEvent(
        MemoryImported(
            source_format=plan.source_format,
            source_path=plan.source_path,
            source_digest=plan.digest,
            counts=plan.counts,
        )
    )
    with store.atomic() as tx:
        wanted = {plan.digest, stored_digest(store, plan.digest)}
        for ev in tx.read(head + 1):  # another process may have imported it meanwhile
            if ev.type == "memory_imported" and ev.data.get("source_digest") in wanted:
                return ImportResult(
                    plan.source_format, plan.source_path, plan.digest, 0, None, None, plan.counts, ev.seq
                )
        recorded = tx.append([marker, *plan.events])
    return ImportResult(
        plan.source_format, plan.source_path, plan.digest, len(recorded), recorded[0].seq, recorded[-1].seq, plan.counts
    )
