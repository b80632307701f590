"""JSON Lines in: one event per line, payload fields at the top level.

Every line is validated before anything is written; the first bad line is
reported as one line naming its number and the problem.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import IO, Any

import orjson
from pydantic import ValidationError

from memtape.ledger.clock import normalize_ts
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import ENVELOPE_KEYS, EVENT_TYPES
from memtape.ledger.field_rules import INT64_MAX, MAX_DEPTH, check_domain, check_time, integral

#: the longest line, and the most a source that is not a regular file may give (a pipe, a device):
#: what the HTTP face takes as one request body (`memtape serve` refuses more with 413)
MAX_LINE_BYTES = 16 * 1024 * 1024
#: how much is read at a time: a line over the limit is refused after at most this much more
CHUNK_BYTES = 1024 * 1024


def read_source(source: IO[bytes], name: str) -> bytes:
    """The whole of `source` (a file, stdin), read in chunks with the HTTP face's limits, so that an
    endless or huge input is refused in one line within a second, never read into memory whole: a
    line over `MAX_LINE_BYTES`, or more than that from a source that is not a regular file (a pipe,
    `/dev/zero`: no size to trust; a regular file is bounded by its size)."""
    try:
        regular = stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's BytesIO): its size is its bound
        regular = True
    chunks: list[bytes] = []
    size = line = 0
    while True:
        try:
            chunk = source.read(CHUNK_BYTES)
        except OSError as exc:
            raise InvalidEvent(f"{name}: cannot read ({exc.strerror or exc}); nothing was written") from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        first = chunk.find(b"\n")  # lines inside a chunk are shorter than the limit
        if first >= 0 and line + first > MAX_LINE_BYTES:
            line += first
        else:
            line = line + len(chunk) if first < 0 else len(chunk) - chunk.rfind(b"\n") - 1
        if line > MAX_LINE_BYTES:
            raise InvalidEvent(f"{name}: a line over {MAX_LINE_BYTES} bytes; nothing was written")
        if not regular and size > MAX_LINE_BYTES:
            raise InvalidEvent(
                f"{name}: over {MAX_LINE_BYTES} bytes from a source that is not a regular file "
                "(a pipe or a device); give a file; nothing was written"
            )
        chunks.append(chunk)


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "function-after")
    msg = err.get("msg", "invalid").replace("Value error, ", "")
    return f"{loc}: {msg}" if loc else msg


def parse_event(obj: Any) -> NewEvent:
    """Build a NewEvent from one decoded JSON object (raises ValueError with a short reason)."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    type_ = obj.get("type")
    if not isinstance(type_, str):
        raise ValueError("missing 'type'")
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise ValueError(f"unknown event type {type_[:60]!r}")
    env = {k: obj[k] for k in ENVELOPE_KEYS if k in obj and k != "type"}
    payload = {k: v for k, v in obj.items() if k not in ENVELOPE_KEYS}
    for key in ("run_id", "domain", "stream", "id", "occurred_at", "recorded_at"):
        if key in env and env[key] is not None and not isinstance(env[key], str):
            raise ValueError(f"{key}: expected a string")
    if env.get("domain") is not None:
        check_domain(env["domain"], exact=True)
    if env.get("step") is not None:
        env["step"] = integral(env["step"])
        if not isinstance(env["step"], int) or isinstance(env["step"], bool) or not 0 <= env["step"] <= INT64_MAX:
            raise ValueError(f"step: expected an integer from 0 to {INT64_MAX}")
    recorded = env.pop("recorded_at", None)
    if recorded is not None:  # the store sets recorded time; a supplied one is when it occurred
        check_time(recorded, "recorded_at")
        if env.get("occurred_at") is None:
            env["occurred_at"] = recorded
    if env.get("occurred_at") is not None:
        env["occurred_at"] = normalize_ts(check_time(env["occurred_at"]))
    try:
        model = cls.model_validate(_integers(payload), strict=True, context={"exact": True})
    except ValidationError as exc:
        raise ValueError(f"{type_}.{first_error(exc)}") from exc
    try:
        return NewEvent(payload=model, **env)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc).splitlines()[0]) from exc


def _integers(value: Any) -> Any:
    """JSON has one number type: 3.0 is the integer 3 (as JSON Schema's "integer" says), wherever it is."""
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return integral(value)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {duplicate[:60]!r}")
    return obj


def parse_lines(data: bytes) -> list[NewEvent]:
    """Parse a whole JSON Lines document; blank lines are skipped."""
    events: list[NewEvent] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidEvent(f"line {number}: not valid UTF-8; nothing was written") from None
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidEvent(
                f"line {number}: malformed JSON ({str(exc).splitlines()[0][:80]}); nothing was written"
            ) from None
        try:
            obj = json.loads(raw, object_pairs_hook=_unique_keys)  # exact integers; duplicate keys refused
            events.append(parse_event(obj))
        except ValueError as exc:
            reason = str(exc).splitlines()[0][:200].encode("unicode_escape").decode("ascii")
            raise InvalidEvent(f"line {number}: {reason}; nothing was written") from None
    return events


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
                raw[key] = line[start : token.start()].strip()
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


def nested_too_deep(what: str, deepest: int) -> str:
    """The one-line refusal of JSON text nested past what the door reads (`outline` measures it
    where a parser gives up)."""
    return f"{what} nests {deepest} levels deep; memtape reads at most {MAX_DEPTH}; nothing was written"
