"""What the HTTP and MCP faces take and answer, as pydantic models.

One definition serves `memtape serve` (FastAPI validates bodies with them and serializes every
answer through them, so `/openapi.json` declares exactly what is sent and a client can be
generated from it) and `memtape mcp` (the tools' answers and their output schemas). A body has
exactly the fields of the library call it is sent to, with the same defaults; the values
themselves are checked once, by the library (bad ones are its one-line refusal). Answers that
the library gives as dataclasses (`Lesson`, `Fact`, `SessionEntry`, ...) are declared as those
dataclasses: every field the Python caller gets, a caller of either face gets.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from memtape.api import Lesson, Memory, Run, TrajectoryRecall
from memtape.ledger.events import FactObserved, FactType, LessonRecorded, PatternLearned, TrajectoryRecorded
from memtape.projections.budget import DEFAULT_BUDGET
from memtape.projections.pin import CALLER_CATEGORIES
from memtape.projections.recording.values import Extraction, Learned, Scenario
from memtape.projections.records import (
    Change,
    ContextEntry,
    Fact,
    ItemCredit,
    ListedLesson,
    PageMap,
    Pattern,
    RunManifest,
    ScratchEntry,
    SelectorEntry,
    SessionEntry,
    ShortTerm,
    SiteMap,
    SitePage,
    Snapshot,
    StepMemory,
    Trajectory,
)
from memtape.projections.search import SearchResult
from memtape.projections.state_rows import OUTCOMES, STATE_KINDS


def one_of(values: tuple[str, ...]) -> WithJsonSchema:
    """The schema of a string that is one of `values`: a client generated from `/openapi.json`
    refuses a misspelt one at compile time, while the value itself is still checked by the
    library, so a wrong one gets the library's one-line refusal on every face."""
    return WithJsonSchema({"type": "string", "enum": list(values)})


#: a lesson's category as a caller records it (Tier 1 categories are refused, see projections.pin)
LessonCategory = Annotated[str, one_of(CALLER_CATEGORIES)]
#: a fact's kind
FactKind = Annotated[str, one_of(get_args(FactType))]
#: a projection `mem.state` lists
StateKind = Annotated[str, one_of(STATE_KINDS)]
#: the outcome `mem.state` keeps of runs and sessions (none: every one)
Outcome = Annotated[
    str | None, WithJsonSchema({"anyOf": [{"type": "string", "enum": list(OUTCOMES)}, {"type": "null"}]})
]


class Body(BaseModel):
    """Request bodies take exactly their fields, with JSON's own types (no "3" for 3)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def arguments(self) -> dict[str, Any]:
        """The library call's keyword arguments."""
        return self.model_dump()


class RunStart(Body):
    """`mem.start_run`: `rep` and `step_memory_scope` number a session's reps (see the Python API)."""

    goal: str
    start_url: str
    session_id: str | None = None
    run_id: str | None = Field(default=None, description="Chosen by the caller; default: a new id.")
    parent_run_id: str | None = None
    mode: str = Field(default="new", description="new, resume or fork")
    isolation: str = Field(default="shared", description="shared or per-run")
    case_id: str | None = None
    agent: str = Field(default="external", description="The agent's decision policy, as run_started records it.")
    rep: int | None = None
    step_memory_scope: str = Field(default="session", description="session or all")


class StepBody(Body):
    """`run.record_step`: one action on the page at `url`, ending on `url_after`."""

    step: int
    action: str
    target: str | None = Field(default=None, description='The element as `role "name"`.')
    url: str | None = Field(default=None, description="Default: where the last step ended.")
    ok: bool = True
    error: str | None = None
    args: dict[str, Any] | None = None
    url_after: str | None = Field(default=None, description="Default: `url`.")
    selector: str | None = None
    sensitive: bool = Field(
        default=False,
        description=(
            "A value typed into a password field: every argument is masked and the value scrubbed from the run."
        ),
    )
    duration_ms: float = 0.0
    think: str | None = None
    page_before: dict[str, Any] | None = Field(default=None, description="url, title, page_type, elements")
    page_after: dict[str, Any] | None = None
    decided_by: str = "policy"
    in_shadow: bool = False
    memory_ms: float = 0.0


class LessonBody(Body):
    """`run.record_lesson`: `category` is error_recovery or site_specific (Tier 1 text comes only
    from the seeds, promotion or a person's pin)."""

    text: str
    category: LessonCategory = "error_recovery"
    failed_command: str | None = None
    error_pattern: str | None = None
    scope_domain: str | None = None
    step: int | None = None


class FactBody(Body):
    """`run.observe_fact`: kind is timing, selector, pattern or quirk."""

    kind: FactKind
    key: str
    value: str
    step: int | None = None
    domain: str | None = Field(default=None, description="Default: the run's current site.")


class SelectorBody(Body):
    """`run.selector_result`: whether `selector` found `element` on the page at `url`."""

    element: str
    selector: str
    ok: bool
    step: int | None = None
    error: str | None = None
    url: str | None = None
    healed_from: str | None = None


class PromptItem(Body):
    """One item of a prompt: where it came from (`event_ids`), its priority and text; `tokens` as
    your tokenizer counted them (else estimated by `content_type`: text, code, json, html)."""

    source: str
    text: str
    priority: int
    event_ids: list[str] | None = None
    tokens: int | None = None
    content_type: str | None = None
    confidence: float | None = None
    truncated: bool | None = None

    def given(self) -> dict[str, Any]:
        """The item as the library takes it: what was not given keeps the library's default."""
        return self.model_dump(exclude_none=True)


class ContextBody(Body):
    """`run.record_context`: what one prompt held and what the budget trimmed."""

    items: list[PromptItem]
    step: int
    budget: int = DEFAULT_BUDGET
    trimmed: list[PromptItem] = []
    prompt: str = "step"
    domain: str | None = None
    #: what counted the items' `tokens` (the agent's tokenizer); items without a count are counted by the server
    counted_by: str | None = None

    def arguments(self) -> dict[str, Any]:
        return {
            **self.model_dump(),
            "items": [i.given() for i in self.items],
            "trimmed": [i.given() for i in self.trimmed],
        }


class FinishBody(Body):
    """`run.finish`: post-run learning and run_completed; the figures default to what the ledger holds."""

    success: bool
    outcome: str = ""
    reason: str | None = None
    result: str | None = None
    final_url: str | None = None
    turns: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    duration_ms: float | None = None
    policy_decisions: int | None = None
    replayed_steps: int | None = None
    learn: bool = Field(default=True, description="False (an exploration): learn nothing from the steps.")


class UserContextBody(Body):
    """`run.give_context`: what the user told this run, key -> value."""

    context: dict[str, str]


class ScratchBody(Body):
    """`run.set_scratch`: any JSON value on the run's scratch pad under `key`."""

    key: str
    value: Any
    step: int | None = None


class PageMapBody(Body):
    """`run.store_page_map`: title, summary, total_width, total_height and regions of the page at `url`."""

    url: str
    page_map: dict[str, Any]
    step: int | None = None


class InferredContextBody(Body):
    """`run.infer_context`: context learned during the run, recorded once per (domain, key, value)."""

    key: str
    value: str
    source: str
    step: int | None = None
    domain: str | None = Field(default=None, description="Default: the run's current site.")


class PatternUsedBody(Body):
    """`run.pattern_used`: the agent followed a learned pattern; counted when the run finishes
    through this server (the server's handle keeps it until then)."""

    pattern_id: str


class EmbeddingBody(Body):
    """`run.use_embedding`: the vector of the run's internal state by `model`; every step recorded
    from now on carries it (the server's handle keeps it until a step records it)."""

    vector: list[float]
    model: str


class ExtractedPage(Body):
    """What the library's `extract()` returns: the page as the agent extracted it."""

    title: str = ""
    text: str = ""
    links: list[dict[str, str]] = []
    section_count: int = 0


class ExtractionBody(Body):
    """`run.extraction`: `extract` is what the library's `extract()` would return; it is recorded
    only when no extraction under `key` is younger than the policy's extraction TTL (then the
    cached one is answered, and logged as served)."""

    key: str
    tool: str
    url: str
    extract: ExtractedPage
    step: int | None = None

    def arguments(self) -> dict[str, Any]:
        page = self.extract.model_dump()
        return {**self.model_dump(), "extract": lambda: page}


class SnapshotBody(Body):
    """`run.snapshot`: the browser's state at a navigation; `scroll` is [x, y]."""

    url: str
    title: str
    summary: str
    form_state: dict[str, str]
    scroll: list[int] = Field(min_length=2, max_length=2, description="[x, y]")
    step: int

    def arguments(self) -> dict[str, Any]:
        return {**self.model_dump(), "scroll": (self.scroll[0], self.scroll[1])}


class BacktrackBody(Body):
    """`run.backtracked`: the agent went back to snapshot `snapshot_id`, avoiding `avoided`."""

    snapshot_id: str
    from_url: str
    to_url: str
    reason: str
    avoided: list[str]
    step: int


class ExplorationStartBody(Body):
    """`run.exploration_started`: a sitemap exploration of the site of `homepage_url` begins."""

    homepage_url: str
    max_depth: int
    max_pages: int


class SitemapLinksBody(Body):
    """`run.sitemap_links`: links found on `parent_url`, each with `url`, and `text`, `link_type`."""

    parent_url: str
    depth: int
    links: list[dict[str, str]]
    step: int


class SitemapVisitBody(Body):
    """`run.sitemap_visited`: a page the exploration visited."""

    url: str
    title: str
    summary: str
    section_count: int
    depth: int
    step: int


class ExplorationEndBody(Body):
    """`run.exploration_completed`: how the exploration of the site of `homepage_url` ended."""

    homepage_url: str
    visited: int
    discovered: int
    complete: bool
    summary: str


class ProgressBody(Body):
    """`run.progress`: where the run is (for the run registry), every few turns."""

    turn: int
    url: str


class KnownFailureBody(Body):
    """`run.known_failure`: whether this action already failed in the run (it writes nothing)."""

    command: str
    args: dict[str, Any]
    url: str


class RepeatedFailureBody(Body):
    """`run.repeated_failure`: what the agent did about an action known to fail."""

    signature: str
    action: str
    url: str
    response: str
    step: int


#: the longest `older_than` a face takes, in seconds (about 31,700 years: any longer abandons nothing either)
MAX_STALE_SECONDS = 10**12


class AbandonBody(Body):
    """`mem.abandon_stale_runs`: `older_than` in seconds (default: the memory's `stale_after`, one hour)."""

    older_than: float | int | None = Field(
        default=None,
        ge=0,
        le=MAX_STALE_SECONDS,
        description=(
            "Seconds with no event after which a running run is abandoned; default: the memory's stale_after."
        ),
    )


def stale_limit(seconds: float | None) -> timedelta | None:
    """Seconds from a face as the `timedelta` `abandon_stale_runs` takes."""
    return None if seconds is None else timedelta(seconds=seconds)


class ExperimentBody(Body):
    """`mem.experiment`: Policy field -> value, replayed up to `until` (a seq or an ISO time)."""

    changes: dict[str, Any]
    until: int | str | None = None


class CreditBody(Body):
    """`mem.credit`: the runs to credit (none: every run), and whether to run a task again without
    each item that changed a decision."""

    runs: list[str] | None = None
    rerun: bool = True


# ---- answers ----------------------------------------------------------------------------------


class Answer(BaseModel):
    """An answer has exactly its fields."""

    model_config = ConfigDict(extra="forbid")


class StartedRun(Answer):
    run_id: str
    session_id: str


class RecordedStep(Answer):
    event_id: str = Field(description="The step_recorded event's id (a retried step: the first one's).")


class RecordedLesson(Answer):
    lesson_id: str


class ObservedFact(Answer):
    domain: str
    kind: str
    key: str


class Recorded(Answer):
    ok: bool = True


class Finished(Answer):
    """What finishing the run learned: every lesson, fact, the trajectory and patterns, as recorded."""

    run_id: str
    success: bool
    lessons: list[LessonRecorded]
    facts: list[FactObserved]
    trajectory: TrajectoryRecorded | None
    patterns: list[PatternLearned]


class AbandonedRuns(Answer):
    """The runs `abandon_stale_runs` finished as abandoned."""

    abandoned: list[str]


class Appended(Answer):
    appended: int
    first_seq: int | None = None
    last_seq: int | None = None


class Error(Answer):
    """Every error the server answers, whatever its status and route (an unknown route included)."""

    error: str = Field(description="One line saying what was wrong.")


class InferredContext(Answer):
    recorded: bool = Field(description="False: already known, or memory is off for the run.")


class RecordedEmbedding(Answer):
    vector: tuple[float, ...] | None = Field(description="Null when no step of a run with this goal carries one.")


class TakenSnapshot(Answer):
    snapshot_id: str


class KnownFailure(Answer):
    signature: str | None = Field(description="The action's signature when it already failed in this run.")


class AuditRun(Answer):
    """How the audited run started (its run_started)."""

    run_id: str
    goal: str | None
    domain: str | None
    mode: str | None
    parent_run_id: str | None
    session_id: str | None
    memory_enabled: bool
    case_id: str | None
    started_seq: int
    started_at: str


class AuditOutcome(Answer):
    """How the audited run ended (its run_completed)."""

    success: bool | None
    turns: int | None
    tokens_in: int | None
    tokens_out: int | None
    duration_ms: int | float | None
    final_url: str | None
    completed_seq: int


class AuditAction(Answer):
    """The step's step_recorded: what the agent did and how it went."""

    seq: int
    command: str | None
    args: dict[str, Any]
    target_text: str | None
    ok: bool | None
    error: str | None
    url_before: str | None
    url_after: str | None
    decided_by: str | None
    duration_ms: int | float | None


class AuditSearch(Answer):
    """A search the step made (memory_searched) and what it found that is not forgotten."""

    query: str | None
    kinds: list[str] | None
    domain: str | None
    as_of: int | str | None
    matched: int
    hits: list[dict[str, Any]]


class AuditGrade(Answer):
    outcome: str | None
    reason: str | None
    correction: str | None


class AuditStep(Answer):
    """What the run knew at one step: its prompts (items with origins), the memory as of
    `as_of_seq` (Tier 1, recalled lessons, trajectory, facts, selectors), searches, the action."""

    step: int
    as_of_seq: int | None
    domain: str | None
    prompt: list[dict[str, Any]]
    tier1_loaded: list[str]
    memory: dict[str, Any]
    searched: list[AuditSearch]
    action: AuditAction | None
    grade: AuditGrade | None


class Audit(Answer):
    """What a run knew at each step and where it came from (`memtape audit RUN --json`)."""

    run_id: str
    run: AuditRun | None
    outcome: AuditOutcome | None
    steps: list[AuditStep]


class LifeEntry(BaseModel):
    """One event in an item's life."""

    model_config = ConfigDict(extra="allow")
    seq: int
    at: str
    recorded_at: str
    stage: str
    type: str
    run_id: str | None
    step: int | None
    domain: str | None
    detail: str


class Explained(BaseModel):
    """The life of one lesson, fact, selector or trajectory (`memtape explain ITEM --json`)."""

    model_config = ConfigDict(extra="allow")
    kind: str
    item: str
    now: Any
    status: str
    life: list[LifeEntry]


# MCP answers one JSON object per call: lists come inside one


class Lessons(Answer):
    lessons: list[Lesson]


class RecalledTrajectory(Answer):
    recall: TrajectoryRecall | None


class ContinuedRun(Answer):
    scenario: Scenario


class Sessions(Answer):
    sessions: list[SessionEntry]


class Facts(Answer):
    facts: list[Fact]


class Selectors(Answer):
    selectors: list[SelectorEntry]


class StepMemories(Answer):
    step_memories: list[StepMemory]


class LoopWarnings(Answer):
    warnings: list[str]


#: what `GET /state/{kind}` answers: a list of the kind's record (`state_rows.STATE_ROWS`), so a
#: generated client knows each row's fields
StateRows = (
    list[ListedLesson]
    | list[Fact]
    | list[SessionEntry]
    | list[SelectorEntry]
    | list[Trajectory]
    | list[RunManifest]
    | list[ShortTerm]
    | list[Pattern]
    | list[ContextEntry]
    | list[Snapshot]
    | list[SitePage]
    | list[ScratchEntry]
    | list[PageMap]
    | list[ItemCredit]
)


class StateItems(Answer):
    items: StateRows


class StateCount(Answer):
    count: int = Field(description="How many records `state` lists for the same kind and filters, before paging.")


class Changes(Answer):
    changes: list[Change]


class ContextEntries(Answer):
    context: list[ContextEntry]


class ScratchValue(Answer):
    """The value last set under a key of the scratch pad (null when none was)."""

    value: Any


class ScratchPad(Answer):
    scratch: dict[str, Any]


class FoundPageMap(Answer):
    page_map: PageMap | None


class HasPageMap(Answer):
    has_page_map: bool


class PageMaps(Answer):
    page_maps: dict[str, PageMap]


class PageSummary(Answer):
    summary: str


class Patterns(Answer):
    patterns: list[Pattern]


class Extractions(Answer):
    extractions: list[ContextEntry]


class Extracted(Answer):
    extraction: Extraction


class Snapshots(Answer):
    snapshots: list[Snapshot]


class Sitemap(Answer):
    sitemap: SiteMap | None


class SearchResults(Answer):
    results: list[SearchResult]


class ShortTermMemory(Answer):
    short_term: ShortTerm


class RunHandles:
    """Both faces' handles on runs, by id: a `Run` keeps what the ledger does not (an embedding
    before a step carries it, the patterns followed), so a face records into the handle it
    started or first opened, as a Python caller does. The ledger stays the truth: a handle whose
    run finished is opened again, and every write is checked against the run as the ledger holds it."""

    def __init__(self, memory: Memory):
        self.memory = memory
        self.live: dict[str, Run] = {}

    def keep(self, run: Run) -> Run:
        self.live[run.run_id] = run
        return run

    def writing(self, run_id: str) -> Run:
        """The handle to record into and recall for: a run this memory saw finish (abandoned when
        another started, say) is opened again, so `memory.run` refuses it."""
        run = self.live.get(run_id)
        manifest = self.memory.current().run(run_id) if run is not None else None
        if run is None or run.finished or manifest is None or manifest.status != "running":
            return self.keep(self.memory.run(run_id))
        return run

    def reading(self, run_id: str) -> Run:
        """The run to read from: its live handle, or (a finished run's too) the ledger's."""
        run = self.live.get(run_id)
        return run if run is not None and not run.finished else self.memory.read_run(run_id)

    def drop(self, run_ids: list[str] | None = None) -> None:
        """Forget these runs' handles (None: every handle, when a write was rolled back)."""
        for run_id in list(self.live) if run_ids is None else run_ids:
            self.live.pop(run_id, None)


def finished(run_id: str, success: bool, learned: Learned) -> Finished:
    """The answer of finishing a run from the library's `Learned`."""
    return Finished(
        run_id=run_id,
        success=success,
        lessons=learned.lessons,
        facts=learned.facts,
        trajectory=learned.trajectory,
        patterns=learned.patterns,
    )
