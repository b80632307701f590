"""The MCP face's stdio framing: every line read as HTTP reads a body, and every request answered.

The SDK's stdio transport reads stdin as UTF-8 with errors replaced (invalid bytes inside an
argument would be stored as U+FFFD, where HTTP refuses them) and drops the lines it cannot
validate as an MCP message (the client then waits until its own timeout). `LineReader` reads the
raw bytes itself and remembers, line by line, what came in; `answer` then gives the JSON-RPC
answer a line is owed instead of nothing, as JSON-RPC 2.0 says:

- a line that is not valid UTF-8: -32700 (parse error), naming the request's id when it has one;
- a JSON object with an id that is no valid request (`params` not an object, `jsonrpc` other than
  "2.0", `method` not a string): -32600 (invalid request) naming that id;
- a batch (an array): -32600 for each request in it that carries an id (MCP has no batches since
  its 2025-06-18 revision), or one with id null when none does.
"""

from __future__ import annotations

import json
from collections import deque
from typing import IO, Any

import anyio
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from memtape.ledger.jsonl import outline


def request_id(value: Any) -> int | str | None:
    """A JSON-RPC id as the answer may carry it (a bool is no id)."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


class LineReader:
    """stdin's lines for the SDK's transport, decoded strictly: each line read is also kept (its
    text, and whether its bytes were valid UTF-8) until `taken`, one per message the transport
    hands on, in the same order (the transport validates each line in turn)."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = anyio.wrap_file(source)
        self.read: deque[tuple[str, bool]] = deque()

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        raw = await self.source.readline()
        if not raw:
            raise StopAsyncIteration
        try:
            text, valid = raw.decode("utf-8"), True
        except UnicodeDecodeError:
            text, valid = raw.decode("utf-8", "replace"), False
        self.read.append((text, valid))
        return text

    def taken(self) -> tuple[str, bool]:
        """The line behind the next message the transport handed on (its text, valid UTF-8)."""
        return self.read.popleft() if self.read else ("", True)


def _error(id_: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=id_, error=ErrorData(code=code, message=message))


def _invalid(obj: dict[str, Any]) -> str | None:
    """Why a JSON object is no valid JSON-RPC request or notification (one line), or None."""
    if obj.get("jsonrpc") != "2.0":
        return f'jsonrpc must be "2.0", got {json.dumps(obj.get("jsonrpc"))[:40]}'
    if "method" in obj and not isinstance(obj["method"], str):
        return "method must be a string"
    if "params" in obj and not isinstance(obj["params"], dict):
        return "params must be an object (MCP names every argument)"
    return None


def answers(line: str, valid: bool, unread: list[JSONRPCError]) -> list[JSONRPCError]:
    """What a line is owed beyond what the SDK answers: a refusal of invalid UTF-8 (the message is
    then not handed on), of a batch, or of an object with an id that is no valid request; else
    `unread` (the transport's own refusal of a line it could not read, or nothing)."""
    if not valid:
        members, _ = outline(line)
        return [_error(request_id(members.get("id")), PARSE_ERROR, "not valid UTF-8; nothing was written")]
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return unread
    if isinstance(obj, list):
        ids = [request_id(m.get("id")) for m in obj if isinstance(m, dict) and request_id(m.get("id")) is not None]
        batch = "a batch (an array of messages): MCP takes one message per line; nothing was written"
        return [_error(i, INVALID_REQUEST, batch) for i in ids] or [_error(None, INVALID_REQUEST, batch)]
    if isinstance(obj, dict) and request_id(obj.get("id")) is not None:
        why = _invalid(obj)
        if why is not None:
            return [_error(request_id(obj["id"]), INVALID_REQUEST, f"{why}; nothing was written")]
    return unread
