"""`memtape mcp`: the library's runs and recall as Model Context Protocol tools over stdio.

An MCP client (Claude Desktop, an IDE, an agent framework) starts `memtape mcp` as a
subprocess and calls tools whose arguments are the library's (`memtape.api`), plus the
`run_id` that `start_run` returned wherever a `Run` method needs one. Each tool makes the
same library call the Python API makes, so the ledger records exactly the same events.
A bad argument is a tool error carrying the library's one-line message; nothing is written.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import StrictBool, StrictInt, StrictStr, ValidationError

from memtape.api import Lesson, Memory, MemtapeError
from memtape.commands.runs import finished
from memtape.ledger.events import MAX_DEPTH, check_value
from memtape.ledger.jsonl import first_error

INSTRUCTIONS = (
    "memtape is an auditable memory for browser agents. Call start_run at the start of a task, tier1 for "
    "the lessons to keep in mind, recall_domain on entering a site, recall_error after a failed action, "
    "record_step after each action, record_lesson when you learn something, and finish_run at the end "
    "(post-run learning turns failure->recovery into lessons). audit shows what a run knew and where it came from."
)


#: a JSON string or one of JSON's structural characters (numbers and literals lie between them)
JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]')


def outline(line: str) -> tuple[dict[str, Any], int]:
    """A JSON object's top-level members whose value is a number, a string, true, false or null, and
    how deeply the line nests, read without recursion: a line too deep (or otherwise unreadable) for
    a parser still names the request it carries."""
    raw: dict[str, str] = {}
    depth = deepest = 0
    key: str | None = None
    start = -1
    for token in JSON_TOKEN.finditer(line):
        mark = token.group()
        if mark[0] == '"':
            if depth == 1 and start < 0:
                key = mark
        elif mark == ":":
            start = token.end() if depth == 1 else start
        elif mark in "{[":
            depth += 1
            deepest = max(deepest, depth)
        else:
            if depth == 1 and key is not None and start >= 0:
                raw[key] = line[start:token.start()].strip()
                key, start = None, -1
            depth -= mark != ","
    members: dict[str, Any] = {}
    for name, value in raw.items():
        if value[:1] not in ("{", "["):
            try:
                members[json.loads(name)] = json.loads(value)
            except ValueError:
                continue
    return members, deepest


def _request_id(value: Any) -> int | str | None:
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _unreadable(line: str, deepest: int, reason: str) -> str:
    """Why the SDK could not read `line`, in the door's words."""
    if deepest > MAX_DEPTH:
        return f"the message nests {deepest} levels deep; memtape reads at most {MAX_DEPTH}; nothing was written"
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
        return JSONRPCError(jsonrpc="2.0", id=_request_id(members.get("id")), error=ErrorData(code=PARSE_ERROR, message=why))
    if isinstance(exc, ValidationError) and isinstance(given, dict) and "method" in given and _request_id(given.get("id")) is not None:
        return JSONRPCError(jsonrpc="2.0", id=_request_id(given["id"]),
                            error=ErrorData(code=INVALID_REQUEST, message=first_error(exc)))
    return None


class MemoryServer(MCPServer):
    """The SDK's server, with every anticipated failure as one line for the model to read: a
    MemtapeError (bad argument, unknown run) or arguments that fail the input schema. Anything
    else stays a crash (the SDK hides its text from the client)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
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
        """The SDK's stdio transport, with each line it cannot read answered at once (`refusal`)."""
        async with stdio_server() as (lines, answers):
            screened_in, screened = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def screen() -> None:
                async with screened_in:
                    async for item in lines:
                        if not isinstance(item, Exception):
                            await screened_in.send(item)
                        elif (answer := refusal(item)) is not None:
                            await answers.send(SessionMessage(answer))

            async with anyio.create_task_group() as tg:
                tg.start_soon(screen)
                await self._lowlevel_server.run(screened, answers, self._lowlevel_server.create_initialization_options())


def _lessons(lessons: list[Lesson]) -> dict[str, Any]:
    """Recall's answer as one JSON object (`{"lessons": [...]}`): one text block for the model, even
    when no lesson matched."""
    return {"lessons": [asdict(lesson) for lesson in lessons]}


def build_server(memory: Memory) -> MemoryServer:
    """The MCP server over one opened memory. Tools are coroutines that call the library in the
    event loop's thread: the store's connection is never shared across threads, and calls are
    applied one at a time in the order they arrive."""
    server = MemoryServer("memtape", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def start_run(goal: StrictStr, start_url: StrictStr, session_id: StrictStr | None = None) -> dict[str, Any]:
        """Start a run (stale runs are abandoned first) and return its run_id and session_id."""
        run = memory.start_run(goal=goal, start_url=start_url, session_id=session_id)
        return {"run_id": run.run_id, "session_id": run.session_id}

    @server.tool()
    async def tier1(run_id: StrictStr) -> dict[str, Any]:
        """The Tier 1 lessons for the system prompt of run `run_id` (logs tier1_loaded)."""
        return _lessons(memory.run(run_id).tier1())

    @server.tool()
    async def recall_domain(run_id: StrictStr, step: StrictInt | None = None,
                            domain: StrictStr | None = None) -> dict[str, Any]:
        """Lessons for the site the run is on (or `domain`), on entering it (logs domain_recall)."""
        return _lessons(memory.run(run_id).recall_domain(step=step, domain=domain))

    @server.tool()
    async def recall_error(run_id: StrictStr, command: StrictStr, error: StrictStr, step: StrictInt | None = None,
                           domain: StrictStr | None = None) -> dict[str, Any]:
        """Lessons for a failed command and its error message on the run's site (logs error_recall)."""
        return _lessons(memory.run(run_id).recall_error(command=command, error=error, step=step, domain=domain))

    @server.tool()
    async def record_step(run_id: StrictStr, step: StrictInt, action: StrictStr, target: StrictStr | None = None,
                          url: StrictStr | None = None, ok: StrictBool = True,
                          error: StrictStr | None = None, args: dict[str, Any] | None = None,
                          sensitive: StrictBool = False) -> dict[str, Any]:
        """One action the agent took: `target` names the element as `role "name"`, `url` is the page
        (default: where the last step ended), `args` its arguments; `sensitive` (a value typed into a
        password field) masks every argument. Returns the step_recorded event id."""
        event_id = memory.run(run_id).record_step(step=step, action=action, target=target, url=url, ok=ok,
                                                  error=error, args=args, sensitive=sensitive)
        return {"event_id": event_id}

    @server.tool()
    async def record_lesson(run_id: StrictStr, text: StrictStr, category: StrictStr = "error_recovery",
                            failed_command: StrictStr | None = None, error_pattern: StrictStr | None = None,
                            scope_domain: StrictStr | None = None, step: StrictInt | None = None) -> dict[str, Any]:
        """A lesson the agent learned (deduplicated and promoted like every lesson). With
        failed_command and error_pattern, recall_error finds it after the same failure."""
        lesson_id = memory.run(run_id).record_lesson(text, category=category, failed_command=failed_command,
                                                     error_pattern=error_pattern, scope_domain=scope_domain,
                                                     step=step)
        return {"lesson_id": lesson_id}

    @server.tool()
    async def observe_fact(run_id: StrictStr, kind: StrictStr, key: StrictStr, value: StrictStr,
                           step: StrictInt | None = None, domain: StrictStr | None = None) -> dict[str, Any]:
        """App knowledge about the run's site (or `domain`): kind is timing, selector, pattern or quirk.
        The same value confirms a fact, a different one contradicts it."""
        run = memory.run(run_id)
        run.observe_fact(kind=kind, key=key, value=value, step=step, domain=domain)
        return {"domain": domain if domain is not None else run.domain, "kind": kind, "key": key}

    @server.tool()
    async def finish_run(run_id: StrictStr, success: StrictBool, outcome: StrictStr = "") -> dict[str, Any]:
        """Finish the run: post-run learning from its recorded steps (lessons, facts, selectors, the
        trajectory of a success). Returns what was learned."""
        return finished(run_id, success, memory.finish_run(run_id, success=success, outcome=outcome))

    @server.tool()
    async def audit(run_id: StrictStr, step: StrictInt | None = None) -> dict[str, Any]:
        """What run `run_id` knew at each step (or only `step`) and which events it came from:
        the content of `memtape audit RUN --json`."""
        return memory.audit(run_id, step)

    return server
