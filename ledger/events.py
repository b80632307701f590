"""Every event the ledger accepts: one pydantic discriminated union on `type`.

A payload model holds only what happened; the envelope (seq, id, stream,
stream_version, recorded_at, occurred_at, run_id, step, domain, prev_hash,
hash) is assigned by the store. Old payload versions are upcast on read (`UPCASTERS`, applied by
`store.upcast`), so projections only ever see the current shape. The field rules are `field_rules`',
the envelope around a payload `envelope`'s, a line's JSON Schema `event_schema`'s.

Two domains must not be confused: the envelope's `domain` is where an event
happened; a lesson's `scope_domain` is the site a lesson applies to (None for
a universal lesson).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Ge, Le
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memtape.ledger.field_rules import (
    MAX_DEPTH,
    MAX_TEXT,
    Count,
    Duration,
    Int64,
    NavigableUrl,
    Positive,
    Real,
    Timestamp,
    check_domain,
    check_value,
)
from memtape.ledger.redact import MARKER, masked_args, secret_field, secret_named
from memtape.ledger.suffixes import is_public_suffix


class Payload(BaseModel):
    """Base of every event payload."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_max_length=MAX_TEXT, allow_inf_nan=False, defer_build=True
    )
    schema_version: Int64 = 1
    #: payload schema version this code writes; older stored versions are upcast on read
    CURRENT_VERSION: ClassVar[int] = 1
    #: events of this type must carry a run_id in their envelope
    NEEDS_RUN: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        if isinstance(data, dict):
            check_value(data)
        return data

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        """A newer version cannot be read by this code; an older one only if it can be upcast."""
        if version > cls.CURRENT_VERSION:
            raise ValueError(
                f"schema_version {version} was written by a newer memtape "
                f"(this one knows up to {cls.CURRENT_VERSION}); upgrade memtape"
            )
        if version < min_version(cls):
            raise ValueError(
                f"schema_version {version} is not a version of this event "
                f"(known: {min_version(cls)}..{cls.CURRENT_VERSION})"
            )
        return version


Category = Literal["tool_fallback", "best_practice", "error_recovery", "site_specific"]
FactType = Literal["timing", "selector", "pattern", "quirk"]


# ---- runs -----------------------------------------------------------------


class RunStarted(Payload):
    type: Literal["run_started"] = "run_started"
    NEEDS_RUN: ClassVar[bool] = True
    session_id: str | None = None
    parent_run_id: str | None = None
    mode: Literal["new", "resume", "fork"] = "new"
    goal: str
    start_url: NavigableUrl | None = None
    memory_enabled: bool = True
    isolation: Literal["shared", "per-run"] = "shared"
    #: the policy in force; its `seeds` (when present) are the seed lessons this memory was opened
    #: with (absent: seed 001's), which the start-of-run policy writes on first use
    policy: dict[str, Any] = Field(default_factory=dict)
    case_id: str | None = None

    @field_validator("policy")
    @classmethod
    def _seeds(cls, policy: dict[str, Any]) -> dict[str, Any]:
        if "seeds" in policy:
            SEED_LESSONS.validate_python(policy["seeds"])
        return policy


#: the most seed lessons one memory takes (Tier 1 holds at most `tier1_cap`, 10 by default)
MAX_SEEDS = 50


class SeedLesson(BaseModel):
    """One seed lesson, as `memtape.open(seeds=PATH)` reads it from a JSON file (a list of these):
    the text, its category (Tier 1's tool_fallback or best_practice, or error_recovery, recalled on
    its failure) and the failure it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=2_000)
    lesson: str = Field(min_length=1)
    category: Literal["tool_fallback", "best_practice", "error_recovery"] = "best_practice"
    failed_command: str | None = Field(default=None, min_length=1, max_length=200)
    error_pattern: str | None = Field(default=None, min_length=1, max_length=300)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        if isinstance(data, dict):
            check_value(data)
        return data

    @field_validator("lesson")
    @classmethod
    def _worded(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("a seed lesson needs text")
        return text


SEED_LESSONS: TypeAdapter[list[SeedLesson]] = TypeAdapter(
    Annotated[list[SeedLesson], Field(max_length=MAX_SEEDS)], config=ConfigDict(defer_build=True)
)


class RunProgress(Payload):
    type: Literal["run_progress"] = "run_progress"
    NEEDS_RUN: ClassVar[bool] = True
    turn: Count
    current_url: str


class RunCompleted(Payload):
    type: Literal["run_completed"] = "run_completed"
    NEEDS_RUN: ClassVar[bool] = True
    success: bool
    summary: str = ""
    result: str | None = None
    reason: str | None = None
    final_url: str | None = None
    turns: Count = 0
    tokens_in: Count = 0
    tokens_out: Count = 0
    duration_ms: Duration = 0
    artifact_paths: list[str] = Field(default_factory=list)
    policy_decisions: Count = 0
    replayed_steps: Count = 0
    memory_ms: Duration = 0


class SessionRecorded(Payload):
    """A session record, kept per domain (the policy's `session_history` newest)."""

    type: Literal["session_recorded"] = "session_recorded"
    session_id: str
    goal: str
    outcome: str = ""
    success: bool
    final_url: str = ""
    timestamp: Timestamp
    turns_used: Count = 0
    duration_ms: Duration = 0


# ---- steps ----------------------------------------------------------------


class EnvState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    url: str = ""
    title: str = ""
    page_type: str = ""
    #: element identities ("role:name") visible on the page, for seed 002's page similarity
    elements: list[str] = Field(default_factory=list)


class Action(BaseModel):
    """A browser command. `sensitive` marks a value typed into a password field: every argument is masked."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    command: str
    args: dict[str, Any] = Field(default_factory=dict)
    sensitive: bool = False

    @model_validator(mode="after")
    def _redact_sensitive(self) -> Action:
        if self.sensitive:
            object.__setattr__(self, "args", masked_args(self.args))
        return self


#: the longest embedding a step may carry (the largest common models give 3,072 or 4,096 numbers)
MAX_EMBEDDING = 8192
#: a vector from an embeddings endpoint, as a step stores it
Embedding = Annotated[list[Real], Field(max_length=MAX_EMBEDDING)]


#: the arguments of a typing command that name the field rather than hold the typed value
LOCATOR_ARGS = ("selector", "label", "name", "placeholder", "field", "element", "target", "aria_label", "id", "ref")


def _target_labels(target: ElementRef | None, target_text: str | None, args: dict[str, Any]) -> list[str | None]:
    labels: list[str | None] = [target_text]
    if target is not None:
        labels += [target.role, target.name, target.selector]
    labels += [v for k in LOCATOR_ARGS if isinstance(v := args.get(k), str)]
    return labels


class ElementRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    role: str = ""
    name: str = ""
    selector: str | None = None
    #: the element was found inside a shadow root (post-run learning notes the site's shadow DOM);
    #: stored only when true, so every other target is stored as it always was
    in_shadow: bool = Field(default=False, exclude_if=lambda found: not found)


class StepRecorded(Payload):
    type: Literal["step_recorded"] = "step_recorded"
    NEEDS_RUN: ClassVar[bool] = True
    env_before: EnvState = Field(default_factory=EnvState)
    env_after: EnvState = Field(default_factory=EnvState)
    think: str | None = None
    internal_state: str | None = None
    action: Action
    target: ElementRef | None = None
    target_text: str | None = None
    ok: bool
    error: str | None = None
    duration_ms: Duration = 0
    memory_ms: Duration = 0
    decided_by: Literal["policy", "replay", "approval", "backtrack"] = "policy"
    rep: Positive = 1
    #: seed 003's MemoryPriority of the step as a short-term entry (None: by rule, see projections/short_term.py)
    priority: Literal["critical", "high", "normal", "low"] | None = None
    #: seed 002's internalStateEmbedding: `internal_state` as a user-configured embeddings endpoint
    #: returned it, kept so that no replay or experiment asks the endpoint again
    internal_state_embedding: Embedding = Field(default_factory=list)
    #: the model that made `internal_state_embedding` (vectors of two models are never compared)
    embedding_model: str | None = Field(default=None, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _finishable(cls, data: Any) -> Any:
        """The run's trajectory carries a step's arguments one level deeper (`steps.N.args`), so a step
        nests one level less than a payload may: a step the door takes never keeps its run from finishing."""
        if isinstance(data, dict) and "action" in data:
            check_value({"action": data["action"]}, MAX_DEPTH - 1)
        return data

    @model_validator(mode="after")
    def _secret_field(self) -> StepRecorded:
        """A value typed into a field that its role, name or selector (or a locator argument) names a
        password, PIN, OTP, secret, token or card field is masked as if the caller had said `sensitive`."""
        action = self.action
        if not action.sensitive and secret_field(
            action.command, *_target_labels(self.target, self.target_text, action.args)
        ):
            object.__setattr__(self, "action", Action(command=action.command, args=action.args, sensitive=True))
        return self


class StepGraded(Payload):
    """The grading of one step (`step` in the envelope names it)."""

    type: Literal["step_graded"] = "step_graded"
    NEEDS_RUN: ClassVar[bool] = True
    outcome: Literal["success", "failure"]
    reason: str | None = None
    correction: str | None = None
    task_incomplete: str | None = None
    grader: str = "rules"


# ---- memory reads -----------------------------------------------------------


class Tier1Loaded(Payload):
    type: Literal["tier1_loaded"] = "tier1_loaded"
    count: Count
    lessons: list[str] = Field(default_factory=list)
    lesson_ids: list[str] = Field(default_factory=list)


class ErrorRecall(Payload):
    """Trigger A. `counted_ids`: the listed lessons this recall counts as a use now (error pattern
    matched; a command-only match is offered, never counted); None in a recall written before the
    field existed, which counted every listed lesson. `pending_ids`: in a run, the matched lessons
    without credit, counted only by a `lessons_used` when the run's next decisions clear the failure."""

    type: Literal["error_recall"] = "error_recall"
    command: str
    error_snippet: str
    matched: Count
    lessons: list[str] = Field(default_factory=list)
    lesson_ids: list[str] = Field(default_factory=list)
    counted_ids: list[str] | None = None
    pending_ids: list[str] | None = None


class DomainRecall(Payload):
    """Trigger B: the queried domain is the envelope's `domain`. `counted_ids` as in ErrorRecall
    (every lesson matched on its domain scope counts)."""

    type: Literal["domain_recall"] = "domain_recall"
    matched: Count
    lessons: list[str] = Field(default_factory=list)
    lesson_ids: list[str] = Field(default_factory=list)
    counted_ids: list[str] | None = None


class TrajectoryRecalled(Payload):
    type: Literal["trajectory_recalled"] = "trajectory_recalled"
    goal: str
    trajectory_id: str | None = None
    matched_goal: str | None = None
    similarity: float = Field(default=0.0, ge=0, le=1)
    score: Real | None = None
    steps: Count = 0
    replay: bool = False


#: the kinds of memory a search reads (`Memory.search`): the projections whose records carry text
SearchKind = Literal["lessons", "facts", "patterns", "selectors", "trajectories", "sessions", "context"]
#: the longest query a search takes: a query is words, and no memory item is longer than a page
MAX_QUERY = 2_000


class SearchHit(BaseModel):
    """One item a search returned, by reference: its text stays in its own events (a forget hides
    it there), the search keeps only which item it was and how well it ranked."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    kind: SearchKind
    item_id: str = Field(max_length=1_000)
    score: Real


class MemorySearched(Payload):
    """A full-text search of memory (a recall by words): the query, its filters and the ranked hits.
    The envelope's `domain` is the run's (or the filter's outside a run)."""

    type: Literal["memory_searched"] = "memory_searched"
    query: str = Field(min_length=1, max_length=MAX_QUERY)
    kinds: list[SearchKind] | None = None
    domain_filter: str | None = None
    as_of: str | None = None
    limit: Positive = 10
    matched: Count = 0
    hits: list[SearchHit] = Field(default_factory=list)


class ContextItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    source: str
    priority: Int64
    tokens: Count
    content_type: Literal["text", "code", "json", "html"] = "text"
    #: how sure the content-type detection was (seed 003's TokenEstimator confidence)
    confidence: float = Field(default=1.0, ge=0, le=1)
    text: str = ""
    event_ids: list[str] = Field(default_factory=list)
    truncated: bool = False


class ContextBuilt(Payload):
    """Exactly what a prompt contained, and what the budget trimmed."""

    type: Literal["context_built"] = "context_built"
    NEEDS_RUN: ClassVar[bool] = True
    prompt: Literal["system", "step"] = "step"
    budget: Count
    total_tokens: Count
    items: list[ContextItem] = Field(default_factory=list)
    trimmed: list[ContextItem] = Field(default_factory=list)
    counted_by: str | None = Field(
        default=None,
        min_length=1,
        max_length=80,
        description=(
            "What counted the items' tokens: `cl100k_base` (the BPE tokenizer of the `tokens` extra), `estimate` "
            "(FlyBrowser's estimate by content type, without the extra), or the agent's own tokenizer it named; "
            "None when an agent gave its counts without naming what counted them."
        ),
    )


# ---- memory writes: lessons -----------------------------------------------


class _LessonFields(Payload):
    lesson_id: str = Field(
        description=(
            "Empty: filled with 'lsn_' + the first 16 hex digits of sha256 of the dedup key (the same lesson "
            "always gets the same id). An id that already names a lesson with another dedup key is refused."
        )
    )
    lesson: str = Field(min_length=1)
    category: Category
    failed_command: str | None = None
    error_pattern: str | None = None
    scope_domain: str | None = None

    @field_validator("scope_domain")
    @classmethod
    def _scope(cls, v: str | None, info: ValidationInfo) -> str | None:
        v = check_domain(v, exact=bool(info.context and info.context.get("exact")))
        if v is not None and is_public_suffix(v):
            raise ValueError(
                f"scope {v!r} is a public suffix (every site under it would share the lesson): "
                "scope a lesson to one site, e.g. example.com"
            )
        return v


class LessonSeeded(_LessonFields):
    type: Literal["lesson_seeded"] = "lesson_seeded"


class LessonRecorded(_LessonFields):
    """A learned lesson. v1 (the first event log) called the scope `domain`; v2 `scope_domain`."""

    type: Literal["lesson_recorded"] = "lesson_recorded"
    CURRENT_VERSION: ClassVar[int] = 2
    schema_version: Int64 = 2
    source: Literal["learned", "seed", "import"] = "learned"
    learned_from: list[str] = Field(default_factory=list)
    use_count: Count = 1
    triggered_domains: list[str] = Field(default_factory=list)
    created_at: Timestamp | None = None
    last_used: Timestamp | None = None


class LessonDeduplicated(_LessonFields):
    type: Literal["lesson_deduplicated"] = "lesson_deduplicated"
    new_use_count: Positive
    learned_from: list[str] = Field(default_factory=list)


class LessonPromoted(Payload):
    type: Literal["lesson_promoted"] = "lesson_promoted"
    lesson_id: str
    lesson: str
    use_count: Int64
    triggered_domains: list[str]
    from_category: Category = "error_recovery"
    to_category: Category = "best_practice"


class LessonPinned(Payload):
    """A person put a lesson in Tier 1 (`memtape lessons pin LESSON --by NAME --reason TEXT`): besides
    the seeds and promotion, the only way text reaches every system prompt, so it says who and why."""

    type: Literal["lesson_pinned"] = "lesson_pinned"
    lesson_id: str = Field(min_length=1, max_length=200)
    pinned_by: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000)
    from_category: Category
    to_category: Literal["tool_fallback", "best_practice"] = "best_practice"


class LessonUnpinned(Payload):
    """A person took a lesson (a seed too) out of Tier 1 (`memtape lessons unpin`): it stays as Tier 2."""

    type: Literal["lesson_unpinned"] = "lesson_unpinned"
    lesson_id: str = Field(min_length=1, max_length=200)
    unpinned_by: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000)
    from_category: Literal["tool_fallback", "best_practice"]
    to_category: Literal["error_recovery"] = "error_recovery"


class LessonDemoted(Payload):
    """Decision: a learned Tier 1 lesson whose measured credit (`item_credited`) turned negative leaves Tier 1."""

    type: Literal["lesson_demoted"] = "lesson_demoted"
    lesson_id: str
    lesson: str
    turns_saved: Int64
    success_saved: Int64 = 0
    from_category: Literal["tool_fallback", "best_practice"] = "best_practice"
    to_category: Literal["error_recovery"] = "error_recovery"


class LessonsPruned(Payload):
    type: Literal["lessons_pruned"] = "lessons_pruned"
    lesson_ids: list[str]
    pruned_count: Count
    remaining_count: Count
    as_of: Timestamp
    max_age_days: Int64 = 90
    min_uses: Int64 = 5
    #: those pruned as their measured credit stayed at zero for `max_age_days` after first measured
    zero_credit_ids: list[str] = Field(default_factory=list)


# ---- memory writes: facts, selectors, trajectories -------------------------


class FactObserved(Payload):
    """An observation that a domain fact holds (valid time is occurred_at)."""

    type: Literal["fact_observed"] = "fact_observed"
    fact_type: FactType
    key: str = Field(min_length=1)
    value: str = Field(min_length=1)
    confidence: float | None = Field(default=None, ge=0, le=1)
    sources: Positive | None = None


class FactContradicted(Payload):
    """Decision: a new value contradicts current facts of the same (type, key)."""

    type: Literal["fact_contradicted"] = "fact_contradicted"
    fact_type: FactType
    key: str
    old_values: list[str]
    new_value: str
    factor: float = Field(gt=0, le=1)


class FactsPruned(Payload):
    type: Literal["facts_pruned"] = "facts_pruned"
    facts: list[dict[str, Any]]
    threshold: Real


class _SelectorOutcome(Payload):
    NEEDS_RUN: ClassVar[bool] = False
    role: str
    name: str
    selector: str = Field(min_length=1)
    url: str | None = None


class SelectorSucceeded(_SelectorOutcome):
    type: Literal["selector_succeeded"] = "selector_succeeded"
    healed_from: str | None = None


class SelectorFailed(_SelectorOutcome):
    type: Literal["selector_failed"] = "selector_failed"
    error: str | None = None


class TrajectoryStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    command: str
    args: dict[str, Any] = Field(default_factory=dict)
    role: str | None = None
    name: str | None = None
    selector: str | None = None
    url: str = ""
    verified: bool = False
    effect: str | None = None
    duration_ms: Real = 0

    @model_validator(mode="after")
    def _secret_field(self) -> TrajectoryStep:
        """A step typed into a secret field keeps no value (see `StepRecorded`)."""
        if secret_field(
            self.command,
            self.role,
            self.name,
            self.selector,
            *(v for k in LOCATOR_ARGS if isinstance(v := self.args.get(k), str)),
        ):
            object.__setattr__(self, "args", masked_args(self.args))
        return self


class TrajectoryRecorded(Payload):
    type: Literal["trajectory_recorded"] = "trajectory_recorded"
    trajectory_id: str
    goal: str
    origin: str = ""
    steps: list[TrajectoryStep]
    success: bool = True
    duration_ms: Duration = 0
    turns: Count = 0


class TrajectoriesExpired(Payload):
    type: Literal["trajectories_expired"] = "trajectories_expired"
    trajectory_ids: list[str]
    ttl_days: Real
    as_of: Timestamp


# ---- layered memory (seed 003) ------------------------------------------------

PatternType = Literal["login_flow", "navigation", "form_fill"]
MAX_ITEMS = 1000


class PatternStep(BaseModel):
    """One step of a learned pattern; typed values are placeholders such as `{password}`."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    command: str = Field(min_length=1, max_length=40)
    role: str | None = Field(default=None, max_length=40)
    name: str | None = Field(default=None, max_length=300)
    value: str | None = Field(default=None, max_length=300)
    url: str = Field(default="", max_length=2000)

    @model_validator(mode="after")
    def _secret_field(self) -> PatternStep:
        """A value typed into a secret field is kept only as a placeholder (`{password}`)."""
        if (
            self.value
            and not re.fullmatch(r"\{[A-Za-z0-9_ -]{1,40}\}", self.value)
            and secret_field(self.command, self.role, self.name)
        ):
            object.__setattr__(self, "value", MARKER)
        return self


class PatternLearned(Payload):
    """A site-specific multi-step pattern learned from a successful run (its first success)."""

    type: Literal["pattern_learned"] = "pattern_learned"
    pattern_id: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=500)
    pattern_type: PatternType
    steps: list[PatternStep] = Field(min_length=1, max_length=50)


class PatternUsed(Payload):
    """A learned pattern was reused: success or failure counts toward its success rate."""

    type: Literal["pattern_used"] = "pattern_used"
    pattern_id: str = Field(min_length=1, max_length=200)
    success: bool


class LessonsUsed(Payload):
    """Written as a run finishes: the decisions after the error recall at `recall_step` (made at
    `recalled_at`, the uses' time) cleared its failure (at `cleared_at`); each pending lesson counts."""

    type: Literal["lessons_used"] = "lessons_used"
    NEEDS_RUN: ClassVar[bool] = True
    recall_step: Positive
    cleared_at: Positive
    recalled_at: Timestamp | None = None
    lesson_ids: list[str] = Field(max_length=MAX_ITEMS)


class PatternsPruned(Payload):
    """Decision: more than max_patterns; the bottom 20% by (success_rate, last_used) removed."""

    type: Literal["patterns_pruned"] = "patterns_pruned"
    pattern_ids: list[str] = Field(max_length=MAX_ITEMS)
    max_patterns: int = Field(ge=1, le=1_000_000)
    remaining_count: int = Field(ge=0, le=1_000_000)


class ContextGiven(Payload):
    """User context given to a run (`memtape run --context key=value`)."""

    type: Literal["context_given"] = "context_given"
    key: str = Field(min_length=1, max_length=200)
    value: str = Field(max_length=2000)


class ContextInferred(Payload):
    """Context learned during execution, with what it was inferred from."""

    type: Literal["context_inferred"] = "context_inferred"
    key: str = Field(min_length=1, max_length=200)
    value: str = Field(max_length=2000)
    source: str = Field(min_length=1, max_length=300)


class ExtractionRecorded(Payload):
    """Data extracted from a page (the extraction cache keeps it for `ttl_seconds`)."""

    type: Literal["extraction_recorded"] = "extraction_recorded"
    key: str = Field(min_length=1, max_length=2000)
    tool: str = Field(min_length=1, max_length=60)
    url: str = Field(default="", max_length=2000)
    text: str = ""
    title: str = Field(default="", max_length=500)
    links: list[dict[str, str]] = Field(default_factory=list, max_length=MAX_ITEMS)
    section_count: int = Field(default=0, ge=0, le=1_000_000)


class ExtractionServed(Payload):
    """A repeated extraction within the cache TTL, served from memory instead of the page."""

    type: Literal["extraction_served"] = "extraction_served"
    key: str = Field(min_length=1, max_length=2000)
    extraction_id: str = Field(min_length=1, max_length=200)
    age_seconds: float = Field(ge=0, le=1e9)
    ttl_seconds: float = Field(ge=0, le=1e9)


class SnapshotTaken(Payload):
    """Browser state at a navigation, for backtracking."""

    type: Literal["snapshot_taken"] = "snapshot_taken"
    NEEDS_RUN: ClassVar[bool] = True
    snapshot_id: str = Field(min_length=1, max_length=200)
    url: str = Field(max_length=2000)
    title: str = Field(default="", max_length=500)
    visible_elements_summary: str = Field(default="", max_length=2000)
    form_state: dict[str, str] = Field(default_factory=dict)
    scroll_x: int = Field(default=0, ge=0, le=10_000_000)
    scroll_y: int = Field(default=0, ge=0, le=10_000_000)
    associated_step: int = Field(default=0, ge=0, le=1_000_000)


class Backtracked(Payload):
    """The agent was stuck and went back to the last good snapshot."""

    type: Literal["backtracked"] = "backtracked"
    NEEDS_RUN: ClassVar[bool] = True
    snapshot_id: str = Field(min_length=1, max_length=200)
    from_url: str = Field(max_length=2000)
    to_url: str = Field(max_length=2000)
    reason: str = Field(max_length=500)
    avoided: list[str] = Field(default_factory=list, max_length=100)


class RepeatedFailureDetected(Payload):
    """Before acting: the chosen action's signature already failed in this run (a
    repeated failure); the agent chose otherwise or went ahead with a warning."""

    type: Literal["repeated_failure_detected"] = "repeated_failure_detected"
    NEEDS_RUN: ClassVar[bool] = True
    signature: str = Field(min_length=1, max_length=64)
    action: str = Field(max_length=500)
    url: str = Field(max_length=2000)
    response: Literal["chose_otherwise", "warned"]


class SitemapLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    url: NavigableUrl = Field(min_length=1, max_length=2000)
    text: str = Field(default="", max_length=300)
    link_type: Literal["main_nav", "content", "footer"] = "content"


class ExplorationStarted(Payload):
    type: Literal["exploration_started"] = "exploration_started"
    homepage_url: NavigableUrl = Field(min_length=1, max_length=2000)
    max_depth: int = Field(ge=0, le=100)
    max_pages: int = Field(ge=1, le=100_000)


class SitemapLinksDiscovered(Payload):
    type: Literal["sitemap_links_discovered"] = "sitemap_links_discovered"
    parent_url: str = Field(min_length=1, max_length=2000)
    depth: int = Field(ge=0, le=100)
    links: list[SitemapLink] = Field(max_length=MAX_ITEMS)


class SitemapPageVisited(Payload):
    type: Literal["sitemap_page_visited"] = "sitemap_page_visited"
    url: str = Field(min_length=1, max_length=2000)
    title: str = Field(default="", max_length=500)
    summary: str = Field(default="", max_length=2000)
    section_count: int = Field(default=0, ge=0, le=1_000_000)
    depth: int = Field(default=0, ge=0, le=100)


class ExplorationCompleted(Payload):
    type: Literal["exploration_completed"] = "exploration_completed"
    homepage_url: str = Field(min_length=1, max_length=2000)
    pages_visited: int = Field(ge=0, le=100_000)
    pages_discovered: int = Field(ge=0, le=1_000_000)
    complete: bool
    summary: str = Field(default="", max_length=20_000)


class ScratchSet(Payload):
    """A value put on the run's scratch pad (working memory): working data
    kept between cycles and read back by key within the run. A value stored under a key that names
    a secret (password, token, PIN...) is kept as the redaction marker."""

    type: Literal["scratch_set"] = "scratch_set"
    NEEDS_RUN: ClassVar[bool] = True
    key: str = Field(min_length=1, max_length=200)
    value: JsonValue = None

    @model_validator(mode="after")
    def _secret_key(self) -> ScratchSet:
        if secret_named(self.key) and self.value not in (None, ""):
            object.__setattr__(self, "value", MARKER)
        return self


#: seed 003's SectionType: what part of a page a region is
RegionKind = Literal["header", "navigation", "hero", "content", "sidebar", "footer", "modal", "unknown"]


class PageRegion(BaseModel):
    """One region of a page (a page section): its kind, name, what it holds, the key elements
    in it (`role "name"` or any label) and the vertical range it spans in pixels."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    kind: RegionKind = "unknown"
    name: str = Field(min_length=1, max_length=300)
    description: str = Field(default="", max_length=2000)
    elements: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=MAX_ITEMS)
    start_y: int = Field(default=0, ge=0, le=10_000_000)
    end_y: int = Field(default=0, ge=0, le=10_000_000)


class PageMapStored(Payload):
    """A run's spatial understanding of one page (a page map in working memory): title,
    summary, dimensions and its regions with their elements. Stored again for the same URL, it
    replaces the earlier map."""

    type: Literal["page_map_stored"] = "page_map_stored"
    NEEDS_RUN: ClassVar[bool] = True
    url: str = Field(min_length=1, max_length=2000)
    title: str = Field(default="", max_length=500)
    summary: str = Field(default="", max_length=2000)
    total_width: int = Field(default=0, ge=0, le=10_000_000)
    total_height: int = Field(default=0, ge=0, le=10_000_000)
    regions: list[PageRegion] = Field(default_factory=list, max_length=200)


# ---- interop and privacy ----------------------------------------------------


class MemoryImported(Payload):
    type: Literal["memory_imported"] = "memory_imported"
    source_format: str
    source_path: str
    source_digest: str
    counts: dict[str, Int64] = Field(default_factory=dict)


class SubjectForgotten(Payload):
    type: Literal["subject_forgotten"] = "subject_forgotten"
    subject_kind: Literal["domain", "run", "session", "lesson", "fact"]
    subject: str = Field(min_length=1)
    reason: str | None = None
    #: the runs a forgotten run or session covers, resolved when it was forgotten, so that folds
    #: that never see `run_started` (knowledge, selectors) can drop what those runs introduced
    run_ids: list[str] = Field(default_factory=list)


class ChangedStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    step: Count
    sections: list[str] = Field(default_factory=list)


class ItemCredited(Payload):
    """What one memory item was worth to one run, by counterfactual (`memtape credit`): the decisions
    that showed it (`shown`), those its policy decides otherwise without it (`changed`, at
    `changed_steps` with the prompt sections it was in), and where the task ran again without it
    (`evidence_runs`), the turns, tokens and success it saved. `method`: `exact` (scripted policy) or
    `temperature-0` (a model: an estimate), `+rerun` where it ran again. A later credit of the same
    item and run replaces the earlier one."""

    type: Literal["item_credited"] = "item_credited"
    item: str = Field(min_length=1, max_length=200)
    kind: Literal["lesson", "fact", "pattern", "trajectory"]
    text: str = Field(default="", max_length=2000)
    credited_run: str = Field(min_length=1, max_length=200)
    method: str = Field(min_length=1, max_length=80)
    shown: Count = 0
    changed: Count = 0
    changed_steps: list[ChangedStep] = Field(default_factory=list)
    turns_saved: Int64 = 0
    tokens_saved: Int64 = 0
    success_changed: bool = False
    success_saved: Annotated[int, Ge(-1), Le(1)] = 0  # +1 the item made the run succeed, -1 fail
    evidence_runs: list[str] = Field(default_factory=list)


class RequestAnswered(Payload):
    """A request sent with an idempotency key, and the answer it got. The key's digest names the
    stream (`request-sha256-<hex of the key>`), so the same key again is answered from here by any
    server on this ledger, after any restart, and the ledger's lock makes the first one win."""

    type: Literal["request_answered"] = "request_answered"
    #: sha256 of what was asked (for HTTP: the method, the path and the body's bytes)
    request_sha256: str
    status: Annotated[int, Ge(100), Le(599)] = 200
    response: Any = None


AnyPayload = Annotated[
    RunStarted
    | RunProgress
    | RunCompleted
    | SessionRecorded
    | StepRecorded
    | StepGraded
    | Tier1Loaded
    | ErrorRecall
    | DomainRecall
    | TrajectoryRecalled
    | MemorySearched
    | ContextBuilt
    | LessonSeeded
    | LessonRecorded
    | LessonDeduplicated
    | LessonPromoted
    | LessonPinned
    | LessonUnpinned
    | LessonDemoted
    | LessonsPruned
    | FactObserved
    | FactContradicted
    | FactsPruned
    | SelectorSucceeded
    | SelectorFailed
    | TrajectoryRecorded
    | TrajectoriesExpired
    | MemoryImported
    | SubjectForgotten
    | RequestAnswered
    | ItemCredited
    | PatternLearned
    | PatternUsed
    | LessonsUsed
    | PatternsPruned
    | ContextGiven
    | ContextInferred
    | ExtractionRecorded
    | ExtractionServed
    | SnapshotTaken
    | Backtracked
    | RepeatedFailureDetected
    | ExplorationStarted
    | SitemapLinksDiscovered
    | SitemapPageVisited
    | ExplorationCompleted
    | ScratchSet
    | PageMapStored,
    Field(discriminator="type"),
]
PAYLOAD_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyPayload, config=ConfigDict(defer_build=True))
EVENT_TYPES: dict[str, type[Payload]] = {
    cls.model_fields["type"].default: cls
    for cls in AnyPayload.__origin__.__args__  # type: ignore[attr-defined]
}

#: keys a JSON Lines event may carry besides its payload fields
ENVELOPE_KEYS = frozenset({"type", "id", "stream", "run_id", "step", "domain", "occurred_at", "recorded_at"})


# ---- upcasting ---------------------------------------------------------------

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _lesson_recorded_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """The first event log named a lesson's scope `domain`; v2 calls it `scope_domain`."""
    data = dict(data)
    if "domain" in data:
        data["scope_domain"] = data.pop("domain")
    data.setdefault("lesson_id", "")
    return data


#: (type, from_version) -> function producing version from_version + 1
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("lesson_recorded", 1): _lesson_recorded_v1_to_v2,
}


def min_version(cls: type[Payload]) -> int:
    """The oldest stored version of an event type this code can read (upcasters reach it up)."""
    type_ = cls.model_fields["type"].default
    version = cls.CURRENT_VERSION
    while (type_, version - 1) in UPCASTERS:
        version -= 1
    return version
