"""Memory for any agent: runs, recall and post-run learning — the code behind `memtape.open`.

`Memory` opens runs on a store under one `Policy`; a `Run` records what the
agent did and recalls what memory holds. Every call appends its events
through `projections.writer.MemoryWriter` (so the policy's decisions — dedup,
promotion, pruning, contradiction, the start-of-run seeding and expiry — land
in the same transaction) and every read goes through
`projections.view.MemoryView`; every recall is itself an event. Nothing here
knows the bundled browser agent: its loop starts a `Run` and calls it as any
agent does, so what an external agent gets is what the demo measures.
`Memory.state` answers `memtape state`; `memtape.api` adds the answers that
need the analytics layer (audit, experiment).

With memory off a run is still logged (run_started, step_recorded,
context_built, step_graded, run_completed: seed 002's baseline rep) but reads
nothing and learns nothing. Secrets never reach the ledger: passwords the
goal gives (read by `ledger.credentials`, as the policy reads them) and values
typed with `sensitive=True` are scrubbed from every payload before it is
built, and `Action(sensitive=True)` masks every argument of the action itself.

Example:
    mem = Memory(store, projections_path)
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.recall_domain(step=1)
        run.record_step(step=1, action="click", target='button "Buy"', ok=False, error="...")
        run.finish(success=True, outcome="bought")
"""

from __future__ import annotations

import copy
import hashlib
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import orjson
from pydantic import TypeAdapter, ValidationError

from memtape.ledger.anchor import Keeper, remember_head
from memtape.ledger.clock import format_ts, parse_ts
from memtape.ledger.credentials import passwords
from memtape.ledger.errors import InvalidEvent, KeyReused, RunConflict, UnknownItem
from memtape.ledger.events import (
    LOCATOR_ARGS,
    Backtracked,
    ContextBuilt,
    ContextGiven,
    ContextInferred,
    ContextItem,
    DomainRecall,
    Embedding,
    ErrorRecall,
    ExplorationCompleted,
    ExplorationStarted,
    ExtractionRecorded,
    ExtractionServed,
    FactObserved,
    FactType,
    LessonRecorded,
    MemorySearched,
    NewEvent,
    PageMapStored,
    PatternLearned,
    PatternUsed,
    Payload,
    RecordedEvent,
    RepeatedFailureDetected,
    RequestAnswered,
    RunCompleted,
    RunProgress,
    RunStarted,
    ScratchSet,
    SelectorFailed,
    SelectorSucceeded,
    SessionRecorded,
    SitemapLinksDiscovered,
    SitemapPageVisited,
    SnapshotTaken,
    StepGraded,
    StepRecorded,
    Tier1Loaded,
    TrajectoryRecalled,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.ids import short_id
from memtape.ledger.jsonl import first_error
from memtape.ledger.redact import MARKER, masked_args, secret_field
from memtape.ledger.store import Store
from memtape.ledger.urls import url_parts
from memtape.projections import lessons as lessons_mod
from memtape.projections.budget import DEFAULT_BUDGET, count_tokens, token_counter
from memtape.projections.knowledge import LOAD_TIME, SHADOW_DOM, fill_fails_key
from memtape.projections.lessons import lesson_id_for, recall_payload
from memtape.projections.page_maps import PageMap
from memtape.projections.parameters import DEFAULT_POLICY, Policy
from memtape.projections.pattern_learning import learn_patterns
from memtape.projections.pin import tier1_refusal
from memtape.projections.report import STATE_KINDS, open_state
from memtape.projections.runs import RunManifest
from memtape.projections.search import SearchIndex, SearchResult, check_kinds, check_limit, check_query
from memtape.projections.selectors import known_good
from memtape.projections.short_term import ShortTerm
from memtape.projections.steps import action_signature
from memtape.projections.text import domain_of, origin_of, quoted_name
from memtape.projections.trajectories import Trajectory
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter, RunSoFar, run_finished

#: seed 001's known error phrases, in the order its agent tries them: the first one an error
#: contains is the lesson's error_pattern ("... not visible; Timeout 5000ms exceeded" is `timeout`)
KNOWN_PATTERNS = (
    "too many arguments",
    "intercepts pointer events",
    "timeout",
    "element is not visible",
    "element is not enabled",
    "frame was detached",
    "target closed",
    "navigation interrupted",
)
DISMISS = re.compile(r"\b(accept|agree|allow|close|dismiss|got it|ok|okay|no thanks|continue|reject)\b", re.I)
SAFE_KEYS = {"Enter", "Escape", "Tab", "ArrowDown", "ArrowUp", "PageDown", "PageUp", "Space", "Backspace"}
#: a run with no event for this long is abandoned when the next run starts (its process died)
STALE_AFTER = timedelta(hours=1)
#: `role "name"`, the way prompts and lessons name an element (quotes escaped as in `quoted_name`)
ELEMENT = re.compile(r'^([A-Za-z][A-Za-z0-9_-]*) "((?:[^"\\]|\\.)*)"$', re.S)
CONTEXT_ITEM_KEYS = frozenset(
    {"source", "text", "priority", "event_ids", "content_type", "confidence", "truncated", "tokens"}
)


#: errors that only say the element was not there (seed 001's agent skips them): they teach nothing
NO_CAUSE = ("not found", "no such element")
#: an error shorter than this (stripped) teaches nothing; exactly this long is kept
MIN_ERROR_CHARS = 10
#: a lesson's error_pattern without a known phrase: the error's first line, lower-cased, cut to this
PATTERN_CHARS = 80
#: a lesson's text quotes the error's first line, in its own case, cut to this
QUOTE_CHARS = 60


def error_pattern(error: str) -> str:
    """The key phrase of an error, as seed 001's agent picks it: the first of `KNOWN_PATTERNS` (in
    list order) the error contains, else its first line lower-cased and cut to `PATTERN_CHARS`."""
    low = (error or "").lower()
    for p in KNOWN_PATTERNS:
        if p in low:
            return p
    return low.strip().split("\n")[0][:PATTERN_CHARS]


def quoted_error(error: str) -> str:
    """The error as a lesson quotes it: its first line in its own case, cut to `QUOTE_CHARS`."""
    return error.strip().split("\n")[0][:QUOTE_CHARS]


def command_name(command: str) -> str:
    """The command of a command line: its first word, after a `playwright-cli` prefix."""
    parts = command.split()
    if len(parts) >= 2 and parts[0] == "playwright-cli":
        return parts[1]
    return parts[0] if parts else ""


def substantive(error: str | None) -> bool:
    """Seed 001: only a substantive error teaches a lesson — one that does not merely say the
    element was not there (`NO_CAUSE`) and is at least `MIN_ERROR_CHARS` long once stripped."""
    if not error or len(error.strip()) < MIN_ERROR_CHARS:
        return False
    low = error.lower()
    return not any(phrase in low for phrase in NO_CAUSE)


def goal_secrets(goal: str) -> list[str]:
    """Passwords a goal gives (`log in as "u" using "p"`, `... with password "p"`), read as the policy
    reads them; they are scrubbed from every payload of the run and typed again on replay."""
    return passwords(goal)


def element_text(role: str | None, name: str | None) -> str | None:
    """`button "Buy"` from a role and a name (None without a role)."""
    if not role:
        return None
    return f'{role} "' + (name or "").replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_element(text: str | None) -> tuple[str | None, str | None]:
    """(role, name) of `button "Buy"`; any other text is a name without a role."""
    if text is None:
        return None, None
    m = ELEMENT.match(text)
    if m is None:
        return None, text
    return m.group(1), re.sub(r"\\(.)", r"\1", m.group(2))


@dataclass
class StepRecord:
    """One executed step as memory keeps it for post-run learning."""

    step: int
    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None
    url_before: str
    url_after: str
    role: str | None = None
    name: str | None = None
    selector: str | None = None
    sensitive: bool = False
    duration_ms: float = 0.0
    decided_by: str = "policy"
    in_shadow: bool = False
    event_id: str | None = None

    @property
    def domain(self) -> str:
        return domain_of(self.url_before) or domain_of(self.url_after)

    @property
    def identity(self) -> tuple[str | None, str | None]:
        return (self.role, self.name)

    @classmethod
    def from_event(cls, ev: RecordedEvent) -> StepRecord:
        """The step a `step_recorded` event logged (a run finished in another process learns from these)."""
        d = ev.data
        action, target = d["action"], d.get("target") or {}
        role = target.get("role") or None
        return cls(
            step=ev.step or 0,
            command=action["command"],
            args=dict(action.get("args") or {}),
            ok=d["ok"],
            error=d.get("error"),
            url_before=(d.get("env_before") or {}).get("url", ""),
            url_after=(d.get("env_after") or {}).get("url", ""),
            role=role,
            name=target.get("name") if role else None,
            selector=target.get("selector"),
            in_shadow=bool(target.get("in_shadow")),
            sensitive=bool(action.get("sensitive")),
            duration_ms=float(d.get("duration_ms") or 0.0),
            decided_by=d.get("decided_by", "policy"),
            event_id=ev.id,
        )


@dataclass
class Learned:
    """What post-run learning produced (also returned to the caller for reports and tests)."""

    lessons: list[LessonRecorded] = field(default_factory=list)
    facts: list[FactObserved] = field(default_factory=list)
    trajectory: TrajectoryRecorded | None = None
    patterns: list[PatternLearned] = field(default_factory=list)


@dataclass(frozen=True)
class Extraction:
    """An extraction as the agent uses it: from the page now, or served from the cache."""

    key: str
    tool: str
    url: str
    title: str
    text: str
    links: tuple[dict[str, str], ...]
    section_count: int
    served_from_cache: bool
    event_id: str


@dataclass(frozen=True, slots=True)
class Lesson:
    """A lesson as recall returns it; `event_ids` are the events it came from (for provenance)."""

    lesson_id: str
    text: str
    category: str
    use_count: int
    triggered_domains: tuple[str, ...]
    event_ids: tuple[str, ...]
    failed_command: str | None = None
    error_pattern: str | None = None
    scope_domain: str | None = None
    source: str = "learned"
    #: what a recall matched (`pattern+command`, `pattern`, `command`, `domain`, `host`; None outside a
    #: recall) and the score it ranked by; a `command` match was offered but not counted as a use
    score: float = 0.0
    matched: str | None = None

    @classmethod
    def of(cls, lesson: lessons_mod.Lesson, match: lessons_mod.Match | None = None) -> Lesson:
        return cls(
            lesson_id=lesson.lesson_id,
            text=lesson.lesson,
            category=lesson.category,
            use_count=lesson.use_count,
            triggered_domains=lesson.triggered_domains,
            event_ids=lesson.event_ids,
            failed_command=lesson.failed_command,
            error_pattern=lesson.error_pattern,
            scope_domain=lesson.scope_domain,
            source=lesson.source,
            score=match.score if match else 0.0,
            matched=match.matched if match else None,
        )

    @classmethod
    def recalled(cls, match: lessons_mod.Match) -> Lesson:
        return cls.of(match.lesson, match)


@dataclass(frozen=True, slots=True)
class TrajectoryRecall:
    """The reference trajectory recalled for a goal, and whether it is close enough to replay
    (similarity ≥ replay_min_similarity, the same origin, some steps)."""

    trajectory: Trajectory
    similarity: float
    score: float
    replay: bool


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return first_error(exc)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_step(step: Any, what: str = "step", *, required: bool = False) -> int | None:
    if step is None and not required:
        return None
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**63:
        raise InvalidEvent(f"{what} must be an integer from 0 to 2**63-1, got {step!r:.60}")
    return step


def _check_text(value: Any, what: str, *, empty: bool = False, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise InvalidEvent(f"{what} must be a non-empty string, got {value!r:.60}")
    return value


def _check_amount(value: Any, what: str, *, whole: bool = False) -> Any:
    """A number >= 0 (an integer when `whole`), never a bool; None passes (a default applies)."""
    kinds = (int,) if whole else (int, float)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds) or not 0 <= value < 2**63):
        raise InvalidEvent(f"{what} must be {'an integer' if whole else 'a number'} >= 0, got {value!r:.60}")
    return value


def check_point(value: Any, what: str) -> int | str | None:
    """A point of the ledger as the API takes it: a seq (an integer >= 0) or an ISO time; None passes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, int) and value < 0):
        raise InvalidEvent(f"{what} must be a seq (an integer >= 0) or an ISO time, got {value!r:.60}")
    return value


def plain(value: Any) -> Any:
    """The value exactly as the command line's `--json` prints it."""
    return orjson.loads(
        orjson.dumps(value, default=lambda v: asdict(v) if is_dataclass(v) and not isinstance(v, type) else str(v))
    )


EMBEDDING: TypeAdapter[list[float]] = TypeAdapter(Embedding)


def _check_embedding(vector: Any) -> tuple[float, ...]:
    """A vector as `step_recorded` stores it (real numbers, at most MAX_EMBEDDING), never empty."""
    if isinstance(vector, str | bytes) or not vector:
        raise InvalidEvent(f"embedding must be a non-empty list of numbers, got {vector!r:.60}")
    try:
        return tuple(EMBEDDING.validate_python(list(vector), strict=True))
    except (TypeError, ValidationError) as exc:
        raise InvalidEvent(f"embedding: {_one_line(exc)}") from None


def _check_flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidEvent(f"{what} must be True or False, got {value!r:.60}")
    return value


class Memory:
    """One ledger under one policy: opens runs, and answers recall outside a run."""

    def __init__(
        self,
        store: Store,
        projections_path: Path | None = None,
        policy: Policy = DEFAULT_POLICY,
        *,
        enabled: bool = True,
        stale_after: timedelta = STALE_AFTER,
        keepers: Sequence[Keeper] = (),
    ):
        if not isinstance(policy, Policy):
            raise InvalidEvent(f"policy must be a memtape Policy, got {type(policy).__name__}")
        self.store = store
        self.policy = policy
        self.enabled = enabled
        self.stale_after = stale_after
        self.projections_path = projections_path
        #: where this memory remembers the head it saw when it closes (`memtape.ledger.anchor`)
        self.keepers = tuple(keepers)
        # starts from projections.db outside the write lock, not by folding the whole log inside it
        self.writer = MemoryWriter(store, policy, projections_path)
        self.view: MemoryView | None = None
        self._dirty = True
        #: (head, index) of the last search at the head: searches in a row share one index
        self._search_index: tuple[int, SearchIndex] | None = None

    # ---- plumbing ------------------------------------------------------------------

    def close(self) -> None:
        """Remember the head this memory saw, then close the ledger."""
        try:
            if self.keepers:
                remember_head(self.store, self.keepers)
        finally:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return format_ts(self.store.clock())

    def current(self) -> MemoryView:
        """The view at the ledger's head (folding in only what was appended since the last read)."""
        if self.view is None:
            self.view = MemoryView.open(self.store, self.projections_path, self.policy)
            # later refreshes fold only the new events in memory (no projections.db round trip)
            self.view.projections_path = None
            self._dirty = False
        elif self._dirty:
            self.view.refresh()
            self._dirty = False
        return self.view

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        if not events:
            return []
        out = self.writer.append(list(events))
        self._dirty = True
        return out

    def append_to_run(self, run_id: str, build: Callable[[RunSoFar], Sequence[NewEvent]]) -> list[RecordedEvent]:
        """Append what `build` makes of run `run_id` as the ledger holds it (`MemoryWriter.append_to_run`)."""
        out = self.writer.append_to_run(run_id, build)
        self._dirty = True
        return out

    def once(self, key: str, request: str, answer: Callable[[], tuple[int, Any]]) -> tuple[int, Any, bool]:
        """Answer a request sent with idempotency key `key` at most once. The first time, `answer()`
        runs and what it writes commits in one transaction with its answer (a `request_answered`
        event in the key's own stream); the same key again with the same `request` (a sha256 of
        what was asked) gets the first answer and writes nothing; with another request it is
        refused (KeyReused). Returns (status, body, replayed)."""
        _check_text(key, "idempotency key")
        stream = "request-" + hashlib.sha256(key.encode()).hexdigest()
        try:
            with self.writer.atomic() as tx:
                first = next(tx.select(stream=stream), None)
                if first is not None:
                    if first.data["request_sha256"] != request:
                        raise KeyReused(f"idempotency key {key[:60]!r} already answered another request")
                    return int(first.data["status"]), first.data["response"], True
                status, body = answer()
                self.append(
                    [
                        self.event(
                            RequestAnswered,
                            {"request_sha256": request, "status": status, "response": body},
                            stream=stream,
                        )
                    ]
                )
        except BaseException:
            self.view = None  # it may have folded what was rolled back
            raise
        finally:
            self._dirty = True
        return status, body, False

    def event(
        self,
        cls: type[Payload],
        fields: dict[str, Any],
        *,
        run_id: str | None = None,
        step: int | None = None,
        domain: str | None = None,
        stream: str | None = None,
    ) -> NewEvent:
        """Build (and so validate) one event; bad input raises InvalidEvent before anything is written."""
        _check_text(domain, "domain", empty=True, optional=True)
        try:
            return NewEvent(cls(**fields), run_id=run_id, step=step, domain=domain or None, stream=stream)
        except (ValidationError, ValueError, TypeError) as exc:
            raise InvalidEvent(f"{cls.model_fields['type'].default}: {_one_line(exc)}") from None

    def _known_run(self, run_id: str | None) -> None:
        if run_id is not None and self.current().run(_check_text(run_id, "run_id") or "") is None:
            raise UnknownItem(f"no run {run_id!r} in the ledger")

    # ---- runs ------------------------------------------------------------------------

    def start_run(
        self,
        *,
        goal: str,
        start_url: str,
        session_id: str | None = None,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        mode: str = "new",
        isolation: str = "shared",
        case_id: str | None = None,
        agent: str = "external",
        rep: int | None = None,
        step_memory_scope: str = "session",
    ) -> Run:
        """Abandon stale runs, then start this one: the start-of-run policy (seeds on first use,
        pruning, trajectory expiry) is applied by the writer in the same transaction as run_started.

        Seed 002's reps: without `rep`, the run is numbered within its session (1 + the
        session's runs already in the registry; a run without a session id is rep 1). Rep 1
        retrieves no step memories (the baseline); rep 2+ retrieves those of the session's
        previous reps, or of every other run with `step_memory_scope="all"`."""
        _check_text(goal, "goal")
        _check_text(start_url, "start_url")
        _check_text(agent, "agent")
        if step_memory_scope not in ("session", "all"):
            raise InvalidEvent(f"step_memory_scope must be 'session' or 'all', got {step_memory_scope!r:.40}")
        if rep is not None and (not isinstance(rep, int) or isinstance(rep, bool) or rep < 1):
            raise InvalidEvent(f"rep must be a whole number ≥ 1, got {rep!r:.40}")
        run_id = run_id or short_id("run")
        run = Run(self, run_id, goal, start_url, session_id or run_id, enabled=self.enabled)
        previous = [r.run_id for r in self.current().runs(session_id=session_id)] if session_id else []
        run.rep = rep if rep is not None else len(previous) + 1
        run.step_memory_runs = None if step_memory_scope == "all" else previous
        started = run._event(
            RunStarted,
            {
                "session_id": session_id,
                "parent_run_id": parent_run_id,
                "mode": mode,
                "goal": goal,
                "start_url": start_url,
                "memory_enabled": self.enabled,
                "isolation": isolation,
                "policy": {
                    "decision_policy": agent,
                    "step_memory_scope": step_memory_scope,
                    "fingerprint": self.policy.fingerprint(),
                    **self.policy.model_dump(mode="json"),
                },
                "case_id": case_id,
            },
            domain=domain_of(start_url),
        )
        if self.current().run(run.run_id) is not None:
            raise InvalidEvent(f"run {run.run_id!r} already exists")
        with run.timed():
            self.abandon_stale_runs()
            self.append([started])
        return run

    def run(self, run_id: str) -> Run:
        """A running run started elsewhere (another process, the command line), to record into or
        finish. The ledger stays its one truth: every write of the handle is checked against the
        run as the ledger holds it then, and `finish` learns from every step any process recorded."""
        manifest = self._manifest(run_id)
        if manifest.status != "running":
            raise RunConflict(f"run {run_id!r} is already {manifest.status}")
        return self._handle(manifest)

    def read_run(self, run_id: str) -> Run:
        """A handle on any run, running or finished, to read what it holds (scratch pad, page maps,
        sessions, facts, step memories, ...). A finished run's handle is finished, as is the one
        that finished it: its recall (which logs events) and its writes are refused (RunConflict)."""
        manifest = self._manifest(run_id)
        run = self._handle(manifest)
        run.finished = manifest.status != "running"
        return run

    def _manifest(self, run_id: str) -> RunManifest:
        _check_text(run_id, "run_id")
        self._dirty = True  # another process may have started or finished it since this memory last read
        manifest = self.current().run(run_id)
        if manifest is None:
            raise UnknownItem(f"no run {run_id!r:.80} in the ledger")
        return manifest

    def _handle(self, manifest: RunManifest) -> Run:
        """A Run on `manifest`'s run as the ledger holds it: its rep, steps, embedding and URL."""
        run_id = manifest.run_id
        run = Run(
            self,
            run_id,
            manifest.goal,
            manifest.start_url or "",
            manifest.session_id or run_id,
            enabled=manifest.memory_enabled,
        )
        run.started_at = manifest.started_at
        if manifest.session_id:  # its rep: the session's runs that started before it
            earlier = [
                r.run_id
                for r in self.current().runs(session_id=manifest.session_id)
                if r.run_id != run_id and r.started_at <= manifest.started_at
            ]
            run.rep, run.step_memory_runs = len(earlier) + 1, earlier
        recorded = list(self.store.read(run_id=run_id, types=["step_recorded"]))
        run.steps = [StepRecord.from_event(ev) for ev in recorded]
        embedded = [ev.data for ev in recorded if ev.data.get("internal_state_embedding")]
        if embedded:  # the vector the run's steps carry, carried on
            run.state_embedding = tuple(embedded[-1]["internal_state_embedding"])
            run.embedding_model = embedded[-1].get("embedding_model")
        urls = [u for s in run.steps for u in (s.url_before, s.url_after) if u]
        run.url = urls[-1] if urls else (manifest.current_url or run.start_url)
        return run

    def finish_run(self, run_id: str, *, success: bool, outcome: str = "", reason: str | None = None) -> Learned:
        """Finish a running run started elsewhere (`memtape finish-run`): `Run.finish` on its
        steps as the ledger holds them."""
        return self.run(run_id).finish(success=success, outcome=outcome, reason=reason)

    def abandon_stale_runs(self, older_than: timedelta | None = None) -> list[str]:
        """Finish as failed (reason "abandoned") every running run with no event for `older_than`
        (default `stale_after`, one hour): a crash between start and finish leaves no run running
        forever. `start_run` calls this first; returns the run ids finished."""
        if older_than is not None and not isinstance(older_than, timedelta):
            raise InvalidEvent(f"older_than must be a datetime.timedelta, got {older_than!r:.60}")
        limit = parse_ts(self.now()) - (older_than if older_than is not None else self.stale_after)
        done: list[str] = []
        for manifest in self.current().runs(status="running"):
            last = self._last_activity(manifest)
            if parse_ts(last) <= limit:
                try:
                    self.finish_run(
                        manifest.run_id,
                        success=False,
                        outcome=f"abandoned: no activity since {last}",
                        reason="abandoned",
                    )
                except RunConflict:  # another process finished it meanwhile
                    continue
                done.append(manifest.run_id)
        return done

    def _last_activity(self, manifest: RunManifest) -> str:
        last = manifest.updated_at
        for ev in self.store.read(run_id=manifest.run_id):
            last = max(last, ev.occurred_at)
        return last

    # ---- recall (each one is an event; run_id and step say where it happened) ------------------

    def tier1(self, *, run_id: str | None = None, step: int | None = 0, domain: str | None = None) -> list[Lesson]:
        """Tier 1: the tool_fallback and best_practice lessons a system prompt carries; logs tier1_loaded."""
        self._known_run(run_id)
        lessons = self.current().tier1()
        self.append(
            [
                self.event(
                    Tier1Loaded,
                    {
                        "count": len(lessons),
                        "lessons": [l.lesson for l in lessons],
                        "lesson_ids": [l.lesson_id for l in lessons],
                    },
                    run_id=run_id,
                    step=_check_step(step),
                    domain=domain,
                )
            ]
        )
        return [Lesson.of(l) for l in lessons]

    def recall_domain(self, domain: str, *, run_id: str | None = None, step: int | None = None) -> list[Lesson]:
        """Trigger B: lessons scoped to the site (or a parent domain); logs domain_recall."""
        _check_text(domain, "domain")
        probe = self.event(DomainRecall, {"matched": 0}, run_id=run_id, step=_check_step(step), domain=domain)
        self._known_run(run_id)
        matches = self.current().domain_matches(probe.domain or "")
        self.append([self.event(DomainRecall, recall_payload(matches), run_id=run_id, step=step, domain=probe.domain)])
        return [Lesson.recalled(m) for m in matches]

    def recall_error(
        self, command: str, error: str, *, domain: str | None = None, run_id: str | None = None, step: int | None = None
    ) -> list[Lesson]:
        """Trigger A: lessons matching a failed command or its error (site lessons only on their
        site); logs error_recall."""
        _check_text(command, "command")
        _check_text(error, "error", empty=True)
        probe = self.event(
            ErrorRecall,
            {"command": command, "error_snippet": error[:300], "matched": 0},
            run_id=run_id,
            step=_check_step(step),
            domain=domain,
        )
        self._known_run(run_id)
        matches = self.current().error_matches(command, error, probe.domain)
        self.append(
            [
                self.event(
                    ErrorRecall,
                    {"command": command, "error_snippet": error[:300], **recall_payload(matches)},
                    run_id=run_id,
                    step=step,
                    domain=probe.domain,
                )
            ]
        )
        return [Lesson.recalled(m) for m in matches]

    def recall_trajectory(
        self, goal: str, url: str, *, run_id: str | None = None, step: int | None = None
    ) -> TrajectoryRecall | None:
        """The reference trajectory for `goal` on the host of `url` (seed 000); logs trajectory_recalled."""
        _check_text(goal, "goal")
        _check_text(url, "url")
        domain = domain_of(url)
        probe = self.event(TrajectoryRecalled, {"goal": goal}, run_id=run_id, step=_check_step(step), domain=domain)
        self._known_run(run_id)
        match = self.current().match_trajectory(goal, probe.domain or "", self.now())
        replay = bool(
            match
            and match.similarity >= self.policy.replay_min_similarity
            and match.trajectory.origin == origin_of(url)
            and match.trajectory.steps
        )
        t = match.trajectory if match else None
        self.append(
            [
                self.event(
                    TrajectoryRecalled,
                    {
                        "goal": goal,
                        "trajectory_id": t.trajectory_id if t else None,
                        "matched_goal": t.goal if t else None,
                        "similarity": round(match.similarity, 6) if match else 0.0,
                        "score": round(match.score, 6) if match else None,
                        "steps": len(t.steps) if t else 0,
                        "replay": replay,
                    },
                    run_id=run_id,
                    step=step,
                    domain=probe.domain,
                )
            ]
        )
        return TrajectoryRecall(match.trajectory, match.similarity, match.score, replay) if match else None

    def search(
        self,
        query: str,
        *,
        kinds: Sequence[str] | None = None,
        domain: str | None = None,
        as_of: int | str | None = None,
        limit: int = 10,
        run_id: str | None = None,
        step: int | None = None,
        searched_from: str | None = None,
    ) -> list[SearchResult]:
        """Ranked full-text search (SQLite FTS5, BM25) over lessons, current facts, patterns,
        selectors, trajectories, sessions and context, now or as the ledger knew it at seq / ISO
        time `as_of`; `kinds` and `domain` narrow it. The query is words (no search syntax). A
        search is a recall: it logs memory_searched with the query, filters and hits, against
        `run_id` and `step` when given (`searched_from`: the domain the searching run is on)."""
        query = check_query(query)
        chosen = check_kinds(kinds)
        limit = check_limit(limit)
        _check_text(domain, "domain", optional=True)
        point = check_point(as_of, "as_of")
        fields: dict[str, Any] = {
            "query": query,
            "kinds": list(chosen) if chosen is not None else None,
            "domain_filter": domain,
            "as_of": None if point is None else str(point),
            "limit": limit,
        }
        probe = self.event(
            MemorySearched, fields, run_id=run_id, step=_check_step(step), domain=searched_from or domain
        )
        self._known_run(run_id)
        if point is None:
            view = self.current()
            cached = self._search_index
            index = cached[1] if cached is not None and cached[0] == view.head else view.search_index()
        else:
            view = MemoryView.open(self.store, self.projections_path, self.policy, as_of=point)
            index = view.search_index()
        hits = index.search(query, chosen, domain, limit)
        searched = [{"kind": h.kind, "item_id": h.item_id, "score": h.score} for h in hits]
        logged = self.append(
            [
                self.event(
                    MemorySearched,
                    {**fields, "matched": len(hits), "hits": searched},
                    run_id=run_id,
                    step=step,
                    domain=probe.domain,
                )
            ]
        )
        if point is None:  # the search's own event changes no item: the index stays valid past it
            self._search_index = (logged[-1].seq, index) if logged[-1].seq == view.head + 1 else None
        return hits

    # ---- what memory holds ---------------------------------------------------------------

    def state(
        self, kind: str, as_of: int | str | None = None, domain: str | None = None, run: str | None = None
    ) -> list[dict[str, Any]]:
        """One projection's records (lessons, tier1, facts, sessions, selectors, trajectories, runs,
        short-term, patterns, context, snapshots, sitemap, scratch, page-maps) now or as the ledger
        knew it at seq / ISO time `as_of`, of one domain and one run when given: the fields of
        `state KIND --json`."""
        if kind not in STATE_KINDS:
            raise InvalidEvent(f"unknown state {kind!r:.60}: choose from {', '.join(STATE_KINDS)}")
        if domain is not None and not isinstance(domain, str):
            raise InvalidEvent(f"domain must be a string, got {type(domain).__name__}")
        if run is not None and not isinstance(run, str):
            raise InvalidEvent(f"run must be a string, got {type(run).__name__}")
        _head, items = open_state(
            self.store, self.projections_path, kind, domain, check_point(as_of, "as_of"), self.policy, run=run
        )
        return plain(items)  # type: ignore[no-any-return]


class Run:
    """One run of an agent: what it did and what it recalled, in the ledger as it happens.

    Use it as a context manager: leaving the block by an exception finishes the run as failed
    with the error recorded (and re-raises); leaving it without `finish()` finishes it as
    failed with reason "unfinished". `url` follows the last recorded step.
    """

    def __init__(
        self, memory: Memory, run_id: str, goal: str, start_url: str, session_id: str, *, enabled: bool = True
    ):
        self.memory = memory
        self.run_id = run_id
        self.goal = goal
        self.start_url = start_url
        self.url = start_url
        self.session_id = session_id
        self.enabled = enabled
        self.steps: list[StepRecord] = []
        self.secrets: list[str] = []
        for s in goal_secrets(goal):
            self.add_secret(s)
        self.started = time.perf_counter()
        self.started_at: str | None = None
        #: seed 002's rep: this run's number within its session (1: the baseline, no step memories)
        self.rep = 1
        #: runs whose graded steps this run may retrieve (None: every other run)
        self.step_memory_runs: list[str] | None = []
        #: seed 002's internalStateEmbedding of this run's internal state (its goal), and its model
        self.state_embedding: tuple[float, ...] = ()
        self.embedding_model: str | None = None
        self.finished = False
        self.ms_total = 0.0
        self._ms_step = 0.0
        self.patterns_used: list[str] = []

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, goal={self.safe_goal!r}, url={self.url!r})"

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.finished:
            return
        try:
            if exc is not None:
                self.finish(success=False, outcome=f"{type(exc).__name__}: {_one_line(exc)}"[:2000], reason="exception")
            else:
                self.finish(success=False, outcome="the run ended without finish()", reason="unfinished")
        except RunConflict:  # finished by another process or handle: the ledger's ending stands
            self.finished = True

    # ---- plumbing ------------------------------------------------------------------

    @contextmanager
    def timed(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = (time.perf_counter() - t0) * 1000
            self.ms_total += dt
            self._ms_step += dt

    def take_step_ms(self) -> float:
        """Milliseconds spent in memory since the last call (a loop reads it once per step)."""
        ms, self._ms_step = self._ms_step, 0.0
        return ms

    @property
    def domain(self) -> str:
        """The host of the current URL."""
        return domain_of(self.url)

    @property
    def safe_goal(self) -> str:
        """The goal as memory stores it (secrets scrubbed): trajectories are matched on it."""
        return str(self.scrub(self.goal))

    def scrub(self, value: Any) -> Any:
        """Replace every known secret in strings of a nested value."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            for s in self.secrets:
                if s and s in value:
                    value = value.replace(s, MARKER)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value

    def add_secret(self, value: str) -> None:
        if value and value != MARKER and value not in self.secrets:
            self.secrets.append(value)
            self.secrets.sort(key=len, reverse=True)

    def _event(
        self, cls: type[Payload], fields: dict[str, Any], *, step: int | None = None, domain: str | None = None
    ) -> NewEvent:
        return self.memory.event(cls, self.scrub(fields), run_id=self.run_id, step=_check_step(step), domain=domain)

    def _live(self, what: str = "events") -> None:
        """Refuse early what this handle knows the run no longer takes (the writer checks the ledger)."""
        if self.finished:
            raise run_finished(self.run_id, what)

    # ---- recall ------------------------------------------------------------------------

    def tier1(self) -> list[Lesson]:
        """The Tier 1 lessons for the system prompt; logs tier1_loaded."""
        self._live()
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.tier1(run_id=self.run_id, step=0, domain=domain_of(self.start_url))

    def recall_domain(self, step: int | None = None, domain: str | None = None) -> list[Lesson]:
        """Trigger B for the site of the current URL (or `domain`); logs domain_recall."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            _check_step(step)
            return []
        with self.timed():
            return self.memory.recall_domain(domain, run_id=self.run_id, step=step)

    def recall_error(
        self, command: str, error: str, step: int | None = None, domain: str | None = None
    ) -> list[Lesson]:
        """Trigger A for a failed command on the current site (or `domain`); logs error_recall."""
        self._live()
        if not self.enabled:
            _check_text(command, "command")
            return []
        with self.timed():
            return self.memory.recall_error(
                command,
                self.scrub(error) if isinstance(error, str) else error,
                domain=domain if domain is not None else (self.domain or None),
                run_id=self.run_id,
                step=step,
            )

    def recall_trajectory(self, step: int | None = None, url: str | None = None) -> TrajectoryRecall | None:
        """The reference trajectory for this run's goal on the current site (or `url`'s); logs
        trajectory_recalled."""
        self._live()
        if not self.enabled:
            return None
        with self.timed():
            return self.memory.recall_trajectory(
                self.safe_goal, url if url is not None else self.url, run_id=self.run_id, step=step
            )

    def search(
        self,
        query: str,
        *,
        kinds: Sequence[str] | None = None,
        domain: str | None = None,
        as_of: int | str | None = None,
        limit: int = 10,
        step: int | None = None,
    ) -> list[SearchResult]:
        """`Memory.search` logged against this run and `step` (the query's known secrets scrubbed)."""
        self._live()
        query = check_query(query)
        if not self.enabled:
            check_kinds(kinds)
            check_limit(limit)
            _check_step(step)
            return []
        with self.timed():
            return self.memory.search(
                str(self.scrub(query)),
                kinds=kinds,
                domain=domain,
                as_of=as_of,
                limit=limit,
                run_id=self.run_id,
                step=step,
                searched_from=self.domain or None,
            )

    # ---- plain reads (their provenance goes into record_context) ---------------------------

    def sessions(self, domain: str | None = None) -> list[Any]:
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.current().sessions(domain if domain is not None else self.domain)

    def facts(self, domain: str | None = None) -> list[Any]:
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.current().facts(
                domain if domain is not None else self.domain, min_confidence=self.memory.policy.fact_prompt_min
            )

    def selectors(self, domain: str | None = None) -> list[Any]:
        """Known-good selectors of the site (seed 000: each succeeded at least once), most successful first."""
        if not self.enabled:
            return []
        with self.timed():
            good = known_good(self.memory.current().selectors(domain if domain is not None else self.domain))
            return sorted(good, key=lambda s: (-s.successes, s.failures, s.role, s.name))

    def step_memories(self, elements: list[str], intent: str) -> list[Any]:
        """Graded steps on a page like this one (seed 002's REPEAT / AVOID): none on rep 1 (the
        baseline); then those of the session's previous reps (or of every other run, widened)."""
        if not self.enabled or self.rep <= 1:
            return []
        with self.timed():
            return self.memory.current().step_memories(
                elements,
                intent,
                exclude_run=self.run_id,
                runs=self.step_memory_runs,
                embedding=self.state_embedding,
                embedding_model=self.embedding_model,
            )

    def use_embedding(self, vector: Sequence[float], model: str) -> None:
        """The vector of this run's internal state (its goal, as memory stores it) by `model`,
        from an embeddings endpoint the caller configured: every step recorded from now on
        carries it (Trayn's internalStateEmbedding), and step-memory retrieval compares
        intents by it wherever a memory has a vector of the same model. Memory itself never
        asks an endpoint, so a replay or an experiment reads the recorded vectors."""
        _check_text(model, "model")
        self.state_embedding, self.embedding_model = _check_embedding(vector), model

    def recorded_embedding(self, model: str) -> tuple[float, ...] | None:
        """This run's internal state as `model` embedded it for an earlier step, if one did (so
        the same goal is never sent to the endpoint twice)."""
        _check_text(model, "model")
        return self.memory.current().recorded_embedding(self.internal_state, model)

    @property
    def internal_state(self) -> str:
        """Seed 002's internalState of every step of the run: the task it pursues, as memory
        stores it (the step's own reasoning is its `think`)."""
        return self.safe_goal[:2000]

    def loop_warnings(self) -> tuple[str, ...]:
        """Seed 003's short-term loop warnings for this run."""
        with self.timed():
            return self.memory.current().short_term(self.run_id).loop_warnings

    # ---- layered memory (seed 003): short-term, context, patterns, snapshots, extractions -------

    def short_term(self) -> ShortTerm:
        """This run's short-term and working memory (within the run, so read with memory off too)."""
        with self.timed():
            return self.memory.current().short_term(self.run_id)

    def known_failure(self, command: str, args: Mapping[str, Any], url: str) -> str | None:
        """Seed 003's is_repeated_failure: the action's signature when it already failed in this run."""
        signature = action_signature({"command": command, "args": dict(args)}, url)
        return signature if self.short_term().has_failed(signature) else None

    def repeated_failure(self, signature: str, action: str, url: str, response: str, step: int) -> None:
        """Log what the agent did about an action known to fail: chose otherwise, or went ahead warned."""
        self._live()
        ev = self._event(
            RepeatedFailureDetected,
            {"signature": signature, "action": action[:500], "url": url[:2000], "response": response},
            step=step,
            domain=domain_of(url) or None,
        )
        with self.timed():
            self.memory.append([ev])

    def give_context(self, context: Mapping[str, str]) -> None:
        """User context given to this run (`memtape run --context key=value`)."""
        self._live()
        events = [
            self._event(ContextGiven, {"key": k, "value": v}, domain=domain_of(self.start_url) or None)
            for k, v in context.items()
        ]
        with self.timed():
            self.memory.append(events)

    def infer_context(
        self, key: str, value: str, source: str, step: int | None = None, domain: str | None = None
    ) -> bool:
        """Context learned during execution; recorded once per (domain, key, value)."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            return False
        with self.timed():
            if any(
                e.kind == "inferred" and e.key == key and e.value == value and e.domain == domain
                for e in self.memory.current().context(None, domain)
            ):
                return False
            self.memory.append(
                [self._event(ContextInferred, {"key": key, "value": value, "source": source}, step=step, domain=domain)]
            )
            return True

    def relevant_context(self, domain: str | None = None) -> list[Any]:
        """This run's user context and the site's inferred context that share words with the goal."""
        with self.timed():
            found = self.memory.current().relevant_context(
                self.safe_goal, self.run_id, domain if domain is not None else self.domain
            )
            return [e for e in found if self.enabled or e.kind == "user"]

    def prompt_context(self, domain: str | None = None) -> list[Any]:
        """What a prompt's context section holds: all of this run's user context, then what was
        inferred on the site that is relevant to the goal (with memory on); the context budget
        places it by priority."""
        with self.timed():
            found = self.memory.current().prompt_context(
                self.run_id, domain if domain is not None else self.domain, self.safe_goal
            )
            return [e for e in found if self.enabled or e.kind == "user"]

    def patterns(self, domain: str | None = None) -> list[Any]:
        """Learned patterns for the site, best first."""
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            return []
        with self.timed():
            return self.memory.current().patterns(domain)

    def pattern_used(self, pattern_id: str) -> None:
        """The agent followed a learned pattern: its success or failure is counted when the run finishes."""
        if pattern_id not in self.patterns_used:
            self.patterns_used.append(pattern_id)

    def extraction(self, key: str, tool: str, url: str, extract: Any, step: int | None = None) -> Extraction:
        """An extraction through the cache: served from memory (and logged as such) when the same key
        was extracted at most `extraction_ttl_seconds` ago, else `extract()` (a dict with title, text,
        links, section_count) is called and recorded."""
        self._live()
        domain = domain_of(url) or None
        with self.timed():
            cached = self.memory.current().cached_extraction(key, self.memory.now()) if self.enabled else None
            if cached is not None:
                age = max((parse_ts(self.memory.now()) - parse_ts(cached.occurred_at)).total_seconds(), 0.0)
                self.memory.append(
                    [
                        self._event(
                            ExtractionServed,
                            {
                                "key": key,
                                "extraction_id": cached.event_ids[0],
                                "age_seconds": round(age, 3),
                                "ttl_seconds": self.memory.policy.extraction_ttl_seconds,
                            },
                            step=step,
                            domain=domain,
                        )
                    ]
                )
                return Extraction(
                    key,
                    cached.source,
                    cached.url,
                    cached.title,
                    cached.value,
                    cached.links,
                    cached.section_count,
                    True,
                    cached.event_ids[0],
                )
        data = extract()
        ev = self._event(
            ExtractionRecorded,
            {
                "key": key,
                "tool": tool,
                "url": url,
                "text": str(data.get("text", ""))[:50_000],
                "title": str(data.get("title", ""))[:500],
                "links": list(data.get("links") or [])[:500],
                "section_count": int(data.get("section_count", 0)),
            },
            step=step,
            domain=domain,
        )
        with self.timed():
            recorded = self.memory.append([ev])[0]
            return Extraction(
                key,
                tool,
                url,
                recorded.data["title"],
                recorded.data["text"],
                tuple(recorded.data["links"]),
                recorded.data["section_count"],
                False,
                recorded.id,
            )

    def extractions(self, domain: str | None = None) -> list[Any]:
        """The site's cached extractions, oldest first (the prompt budget and compression decide how
        much of each is shown)."""
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            return []
        with self.timed():
            return [e for e in self.memory.current().context(None, domain) if e.kind == "extraction"]

    def snapshot(
        self, url: str, title: str, summary: str, form_state: Mapping[str, str], scroll: tuple[int, int], step: int
    ) -> str:
        """Seed 003's StateSnapshot at a navigation (secret form values are already redacted)."""
        self._live()
        snapshot_id = f"snap_{self.run_id}_{step}"
        ev = self._event(
            SnapshotTaken,
            {
                "snapshot_id": snapshot_id,
                "url": url[:2000],
                "title": title[:500],
                "visible_elements_summary": summary[:2000],
                "form_state": dict(form_state),
                "scroll_x": max(0, scroll[0]),
                "scroll_y": max(0, scroll[1]),
                "associated_step": step,
            },
            step=step,
            domain=domain_of(url) or None,
        )
        with self.timed():
            self.memory.append([ev])
        return snapshot_id

    def snapshots(self) -> list[Any]:
        """This run's snapshots, in the order they were taken."""
        with self.timed():
            return self.memory.current().snapshots(self.run_id)

    def backtracked(
        self, snapshot_id: str, from_url: str, to_url: str, reason: str, avoided: Sequence[str], step: int
    ) -> None:
        """Stuck: the agent went back to a snapshot, avoiding what led to the dead end."""
        self._live()
        ev = self._event(
            Backtracked,
            {
                "snapshot_id": snapshot_id,
                "from_url": from_url[:2000],
                "to_url": to_url[:2000],
                "reason": reason[:500],
                "avoided": [a[:300] for a in avoided][:100],
            },
            step=step,
            domain=domain_of(to_url) or None,
        )
        with self.timed():
            self.memory.append([ev])

    # ---- working memory (seed 003): the scratch pad and PageMaps ----------------------------------
    # The run's own, so kept with memory off too: no other run reads them.

    def set_scratch(self, key: str, value: Any, step: int | None = None) -> None:
        """Put `value` (any JSON value) on this run's scratch pad under `key` (seed 003's
        `set_scratch`): working data between cycles, replaced when the key is set again. A value
        under a key that names a secret (password, token, PIN...) is kept redacted."""
        self._live()
        _check_text(key, "key")
        ev = self._event(ScratchSet, {"key": key, "value": value}, step=step, domain=self.domain or None)
        with self.timed():
            self.memory.append([ev])

    def get_scratch(self, key: str, default: Any = None) -> Any:
        """The value last set under `key` on this run's scratch pad, else `default` (seed 003's
        `get_scratch`). A copy: changing it changes nothing until it is set again."""
        _check_text(key, "key")
        with self.timed():
            entry = self.memory.current().scratch(self.run_id).get(key)
        return default if entry is None else copy.deepcopy(entry.value)

    def scratch(self) -> dict[str, Any]:
        """This run's whole scratch pad, key -> value (a copy), keys in the order they were first set."""
        with self.timed():
            return {k: copy.deepcopy(e.value) for k, e in self.memory.current().scratch(self.run_id).items()}

    def store_page_map(self, url: str, page_map: Mapping[str, Any], step: int | None = None) -> None:
        """Seed 003's `store_page_map`: this run's understanding of the page at `url`, a mapping of
        `title`, `summary`, `total_width`, `total_height` (pixels) and `regions` — each with `kind`
        (header, navigation, hero, content, sidebar, footer, modal or unknown), `name`,
        `description`, `elements` (the key elements in it) and `start_y`/`end_y`. Replaces an
        earlier map of the same URL."""
        self._live()
        _check_text(url, "url")
        if not isinstance(page_map, Mapping):
            raise InvalidEvent(
                f"page_map must be a mapping of title, summary, regions..., got {type(page_map).__name__}"
            )
        ev = self._event(PageMapStored, {**page_map, "url": url}, step=step, domain=domain_of(url) or None)
        with self.timed():
            self.memory.append([ev])

    def get_page_map(self, url: str) -> PageMap | None:
        """The PageMap this run stored for `url`, or None."""
        _check_text(url, "url")
        return self.get_all_page_maps().get(url)

    def has_page_map(self, url: str) -> bool:
        return self.get_page_map(url) is not None

    def get_all_page_maps(self) -> dict[str, PageMap]:
        """Every PageMap of this run, URL -> map, in the order the URLs were first mapped."""
        with self.timed():
            return self.memory.current().page_maps(self.run_id)

    def get_page_summary(self, url: str) -> str:
        """The summary of the page at `url` from its PageMap ("" without one)."""
        found = self.get_page_map(url)
        return found.summary if found is not None else ""

    # ---- sitemap exploration (seed 003's SitemapGraph) -------------------------------------------

    def exploration_started(self, homepage_url: str, max_depth: int, max_pages: int) -> None:
        """A sitemap exploration of the site of `homepage_url` begins, within these bounds."""
        self._explored(
            ExplorationStarted,
            {"homepage_url": homepage_url, "max_depth": max_depth, "max_pages": max_pages},
            homepage_url,
        )

    def sitemap_links(self, parent_url: str, depth: int, links: Sequence[Mapping[str, str]], step: int) -> None:
        """Links the exploration found on `parent_url` (each with `url`, and `text`, `link_type`)."""
        self._explored(
            SitemapLinksDiscovered,
            {"parent_url": parent_url, "depth": depth, "links": [dict(l) for l in links][:1000]},
            parent_url,
            step,
        )

    def sitemap_visited(self, url: str, title: str, summary: str, section_count: int, depth: int, step: int) -> None:
        """A page the exploration visited, as the agent summarized it."""
        self._explored(
            SitemapPageVisited,
            {
                "url": url,
                "title": title[:500],
                "summary": summary[:2000],
                "section_count": section_count,
                "depth": depth,
            },
            url,
            step,
        )

    def exploration_completed(
        self, homepage_url: str, visited: int, discovered: int, complete: bool, summary: str
    ) -> None:
        """How the exploration of the site of `homepage_url` ended: pages visited and found, whether
        it covered the site, and the agent's summary of it."""
        self._explored(
            ExplorationCompleted,
            {
                "homepage_url": homepage_url,
                "pages_visited": visited,
                "pages_discovered": discovered,
                "complete": complete,
                "summary": summary[:20_000],
            },
            homepage_url,
        )

    def _explored(self, cls: type[Payload], fields: dict[str, Any], url: str, step: int | None = None) -> None:
        self._live()
        ev = self._event(cls, fields, step=step, domain=domain_of(url) or None)
        with self.timed():
            self.memory.append([ev])

    def sitemap(self, domain: str | None = None) -> Any:
        """The site's graph (None before its first exploration)."""
        with self.timed():
            return self.memory.current().sitemap(domain if domain is not None else self.domain)

    # ---- what happened ------------------------------------------------------------------

    def record_step(
        self,
        step: int,
        action: str,
        target: str | None = None,
        url: str | None = None,
        ok: bool = True,
        error: str | None = None,
        *,
        args: Mapping[str, Any] | None = None,
        url_after: str | None = None,
        selector: str | None = None,
        sensitive: bool = False,
        duration_ms: float = 0.0,
        think: str | None = None,
        page_before: Mapping[str, Any] | None = None,
        page_after: Mapping[str, Any] | None = None,
        decided_by: str = "policy",
        in_shadow: bool = False,
        memory_ms: float = 0.0,
    ) -> str:
        """One action the agent took on the page at `url` (default the current URL), ending on
        `url_after` (default `url`); `target` names the element as `role "name"`. `page_before`
        and `page_after` describe the page (url, title, page_type, elements) for step memories.
        With `sensitive=True` every argument is masked and the typed value (args value/text) is
        redacted everywhere. Returns the event id. A step number is recorded once per run: the
        same step again with the same content (a retry) returns the first event's id; with other
        content it is refused (RunConflict)."""
        self._live("step_recorded")
        _check_step(step, required=True)
        _check_text(action, "action")
        _check_text(target, "target", empty=True, optional=True)
        _check_flag(ok, "ok")
        _check_flag(sensitive, "sensitive")
        _check_flag(in_shadow, "in_shadow")
        for what, text in (("error", error), ("selector", selector), ("think", think)):
            _check_text(text, what, empty=True, optional=True)
        _check_amount(duration_ms, "duration_ms")
        _check_amount(memory_ms, "memory_ms")
        url = _check_text(url if url is not None else self.url, "url", empty=True) or ""
        after = _check_text(url_after if url_after is not None else url, "url_after", empty=True) or ""
        for what, value in (("args", args), ("page_before", page_before), ("page_after", page_after)):
            if value is not None and not isinstance(value, Mapping):
                raise InvalidEvent(f"{what} must be a mapping, got {type(value).__name__}")
        role, name = parse_element(target)
        # a value typed into a password, PIN, OTP, secret, token or card field is a secret, said or not
        sensitive = sensitive or secret_field(
            action, role, name, selector, *(v for k in LOCATOR_ARGS if isinstance(v := (args or {}).get(k), str))
        )
        with self.timed():
            if sensitive:
                self.add_secret(str((args or {}).get("value", (args or {}).get("text", ""))))
            ev = self._event(
                StepRecorded,
                {
                    "env_before": dict(page_before) if page_before is not None else {"url": url},
                    "env_after": dict(page_after) if page_after is not None else {"url": after},
                    "think": (think or "")[:2000] or None,
                    "internal_state": self.internal_state or None,
                    "internal_state_embedding": list(self.state_embedding),
                    "embedding_model": self.embedding_model,
                    "action": {"command": action, "args": dict(args or {}), "sensitive": sensitive},
                    "target": {
                        "role": role or "",
                        "name": name or "",
                        "selector": selector,
                        **({"in_shadow": True} if in_shadow else {}),
                    }
                    if role or name
                    else None,
                    "target_text": name or None,
                    "ok": ok,
                    "error": error,
                    "duration_ms": round(duration_ms, 3),
                    "memory_ms": round(memory_ms, 3),
                    "decided_by": decided_by,
                    "rep": self.rep,
                },
                step=step,
                domain=domain_of(url) or domain_of(after) or None,
            )
            written = self.memory.append([ev])
            if not written:  # recorded before (a retry): the first event answers
                return self.memory.writer.runs[self.run_id].steps[step].id
            # post-run learning reads the step as the door stored it (secrets redacted), never the raw
            # values: a lesson's error pattern is lower-cased, and a lower-cased key no detector knows
            stored = StepRecord.from_event(written[0])
            self.steps.append(stored)
            self.url = after
            return stored.event_id or ""

    def record_lesson(
        self,
        text: str,
        category: str = "error_recovery",
        *,
        failed_command: str | None = None,
        error_pattern: str | None = None,
        scope_domain: str | None = None,
        step: int | None = None,
    ) -> str:
        """A lesson the agent learned by itself (deduplicated and promoted like every lesson);
        returns its lesson id. `category` is error_recovery or site_specific: Tier 1 (every system
        prompt) takes text only from the seeds, promotion or a person's `memtape lessons pin`.
        A site_specific lesson without `scope_domain` is scoped to the run's domain: unscoped, no
        domain recall would ever return it, not even on the site where it was learned."""
        self._live("lesson_recorded")
        refusal = tier1_refusal(category) if isinstance(category, str) else None
        if refusal is not None:
            raise InvalidEvent(refusal)
        _check_text(text, "text")
        for what, value in (
            ("failed_command", failed_command),
            ("error_pattern", error_pattern),
            ("scope_domain", scope_domain),
        ):
            _check_text(value, what, empty=True, optional=True)
        if category == "site_specific" and not scope_domain:
            scope_domain = self.domain or None
        ev = self._event(
            LessonRecorded,
            {
                "lesson_id": lesson_id_for(failed_command, error_pattern, scope_domain, text),
                "lesson": text,
                "category": category,
                "failed_command": failed_command,
                "error_pattern": error_pattern,
                "scope_domain": scope_domain,
            },
            step=step,
            domain=self.domain,
        )
        with self.timed():
            self.memory.append([ev])
        return ev.payload.lesson_id  # type: ignore[attr-defined,no-any-return]

    def observe_fact(self, kind: str, key: str, value: str, step: int | None = None, domain: str | None = None) -> None:
        """App knowledge about the current site (or `domain`): kind is timing, selector, pattern or
        quirk. The same value confirms a fact, a different one contradicts it."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not domain:
            raise InvalidEvent("observe_fact needs a domain: record a step with a URL first, or pass domain=")
        ev = self._event(FactObserved, {"fact_type": kind, "key": key, "value": value}, step=step, domain=domain)
        with self.timed():
            self.memory.append([ev])

    def selector_result(
        self,
        element: str,
        selector: str,
        ok: bool,
        step: int | None = None,
        *,
        error: str | None = None,
        url: str | None = None,
        healed_from: str | None = None,
    ) -> None:
        """Whether `selector` found `element` (`role "name"`) on the current page (or `url`)."""
        self._live()
        _check_text(element, "element")
        _check_flag(ok, "ok")
        url = _check_text(url if url is not None else self.url, "url", empty=True) or ""
        role, name = parse_element(element)
        fields: dict[str, Any] = {"role": role or "", "name": name or "", "selector": selector, "url": url}
        if ok:
            fields["healed_from"] = healed_from
        else:
            fields["error"] = error[:300] if isinstance(error, str) else error
        ev = self._event(SelectorSucceeded if ok else SelectorFailed, fields, step=step, domain=domain_of(url))
        with self.timed():
            self.memory.append([ev])

    def record_context(
        self,
        items: Sequence[Mapping[str, Any]],
        step: int,
        budget: int = DEFAULT_BUDGET,
        *,
        trimmed: Sequence[Mapping[str, Any]] = (),
        prompt: str = "step",
        domain: str | None = None,
        counted_by: str | None = None,
    ) -> None:
        """What one prompt held: each item's source, priority, text and the event ids it came from
        (and what the budget trimmed), as a context_built event. Audits show exactly this.

        An item's `tokens` is the agent's own count and `counted_by` names what counted it (its
        tokenizer; every item must then carry its count). An item without one is counted here, and
        the event names this process's counter (`cl100k_base`, or `estimate` without the tokens extra)."""
        self._live()
        kept, cut = _items(items, "items"), _items(trimmed, "trimmed")
        counted_here = any("tokens" not in i for i in [*kept, *cut])
        if counted_by is not None and counted_here:
            raise InvalidEvent(
                "context_built: counted_by names what counted the items' tokens; give every item its tokens"
            )
        kept_items = [self._context_item(i) for i in kept]
        cut_items = [self._context_item(i) for i in cut]
        ev = self._event(
            ContextBuilt,
            {
                "prompt": prompt,
                "budget": budget,
                "total_tokens": sum(i.tokens for i in kept_items),
                "items": kept_items,
                "trimmed": cut_items,
                "counted_by": token_counter() if counted_here else counted_by,
            },
            step=step,
            domain=domain if domain is not None else (self.domain or None),
        )
        with self.timed():
            self.memory.append([ev])

    def _context_item(self, item: Mapping[str, Any]) -> ContextItem:
        try:
            text, kind = item["text"], item.get("content_type", "text")
            # the agent's own count (its tokenizer) when it gives one, else this process's counter
            tokens = (
                item["tokens"]
                if "tokens" in item
                else (count_tokens(text, kind) if isinstance(text, str) and isinstance(kind, str) else 0)
            )
            return ContextItem(
                **self.scrub(
                    {
                        "source": item["source"],
                        "priority": item["priority"],
                        "tokens": tokens,
                        "content_type": kind,
                        "confidence": item.get("confidence", 1.0),
                        "text": text[:20000] if isinstance(text, str) else text,
                        "event_ids": list(dict.fromkeys(item.get("event_ids") or ()))[:64],
                        "truncated": item.get("truncated", False),
                    }
                )
            )
        except KeyError as exc:
            raise InvalidEvent(f"context_built: an item needs {exc.args[0]!r}") from None
        except (ValidationError, TypeError) as exc:
            raise InvalidEvent(f"context_built.items: {_one_line(exc)}") from None

    def progress(self, turn: int, url: str) -> None:
        """Seed 000's run registry: where the run is, every few turns."""
        with self.timed():
            self.memory.append(
                [self._event(RunProgress, {"turn": turn, "current_url": url}, domain=domain_of(url) or None)]
            )

    # ---- the end ------------------------------------------------------------------------

    def finish(
        self,
        success: bool,
        outcome: str = "",
        *,
        reason: str | None = None,
        result: str | None = None,
        final_url: str | None = None,
        turns: int | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        duration_ms: float | None = None,
        policy_decisions: int | None = None,
        replayed_steps: int | None = None,
        learn: bool = True,
    ) -> Learned:
        """Post-run learning (lessons from failure→recovery, facts, selectors, the trajectory and the
        patterns of a success), the uses of learned patterns, the session entry, graded steps and
        run_completed, in one transaction. `learn=False` (an exploration) learns nothing from the steps.

        The steps are the run's as the ledger holds them inside that transaction, whichever process
        or handle recorded them; a run already finished (here or elsewhere) is refused (RunConflict)."""
        self._live("run_completed")
        _check_flag(success, "success")
        _check_text(outcome, "outcome", empty=True)
        for what, text in (("reason", reason), ("result", result), ("final_url", final_url)):
            _check_text(text, what, empty=True, optional=True)
        for what, count in (
            ("turns", turns),
            ("tokens_in", tokens_in),
            ("tokens_out", tokens_out),
            ("policy_decisions", policy_decisions),
            ("replayed_steps", replayed_steps),
        ):
            _check_amount(count, what, whole=True)
        _check_amount(duration_ms, "duration_ms")
        learned = Learned()

        def build(so_far: RunSoFar) -> list[NewEvent]:
            steps = [StepRecord.from_event(ev) for ev in so_far.step_events()]  # the ledger's, whoever recorded them
            last_url = next((s.url_after for s in reversed(steps) if s.url_after), self.url)
            run = cast(
                RunCompleted,
                self.memory.event(
                    RunCompleted,
                    {  # the outcome as run_completed records it (memory_ms: at the end)
                        "success": success,
                        "summary": outcome[:2000],
                        "result": result,
                        "reason": reason,
                        "final_url": final_url if final_url is not None else last_url,
                        "turns": turns if turns is not None else len(steps),
                        "tokens_in": tokens_in,
                        "tokens_out": tokens_out,
                        "duration_ms": round(duration_ms if duration_ms is not None else self._elapsed_ms(), 3),
                        "policy_decisions": policy_decisions
                        if policy_decisions is not None
                        else sum(1 for s in steps if s.decided_by == "policy"),
                        "replayed_steps": replayed_steps
                        if replayed_steps is not None
                        else sum(1 for s in steps if s.decided_by == "replay"),
                    },
                    run_id=self.run_id,
                ).payload,
            )
            return self._learning(steps, run, learned, learn)

        with self.timed():
            self.memory.append_to_run(self.run_id, build)
        self.finished = True
        return learned

    def _learning(
        self, steps: Sequence[StepRecord], run: RunCompleted, learned: Learned, learn: bool
    ) -> list[NewEvent]:
        """The events of finishing the run with `steps`: what it learned (into `learned`), the uses of
        patterns, the session entry, graded steps and run_completed (a run with memory off writes only
        run_completed: it neither reads nor writes memory a later run retrieves)."""
        events: list[NewEvent] = []
        run_domain = domain_of(self.start_url)
        if self.enabled:
            events += [
                self._event(PatternUsed, {"pattern_id": pid, "success": run.success}, domain=run_domain)
                for pid in self.patterns_used
            ]
        if self.enabled and learn:
            if run.success:
                for pattern in learn_patterns(steps, run_domain):
                    if pattern.pattern_id not in self.patterns_used:
                        learned.patterns.append(pattern)
                        events.append(self._event(PatternLearned, pattern.model_dump(), domain=run_domain))
            for domain, step, payload in extract_lessons(steps):
                learned.lessons.append(payload)
                events.append(self._event(LessonRecorded, payload.model_dump(), domain=domain, step=step))
            for domain, fact in observe_facts(steps, run.success):
                learned.facts.append(fact)
                events.append(self._event(FactObserved, fact.model_dump(), domain=domain))
            events += self._selector_outcomes(steps)
            if run.success:
                traj = self._trajectory(steps, run)
                if traj is not None:
                    learned.trajectory = traj
                    events.append(self._event(TrajectoryRecorded, traj.model_dump(), domain=run_domain))
        if self.enabled:
            events.append(
                self._event(
                    SessionRecorded,
                    {
                        "session_id": self.session_id,
                        "goal": self.goal,
                        "outcome": run.summary[:500],
                        "success": run.success,
                        "final_url": run.final_url,
                        "timestamp": self.memory.now(),
                        "turns_used": run.turns,
                        "duration_ms": round(run.duration_ms, 3),
                    },
                    domain=run_domain,
                )
            )
        if self.enabled:  # a baseline run's graded steps would be memory a later run retrieves
            for step, grade in grade_steps(steps, run):
                events.append(self._event(StepGraded, grade, step=step, domain=None))
        events.append(
            self._event(
                RunCompleted,
                {
                    "success": run.success,
                    "summary": run.summary[:2000],
                    "result": run.result,
                    "reason": run.reason,
                    "final_url": run.final_url,
                    "turns": run.turns,
                    "tokens_in": run.tokens_in,
                    "tokens_out": run.tokens_out,
                    "duration_ms": round(run.duration_ms, 3),
                    "policy_decisions": run.policy_decisions,
                    "replayed_steps": run.replayed_steps,
                    "memory_ms": round(self.ms_total, 3),
                },
                domain=domain_of(run.final_url or "") or run_domain,
            )
        )
        return events

    def _elapsed_ms(self) -> float:
        if self.started_at is None:
            return (time.perf_counter() - self.started) * 1000
        return max(0.0, (parse_ts(self.memory.now()) - parse_ts(self.started_at)).total_seconds() * 1000)

    def _selector_outcomes(self, steps: Sequence[StepRecord]) -> list[NewEvent]:
        out: list[NewEvent] = []
        for s in steps:
            if not s.selector or not s.role or s.decided_by == "approval":
                continue
            if s.ok:
                out.append(
                    self._event(
                        SelectorSucceeded,
                        {"role": s.role, "name": s.name or "", "selector": s.selector, "url": s.url_before},
                        step=s.step,
                        domain=s.domain,
                    )
                )
            else:
                out.append(
                    self._event(
                        SelectorFailed,
                        {
                            "role": s.role,
                            "name": s.name or "",
                            "selector": s.selector,
                            "url": s.url_before,
                            "error": (s.error or "")[:300],
                        },
                        step=s.step,
                        domain=s.domain,
                    )
                )
        return out

    def _trajectory(self, steps: Sequence[StepRecord], outcome: RunCompleted) -> TrajectoryRecorded | None:
        kept = effective_steps(steps)
        if not kept:
            return None
        tsteps = []
        for s in kept:
            args = {k: v for k, v in s.args.items() if k != "ref"}
            if s.sensitive:
                args = masked_args(args)
            effect = f"url:{s.url_after}" if s.url_after and s.url_after != s.url_before else None
            tsteps.append(
                TrajectoryStep(
                    command=s.command,
                    args=args,
                    role=s.role,
                    name=s.name,
                    selector=s.selector,
                    url=s.url_before,
                    verified=s.ok,
                    effect=effect,
                    duration_ms=round(s.duration_ms, 3),
                )
            )
        tsteps.append(
            TrajectoryStep(command="finish", args={"result": "done"}, url=outcome.final_url or "", verified=True)
        )
        return TrajectoryRecorded(
            trajectory_id=f"traj_{self.run_id}",
            goal=self.safe_goal,
            origin=origin_of(self.start_url),
            steps=tsteps,
            success=True,
            duration_ms=round(outcome.duration_ms, 3),
            turns=outcome.turns,
        )


def _items(items: Any, what: str) -> list[Mapping[str, Any]]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidEvent(f"context_built: {what} must be a list of mappings")
    for item in items:
        if not isinstance(item, Mapping):
            raise InvalidEvent(f"context_built: each of {what} must be a mapping, got {type(item).__name__}")
        unknown = set(item) - CONTEXT_ITEM_KEYS
        if unknown:
            raise InvalidEvent(
                f"context_built: unknown item key {sorted(unknown)[0]!r}; known: {', '.join(sorted(CONTEXT_ITEM_KEYS))}"
            )
    return list(items)


# ---- post-run learning (pure functions over the steps) -----------------------------------------


def _describe_recovery(steps: Sequence[StepRecord], i: int) -> str:
    """What step i did, in tool syntax, without page text (lessons are universal)."""
    s = steps[i]
    command = command_name(s.command)
    nxt = steps[i + 1] if i + 1 < len(steps) else None
    if command == "click" and nxt is not None and nxt.ok and command_name(nxt.command) == "type":
        return "click(ref) to focus the element, then type(text)"
    if command == "press":
        key = str(s.args.get("key", ""))
        return f"press(key='{key}')" if key in SAFE_KEYS else "press(key)"
    return {
        "click": "click(ref) on a different element",
        "type": "type(text)",
        "fill": "fill(ref, value)",
        "wait": "wait() for the page to settle",
        "scroll": "scroll(direction)",
        "back": "back()",
        "goto": "goto(url)",
        "select": "select(ref, value)",
    }.get(command, f"{command}()")


def extract_lessons(steps: Sequence[StepRecord]) -> list[tuple[str, int, LessonRecorded]]:
    """Seed 001's failure→recovery extraction, plus site-specific overlay lessons.

    Step N command A fails with a substantive error, step N+1 command B succeeds,
    A ≠ B (`command_name`s): an error_recovery lesson (failed_command A,
    `error_pattern` of the error, the text quoting `quoted_error`). A step the
    approval hook rejected was never executed: it fails nothing. The same recovery
    seen twice in a run is recorded twice: the writer deduplicates the second, so
    it is one lesson used twice. A click intercepted
    by an overlay that a later click on a dismiss button cleared (the blocked
    element then worked): a site_specific lesson scoped to that domain, naming
    the button as quoted data.
    """
    out: list[tuple[str, int, LessonRecorded]] = []
    seen: set[str] = set()
    for i in range(len(steps) - 1):
        a, b = steps[i], steps[i + 1]
        failed, recovery = command_name(a.command), command_name(b.command)
        if (
            a.ok
            or not b.ok
            or a.decided_by == "approval"
            or not failed
            or not recovery
            or failed == recovery
            or not substantive(a.error)
        ):
            continue
        pattern = error_pattern(a.error or "")
        text = f"When {failed} fails with '{quoted_error(a.error or '')}', try {_describe_recovery(steps, i + 1)}."
        lid = lesson_id_for(failed, pattern, None, text)
        out.append(
            (
                a.domain,
                a.step,
                LessonRecorded(
                    lesson_id=lid,
                    lesson=text,
                    category="error_recovery",
                    failed_command=failed,
                    error_pattern=pattern,
                    learned_from=[x for x in (a.event_id, b.event_id) if x],
                ),
            )
        )
    for i, a in enumerate(steps):
        if a.ok or a.command != "click" or "intercepts pointer events" not in (a.error or ""):
            continue
        for j in range(i + 1, len(steps)):
            m = steps[j]
            if not (m.ok and m.command == "click" and m.name and DISMISS.search(m.name) and m.identity != a.identity):
                continue
            if not any(k.ok and k.identity == a.identity for k in steps[j + 1 :]) or not a.domain:
                break
            name = quoted_name(m.name, 60)
            text = (
                f"An overlay on this site intercepts clicks until its {m.role} {name} is clicked: "
                f"click {m.role} {name} first."
            )
            lid = lesson_id_for(None, None, a.domain, text)
            if lid not in seen:
                seen.add(lid)
                out.append(
                    (
                        a.domain,
                        a.step,
                        LessonRecorded(
                            lesson_id=lid,
                            lesson=text,
                            category="site_specific",
                            scope_domain=a.domain,
                            learned_from=[x for x in (a.event_id, m.event_id) if x],
                        ),
                    )
                )
            break
    return out


def effective_steps(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The ok steps worth replaying: failures dropped, and so are recoveries that did not help
    (an ok step right after a failure, followed by the same failed action failing again)."""
    kept: list[StepRecord] = []
    for i, s in enumerate(steps):
        if not s.ok or s.command == "finish":
            continue
        prev = steps[i - 1] if i > 0 else None
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if (
            prev is not None
            and not prev.ok
            and nxt is not None
            and not nxt.ok
            and nxt.command == prev.command
            and nxt.identity == prev.identity
        ):
            continue
        kept.append(s)
    return kept


def observe_facts(steps: Sequence[StepRecord], success: bool) -> list[tuple[str, FactObserved]]:
    """App knowledge seen in this run: overlays, fields where fill fails, slow pages, shadow DOM, auth flow."""
    out: dict[tuple[str, str, str], FactObserved] = {}

    def add(domain: str, kind: str, key: str, value: str) -> None:
        if domain:
            out.setdefault(
                (domain, kind, key), FactObserved(fact_type=cast(FactType, kind), key=key[:200], value=value[:300])
            )

    for i, s in enumerate(steps):
        if (
            not s.ok
            and s.command == "fill"
            and "is not an <input>" in (s.error or "")
            and s.name
            and any(k.ok and k.command == "type" for k in steps[i + 1 : i + 4])
        ):
            add(s.domain, "quirk", fill_fails_key(s.name[:80]), "click the field, then type")
        if s.ok and s.command in ("click", "goto") and s.url_after != s.url_before and s.duration_ms > 1000:
            path = url_parts(s.url_after).path or "/"
            add(
                domain_of(s.url_after),
                "timing",
                f"{LOAD_TIME}{path[:80]}",
                f"page load takes about {round(s.duration_ms / 1000)} s",
            )
        if s.ok and s.in_shadow:
            add(s.domain, "quirk", SHADOW_DOM, "uses shadow DOM for modals")
    for i, a in enumerate(steps):
        if not a.ok and "intercepts pointer events" in (a.error or ""):
            m = next(
                (k for k in steps[i + 1 :] if k.ok and k.command == "click" and k.name and DISMISS.search(k.name)), None
            )
            if m is not None:
                add(
                    a.domain,
                    "quirk",
                    "blocking overlay",
                    f"{m.role} {quoted_name(m.name or '', 60)} must be clicked first",
                )
    if success:
        login = [s for s in steps if s.ok and s.command in ("fill", "type", "click")]
        sens = next((k for k, s in enumerate(login) if s.sensitive), None)
        if sens is not None:
            flow = login[max(0, sens - 1) : sens + 2]
            add(
                flow[0].domain,
                "pattern",
                "auth flow",
                " → ".join(f"{s.command} {quoted_name(s.name or '', 40)}" for s in flow),
            )
    return [(k[0], v) for k, v in out.items()]


def grade_steps(steps: Sequence[StepRecord], outcome: RunCompleted) -> list[tuple[int, dict[str, Any]]]:
    """Seed 002's grading by rules: failures carry their correction (what worked instead);
    a recovery that did not help is a failure too; the last step notes an incomplete task."""
    useful = {id(s) for s in effective_steps(steps)}
    grades: list[tuple[int, dict[str, Any]]] = []
    for i, s in enumerate(steps):
        fix = next(
            (
                k
                for k in steps[i + 1 :]
                if k.ok and id(k) in useful and (k.identity != s.identity or k.command != s.command)
            ),
            None,
        )
        correction = _correction(fix) if fix is not None else None
        if not s.ok:
            g = {
                "outcome": "failure",
                "reason": f"failed: {error_pattern(s.error or '')}"[:300],
                "correction": correction,
            }
        elif id(s) not in useful and s.command != "finish":
            g = {
                "outcome": "failure",
                "reason": "did not clear the obstacle; the next attempt failed the same way",
                "correction": correction,
            }
        else:
            moved = s.url_after != s.url_before
            g = {
                "outcome": "success",
                "reason": f"worked: navigated to {url_parts(s.url_after).path or '/'}" if moved else "worked",
                "correction": None,
            }
        if i == len(steps) - 1 and not outcome.success:
            g["task_incomplete"] = (outcome.reason or outcome.summary or "task not completed")[:300]
        grades.append((s.step, g))
    return grades


def _correction(s: StepRecord) -> str:
    if s.command == "press":
        return f"press {s.args.get('key', '')}" + (f" on {s.role} {quoted_name(s.name or '', 40)}" if s.role else "")
    if s.role:
        return f"{s.command} {s.role} {quoted_name(s.name or '', 40)}"
    return s.command
