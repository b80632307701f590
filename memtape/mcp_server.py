"""`memtape mcp`: the library's runs and recall as Model Context Protocol tools over stdio.

An MCP client (Claude Desktop, an IDE, an agent framework) starts `memtape mcp` as a
subprocess and calls tools whose arguments are the library's (`memtape.api`), plus the
`run_id` that `start_run` returned wherever a `Run` method needs one. Each tool makes the
same library call the Python API makes, so the ledger records exactly the same events.
A bad argument is a tool error carrying the library's one-line message; nothing is written.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import Tool
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from memtape.api import Memory, MemtapeError
from memtape.face_models import (
    MAX_STALE_SECONDS,
    AbandonedRuns,
    Audit,
    ContextEntries,
    Explained,
    Extracted,
    ExtractedPage,
    Extractions,
    Facts,
    Finished,
    FoundPageMap,
    HasPageMap,
    InferredContext,
    KnownFailure,
    LoopWarnings,
    ObservedFact,
    PageMaps,
    PageSummary,
    Patterns,
    PromptItem,
    RecalledTrajectory,
    Recorded,
    RecordedEmbedding,
    RecordedLesson,
    RecordedStep,
    RunHandles,
    ScratchPad,
    ScratchValue,
    Selectors,
    Sessions,
    ShortTermMemory,
    Sitemap,
    Snapshots,
    StartedRun,
    StateItems,
    StepMemories,
    TakenSnapshot,
    finished,
    stale_limit,
)
from memtape.face_models import Lessons as LessonsAnswer
from memtape.ledger.field_rules import MAX_DEPTH, check_value
from memtape.ledger.jsonl import first_error, nested_too_deep, outline
from memtape.mcp_frames import LineReader
from memtape.mcp_frames import answers as frame_answers
from memtape.projections.budget import DEFAULT_BUDGET

INSTRUCTIONS = (
    "memtape is an auditable memory for browser agents. Call start_run at the start of a task, tier1 for "
    "the lessons to keep in mind, recall_domain on entering a site, recall_error after a failed action, "
    "record_step after each action, record_lesson when you learn something, and finish_run at the end "
    "(post-run learning turns failure->recovery into lessons). sessions, facts, selectors, step_memories, "
    "loop_warnings and prompt_context read what memory holds for a prompt; record_context says what the prompt "
    "held. set_scratch and store_page_map keep the run's own working memory; infer_context, extraction, "
    "snapshot, backtracked, progress and the exploration tools record the rest of a run's layered memory. audit "
    "shows what a run knew and where it came from, explain the life of one lesson, fact or selector."
)

#: a float argument also takes a whole number, as JSON does (3 for 3.0)
Number = StrictFloat | StrictInt


def _request_id(value: Any) -> int | str | None:
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _unreadable(line: str, deepest: int, reason: str) -> str:
    """Why the SDK could not read `line`, in the door's words."""
    if deepest > MAX_DEPTH:
        return nested_too_deep("the message", deepest)
    try:
        check_value(json.loads(line))
    except json.JSONDecodeError:
        pass
    except ValueError as exc:
        return f"{str(exc).splitlines()[0][:200]}; nothing was written"
    return f"malformed JSON ({reason}); nothing was written"


def refusal(exc: Exception) -> JSONRPCError | None:
    """The answer to a line the SDK's stdio transport could not read (it drops them, and the client
    waits for an answer until its own timeout): a parse error naming the request's id, when the line
    holds one, and why (a lone surrogate, nesting past the door's depth, malformed JSON); an invalid
    request for a JSON object with a method and an id that is no MCP message. None: nothing to answer."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    given = errors[0].get("input") if errors else None
    if errors and errors[0].get("type") == "json_invalid" and isinstance(given, str):
        members, deepest = outline(given)
        why = _unreadable(given, deepest, str(errors[0].get("msg", "invalid")))
        return JSONRPCError(
            jsonrpc="2.0", id=_request_id(members.get("id")), error=ErrorData(code=PARSE_ERROR, message=why)
        )
    if (
        isinstance(exc, ValidationError)
        and isinstance(given, dict)
        and "method" in given
        and _request_id(given.get("id")) is not None
    ):
        return JSONRPCError(
            jsonrpc="2.0", id=_request_id(given["id"]), error=ErrorData(code=INVALID_REQUEST, message=first_error(exc))
        )
    return None


def _listed(exc: Exception) -> list[JSONRPCError]:
    answer = refusal(exc)
    return [] if answer is None else [answer]


class MemoryServer(MCPServer):
    """The SDK's server, with every anticipated failure as one line for the model to read: a
    MemtapeError (bad argument, unknown run), arguments that fail the input schema, or an argument
    no tool parameter has (the SDK would drop it: a misspelt `sensitive` must not record a
    password). Anything else stays a crash (the SDK hides its text from the client)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments: dict[str, tuple[str, ...]] = {}

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().add_tool(fn, name, *args, **kwargs)
        self.arguments[name or fn.__name__] = tuple(inspect.signature(fn).parameters)

    async def list_tools(self) -> list[Tool]:
        """The tools, each input schema closed: an argument it does not name is refused."""
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema["additionalProperties"] = False
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self.arguments.get(name)
        unknown = sorted(set(arguments or {}) - set(known)) if known is not None else []
        if known is not None and unknown:
            raise ToolError(
                f"Error executing tool {name}: unknown argument {unknown[0][:60]!r}; known: {', '.join(known)}"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, MemtapeError):
                text = str(cause).strip()
                line = text.splitlines()[0] if text else type(cause).__name__
            elif isinstance(cause, ValidationError):
                line = first_error(cause)
            else:
                raise
            raise ToolError(f"Error executing tool {name}: {line}") from cause

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport over stdin's raw lines (`mcp_frames.LineReader`), with each
        line it cannot read, or that is owed a JSON-RPC error, answered at once (`mcp_frames.answers`)."""
        reader = LineReader(sys.stdin.buffer)
        async with stdio_server(stdin=reader) as (lines, answers):  # type: ignore[arg-type]
            screened_in, screened = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def screen() -> None:
                async with screened_in:
                    async for item in lines:
                        line, valid = reader.taken()
                        owed = frame_answers(line, valid, _listed(item) if isinstance(item, Exception) else [])
                        if owed:
                            for answer in owed:
                                await answers.send(SessionMessage(answer))
                        elif not isinstance(item, Exception):
                            await screened_in.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(screen)
                await self._lowlevel_server.run(
                    screened, answers, self._lowlevel_server.create_initialization_options()
                )


def _items(items: Sequence[PromptItem]) -> list[dict[str, Any]]:
    return [item.given() for item in items]


def build_server(memory: Memory) -> MemoryServer:
    """The MCP server over one opened memory. Tools are coroutines that call the library in the
    event loop's thread: the store's connection is never shared across threads, and calls are
    applied one at a time in the order they arrive. Each takes the library call's arguments, with
    its defaults, plus the run's `run_id`."""
    server = MemoryServer("memtape", instructions=INSTRUCTIONS, log_level="WARNING")
    handles = RunHandles(memory)

    # ---- runs: what happened ----------------------------------------------------------------

    @server.tool()
    async def start_run(
        goal: StrictStr,
        start_url: StrictStr,
        session_id: StrictStr | None = None,
        run_id: StrictStr | None = None,
        parent_run_id: StrictStr | None = None,
        mode: StrictStr = "new",
        isolation: StrictStr = "shared",
        case_id: StrictStr | None = None,
        agent: StrictStr = "external",
        rep: StrictInt | None = None,
        step_memory_scope: StrictStr = "session",
    ) -> StartedRun:
        """Start a run (stale runs are abandoned first) and return its run_id and session_id. `rep`
        and `step_memory_scope` are seed 002's reps: rep 1 retrieves no step memories."""
        run = memory.start_run(
            goal=goal,
            start_url=start_url,
            session_id=session_id,
            run_id=run_id,
            parent_run_id=parent_run_id,
            mode=mode,
            isolation=isolation,
            case_id=case_id,
            agent=agent,
            rep=rep,
            step_memory_scope=step_memory_scope,
        )
        handles.keep(run)
        return StartedRun(run_id=run.run_id, session_id=run.session_id)

    @server.tool()
    async def record_step(
        run_id: StrictStr,
        step: StrictInt,
        action: StrictStr,
        target: StrictStr | None = None,
        url: StrictStr | None = None,
        ok: StrictBool = True,
        error: StrictStr | None = None,
        args: dict[str, Any] | None = None,
        url_after: StrictStr | None = None,
        selector: StrictStr | None = None,
        sensitive: StrictBool = False,
        duration_ms: Number = 0.0,
        think: StrictStr | None = None,
        page_before: dict[str, Any] | None = None,
        page_after: dict[str, Any] | None = None,
        decided_by: StrictStr = "policy",
        in_shadow: StrictBool = False,
        memory_ms: Number = 0.0,
    ) -> RecordedStep:
        """One action the agent took on the page at `url` (default: where the last step ended),
        ending on `url_after`: `target` names the element as `role "name"`, `args` its arguments,
        `page_before`/`page_after` describe the page (url, title, page_type, elements); `sensitive`
        (a value typed into a password field) masks every argument. Returns the step_recorded event
        id; the same step again with the same content is one step."""
        return RecordedStep(
            event_id=handles.writing(run_id).record_step(
                step=step,
                action=action,
                target=target,
                url=url,
                ok=ok,
                error=error,
                args=args,
                url_after=url_after,
                selector=selector,
                sensitive=sensitive,
                duration_ms=duration_ms,
                think=think,
                page_before=page_before,
                page_after=page_after,
                decided_by=decided_by,
                in_shadow=in_shadow,
                memory_ms=memory_ms,
            )
        )

    @server.tool()
    async def record_lesson(
        run_id: StrictStr,
        text: StrictStr,
        category: StrictStr = "error_recovery",
        failed_command: StrictStr | None = None,
        error_pattern: StrictStr | None = None,
        scope_domain: StrictStr | None = None,
        step: StrictInt | None = None,
    ) -> RecordedLesson:
        """A lesson the agent learned (deduplicated and promoted like every lesson); category is
        error_recovery or site_specific. With failed_command and error_pattern, recall_error finds
        it after the same failure."""
        return RecordedLesson(
            lesson_id=handles.writing(run_id).record_lesson(
                text,
                category=category,
                failed_command=failed_command,
                error_pattern=error_pattern,
                scope_domain=scope_domain,
                step=step,
            )
        )

    @server.tool()
    async def observe_fact(
        run_id: StrictStr,
        kind: StrictStr,
        key: StrictStr,
        value: StrictStr,
        step: StrictInt | None = None,
        domain: StrictStr | None = None,
    ) -> ObservedFact:
        """App knowledge about the run's site (or `domain`): kind is timing, selector, pattern or quirk.
        The same value confirms a fact, a different one contradicts it."""
        run = handles.writing(run_id)
        run.observe_fact(kind=kind, key=key, value=value, step=step, domain=domain)
        return ObservedFact(domain=domain if domain is not None else run.domain, kind=kind, key=key)

    @server.tool()
    async def selector_result(
        run_id: StrictStr,
        element: StrictStr,
        selector: StrictStr,
        ok: StrictBool,
        step: StrictInt | None = None,
        error: StrictStr | None = None,
        url: StrictStr | None = None,
        healed_from: StrictStr | None = None,
    ) -> Recorded:
        """Whether `selector` found `element` (`role "name"`) on the current page (or `url`)."""
        handles.writing(run_id).selector_result(
            element=element, selector=selector, ok=ok, step=step, error=error, url=url, healed_from=healed_from
        )
        return Recorded()

    @server.tool()
    async def record_context(
        run_id: StrictStr,
        items: list[PromptItem],
        step: StrictInt,
        budget: StrictInt = DEFAULT_BUDGET,
        trimmed: Sequence[PromptItem] = (),
        prompt: StrictStr = "step",
        domain: StrictStr | None = None,
        counted_by: StrictStr | None = None,
    ) -> Recorded:
        """What one prompt held: each item's source, priority, text and the event ids it came from
        (and what the budget trimmed), as a context_built event. Audits show exactly this."""
        handles.writing(run_id).record_context(
            items=_items(items),
            step=step,
            budget=budget,
            trimmed=_items(trimmed),
            prompt=prompt,
            domain=domain,
            counted_by=counted_by,
        )
        return Recorded()

    @server.tool()
    async def finish_run(
        run_id: StrictStr,
        success: StrictBool,
        outcome: StrictStr = "",
        reason: StrictStr | None = None,
        result: StrictStr | None = None,
        final_url: StrictStr | None = None,
        turns: StrictInt | None = None,
        tokens_in: StrictInt = 0,
        tokens_out: StrictInt = 0,
        duration_ms: Number | None = None,
        policy_decisions: StrictInt | None = None,
        replayed_steps: StrictInt | None = None,
        learn: StrictBool = True,
    ) -> Finished:
        """Finish the run: post-run learning from every step the ledger holds for it (lessons, facts,
        selectors, the trajectory and patterns of a success), the session entry and run_completed.
        Returns what was learned. A finished run takes no more steps, lessons or finish."""
        learned = handles.writing(run_id).finish(
            success=success,
            outcome=outcome,
            reason=reason,
            result=result,
            final_url=final_url,
            turns=turns,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            duration_ms=duration_ms,
            policy_decisions=policy_decisions,
            replayed_steps=replayed_steps,
            learn=learn,
        )
        handles.drop([run_id])
        return finished(run_id, success, learned)

    # ---- runs: recall (each one an event) and plain reads ------------------------------------

    @server.tool()
    async def tier1(run_id: StrictStr) -> LessonsAnswer:
        """The Tier 1 lessons for the system prompt of run `run_id` (logs tier1_loaded)."""
        return LessonsAnswer(lessons=handles.writing(run_id).tier1())

    @server.tool()
    async def recall_domain(
        run_id: StrictStr, step: StrictInt | None = None, domain: StrictStr | None = None
    ) -> LessonsAnswer:
        """Lessons for the site the run is on (or `domain`), on entering it (logs domain_recall)."""
        return LessonsAnswer(lessons=handles.writing(run_id).recall_domain(step=step, domain=domain))

    @server.tool()
    async def recall_error(
        run_id: StrictStr,
        command: StrictStr,
        error: StrictStr,
        step: StrictInt | None = None,
        domain: StrictStr | None = None,
    ) -> LessonsAnswer:
        """Lessons for a failed command and its error message on the run's site (logs error_recall)."""
        return LessonsAnswer(
            lessons=handles.writing(run_id).recall_error(command=command, error=error, step=step, domain=domain)
        )

    @server.tool()
    async def recall_trajectory(
        run_id: StrictStr, step: StrictInt | None = None, url: StrictStr | None = None
    ) -> RecalledTrajectory:
        """The reference trajectory for the run's goal on the current site (or `url`'s), and whether
        it is close enough to replay; `recall` is null when none matches (logs trajectory_recalled)."""
        return RecalledTrajectory(recall=handles.writing(run_id).recall_trajectory(step=step, url=url))

    @server.tool()
    async def sessions(run_id: StrictStr, domain: StrictStr | None = None) -> Sessions:
        """The last completed runs on the run's site (or `domain`), oldest first."""
        return Sessions(sessions=handles.reading(run_id).sessions(domain=domain))

    @server.tool()
    async def facts(run_id: StrictStr, domain: StrictStr | None = None) -> Facts:
        """The site's current facts confident enough for a prompt, most confident first."""
        return Facts(facts=handles.reading(run_id).facts(domain=domain))

    @server.tool()
    async def selectors(run_id: StrictStr, domain: StrictStr | None = None) -> Selectors:
        """Known-good selectors of the site, most successful first."""
        return Selectors(selectors=handles.reading(run_id).selectors(domain=domain))

    @server.tool()
    async def step_memories(run_id: StrictStr, elements: list[StrictStr], intent: StrictStr) -> StepMemories:
        """Graded steps on a page like this one (REPEAT / AVOID): none on rep 1, the baseline."""
        return StepMemories(step_memories=handles.reading(run_id).step_memories(elements, intent))

    @server.tool()
    async def loop_warnings(run_id: StrictStr) -> LoopWarnings:
        """This run's loop warnings (an action that already failed, repeated)."""
        return LoopWarnings(warnings=list(handles.reading(run_id).loop_warnings()))

    @server.tool()
    async def prompt_context(run_id: StrictStr, domain: StrictStr | None = None) -> ContextEntries:
        """What a prompt's context section holds: all of this run's user context, then what was
        inferred on the site (with memory on)."""
        return ContextEntries(context=handles.reading(run_id).prompt_context(domain=domain))

    @server.tool()
    async def relevant_context(run_id: StrictStr, domain: StrictStr | None = None) -> ContextEntries:
        """This run's user context and the site's inferred context that share words with the goal."""
        return ContextEntries(context=handles.reading(run_id).relevant_context(domain=domain))

    # ---- runs: working memory (the run's own) ------------------------------------------------

    @server.tool()
    async def give_context(run_id: StrictStr, context: dict[StrictStr, StrictStr]) -> Recorded:
        """What the user told this run, key -> value (`memtape run --context key=value`)."""
        handles.writing(run_id).give_context(context)
        return Recorded()

    @server.tool()
    async def set_scratch(run_id: StrictStr, key: StrictStr, value: Any, step: StrictInt | None = None) -> Recorded:
        """Put any JSON value on this run's scratch pad under `key` (replaced when set again; a key
        naming a secret keeps it redacted)."""
        handles.writing(run_id).set_scratch(key, value, step=step)
        return Recorded()

    @server.tool()
    async def get_scratch(run_id: StrictStr, key: StrictStr, default: Any = None) -> ScratchValue:
        """The value last set under `key` on this run's scratch pad, else `default`."""
        return ScratchValue(value=handles.reading(run_id).get_scratch(key, default))

    @server.tool()
    async def scratch(run_id: StrictStr) -> ScratchPad:
        """This run's whole scratch pad, key -> value."""
        return ScratchPad(scratch=handles.reading(run_id).scratch())

    @server.tool()
    async def store_page_map(
        run_id: StrictStr, url: StrictStr, page_map: dict[str, Any], step: StrictInt | None = None
    ) -> Recorded:
        """This run's understanding of the page at `url`: title, summary, total_width, total_height
        and regions (kind, name, description, elements, start_y, end_y); replaces an earlier map."""
        handles.writing(run_id).store_page_map(url, page_map, step=step)
        return Recorded()

    @server.tool()
    async def get_page_map(run_id: StrictStr, url: StrictStr) -> FoundPageMap:
        """The PageMap this run stored for `url` (null without one)."""
        return FoundPageMap(page_map=handles.reading(run_id).get_page_map(url))

    @server.tool()
    async def has_page_map(run_id: StrictStr, url: StrictStr) -> HasPageMap:
        """Whether this run stored a PageMap for `url`."""
        return HasPageMap(has_page_map=handles.reading(run_id).has_page_map(url))

    @server.tool()
    async def get_all_page_maps(run_id: StrictStr) -> PageMaps:
        """Every PageMap of this run, URL -> map."""
        return PageMaps(page_maps=handles.reading(run_id).get_all_page_maps())

    @server.tool()
    async def get_page_summary(run_id: StrictStr, url: StrictStr) -> PageSummary:
        """The summary of the page at `url` from its PageMap ("" without one)."""
        return PageSummary(summary=handles.reading(run_id).get_page_summary(url))

    # ---- runs: layered memory (seed 003): context, patterns, extractions, snapshots, sitemaps ----

    @server.tool()
    async def progress(run_id: StrictStr, turn: StrictInt, url: StrictStr) -> Recorded:
        """Where the run is (seed 000's run registry), every few turns."""
        handles.writing(run_id).progress(turn, url)
        return Recorded()

    @server.tool()
    async def infer_context(
        run_id: StrictStr,
        key: StrictStr,
        value: StrictStr,
        source: StrictStr,
        step: StrictInt | None = None,
        domain: StrictStr | None = None,
    ) -> InferredContext:
        """Context learned during the run on its site (or `domain`), recorded once per (domain, key,
        value); `recorded` is false when it was already known or memory is off for the run."""
        return InferredContext(
            recorded=handles.writing(run_id).infer_context(key, value, source, step=step, domain=domain)
        )

    @server.tool()
    async def patterns(run_id: StrictStr, domain: StrictStr | None = None) -> Patterns:
        """Learned patterns for the run's site (or `domain`), best first."""
        return Patterns(patterns=handles.reading(run_id).patterns(domain=domain))

    @server.tool()
    async def pattern_used(run_id: StrictStr, pattern_id: StrictStr) -> Recorded:
        """The agent followed a learned pattern: its success or failure is counted when the run
        finishes through this server (which keeps it until then)."""
        handles.writing(run_id).pattern_used(pattern_id)
        return Recorded()

    @server.tool()
    async def extraction(
        run_id: StrictStr,
        key: StrictStr,
        tool: StrictStr,
        url: StrictStr,
        extract: ExtractedPage,
        step: StrictInt | None = None,
    ) -> Extracted:
        """An extraction through the cache: `extract` is the page as the agent extracted it (title,
        text, links, section_count), recorded unless an extraction under `key` is younger than the
        policy's TTL: then that one is answered (`served_from_cache`) and logged as served."""
        page = extract.model_dump()
        return Extracted(extraction=handles.writing(run_id).extraction(key, tool, url, lambda: page, step=step))

    @server.tool()
    async def extractions(run_id: StrictStr, domain: StrictStr | None = None) -> Extractions:
        """The site's cached extractions, oldest first."""
        return Extractions(extractions=handles.reading(run_id).extractions(domain=domain))

    @server.tool()
    async def snapshot(
        run_id: StrictStr,
        url: StrictStr,
        title: StrictStr,
        summary: StrictStr,
        form_state: dict[StrictStr, StrictStr],
        scroll: Annotated[list[StrictInt], Field(min_length=2, max_length=2)],
        step: StrictInt,
    ) -> TakenSnapshot:
        """Seed 003's StateSnapshot at a navigation (`scroll` is [x, y]); returns its snapshot_id."""
        return TakenSnapshot(
            snapshot_id=handles.writing(run_id).snapshot(url, title, summary, form_state, (scroll[0], scroll[1]), step)
        )

    @server.tool()
    async def snapshots(run_id: StrictStr) -> Snapshots:
        """This run's snapshots, in the order they were taken."""
        return Snapshots(snapshots=handles.reading(run_id).snapshots())

    @server.tool()
    async def backtracked(
        run_id: StrictStr,
        snapshot_id: StrictStr,
        from_url: StrictStr,
        to_url: StrictStr,
        reason: StrictStr,
        avoided: list[StrictStr],
        step: StrictInt,
    ) -> Recorded:
        """Stuck: the agent went back to a snapshot, avoiding what led to the dead end."""
        handles.writing(run_id).backtracked(snapshot_id, from_url, to_url, reason, avoided, step)
        return Recorded()

    @server.tool()
    async def known_failure(
        run_id: StrictStr, command: StrictStr, args: dict[str, Any], url: StrictStr
    ) -> KnownFailure:
        """The action's signature when it already failed in this run, else null (writes nothing)."""
        return KnownFailure(signature=handles.reading(run_id).known_failure(command, args, url))

    @server.tool()
    async def repeated_failure(
        run_id: StrictStr, signature: StrictStr, action: StrictStr, url: StrictStr, response: StrictStr, step: StrictInt
    ) -> Recorded:
        """What the agent did about an action known to fail: chose otherwise, or went ahead warned."""
        handles.writing(run_id).repeated_failure(signature, action, url, response, step)
        return Recorded()

    @server.tool()
    async def short_term(run_id: StrictStr) -> ShortTermMemory:
        """This run's short-term memory: recent actions, failed signatures, loop warnings, path."""
        return ShortTermMemory(short_term=handles.reading(run_id).short_term())

    @server.tool()
    async def use_embedding(run_id: StrictStr, vector: list[Number], model: StrictStr) -> Recorded:
        """The vector of this run's internal state (its goal) by `model`: every step recorded from
        now on carries it, and step-memory retrieval compares intents by it."""
        handles.writing(run_id).use_embedding(vector, model)
        return Recorded()

    @server.tool()
    async def recorded_embedding(run_id: StrictStr, model: StrictStr) -> RecordedEmbedding:
        """This run's internal state as `model` embedded it for an earlier step (null if none did)."""
        return RecordedEmbedding(vector=handles.reading(run_id).recorded_embedding(model))

    @server.tool()
    async def exploration_started(
        run_id: StrictStr, homepage_url: StrictStr, max_depth: StrictInt, max_pages: StrictInt
    ) -> Recorded:
        """A sitemap exploration of the site of `homepage_url` begins."""
        handles.writing(run_id).exploration_started(homepage_url, max_depth, max_pages)
        return Recorded()

    @server.tool()
    async def sitemap_links(
        run_id: StrictStr,
        parent_url: StrictStr,
        depth: StrictInt,
        links: list[dict[StrictStr, StrictStr]],
        step: StrictInt,
    ) -> Recorded:
        """Links found on `parent_url` during an exploration."""
        handles.writing(run_id).sitemap_links(parent_url, depth, links, step)
        return Recorded()

    @server.tool()
    async def sitemap_visited(
        run_id: StrictStr,
        url: StrictStr,
        title: StrictStr,
        summary: StrictStr,
        section_count: StrictInt,
        depth: StrictInt,
        step: StrictInt,
    ) -> Recorded:
        """A page the exploration visited."""
        handles.writing(run_id).sitemap_visited(url, title, summary, section_count, depth, step)
        return Recorded()

    @server.tool()
    async def exploration_completed(
        run_id: StrictStr,
        homepage_url: StrictStr,
        visited: StrictInt,
        discovered: StrictInt,
        complete: StrictBool,
        summary: StrictStr,
    ) -> Recorded:
        """How the exploration of the site of `homepage_url` ended."""
        handles.writing(run_id).exploration_completed(homepage_url, visited, discovered, complete, summary)
        return Recorded()

    @server.tool()
    async def sitemap(run_id: StrictStr, domain: StrictStr | None = None) -> Sitemap:
        """The site's graph of pages (null before its first exploration)."""
        return Sitemap(sitemap=handles.reading(run_id).sitemap(domain=domain))

    # ---- the memory: recall outside a run (each one an event), runs by id ---------------------

    @server.tool()
    async def memory_tier1(
        run_id: StrictStr | None = None, step: StrictInt | None = 0, domain: StrictStr | None = None
    ) -> LessonsAnswer:
        """The Tier 1 lessons, outside a run or for run `run_id` at `step` (logs tier1_loaded)."""
        return LessonsAnswer(lessons=memory.tier1(run_id=run_id, step=step, domain=domain))

    @server.tool()
    async def memory_recall_domain(
        domain: StrictStr, run_id: StrictStr | None = None, step: StrictInt | None = None
    ) -> LessonsAnswer:
        """Lessons scoped to `domain` (or a parent domain), outside a run or for `run_id` (logs domain_recall)."""
        return LessonsAnswer(lessons=memory.recall_domain(domain, run_id=run_id, step=step))

    @server.tool()
    async def memory_recall_error(
        command: StrictStr,
        error: StrictStr,
        domain: StrictStr | None = None,
        run_id: StrictStr | None = None,
        step: StrictInt | None = None,
    ) -> LessonsAnswer:
        """Lessons for a failed command and its error (site lessons only on `domain`), outside a run
        or for `run_id` (logs error_recall)."""
        return LessonsAnswer(lessons=memory.recall_error(command, error, domain=domain, run_id=run_id, step=step))

    @server.tool()
    async def memory_recall_trajectory(
        goal: StrictStr, url: StrictStr, run_id: StrictStr | None = None, step: StrictInt | None = None
    ) -> RecalledTrajectory:
        """The reference trajectory for `goal` on the host of `url`, outside a run or for `run_id`;
        `recall` is null when none matches (logs trajectory_recalled)."""
        return RecalledTrajectory(recall=memory.recall_trajectory(goal, url, run_id=run_id, step=step))

    @server.tool()
    async def abandon_stale_runs(
        older_than: Annotated[Number | None, Field(ge=0, le=MAX_STALE_SECONDS)] = None,
    ) -> AbandonedRuns:
        """Finish as failed (reason "abandoned") every running run with no event for `older_than`
        seconds (default: the memory's stale_after, one hour); returns the run ids finished."""
        abandoned = memory.abandon_stale_runs(stale_limit(older_than))
        handles.drop(abandoned)
        return AbandonedRuns(abandoned=abandoned)

    # ---- the memory: state, audit, explain, experiment ---------------------------------------

    @server.tool()
    async def state(
        kind: StrictStr,
        as_of: StrictInt | StrictStr | None = None,
        domain: StrictStr | None = None,
        run: StrictStr | None = None,
    ) -> StateItems:
        """One projection's records (lessons, tier1, facts, sessions, selectors, trajectories, runs,
        short-term, patterns, context, snapshots, sitemap), now or at seq / ISO time `as_of`."""
        return StateItems(items=memory.state(kind, as_of=as_of, domain=domain, run=run))

    @server.tool()
    async def audit(run_id: StrictStr, step: StrictInt | None = None) -> Audit:
        """What run `run_id` knew at each step (or only `step`) and which events it came from:
        the content of `memtape audit RUN --json`."""
        return Audit.model_validate(memory.audit(run_id, step))

    @server.tool()
    async def explain(item: StrictStr, domain: StrictStr | None = None) -> Explained:
        """The whole life of one lesson, fact (id or key), selector or trajectory: recorded,
        deduplicated, recalled (in which runs), promoted, decayed, pruned, forgotten."""
        return Explained.model_validate(memory.explain(item, domain=domain))

    @server.tool()
    async def experiment(changes: dict[str, Any], until: StrictInt | StrictStr | None = None) -> dict[str, Any]:
        """Replay the log's observations under the policy with `changes` (Policy field -> value) and
        diff against what really happened: the content of `memtape experiment --set ... --json`."""
        return memory.experiment(changes, until=until)

    return server
