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
from collections.abc import Callable, Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import Tool
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from memtape.api import Memory, MemtapeError
from memtape.face_models import RunHandles
from memtape.ledger.field_rules import MAX_DEPTH, check_value
from memtape.ledger.jsonl import first_error, nested_too_deep, outline
from memtape.mcp_frames import LineReader
from memtape.mcp_frames import answers as frame_answers
from memtape.operations import OPERATIONS, Operation, body_arguments, compact

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

#: what `memtape mcp` offers by default: the calls of a run and its audit (`--tools all`: every call)
COMPACT_INSTRUCTIONS = (
    "memtape is an auditable memory for browser agents. Call start_run at the start of a task and keep its "
    "run_id; tier1 for the lessons to keep in mind; recall_domain on entering a site; recall_error after a "
    "failed action; record_step after each action; record_lesson and observe_fact when you learn something; "
    "finish_run at the end (it learns from the run); search finds anything memory holds by its words. "
    "audit shows what a run knew and where it came from, explain the life of one item."
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


_STRICT: dict[Any, Any] = {str: StrictStr, int: StrictInt, bool: StrictBool, float: Number}


def strict(annotation: Any) -> Any:
    """A tool argument's type taking JSON's own types only (no "3" for 3), as a body's fields do."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in _STRICT:
        return _STRICT[annotation]
    if origin is Annotated:  # the schema it carries (an enumeration) kept, its type made strict
        return Annotated[(strict(args[0]), *annotation.__metadata__)]  # type: ignore[valid-type]
    if origin in (Union, UnionType):
        return Union[tuple(strict(arg) for arg in args)]  # noqa: UP007 (a union built from a tuple)
    if origin in (list, Sequence):
        return list[strict(args[0])]  # type: ignore[misc]
    if origin in (dict, Mapping):
        return dict[strict(args[0]), strict(args[1])]  # type: ignore[misc]
    return annotation


def tool_parameters(operation: Operation) -> list[inspect.Parameter]:
    """A tool's arguments: the run's `run_id` for a `Run` method, then the library call's."""
    taken = []
    if operation.on_run:
        taken.append(inspect.Parameter("run_id", inspect.Parameter.KEYWORD_ONLY, annotation=StrictStr))
    for argument in operation.arguments():
        field = Field(description=argument.description) if argument.description else Field()
        annotation = Annotated[(strict(argument.annotation), *argument.metadata, field)]  # type: ignore[valid-type]
        taken.append(
            inspect.Parameter(
                argument.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=argument.default
            )
        )
    return taken


def add_tool(
    server: MemoryServer, operation: Operation, memory: Memory, handles: RunHandles, *, structured: bool = True
) -> None:
    """`operation` as a tool: the same library call with the same arguments, its answer one object
    (as JSON text, and `structured` also as structured content declared by an output schema)."""

    async def tool(**given: Any) -> Any:
        arguments = given
        if operation.body is not None:  # the body's fields, as the library takes them (the run's id aside)
            fields = {name: value for name, value in given.items() if not (operation.on_run and name == "run_id")}
            arguments = {**given, **body_arguments(operation.body, fields)}
        return operation.tool_answering(operation.perform(memory, handles, arguments))

    tool.__name__ = operation.name  # the SDK names the argument and answer schemas after it
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        tool_parameters(operation), return_annotation=operation.tool_answer or operation.answer
    )
    server.add_tool(tool, operation.name, description=operation.doc, structured_output=structured)


def build_server(
    memory: Memory, operations: Sequence[Operation] = OPERATIONS, *, tools: Literal["all", "compact"] = "all"
) -> MemoryServer:
    """The MCP server over one opened memory: a tool for each of `operations` (memtape/operations.py),
    or only those of the compact set, whose answers come as JSON text without output schemas (the
    definitions every conversation carries stay under 16,000 characters). Tools are coroutines that
    call the library in the event loop's thread: the store's connection is never shared across
    threads, and calls are applied one at a time in the order they arrive."""
    offered = compact(operations) if tools == "compact" else operations
    server = MemoryServer(
        "memtape", instructions=COMPACT_INSTRUCTIONS if tools == "compact" else INSTRUCTIONS, log_level="WARNING"
    )
    handles = RunHandles(memory)
    for operation in offered:
        add_tool(server, operation, memory, handles, structured=tools == "all")
    return server
