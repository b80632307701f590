"""The lean path of `memtape serve`: a call of the table of operations answered without FastAPI's
per-request machinery.

Profiled (docs/benchmarks.md, "The lean network path"), FastAPI's work around a route (its
exception and exit-stack middleware, the content-type parsing, dependency solving, the endpoint
context) cost about as much per request as the library's own `record_step`. This layer sits
behind the door's checks (memtape/http_guard.py: Host, origin, token, body type and size all
still run first) and in front of FastAPI. A request that FastAPI would route to an operation
(matched by the routes' own `matches`, in their order) and whose path, query and body validate
against the very types FastAPI would check them with is answered here: the same library call,
the same Idempotency-Key handling, the answer validated and serialized through the same model.
Anything else (a parameter or body FastAPI would refuse, JSON that is not standard JSON, any
other route) goes on to FastAPI untouched, so every refusal is still FastAPI's, word for word:
this path takes only what FastAPI would take, and nothing has been written when it hands over.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from inspect import Parameter
from typing import Any

from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memtape.api import MemtapeError
from memtape.operations import Operation

#: what answers an operation's call: (operation, its arguments, the request) -> a Response, or the
#: library's value for the answer model to serialize (server.py's `calling`, FastAPI's endpoints too)
Calling = Callable[[Operation, dict[str, Any], Request], Awaitable[Any]]
#: a library refusal as the server's error handlers answer it
Refusing = Callable[[MemtapeError], Response]

_REQUIRED = object()


class _Refused(Exception):
    """A value FastAPI would refuse: the request goes on to FastAPI, which says so in its words."""


def _not_a_json_number(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class QueryArgument:
    """One query parameter as FastAPI takes it: the last value (every value of a list), or its default."""

    name: str
    adapter: TypeAdapter[Any]
    listed: bool
    default: Any

    def value(self, query: QueryParams) -> Any:
        given: Any = query.getlist(self.name) if self.listed else query.get(self.name)
        if given is None or (self.listed and not given):
            if self.default is _REQUIRED:
                raise _Refused(self.name)
            return copy.deepcopy(self.default)  # as FastAPI: a caller may change the value it gets
        try:
            return self.adapter.validate_python(given)
        except ValidationError:
            raise _Refused(self.name) from None


class PreparedCall:
    """An operation's route, ready to take a request: the adapters of its path, query and answer."""

    def __init__(self, operation: Operation, parameters: Sequence[Parameter], listed: Callable[[Any], bool]):
        self.operation = operation
        self.path = {name: TypeAdapter(operation.schemas.get(name, str)) for name in operation.path_names}
        self.query = [
            QueryArgument(p.name, TypeAdapter(p.annotation), listed(p.annotation), _default(p.default))
            for p in parameters
            if p.kind is Parameter.KEYWORD_ONLY and p.name not in self.path and p.name != "body"
        ]
        self.answer: TypeAdapter[Any] = TypeAdapter(operation.answer)

    def arguments(self, path_params: dict[str, Any], scope: Scope, body: bytes) -> dict[str, Any]:
        """The library call's arguments, or _Refused where FastAPI would refuse the request."""
        try:
            taken = {name: adapter.validate_python(path_params[name]) for name, adapter in self.path.items()}
        except (KeyError, ValidationError):
            raise _Refused("path") from None
        if self.operation.body is None:
            query = QueryParams(scope.get("query_string", b""))
            return {**taken, **{argument.name: argument.value(query) for argument in self.query}}
        if _content_type(scope) != b"application/json" or not body:
            raise _Refused("body")
        try:
            parsed = json.loads(body, parse_constant=_not_a_json_number)
            given = self.operation.body.model_validate(parsed)
        except (ValueError, RecursionError, ValidationError):  # JSONDecodeError is a ValueError
            raise _Refused("body") from None
        return {**taken, **given.arguments()}

    def response(self, value: Any) -> Response:
        """The answer as FastAPI's serialization of the route's response model makes it."""
        if isinstance(value, Response):
            return value
        checked = self.answer.validate_python(value, from_attributes=True)
        content = self.answer.dump_json(checked, by_alias=True)
        return Response(content, status_code=self.operation.status, media_type="application/json")


def _default(default: Any) -> Any:
    if isinstance(default, FieldInfo):
        default = default.default
    return _REQUIRED if default is Parameter.empty or default is PydanticUndefined else default


def _content_type(scope: Scope) -> bytes:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower()
    return b""


class DirectCalls:
    """ASGI: answers the table's calls it can take (see the module's docstring), hands on the rest."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Sequence[BaseRoute],
        prepared: dict[str, PreparedCall],
        calling: Calling,
        refusing: Refusing,
    ):
        self.app = app
        self.routes = routes  # the router's own list: the routes FastAPI matches, in its order
        self.prepared = prepared
        self.calling = calling
        self.refusing = refusing

    def _matched(self, scope: Scope) -> tuple[PreparedCall, dict[str, Any]] | None:
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                prepared = self.prepared.get(route.name) if isinstance(route, APIRoute) else None
                if prepared is None or scope["method"] != prepared.operation.method:
                    return None
                return prepared, child["path_params"]
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._matched(scope) if scope["type"] == "http" else None
        if matched is None:
            await self.app(scope, receive, send)
            return
        prepared, path_params = matched
        chunks: list[bytes] = []
        while True:  # the door (RequestGuard) has read the whole body, bounded: it comes in one message
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replay = _replaying(body, receive)
        try:
            arguments = prepared.arguments(path_params, scope, body)
        except _Refused:
            await self.app(scope, replay, send)
            return
        try:
            response = prepared.response(await self.calling(prepared.operation, arguments, Request(scope, replay)))
        except MemtapeError as exc:
            response = self.refusing(exc)
        await response(scope, replay, send)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` for the next reader: the body once more, then whatever the client sends."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
