"""The table of operations: every call the network faces offer, declared once.

`memtape serve` (memtape/server.py) makes each row an HTTP route, and so a path of its OpenAPI
document; `memtape mcp` (memtape/mcp_server.py) makes it an MCP tool; the parity tests
(tests/faces_support.py) read their list of calls from it. Neither face names an operation:
each walks `OPERATIONS`, so a call is offered everywhere or nowhere, with the same arguments.

A row says:
- `name`: the MCP tool (and, unless `operation_id` says otherwise, the route's operationId);
- `call`: the library function (`Run.x` or `Memory.x`): its signature gives a GET's query
  parameters and a tool's arguments without a `body`, its docstring the route's description;
  a `Run` method takes the run's `run_id` on both faces (in the path, as a tool argument);
- `kind`: "write" when the call logs an event (a recall too), "read" when it writes nothing.
  A write records into the run's live handle; a POST that writes answers once per
  Idempotency-Key (a read POST, such as `known_failure`, answers afresh);
- `route`: "METHOD /path"; `{name}` in the path is that argument (`{name:path}` may hold slashes);
- `doc`: what a model needs to know to call it (the MCP tool's description);
- `body`: the face_models `Body` of a POST (exactly the library's arguments), also a tool's arguments;
- `answer`: what the route answers, `reply` how the library's value becomes it (default: as
  is, or `Recorded()` for a write answering `Recorded`), `tool_answer` the one-field model an
  MCP tool wraps a list or scalar answer in (a tool answers one JSON object);
- `http_omits`: arguments the route leaves to its caller;
- `query_names`: an argument's name in the query string where the library's is another (Python
  cannot name a parameter `from`: `mem.diff(start, end)` is `GET /diff?from=&to=`);
- `schemas`: an argument's type as both faces declare it, where the library's signature says
  less (a `str` that is one of a list: the library still refuses a wrong one in its own words);
- `make`: the call itself, when it is more than the library method (starting or finishing a run
  keeps or drops the faces' run handles);
- `compact`: in the compact MCP set `memtape mcp` offers by default (at most 12 tools).

To add a call: write the library method (with its docstring), then one row below, a `Body` in
memtape/face_models.py if it is a POST, and an answer model if it answers a new shape. Nothing
else changes: the route, the tool, the OpenAPI path and the parity tests' list follow from the
row. `create_app(memory, operations=...)` and `build_server(memory, operations=...)` take another
table (a test adds a throwaway row that way).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from memtape.api import Lesson, Memory, Run, TrajectoryRecall
from memtape.face_models import (
    AbandonBody,
    AbandonedRuns,
    Answer,
    Audit,
    BacktrackBody,
    Body,
    Changes,
    ContextBody,
    ContextEntries,
    ContinuedRun,
    CreditBody,
    EmbeddingBody,
    ExperimentBody,
    Explained,
    ExplorationEndBody,
    ExplorationStartBody,
    Extracted,
    ExtractionBody,
    Extractions,
    FactBody,
    Facts,
    FinishBody,
    Finished,
    FoundPageMap,
    HasPageMap,
    InferredContext,
    InferredContextBody,
    KnownFailure,
    KnownFailureBody,
    LessonBody,
    Lessons,
    LoopWarnings,
    ObservedFact,
    Outcome,
    PageMapBody,
    PageMaps,
    PageSummary,
    Patterns,
    PatternUsedBody,
    ProgressBody,
    RecalledTrajectory,
    Recorded,
    RecordedEmbedding,
    RecordedLesson,
    RecordedStep,
    RepeatedFailureBody,
    RunHandles,
    RunStart,
    ScratchBody,
    ScratchPad,
    ScratchValue,
    SearchResults,
    SelectorBody,
    Selectors,
    Sessions,
    ShortTermMemory,
    Sitemap,
    SitemapLinksBody,
    SitemapVisitBody,
    SnapshotBody,
    Snapshots,
    StartedRun,
    StateCount,
    StateItems,
    StateKind,
    StateRows,
    StepBody,
    StepMemories,
    TakenSnapshot,
    UserContextBody,
    finished,
    stale_limit,
)
from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.knowledge import Fact
from memtape.projections.folds.page_maps import PageMap
from memtape.projections.folds.patterns import Pattern
from memtape.projections.folds.selectors import SelectorEntry
from memtape.projections.folds.sessions import SessionEntry
from memtape.projections.folds.short_term import ShortTerm
from memtape.projections.folds.sitemap import SiteMap
from memtape.projections.folds.snapshots import Snapshot
from memtape.projections.folds.steps import StepMemory
from memtape.projections.recording.values import Extraction, Scenario
from memtape.projections.search import SearchResult
from memtape.projections.state_rows import Change

#: the call itself when it is more than the library method: (memory, handles, arguments) -> answer
Make = Callable[[Memory, RunHandles, dict[str, Any]], Any]

_PATH_NAME = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass(frozen=True)
class Argument:
    """One argument of an operation, as both faces take it: its name, type, default and description."""

    name: str
    annotation: Any
    default: Any = inspect.Parameter.empty
    metadata: tuple[Any, ...] = ()
    description: str | None = None


@dataclass(frozen=True)
class Operation:
    """One row of the table (see the module's docstring for each field)."""

    name: str
    call: Callable[..., Any]
    kind: Literal["read", "write"]
    route: str
    doc: str
    body: type[Body] | None = None
    answer: Any = Recorded
    reply: Callable[[Any], Any] | None = None
    tool_answer: type[Answer] | None = None
    make: Make | None = None
    operation_id: str | None = None
    http_omits: tuple[str, ...] = ()
    query_names: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    compact: bool = False
    status: int = 200

    @property
    def method(self) -> str:
        return self.route.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.route.split(" ", 1)[1]

    @property
    def path_names(self) -> list[str]:
        return _PATH_NAME.findall(self.path)

    @property
    def route_name(self) -> str:
        """The route's operationId (the name a generated client gives the call)."""
        return self.operation_id or self.name

    @property
    def on_run(self) -> bool:
        """A `Run` method: both faces take the run's `run_id` besides the library's arguments."""
        return getattr(Run, self.call.__name__, None) is self.call

    @property
    def summary(self) -> str:
        """The call as a caller writes it: `run.record_step`, `mem.state`."""
        return f"{'run' if self.on_run else 'mem'}.{self.call.__name__}"

    @property
    def idempotent(self) -> bool:
        """A POST that writes: answered once per Idempotency-Key."""
        return self.method == "POST" and self.kind == "write"

    def arguments(self) -> list[Argument]:
        """The library call's arguments: the body's fields, else the method's parameters."""
        if self.body is not None:
            return [
                Argument(
                    name,
                    field.annotation,
                    inspect.Parameter.empty if field.default is PydanticUndefined else field.default,
                    tuple(field.metadata),
                    field.description,
                )
                for name, field in self.body.model_fields.items()
            ]
        hints = get_type_hints(self.call)
        return [
            Argument(p.name, self.schemas.get(p.name, hints[p.name]), p.default)
            for p in list(inspect.signature(self.call).parameters.values())[1:]
        ]

    def perform(self, memory: Memory, handles: RunHandles, arguments: dict[str, Any]) -> Any:
        """Make the call with a face's `arguments` (the run's `run_id` among them for a `Run` method)."""
        if self.make is not None:
            return self.make(memory, handles, arguments)
        if not self.on_run:
            return getattr(memory, self.call.__name__)(**arguments)
        given = dict(arguments)
        run_id = given.pop("run_id")
        run = handles.writing(run_id) if self.kind == "write" else handles.reading(run_id)
        return getattr(run, self.call.__name__)(**given)

    def answering(self, value: Any) -> Any:
        """The route's answer (and a tool's, unless `tool_answer` wraps it) from the call's value."""
        if self.reply is not None:
            return self.reply(value)
        return Recorded() if self.answer is Recorded else value

    def tool_answering(self, value: Any) -> Any:
        """An MCP tool's answer: one JSON object."""
        if self.tool_answer is None:
            return self.answering(value)
        (field,) = self.tool_answer.model_fields
        return self.tool_answer.model_validate({field: value})


def body_arguments(body: type[Body], given: dict[str, Any]) -> dict[str, Any]:
    """The library's keyword arguments from a body's fields already checked by a face."""
    return body.model_construct(**given).arguments()


def _start_run(memory: Memory, handles: RunHandles, arguments: dict[str, Any]) -> StartedRun:
    run = handles.keep(memory.start_run(**arguments))
    return StartedRun(run_id=run.run_id, session_id=run.session_id)


def _observe_fact(_memory: Memory, handles: RunHandles, arguments: dict[str, Any]) -> ObservedFact:
    given = dict(arguments)
    run = handles.writing(given.pop("run_id"))
    run.observe_fact(**given)
    domain = given["domain"] if given["domain"] is not None else run.domain
    return ObservedFact(domain=domain, kind=given["kind"], key=given["key"])


def _finish(_memory: Memory, handles: RunHandles, arguments: dict[str, Any]) -> Finished:
    given = dict(arguments)
    run_id = given.pop("run_id")
    learned = handles.writing(run_id).finish(**given)
    handles.drop([run_id])
    return finished(run_id, given["success"], learned)


def _abandon_stale_runs(memory: Memory, handles: RunHandles, arguments: dict[str, Any]) -> AbandonedRuns:
    abandoned = memory.abandon_stale_runs(stale_limit(arguments["older_than"]))
    handles.drop(abandoned)
    return AbandonedRuns(abandoned=abandoned)


def _validated(model: type[BaseModel]) -> Callable[[Any], Any]:
    return model.model_validate


OPERATIONS: list[Operation] = [
    # ---- runs: what happened ----------------------------------------------------------------
    Operation(
        "start_run",
        Memory.start_run,
        "write",
        "POST /runs",
        "Start a run for a task and return its run_id (every other run tool takes it) and session_id. "
        "mode: new, resume or fork; rep 1 of a session retrieves no step memories.",
        body=RunStart,
        answer=StartedRun,
        make=_start_run,
        compact=True,
        status=201,
    ),
    Operation(
        "record_step",
        Run.record_step,
        "write",
        "POST /runs/{run_id}/steps",
        'Record one action after taking it: `target` names the element as `role "name"`, `ok`/`error` '
        "say how it went, `url`/`url_after` where (default: where the last step ended). Set `sensitive` "
        "for a value typed into a password field (every argument is masked). The same step again with "
        "the same content is one step.",
        body=StepBody,
        answer=RecordedStep,
        reply=lambda event_id: RecordedStep(event_id=event_id),
        compact=True,
    ),
    Operation(
        "record_lesson",
        Run.record_lesson,
        "write",
        "POST /runs/{run_id}/lessons",
        "Record a lesson learned (deduplicated, promoted to Tier 1 by use). category: error_recovery or "
        "site_specific (scoped to scope_domain, default the run's site). With failed_command and error_pattern, recall_error finds it "
        "after the same failure.",
        body=LessonBody,
        answer=RecordedLesson,
        reply=lambda lesson_id: RecordedLesson(lesson_id=lesson_id),
        compact=True,
    ),
    Operation(
        "observe_fact",
        Run.observe_fact,
        "write",
        "POST /runs/{run_id}/facts",
        "Record app knowledge about the run's site (or `domain`): kind is timing, selector, pattern or quirk. "
        "The same value confirms a fact, another contradicts it.",
        body=FactBody,
        answer=ObservedFact,
        make=_observe_fact,
        compact=True,
    ),
    Operation(
        "selector_result",
        Run.selector_result,
        "write",
        "POST /runs/{run_id}/selectors",
        'Whether `selector` found `element` (`role "name"`) on the current page (or `url`).',
        body=SelectorBody,
    ),
    Operation(
        "record_context",
        Run.record_context,
        "write",
        "POST /runs/{run_id}/context",
        "What one prompt held: each item's source, priority, text and the event ids it came from (and what "
        "the budget trimmed), as a context_built event. Audits show exactly this.",
        body=ContextBody,
    ),
    Operation(
        "finish_run",
        Run.finish,
        "write",
        "POST /runs/{run_id}/finish",
        "Finish the run at the end of the task. Post-run learning turns its failures and recoveries into "
        "lessons, facts, selectors and, on success, a trajectory; returns what was learned. A finished run "
        "takes no more steps.",
        body=FinishBody,
        answer=Finished,
        make=_finish,
        operation_id="finish",
        compact=True,
    ),
    Operation(
        "progress",
        Run.progress,
        "write",
        "POST /runs/{run_id}/progress",
        "Where the run is (the run registry), every few turns.",
        body=ProgressBody,
    ),
    # ---- runs: recall (each one an event) and plain reads ------------------------------------
    Operation(
        "tier1",
        Run.tier1,
        "write",
        "GET /runs/{run_id}/tier1",
        "The Tier 1 lessons to keep in mind for the whole run (its system prompt).",
        answer=list[Lesson],
        tool_answer=Lessons,
        compact=True,
    ),
    Operation(
        "recall_domain",
        Run.recall_domain,
        "write",
        "GET /runs/{run_id}/recall/domain",
        "Lessons for the site the run is on (or `domain`): call on entering a site.",
        answer=list[Lesson],
        tool_answer=Lessons,
        compact=True,
    ),
    Operation(
        "recall_error",
        Run.recall_error,
        "write",
        "GET /runs/{run_id}/recall/error",
        "Lessons for a failed action (`command`) and its error message: call after an action fails.",
        answer=list[Lesson],
        tool_answer=Lessons,
        compact=True,
    ),
    Operation(
        "recall_trajectory",
        Run.recall_trajectory,
        "write",
        "GET /runs/{run_id}/recall/trajectory",
        "The reference trajectory for the run's goal on the current site (or `url`'s), and whether it is "
        "close enough to replay; `recall` is null when none matches.",
        answer=TrajectoryRecall | None,
        tool_answer=RecalledTrajectory,
    ),
    Operation(
        "sessions",
        Run.sessions,
        "read",
        "GET /runs/{run_id}/sessions",
        "The last completed runs on the run's site (or `domain`), oldest first.",
        answer=list[SessionEntry],
        tool_answer=Sessions,
    ),
    Operation(
        "facts",
        Run.facts,
        "read",
        "GET /runs/{run_id}/facts",
        "The site's current facts confident enough for a prompt, most confident first.",
        answer=list[Fact],
        tool_answer=Facts,
    ),
    Operation(
        "selectors",
        Run.selectors,
        "read",
        "GET /runs/{run_id}/selectors",
        "Known-good selectors of the site, most successful first.",
        answer=list[SelectorEntry],
        tool_answer=Selectors,
    ),
    Operation(
        "step_memories",
        Run.step_memories,
        "read",
        "GET /runs/{run_id}/step_memories",
        "Graded steps on a page like this one (REPEAT / AVOID): none on rep 1, the baseline.",
        answer=list[StepMemory],
        tool_answer=StepMemories,
    ),
    Operation(
        "loop_warnings",
        Run.loop_warnings,
        "read",
        "GET /runs/{run_id}/loop_warnings",
        "This run's loop warnings (an action that already failed, repeated).",
        answer=list[str],
        tool_answer=LoopWarnings,
    ),
    Operation(
        "prompt_context",
        Run.prompt_context,
        "read",
        "GET /runs/{run_id}/prompt_context",
        "What a prompt's context section holds: all of this run's user context, then what was inferred on "
        "the site (with memory on).",
        answer=list[ContextEntry],
        tool_answer=ContextEntries,
    ),
    Operation(
        "relevant_context",
        Run.relevant_context,
        "read",
        "GET /runs/{run_id}/relevant_context",
        "This run's user context and the site's inferred context that share words with the goal.",
        answer=list[ContextEntry],
        tool_answer=ContextEntries,
    ),
    Operation(
        "patterns",
        Run.patterns,
        "read",
        "GET /runs/{run_id}/patterns",
        "Learned patterns for the run's site (or `domain`), best first.",
        answer=list[Pattern],
        tool_answer=Patterns,
    ),
    Operation(
        "extractions",
        Run.extractions,
        "read",
        "GET /runs/{run_id}/extractions",
        "The site's cached extractions, oldest first.",
        answer=list[ContextEntry],
        tool_answer=Extractions,
    ),
    Operation(
        "snapshots",
        Run.snapshots,
        "read",
        "GET /runs/{run_id}/snapshots",
        "This run's snapshots, in the order they were taken.",
        answer=list[Snapshot],
        tool_answer=Snapshots,
    ),
    Operation(
        "sitemap",
        Run.sitemap,
        "read",
        "GET /runs/{run_id}/sitemap",
        "The site's graph of pages (null before its first exploration).",
        answer=SiteMap | None,
        tool_answer=Sitemap,
    ),
    Operation(
        "short_term",
        Run.short_term,
        "read",
        "GET /runs/{run_id}/short_term",
        "This run's short-term memory: recent actions, failed signatures, loop warnings, path.",
        answer=ShortTerm,
        tool_answer=ShortTermMemory,
    ),
    Operation(
        "recorded_embedding",
        Run.recorded_embedding,
        "read",
        "GET /runs/{run_id}/embedding",
        "This run's internal state as `model` embedded it for an earlier step (null if none did).",
        answer=RecordedEmbedding,
        reply=lambda vector: RecordedEmbedding(vector=vector),
    ),
    Operation(
        "run_search",
        Run.search,
        "write",
        "GET /runs/{run_id}/search",
        "Search everything memory holds for words, as `search` does, logged against this run (and `step`).",
        answer=list[SearchResult],
        tool_answer=SearchResults,
    ),
    Operation(
        "known_failure",
        Run.known_failure,
        "read",
        "POST /runs/{run_id}/known_failure",
        "The action's signature when it already failed in this run, else null (writes nothing).",
        body=KnownFailureBody,
        answer=KnownFailure,
        reply=lambda signature: KnownFailure(signature=signature),
    ),
    # ---- runs: working memory and layered memory ----------------------------------------------
    Operation(
        "give_context",
        Run.give_context,
        "write",
        "POST /runs/{run_id}/user_context",
        "What the user told this run, key -> value (`memtape run --context key=value`).",
        body=UserContextBody,
    ),
    Operation(
        "infer_context",
        Run.infer_context,
        "write",
        "POST /runs/{run_id}/inferred_context",
        "Context learned during the run on its site (or `domain`), recorded once per (domain, key, value); "
        "`recorded` is false when it was already known or memory is off for the run.",
        body=InferredContextBody,
        answer=InferredContext,
        reply=lambda recorded: InferredContext(recorded=recorded),
    ),
    Operation(
        "set_scratch",
        Run.set_scratch,
        "write",
        "POST /runs/{run_id}/scratch",
        "Put any JSON value on this run's scratch pad under `key` (replaced when set again; a key naming a "
        "secret keeps it redacted).",
        body=ScratchBody,
    ),
    Operation(
        "scratch",
        Run.scratch,
        "read",
        "GET /runs/{run_id}/scratch",
        "This run's whole scratch pad, key -> value.",
        answer=dict[str, Any],
        tool_answer=ScratchPad,
    ),
    Operation(
        "get_scratch",
        Run.get_scratch,
        "read",
        # a key holds anything, a slash too; over HTTP `default` is the caller's own (a key never set is null)
        "GET /runs/{run_id}/scratch/{key:path}",
        "The value last set under `key` on this run's scratch pad, else `default`.",
        answer=ScratchValue,
        reply=lambda value: ScratchValue(value=value),
        http_omits=("default",),
    ),
    Operation(
        "store_page_map",
        Run.store_page_map,
        "write",
        "POST /runs/{run_id}/page_maps",
        "This run's understanding of the page at `url`: title, summary, total_width, total_height and "
        "regions (kind, name, description, elements, start_y, end_y); replaces an earlier map.",
        body=PageMapBody,
    ),
    Operation(
        "get_all_page_maps",
        Run.get_all_page_maps,
        "read",
        "GET /runs/{run_id}/page_maps",
        "Every PageMap of this run, URL -> map.",
        answer=dict[str, PageMap],
        tool_answer=PageMaps,
    ),
    Operation(
        "get_page_map",
        Run.get_page_map,
        "read",
        "GET /runs/{run_id}/page_map",
        "The PageMap this run stored for `url` (null without one).",
        answer=PageMap | None,
        tool_answer=FoundPageMap,
    ),
    Operation(
        "has_page_map",
        Run.has_page_map,
        "read",
        "GET /runs/{run_id}/has_page_map",
        "Whether this run stored a PageMap for `url`.",
        answer=bool,
        tool_answer=HasPageMap,
    ),
    Operation(
        "get_page_summary",
        Run.get_page_summary,
        "read",
        "GET /runs/{run_id}/page_summary",
        'The summary of the page at `url` from its PageMap ("" without one).',
        answer=str,
        tool_answer=PageSummary,
    ),
    Operation(
        "pattern_used",
        Run.pattern_used,
        "write",
        "POST /runs/{run_id}/patterns_used",
        "The agent followed a learned pattern: its success or failure is counted when the run finishes "
        "through this server (which keeps it until then).",
        body=PatternUsedBody,
    ),
    Operation(
        "use_embedding",
        Run.use_embedding,
        "write",
        "POST /runs/{run_id}/embedding",
        "The vector of this run's internal state (its goal) by `model`: every step recorded from now on "
        "carries it, and step-memory retrieval compares intents by it.",
        body=EmbeddingBody,
    ),
    Operation(
        "extraction",
        Run.extraction,
        "write",
        "POST /runs/{run_id}/extractions",
        "An extraction through the cache: `extract` is the page as the agent extracted it (title, text, "
        "links, section_count), recorded unless an extraction under `key` is younger than the policy's TTL: "
        "then that one is answered (`served_from_cache`) and logged as served.",
        body=ExtractionBody,
        answer=Extraction,
        tool_answer=Extracted,
    ),
    Operation(
        "snapshot",
        Run.snapshot,
        "write",
        "POST /runs/{run_id}/snapshots",
        "A StateSnapshot at a navigation (`scroll` is [x, y]); returns its snapshot_id.",
        body=SnapshotBody,
        answer=TakenSnapshot,
        reply=lambda snapshot_id: TakenSnapshot(snapshot_id=snapshot_id),
    ),
    Operation(
        "backtracked",
        Run.backtracked,
        "write",
        "POST /runs/{run_id}/backtracked",
        "Stuck: the agent went back to a snapshot, avoiding what led to the dead end.",
        body=BacktrackBody,
    ),
    Operation(
        "repeated_failure",
        Run.repeated_failure,
        "write",
        "POST /runs/{run_id}/repeated_failure",
        "What the agent did about an action known to fail: chose otherwise, or went ahead warned.",
        body=RepeatedFailureBody,
    ),
    Operation(
        "exploration_started",
        Run.exploration_started,
        "write",
        "POST /runs/{run_id}/exploration/started",
        "A sitemap exploration of the site of `homepage_url` begins.",
        body=ExplorationStartBody,
    ),
    Operation(
        "sitemap_links",
        Run.sitemap_links,
        "write",
        "POST /runs/{run_id}/sitemap/links",
        "Links found on `parent_url` during an exploration.",
        body=SitemapLinksBody,
    ),
    Operation(
        "sitemap_visited",
        Run.sitemap_visited,
        "write",
        "POST /runs/{run_id}/sitemap/visited",
        "A page the exploration visited.",
        body=SitemapVisitBody,
    ),
    Operation(
        "exploration_completed",
        Run.exploration_completed,
        "write",
        "POST /runs/{run_id}/exploration/completed",
        "How the exploration of the site of `homepage_url` ended.",
        body=ExplorationEndBody,
    ),
    # ---- the memory: recall outside a run (each one an event), runs by id ---------------------
    Operation(
        "memory_tier1",
        Memory.tier1,
        "write",
        "GET /tier1",
        "The Tier 1 lessons, outside a run or for run `run_id` at `step` (logs tier1_loaded).",
        answer=list[Lesson],
        tool_answer=Lessons,
    ),
    Operation(
        "memory_recall_domain",
        Memory.recall_domain,
        "write",
        "GET /recall/domain",
        "Lessons scoped to `domain` (or a parent domain), outside a run or for `run_id` (logs domain_recall).",
        answer=list[Lesson],
        tool_answer=Lessons,
    ),
    Operation(
        "memory_recall_error",
        Memory.recall_error,
        "write",
        "GET /recall/error",
        "Lessons for a failed command and its error (site lessons only on `domain`), outside a run or for "
        "`run_id` (logs error_recall).",
        answer=list[Lesson],
        tool_answer=Lessons,
    ),
    Operation(
        "memory_recall_trajectory",
        Memory.recall_trajectory,
        "write",
        "GET /recall/trajectory",
        "The reference trajectory for `goal` on the host of `url`, outside a run or for `run_id`; `recall` "
        "is null when none matches (logs trajectory_recalled).",
        answer=TrajectoryRecall | None,
        tool_answer=RecalledTrajectory,
    ),
    Operation(
        "search",
        Memory.search,
        "write",
        "GET /search",
        "Search everything memory holds (lessons, facts, patterns, selectors, trajectories, sessions, context) "
        "for words, best match first; `kinds` and `domain` narrow it, `as_of` (a seq or ISO time) searches the "
        "past. Pass `run_id` and `step` to log the search against the run.",
        answer=list[SearchResult],
        tool_answer=SearchResults,
        compact=True,
    ),
    Operation(
        "abandon_stale_runs",
        Memory.abandon_stale_runs,
        "write",
        "POST /runs/abandon_stale",
        'Finish as failed (reason "abandoned") every running run with no event for `older_than` seconds '
        "(default: the memory's stale_after, one hour); returns the run ids finished.",
        body=AbandonBody,
        answer=AbandonedRuns,
        make=_abandon_stale_runs,
    ),
    Operation(
        "resume_scenario",
        Memory.resume_scenario,
        "read",
        "GET /runs/{run_id}/resume",
        "Seed 000's resume of run `run_id`: its final URL, its session, lineage kept, its goal unless `goal` "
        "gives another; the fields `start_run` takes to start it.",
        answer=Scenario,
        tool_answer=ContinuedRun,
    ),
    Operation(
        "fork_scenario",
        Memory.fork_scenario,
        "read",
        "GET /runs/{run_id}/fork",
        "Seed 000's fork of run `run_id`: its final URL in a new session (`fork_...`), lineage kept, its "
        "goal unless `goal` gives another; the fields `start_run` takes to start it.",
        answer=Scenario,
        tool_answer=ContinuedRun,
    ),
    # ---- the memory: state, audit, explain, experiment ---------------------------------------
    Operation(
        "state",
        Memory.state,
        "read",
        "GET /state/{kind}",
        "One projection's records (lessons, tier1, facts, sessions, selectors, trajectories, runs, "
        "short-term, patterns, context, snapshots, sitemap, scratch, page-maps, credit), now or at seq / "
        "ISO time `as_of`, of one `domain` and one `run` (its own state, or what it taught) when given; "
        "runs and sessions of one `session` and `outcome` (running, success, failed). `limit` (1 to "
        "10000) rows from `offset`: a page of the list as ordered (runs newest first); `count` gives the total.",
        answer=StateRows,
        tool_answer=StateItems,
        schemas={"kind": StateKind, "outcome": Outcome},
    ),
    Operation(
        "count",
        Memory.count,
        "read",
        "GET /state/{kind}/count",
        "How many records `state` lists for the same kind and filters, before paging: the N of a page's '51-100 of N'.",
        answer=StateCount,
        reply=lambda total: StateCount(count=total),
        schemas={"kind": StateKind, "outcome": Outcome},
    ),
    Operation(
        "diff",
        Memory.diff,
        "read",
        "GET /diff",
        "What memory gained, changed and lost between two points of the log (`start` before `end`), each a "
        "seq, an ISO time or a run id (the end of that run): one change per lesson, fact, trajectory, run "
        "or selector.",
        answer=list[Change],
        tool_answer=Changes,
        query_names={"start": "from", "end": "to"},
    ),
    Operation(
        "audit",
        Memory.audit,
        "read",
        "GET /audit/{run_id}",
        "What run `run_id` knew at each step (or only `step`) and which events it came from.",
        answer=Audit,
        reply=_validated(Audit),
        compact=True,
    ),
    Operation(
        "explain",
        Memory.explain,
        "read",
        "GET /explain/{item:path}",  # an XPath selector holds slashes
        "The whole life of one lesson, fact (id or key), selector or trajectory: recorded, deduplicated, "
        "recalled (in which runs), promoted, decayed, pruned, forgotten.",
        answer=Explained,
        reply=_validated(Explained),
        compact=True,
    ),
    Operation(
        "experiment",
        Memory.experiment,
        "read",
        "POST /experiment",
        "Replay the log's observations under the policy with `changes` (Policy field -> value) and diff "
        "against what really happened: the content of `memtape experiment --set ... --json`.",
        body=ExperimentBody,
        answer=dict[str, Any],
    ),
    Operation(
        "credit",
        Memory.credit,
        "write",
        "POST /credit",
        "Credit every memory item shown to `runs` (none: every run) by counterfactual: each decision of the "
        "bundled agent asked again without each item it was shown, the task run again where one changed a "
        "decision (`rerun`); records item_credited events; the content of `memtape credit --json`.",
        body=CreditBody,
        answer=dict[str, Any],
    ),
]


def compact(operations: Sequence[Operation]) -> list[Operation]:
    """The compact MCP set: what an agent calls in a run, and the audit of it."""
    return [operation for operation in operations if operation.compact]
