"""The seed systems' memory formats as strict pydantic models.

Parsing a source into these models is the whole of validation: a file that
does not fit is refused with one line naming the file and the field
(`memory.json: lessons[2].category: ...`), before any event is built. The
models keep the seeds' own field names (camelCase for the TypeScript seeds
000 and 002, snake_case for the Python seed 001) so that an export is the
`model_dump` of the same models and compares field for field.

Shapes not spelled out in the seed documents follow their reference
implementations: seed 000's selectors.json (`{entries: {element: {...}},
updatedAt}`) and trajectory files (`{id, goal, origin, steps: [{url, action,
snapshotHash, verified}], success, durationMs, model, timestamp}`).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from memtape.ledger.clock import normalize_ts, parse_ts
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import Embedding
from memtape.ledger.field_rules import MAX_TEXT, check_domain, check_ident

#: the event kinds of seed 001's memory_events.jsonl, each a ledger event type of the same name
SEED001_EVENTS = (
    "tier1_loaded",
    "error_recall",
    "domain_recall",
    "lesson_recorded",
    "lesson_deduplicated",
    "lesson_promoted",
    "lessons_pruned",
)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_EPOCH_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


class SourceError(InvalidEvent):
    """A source file does not fit its format; nothing was written."""


def _text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text contains a NUL character")
    if len(value) > MAX_TEXT:
        raise ValueError(f"text longer than {MAX_TEXT} characters")
    return value


def _time(value: str) -> str:
    try:
        normalize_ts(value)
    except (ValueError, OverflowError, TypeError):
        raise ValueError(f"not an ISO date or time: {value[:40]!r}") from None
    return value


def _domain(value: str) -> str:
    checked = check_domain(value)
    assert checked is not None
    return checked


def _ident(value: str) -> str:
    check_ident(value, "id")
    return value


Text = Annotated[str, AfterValidator(_text)]
Time = Annotated[str, AfterValidator(_time)]
Domain = Annotated[str, AfterValidator(_domain)]
Ident = Annotated[str, AfterValidator(_ident)]
Count = Annotated[int, Field(ge=0, le=2**53)]
#: a duration or an average: finite and not negative
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Strict(BaseModel):
    """Strict types (no "3" for 3), unknown fields refused: nothing is silently dropped."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ---- seed 001: memory.json and memory_events.jsonl ---------------------------

Category = Literal["tool_fallback", "best_practice", "error_recovery", "site_specific"]


class Seed001Lesson(Strict):
    lesson: Annotated[Text, Field(min_length=1)]
    category: Category
    failed_command: Text | None = None
    error_pattern: Text | None = None
    domain: Domain | None = None
    use_count: Count = 1
    created_at: Time
    last_used: Time
    source: Literal["seed", "learned"] = "learned"
    triggered_domains: list[Text] = Field(default_factory=list)


class Seed001Memory(Strict):
    version: Literal[1]
    lessons: list[Seed001Lesson] = Field(default_factory=list)


class _Seed001Event(Strict):
    #: optional time of the event (seed 001 writes none; accepted when a log has one)
    ts: Time | None = None


class Tier1LoadedLine(_Seed001Event):
    event: Literal["tier1_loaded"]
    count: Count
    lessons: list[Text] = Field(default_factory=list)


class ErrorRecallLine(_Seed001Event):
    event: Literal["error_recall"]
    command: Text
    error_snippet: Text
    matched: Count
    lessons: list[Text] = Field(default_factory=list)
    #: memtape's addition: the lessons the run's outcome counted as uses (absent: every pattern match)
    counted: list[Text] | None = None


class DomainRecallLine(_Seed001Event):
    event: Literal["domain_recall"]
    domain: Domain
    matched: Count
    lessons: list[Text] = Field(default_factory=list)


class LessonRecordedLine(_Seed001Event):
    event: Literal["lesson_recorded"]
    lesson: Annotated[Text, Field(min_length=1)]
    category: Category
    failed_command: Text | None = None
    error_pattern: Text | None = None
    domain: Domain | None = None


class LessonDeduplicatedLine(_Seed001Event):
    event: Literal["lesson_deduplicated"]
    lesson: Annotated[Text, Field(min_length=1)]
    new_use_count: Annotated[int, Field(ge=1, le=2**53)]


class LessonPromotedLine(_Seed001Event):
    event: Literal["lesson_promoted"]
    lesson: Annotated[Text, Field(min_length=1)]
    use_count: Count
    triggered_domains: list[Text] = Field(default_factory=list)


class LessonsPrunedLine(_Seed001Event):
    event: Literal["lessons_pruned"]
    pruned_count: Count
    remaining_count: Count


Seed001Line = Annotated[
    Tier1LoadedLine
    | ErrorRecallLine
    | DomainRecallLine
    | LessonRecordedLine
    | LessonDeduplicatedLine
    | LessonPromotedLine
    | LessonsPrunedLine,
    Field(discriminator="event"),
]


SEED001_LINE: TypeAdapter[Any] = TypeAdapter(Seed001Line)


# ---- seed 000: the .agent-memory folder ----------------------------------------

FactType = Literal["timing", "selector", "pattern", "quirk"]


class Seed000Fact(Strict):
    type: FactType
    key: Annotated[Text, Field(min_length=1)]
    value: Annotated[Text, Field(min_length=1)]
    confidence: Annotated[float, Field(ge=0, le=1)]
    sources: Annotated[int, Field(ge=1, le=2**53)] = 1
    lastSeen: Time


class Seed000Session(Strict):
    id: Annotated[Text, Field(min_length=1)]
    goal: Text
    outcome: Text = ""
    success: bool
    finalUrl: Text = ""
    timestamp: Time
    turnsUsed: Count = 0
    durationMs: Amount = 0


class Seed000Knowledge(Strict):
    domain: Domain
    facts: list[Seed000Fact] = Field(default_factory=list)
    sessions: list[Seed000Session] = Field(default_factory=list)
    updatedAt: Time | None = None

    @model_validator(mode="after")
    def _no_duplicate_facts(self) -> Seed000Knowledge:
        seen: dict[tuple[str, str, str], int] = {}
        for i, f in enumerate(self.facts):
            k = (f.type, f.key, f.value)
            if k in seen:
                raise ValueError(f"facts[{i}] repeats facts[{seen[k]}] (same type, key and value)")
            seen[k] = i
        return self


ELEMENT_RE = re.compile(r'^(\S+) "(.*)"$', re.S)


def split_element(element: str) -> tuple[str, str]:
    """`button "Send"` -> ("button", "Send"); anything else is a role with no name."""
    m = ELEMENT_RE.match(element)
    if m and m.group(2):
        return m.group(1), m.group(2)
    return element, ""


def join_element(role: str, name: str) -> str:
    return f'{role} "{name}"' if name else role


class Seed000SelectorUse(Strict):
    """memtape's addition: one selector's own record within an element's entry."""

    successCount: Annotated[int, Field(ge=0, le=2**53)]
    failureCount: Annotated[int, Field(ge=0, le=2**53)] = 0
    lastUsed: Time

    @model_validator(mode="after")
    def _used(self) -> Seed000SelectorUse:
        if self.successCount + self.failureCount < 1:
            raise ValueError("successCount + failureCount must be at least 1")
        return self


class Seed000SelectorEntry(Strict):
    element: Annotated[Text, Field(min_length=1)]
    lastRef: Annotated[Text, Field(min_length=1)] | None = None
    stableSelector: Annotated[Text, Field(min_length=1)] | None = None
    successCount: Annotated[int, Field(ge=0, le=2**53)]
    #: memtape's addition: failures of the element's selectors (seed 000 counts successes only)
    failureCount: Annotated[int, Field(ge=0, le=2**53)] = 0
    lastUsed: Time
    #: memtape's addition: each selector's own counts (seed 000 keeps only the element's total)
    selectors: dict[Annotated[Text, Field(min_length=1)], Seed000SelectorUse] | None = None

    @model_validator(mode="after")
    def _has_selector(self) -> Seed000SelectorEntry:
        if self.lastRef is None and self.stableSelector is None:
            raise ValueError("needs lastRef or stableSelector")
        if self.selectors is not None:
            own = list(self.selectors.values())
            if (
                sum(u.successCount for u in own) != self.successCount
                or sum(u.failureCount for u in own) != self.failureCount
            ):
                raise ValueError("selectors: their counts do not add up to successCount and failureCount")
            for name in (self.lastRef, self.stableSelector):
                if name is not None and name not in self.selectors:
                    raise ValueError(f"selectors: {name[:60]!r} is named but has no counts")
        if self.lastRef is not None and not self.lastRef.startswith("@"):
            raise ValueError("lastRef must be an @ref (a stable selector goes in stableSelector)")
        if self.stableSelector is not None and self.stableSelector.startswith("@"):
            raise ValueError("stableSelector must not be an @ref (that goes in lastRef)")
        uses = self.successCount + self.failureCount
        if uses < 1:
            raise ValueError("successCount + failureCount must be at least 1")
        if self.lastRef is not None and self.stableSelector is not None and uses < 2:
            raise ValueError(
                "successCount + failureCount must be at least 2 when both lastRef and stableSelector are set"
            )
        return self


class Seed000Selectors(Strict):
    entries: dict[str, Seed000SelectorEntry] = Field(default_factory=dict)
    updatedAt: Time | None = None

    @model_validator(mode="after")
    def _keys_match(self) -> Seed000Selectors:
        for key, entry in self.entries.items():
            if entry.element != key:
                raise ValueError(f"entries[{key[:60]!r}].element does not match its key")
        return self


class Seed000Action(BaseModel):
    """A reference-implementation action: `action` names the command, the rest are its arguments."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    action: Annotated[Text, Field(min_length=1)]
    selector: Text | None = None

    @model_validator(mode="after")
    def _plain_args(self) -> Seed000Action:
        for key, value in (self.model_extra or {}).items():
            _check_json_value(value, key)
        return self


def _check_json_value(value: Any, where: str) -> None:
    if isinstance(value, str):
        _text(value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: not a finite number")
    elif isinstance(value, list):
        for v in value:
            _check_json_value(v, where)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_json_value(k, where)
            _check_json_value(v, where)


class Seed000TrajectoryStep(Strict):
    url: Text = ""
    action: Seed000Action
    snapshotHash: Text | None = None
    verified: bool = False


class Seed000Trajectory(Strict):
    id: Ident
    goal: Text
    origin: Text | None = None
    steps: list[Seed000TrajectoryStep]
    success: bool = True
    durationMs: Amount = 0
    model: Text | None = None
    timestamp: Time


class Seed000Hints(Strict):
    """hints.json: cross-domain optimization hints (one text) and when they were written."""

    hints: Text
    updatedAt: Time


class Seed000SuiteTest(Strict):
    id: Annotated[Text, Field(min_length=1)]
    name: Text = ""
    verified: bool
    turnsUsed: Count = 0
    durationMs: Amount = 0


class Seed000RunSummary(Strict):
    """runs/run_*.json: seed 000's suite result summary (`ProjectStore.saveRunSummary`)."""

    id: Ident
    model: Text | None = None
    timestamp: Time
    total: Count
    passed: Count
    failed: Count
    passRate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    avgTurns: Amount
    avgDurationMs: Amount
    totalDurationMs: Amount
    tests: list[Seed000SuiteTest] = Field(default_factory=list)

    @model_validator(mode="after")
    def _adds_up(self) -> Seed000RunSummary:
        if self.total != len(self.tests) or self.passed + self.failed > self.total:
            raise ValueError("total, passed and failed do not match tests")
        return self


class Seed000RunManifest(Strict):
    runId: Ident
    sessionId: Text | None = None
    parentRunId: Ident | None = None
    status: Literal["running", "completed", "failed"]
    goal: Text
    #: a run that started before any page loaded has no domain yet
    domain: Domain | Literal[""]
    startUrl: Text | None = None
    finalUrl: Text | None = None
    currentUrl: Text | None = None
    startedAt: Time
    updatedAt: Time
    completedAt: Time | None = None
    success: bool | None = None
    summary: Text | None = None
    artifactPaths: list[Text] = Field(default_factory=list)
    turnCount: Count = 0
    result: Text | None = None
    reason: Text | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Seed000RunManifest:
        if self.status == "running" and (self.completedAt is not None or self.success is not None):
            raise ValueError("a running run has no completedAt or success")
        if self.status != "running" and self.success is not None and self.success != (self.status == "completed"):
            raise ValueError(f"success={self.success} contradicts status {self.status!r}")
        return self


# ---- seed 002: Trayn MemoryEntry ---------------------------------------------------


class TraynEnv(Strict):
    url: Text = ""
    title: Text = ""
    pageType: Text = ""
    elements: list[Text] = Field(default_factory=list)


class TraynEntry(Strict):
    id: Count
    stepId: Text | None = None
    envPre: TraynEnv
    internalState: Text = ""
    think: Text | None = None
    internalStateEmbedding: Embedding = Field(default_factory=list)
    action: Annotated[Text, Field(min_length=1)]
    actionElementText: Text = ""
    envPost: TraynEnv
    outcome: Literal["pending", "success", "failure"]
    outcomeReason: Text | None = None
    correction: Text | None = None
    taskIncomplete: Text | None = None
    createdAt: Annotated[int, Field(ge=0, le=MAX_EPOCH_MS)]
    stepNum: Count
    rep: Annotated[int, Field(ge=1, le=2**31)] = 1


class TraynExport(Strict):
    memories: list[TraynEntry]


def ms_to_ts(ms: int) -> str:
    return normalize_ts(EPOCH + timedelta(milliseconds=ms))


def ts_to_ms(ts: str) -> int:
    return (parse_ts(ts) - EPOCH) // timedelta(milliseconds=1)


def js_time(ts: str) -> str:
    """Our stored time in the TypeScript seeds' `toISOString()` shape (milliseconds) when exact."""
    dt = parse_ts(ts)
    if dt.microsecond % 1000 == 0:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return normalize_ts(dt)


# ---- parsing with one-line errors ------------------------------------------------


def field_path(loc: tuple[Any, ...]) -> str:
    """('lessons', 2, 'category') -> 'lessons[2].category'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (part.isidentifier() or part in ("$",)):
            out += ("." if out else "") + part
        else:
            out += f"[{str(part)[:60]!r}]"
    return out


def describe(exc: ValidationError, skip: int = 0) -> str:
    """The first problem of a validation error as `field.path: message`."""
    err = exc.errors()[0]
    loc = tuple(
        p
        for p in err.get("loc", ())[skip:]
        if not (isinstance(p, str) and (p.startswith("function-") or p in SEED001_EVENTS))
    )
    msg = str(err.get("msg", "invalid")).replace("Value error, ", "").replace("Assertion failed, ", "")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field"
    if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        loc = (*loc, "event")
    where = field_path(loc)
    return f"{where}: {msg}" if where else msg


def _escape(text: str) -> str:
    return text.replace("\n", "\\n").replace("\r", "\\r")


def refuse(file: str, problem: str) -> SourceError:
    return SourceError(_escape(f"{file}: {problem}; nothing was written"))


def load_json(data: bytes, file: str) -> Any:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(file, "not valid UTF-8") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise refuse(file, f"malformed JSON ({str(exc).splitlines()[0][:80]})") from None


def parse_model(model: type[BaseModel] | TypeAdapter[Any], obj: Any, file: str, prefix: str = "") -> Any:
    """Validate `obj` against `model`, or raise SourceError naming the file and the field."""
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(obj, strict=True)
        return model.model_validate(obj)
    except ValidationError as exc:
        raise refuse(file, f"{prefix}{describe(exc)}") from None
