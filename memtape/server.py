"""`memtape serve`: the public API (`memtape.open`) as an HTTP JSON API.

Each route calls the library method of the same name, so a request logs
exactly the events the Python call logs: an agent in any language gets the
memory a Python agent gets. Bodies and answers are memtape/face_models.py's
pydantic models (the MCP server's too): every answer is serialized through
its model, so the OpenAPI document at `GET /openapi.json` declares what is
sent, each route's error statuses included.

Requests are handled one at a time on the server's event loop: the ledger
serializes appends anyway, and one writer per process keeps the SQLite
connection on one thread. Before a route runs, memtape/http_guard.py checks
the Host, the caller's origin, the bearer token, the body's type and size.
Every error, from a route or from those checks, is `{"error": "<one line>"}`
mapped from the exception's type in this module's handlers; bad input
writes nothing.

A run's truth is the ledger, not a server: any number of servers on one
memory may record into one run, and a write the run no longer takes (a step
after it finished, a second finish, a step number again with other content)
answers 409 naming the run. Every POST takes an `Idempotency-Key` header
(1 to 255 characters): the first request with a key is answered and its answer
recorded in the same transaction as its writes (a `request_answered` event);
the same key with the same method, path and body gets that answer again
(header `Idempotent-Replayed: true`) and writes nothing, on any server of the
ledger and after a restart; the same key with another request answers 422
(as the IETF Idempotency-Key draft asks). Only answers that wrote are kept: a
refused request writes nothing, so it may be sent again with its key (and
`POST /experiment`, which writes nothing, answers afresh).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from importlib.metadata import version
from inspect import Parameter
from types import UnionType
from typing import Any, Union, get_args, get_origin

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from memtape.api import Memory, MemtapeError
from memtape.face_models import Appended, Error, RunHandles
from memtape.http_calls import Calling, DirectCalls, PreparedCall
from memtape.http_frames import JsonFramesProtocol
from memtape.http_guard import SERVER_HEADER_BYTES, OriginGate, RequestGuard, ServeRefused, listen, request_digest
from memtape.ledger.clock import normalize_ts
from memtape.ledger.errors import (
    AnswerGone,
    ConcurrencyConflict,
    DiskFull,
    InvalidEvent,
    KeyReused,
    LedgerLocked,
    UnknownItem,
)
from memtape.ledger.jsonl import nested_too_deep, outline, parse_lines
from memtape.operations import OPERATIONS, Operation
from memtape.projections.cache.materialize import FoldProgress
from memtape.projections.pin import caller_refusal
from memtape.projections.recording.warming import warm
from memtape.viewer import PREFIX as VIEWER
from memtape.viewer import viewer_app

try:
    from memtape.httptools_frames import JsonToolsFramesProtocol
except ImportError:  # httptools is in the [server] extra, but a platform may have no wheel of it: h11 then
    #: the HTTP/1.1 parsers `memtape serve --http` takes, the one used by default first
    PARSERS: dict[str, type[asyncio.Protocol]] = {"h11": JsonFramesProtocol}
else:
    PARSERS = {"httptools": JsonToolsFramesProtocol, "h11": JsonFramesProtocol}

PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_KEY_CHARS = 255

REFUSALS: dict[int, str] = {
    400: "Bad input: the library refused it, or the body is not standard JSON; nothing was written",
    401: "No bearer token, or the wrong one",
    403: "A Host this server does not answer to, or a request from another origin",
    404: "No such run or item (and, on any path, no such route)",
    409: "A write the run no longer takes (it finished, or the step was recorded with other content), "
    "or the ledger is locked",
    413: "A body over 16 MB",
    415: "A body that is not application/json (application/x-ndjson for POST /events)",
    422: "A body or parameter of the wrong shape or type, or an Idempotency-Key sent with another request",
    500: "An internal error (a bug): its type only",
    507: "The disk holding the ledger is full; nothing was written",
}
#: what a route without a body can answer; one with a body adds 413 and 415
QUERY_REFUSALS = (400, 401, 403, 404, 409, 422, 500, 507)
BODY_REFUSALS = (*QUERY_REFUSALS, 413, 415)


DESCRIPTION = """An event-sourced memory ledger for LLM browser agents: the Python API (`memtape.open`) over HTTP.
Each route makes the library call it names, so it logs exactly the events the Python call logs.

Every error, on every path (an unknown route and a wrong method included), is `{"error": "<one line>"}`
(the `Error` schema) with its status; bad input writes nothing. Every request but this document needs
`Authorization: Bearer TOKEN` unless the server was started with --no-token. Every POST that writes
takes an `Idempotency-Key` header: the same key with the same request gets the first answer again."""

IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "The same key with the same request gets the first answer again and writes nothing "
    "(header Idempotent-Replayed: true); with another request, 422.",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS},
}


def _unqualified(spec: dict[str, Any]) -> dict[str, Any]:
    """pydantic names two classes of one name by their modules (the ledger's `TrajectoryStep` and
    the projection's): the event's is called `RecordedTrajectoryStep`, the projection's keeps its name."""
    text = json.dumps(spec)
    for qualified in [name for name in spec.get("components", {}).get("schemas", {}) if "__" in name]:
        short = qualified.rsplit("__", 1)[1]
        short = f"Recorded{short}" if qualified.startswith("memtape__ledger__") else short
        text = text.replace(f'"{qualified}"', f'"{short}"').replace(f'/schemas/{qualified}"', f'/schemas/{short}"')
    return json.loads(text)  # type: ignore[no-any-return]


def documented(spec: dict[str, Any], token: str | None) -> dict[str, Any]:
    """FastAPI's document, completed with what the middleware and the POST wrapper do: the bearer
    scheme (and 401) only where a token is asked for, the Idempotency-Key header on every POST."""
    spec = _unqualified(spec)
    for item in spec["paths"].values():
        for method, operation in item.items():
            if method == "post":
                operation.setdefault("parameters", []).append(IDEMPOTENCY_KEY)
            if token is None:
                operation["responses"].pop("401", None)
    if token is not None:
        spec.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        spec["security"] = [{"bearer": []}]
    return spec


def refusals(statuses: Iterable[int]) -> dict[int | str, dict[str, Any]]:
    """The error answers a route declares: each `{"error": "<one line>"}` (`Error`)."""
    return {status: {"model": Error, "description": REFUSALS[status]} for status in sorted(statuses)}


_SEQ = re.compile(r"[0-9]+")
_LARGEST_SEQ_DIGITS = 19  # 2**63 - 1


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500] or "bad request"


def _not_a_json_number(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


class JSONRequest(Request):
    """A request whose JSON body is standard JSON: Python's parser would take NaN and Infinity.
    A body nested past what its parser's recursion reaches is refused as the door refuses it,
    in one line saying how deep it nests (FastAPI would answer a bare "error parsing the body")."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = json.loads(body, parse_constant=_not_a_json_number)
            except RecursionError:
                _members, deepest = outline(body.decode("utf-8", "replace"))
                raise HTTPException(400, nested_too_deep("the request body", deepest)) from None
        return self._json


class JSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(JSONRequest(request.scope, request.receive))  # type: ignore[no-any-return]

        return handle


def as_of_point(raw: str | None) -> int | str | None:
    """`as_of` from a query string: ASCII digits are a seq, anything else must be an ISO time
    (`²`, `１２`, NaN, -1 are neither)."""
    if raw is None:
        return None
    if _SEQ.fullmatch(raw):
        if len(raw.lstrip("0")) > _LARGEST_SEQ_DIGITS:  # int() of thousands of digits is refused, or slow
            raise MemtapeError(f"as_of {raw[:20]}...: beyond the largest seq a ledger holds (2**63-1)")
        return int(raw)
    try:
        return normalize_ts(raw)
    except (ValueError, OverflowError):
        raise MemtapeError(f"as_of {raw[:40]!r}: expected a seq (digits 0-9) or an ISO time") from None


def _status(exc: MemtapeError) -> int:
    if isinstance(exc, UnknownItem):
        return 404
    if isinstance(exc, KeyReused):
        return 422
    if isinstance(exc, (ConcurrencyConflict, LedgerLocked)):
        return 409
    if isinstance(exc, DiskFull):
        return 507
    if isinstance(exc, AnswerGone):
        return 410
    return 400


def refusal(exc: MemtapeError) -> JSONResponse:
    """A library refusal as every face of the server answers it: its one line, its status."""
    return JSONResponse({"error": _one_line(str(exc) or type(exc).__name__)}, status_code=_status(exc))


#: arguments naming a point in the log: over HTTP a text, a seq (ASCII digits) or an ISO time
POINTS = frozenset({"as_of", "until"})

#: how a route answers a POST that writes: `work()` once per Idempotency-Key, with its status
Answered = Callable[[Request, Callable[[], Any], int], Awaitable[JSONResponse]]


def _listed(annotation: Any) -> bool:
    """A list (or an optional one): a query parameter repeated, not a body."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return any(get_origin(member) in (list, Sequence) for member in members)


def route_parameters(operation: Operation) -> list[Parameter]:
    """The route's parameters: the path's, then the body, or else the library call's arguments
    with their defaults as query parameters (a list one repeated)."""
    taken = [Parameter("request", Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    taken += [
        Parameter(name, Parameter.KEYWORD_ONLY, annotation=operation.schemas.get(name, str))
        for name in operation.path_names
    ]
    if operation.body is not None:
        return [*taken, Parameter("body", Parameter.KEYWORD_ONLY, annotation=operation.body)]
    for argument in operation.arguments():
        if argument.name in operation.path_names or argument.name in operation.http_omits:
            continue
        annotation, default = argument.annotation, argument.default
        if argument.name in POINTS:
            annotation, default = str | None, Query(default=None, description="a seq or an ISO time")
        elif _listed(annotation):
            default = Query() if default is Parameter.empty else Query(default)
        if argument.name in operation.query_names:
            alias = operation.query_names[argument.name]
            default = Query(alias=alias) if default is Parameter.empty else Query(default, alias=alias)
        taken.append(Parameter(argument.name, Parameter.KEYWORD_ONLY, annotation=annotation, default=default))
    return taken


def calling(memory: Memory, handles: RunHandles, answered: Answered) -> Calling:
    """How an operation's call is made and answered, on FastAPI's routes and on the lean path
    (memtape/http_calls.py) alike: a POST that writes once per Idempotency-Key, anything else
    as the library's value for the route's answer model."""

    async def call(operation: Operation, arguments: dict[str, Any], request: Request) -> Any:
        for name in POINTS & arguments.keys():
            if isinstance(arguments[name], str):
                arguments[name] = as_of_point(arguments[name])

        def work() -> Any:
            return operation.answering(operation.perform(memory, handles, arguments))

        return await answered(request, work, operation.status) if operation.idempotent else work()

    return call


def add_route(app: FastAPI, operation: Operation, call: Calling) -> None:
    """`operation` as a route documented by the library call it makes (its operationId the row's)."""

    async def endpoint(request: Request, **given: Any) -> Any:
        body = given.pop("body", None)
        return await call(operation, {**given, **(body.arguments() if body is not None else {})}, request)

    endpoint.__signature__ = inspect.Signature(route_parameters(operation))  # type: ignore[attr-defined]
    app.add_api_route(
        operation.path,
        endpoint,
        methods=[operation.method],
        name=operation.route_name,
        response_model=operation.answer,
        status_code=operation.status,
        responses=refusals(BODY_REFUSALS if operation.body is not None else QUERY_REFUSALS),
        summary=operation.summary,
        description=inspect.getdoc(operation.call),
    )


def idempotent(memory: Memory, handles: RunHandles) -> Answered:
    """How a POST that writes is answered: `work()` once per Idempotency-Key (see the module's docstring)."""

    async def answered(request: Request, work: Callable[[], Any], status: int = 200) -> JSONResponse:
        key = request.headers.get("idempotency-key")
        if key is None:
            return JSONResponse(jsonable_encoder(work()), status_code=status)
        if not 0 < len(key) <= MAX_KEY_CHARS:
            raise InvalidEvent(f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters")
        asked = request_digest(request.method, request.url.path, await request.body())
        try:
            code, body, replayed = memory.once(key, asked, lambda: (status, jsonable_encoder(work())))
        except BaseException:
            handles.drop()  # a run object may hold what was rolled back
            raise
        return JSONResponse(body, status_code=code, headers={"Idempotent-Replayed": "true"} if replayed else None)

    return answered


def add_guards(app: FastAPI, token: str | None, host: str, allow_hosts: Iterable[str], cors: tuple[str, ...]) -> None:
    """The door's checks (memtape/http_guard.py): the last added runs first: the Host and origin,
    then CORS (answering allowed preflights), then the token and body."""
    app.add_middleware(
        RequestGuard,
        token=token,
        public_paths=PUBLIC_PATHS,
        max_body=MAX_BODY_BYTES,
        cors=bool(cors),
        own_gates=(VIEWER,),
    )
    if cors:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
            max_age=600,
        )
    app.add_middleware(OriginGate, host=host, allow_hosts=allow_hosts, cors_origins=cors)


def add_error_handlers(app: FastAPI) -> None:
    """Every error as `{"error": "<one line>"}`, its status from the exception's type."""

    @app.exception_handler(MemtapeError)
    async def refused(_request: Request, exc: MemtapeError) -> JSONResponse:
        return refusal(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return JSONResponse(
                {"error": _one_line(f"request body is not JSON: {first.get('ctx', {}).get('error', '')}")},
                status_code=400,
            )
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse({"error": _one_line(f"{where}: {first.get('msg', 'invalid request')}")}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        """Starlette's own: 404 for an unknown route, 405 for a wrong method, 400 for a body it cannot parse."""
        where = f"{request.method} {request.url.path}"[:200]
        message = {404: f"no route {where}", 405: f"method not allowed: {where}"}.get(exc.status_code, str(exc.detail))
        return JSONResponse({"error": _one_line(message)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def failed(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"internal error ({type(exc).__name__})"}, status_code=500)


def add_append_route(app: FastAPI, memory: Memory, handles: RunHandles, answered: Answered) -> None:
    """POST /events: raw events for an importer (HTTP only, so not a row of the table of operations)."""

    @app.post(
        "/events",
        response_model=Appended,
        responses=refusals(BODY_REFUSALS),
        summary="memtape append",
        description="Events as JSON Lines, exactly as `memtape append` takes them, appended in one transaction "
        "(no line that writes Tier 1 text: a seed, a promotion, a pin, a Tier 1 lesson).",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-ndjson": {
                        "schema": {
                            "type": "string",
                            "description": "JSON Lines, exactly as `memtape append` takes them",
                        }
                    }
                },
            }
        },
    )
    async def append(request: Request) -> Any:
        lines = parse_lines(await request.body())
        refusal = caller_refusal(lines)
        if refusal is not None:
            raise InvalidEvent(refusal)

        def work() -> Appended:
            recorded = memory.append(lines)
            handles.drop()  # a run finished by these lines must not be recorded into from a stale object
            if not recorded:
                return Appended(appended=0)
            return Appended(appended=len(recorded), first_seq=recorded[0].seq, last_seq=recorded[-1].seq)

        return await answered(request, work, 200)


def create_app(
    memory: Memory,
    token: str | None = None,
    *,
    host: str = "127.0.0.1",
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
    operations: Sequence[Operation] = OPERATIONS,
) -> FastAPI:
    """The HTTP API over one open memory (the caller keeps and closes it), answering to `host`
    (the bound address) and `allow_hosts`, to pages of `cors_origins` only, and with `token` to
    requests bearing it (None: to any local caller): a route for each of `operations`
    (memtape/operations.py), and POST /events."""
    app = FastAPI(
        title="memtape",
        version=version("memtape"),
        description=DESCRIPTION,
        generate_unique_id_function=lambda route: route.name,
    )  # operationId: the library call's name
    app.router.route_class = JSONRoute
    handles = RunHandles(memory)
    answered = idempotent(memory, handles)
    call = calling(memory, handles, answered)
    app.mount(VIEWER, viewer_app(memory, token))  # the web viewer: memtape/viewer/
    prepared = {op.route_name: PreparedCall(op, route_parameters(op), _listed) for op in operations}
    app.add_middleware(DirectCalls, routes=app.router.routes, prepared=prepared, calling=call, refusing=refusal)
    add_guards(app, token, host, allow_hosts, tuple(cors_origins))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = documented(
                get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes), token
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    add_error_handlers(app)
    for operation in operations:
        add_route(app, operation, call)
    add_append_route(app, memory, handles, answered)
    return app


def chosen_parser(parser: str | None) -> str:
    """The name of the parser to serve with: `parser` if installed (ServeRefused if not), else the default."""
    if parser is not None and parser not in PARSERS:
        raise ServeRefused(f"--http {parser}: not installed here (choose from {', '.join(PARSERS)})")
    return parser or next(iter(PARSERS))


def serve(
    memory: Memory,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
    announce: Callable[[str], None] = print,
    progress: FoldProgress | None = None,
    parser: str | None = None,
) -> None:
    """Serve `memory` until interrupted (uvicorn, one process). The port is bound, then the
    memory's caches warmed (`warm`: caught up, every state decoded; `progress` is told as it goes),
    before anything is said: `announce` gets the URL only once the server can answer on it at once.
    `parser` names one of PARSERS (default: the first, httptools where it is installed)."""
    parser = chosen_parser(parser)
    sock = listen(host, port)
    try:
        warm(memory, progress)
    except BaseException:
        sock.close()
        raise
    # what the warm-up decoded lives as long as the server: out of the collector's walks (at
    # 1,000,000 events a full collection walks 1.6 GB of states; the first `/ui/` after the
    # warm-up read in 3.7-4.3 s with them walked, 1.2-1.6 s frozen: docs/benchmarks.md)
    gc.freeze()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    app = create_app(memory, token, host=host, allow_hosts=allow_hosts, cors_origins=cors_origins)
    announce(f"http://{shown}:{bound}")
    run_app(app, sock, parser)


def run_app(app: ASGIApp, sock: socket.socket, parser: str | None = None) -> None:
    """Run `app` on the bound `sock` until interrupted, with `memtape serve`'s uvicorn settings
    (bench/server.py runs its do-nothing app through here too: the machine's floor, same settings)."""
    try:
        uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,  # below the warning level anyway: its per-request formatting is skipped
                http=PARSERS[chosen_parser(parser)],
                h11_max_incomplete_event_size=SERVER_HEADER_BYTES,
            )
        ).run(sockets=[sock])
    finally:
        sock.close()
