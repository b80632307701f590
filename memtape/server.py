"""`memtape serve`: the public API (`memtape.open`) as an HTTP JSON API.

Each route calls the library method of the same name, so a request logs
exactly the events the Python call logs: an agent in any language gets the
memory a Python agent gets. The OpenAPI document is at `GET /openapi.json`.

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
refused request writes nothing, so it may be sent again with its key.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from importlib.metadata import version
from typing import Any

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from memtape.api import Memory, MemtapeError, Run, plain
from memtape.http_guard import OriginGate, RequestGuard, listen
from memtape.ledger.clock import normalize_ts
from memtape.ledger.errors import ConcurrencyConflict, DiskFull, InvalidEvent, KeyReused, LedgerLocked, UnknownItem
from memtape.ledger.jsonl import parse_lines
from memtape.projections.pin import caller_refusal

PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_KEY_CHARS = 255


class Body(BaseModel):
    """Request bodies take exactly their fields, with JSON's own types (no "3" for 3)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class RunStart(Body):
    goal: str
    start_url: str
    session_id: str | None = None


class StepBody(Body):
    step: int
    action: str
    target: str | None = None
    url: str | None = None
    ok: bool
    error: str | None = None
    args: dict[str, Any] | None = None
    #: a value typed into a password field: every argument is masked and the value scrubbed from the run
    sensitive: bool = False


class LessonBody(Body):
    text: str
    category: str = "error_recovery"
    failed_command: str | None = None
    error_pattern: str | None = None
    scope_domain: str | None = None
    step: int | None = None


class FactBody(Body):
    kind: str
    key: str
    value: str
    step: int | None = None


class SelectorBody(Body):
    element: str
    selector: str
    ok: bool
    step: int | None = None


class ContextBody(Body):
    items: list[dict[str, Any]]
    step: int
    budget: int | None = None
    #: what counted the items' `tokens` (the agent's tokenizer); items without a count are counted by the server
    counted_by: str | None = None


class FinishBody(Body):
    success: bool
    outcome: str = ""


class RunId(BaseModel):
    run_id: str
    session_id: str


class Appended(BaseModel):
    appended: int
    first_seq: int | None = None
    last_seq: int | None = None


class Recorded(BaseModel):
    ok: bool = True
    id: str | None = Field(default=None, description="The lesson id, for a lesson.")


class Error(BaseModel):
    """Every error the server answers, whatever its status."""

    error: str = Field(description="One line saying what was wrong.")


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": what} for status, what in (
        (400, "Bad input: the library refused it, or the body is not JSON; nothing was written"),
        (401, "No bearer token, or the wrong one"),
        (403, "A Host this server does not answer to, or a request from another origin"),
        (404, "No such run or route"),
        (409, "A write the run no longer takes, or the ledger moved underneath the request"),
        (413, "A body over 16 MB"),
        (415, "A body that is not application/json or application/x-ndjson"),
        (422, "A body or parameter of the wrong shape or type, or an Idempotency-Key sent with another request"),
        (507, "The disk holding the ledger is full; nothing was written"))}

_SEQ = re.compile(r"[0-9]+")
_LARGEST_SEQ_DIGITS = 19  # 2**63 - 1


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500] or "bad request"


def _not_a_json_number(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


class JSONRequest(Request):
    """A request whose JSON body is standard JSON: Python's parser would take NaN and Infinity."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json.loads(await self.body(), parse_constant=_not_a_json_number)
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
    return 400


def create_app(memory: Memory, token: str | None = None, *, host: str = "127.0.0.1", allow_hosts: Iterable[str] = (),
               cors_origins: Iterable[str] = ()) -> FastAPI:
    """The HTTP API over one open memory (the caller keeps and closes it), answering to `host`
    (the bound address) and `allow_hosts`, to pages of `cors_origins` only, and with `token` to
    requests bearing it (None: to any local caller)."""
    app = FastAPI(title="memtape", version=version("memtape"), responses=ERRORS,
                  description="An event-sourced memory ledger for LLM browser agents: the library's API over HTTP.")
    app.router.route_class = JSONRoute
    live: dict[str, Run] = {}
    cors = tuple(cors_origins)

    async def answered(request: Request, work: Callable[[], Any], status: int = 200) -> JSONResponse:
        """The answer of a POST: `work()` once per Idempotency-Key (see the module's docstring)."""
        key = request.headers.get("idempotency-key")
        if key is None:
            return JSONResponse(jsonable_encoder(work()), status_code=status)
        if not 0 < len(key) <= MAX_KEY_CHARS:
            raise InvalidEvent(f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters")
        asked = hashlib.sha256(f"{request.method} {request.url.path}\n".encode() + await request.body()).hexdigest()
        try:
            code, body, replayed = memory.once(key, asked, lambda: (status, jsonable_encoder(work())))
        except BaseException:
            live.clear()  # a run object may hold what was rolled back
            raise
        return JSONResponse(body, status_code=code, headers={"Idempotent-Replayed": "true"} if replayed else None)

    def run_of(run_id: str) -> Run:
        run = live.get(run_id)
        if run is None or run.finished:
            run = memory.run(run_id)
            live[run_id] = run
        return run

    # the last added runs first: the Host and origin, then CORS (answering allowed preflights), then the token and body
    app.add_middleware(RequestGuard, token=token, public_paths=PUBLIC_PATHS, max_body=MAX_BODY_BYTES, cors=bool(cors))
    if cors:
        app.add_middleware(CORSMiddleware, allow_origins=list(cors), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key"], max_age=600)
    app.add_middleware(OriginGate, host=host, allow_hosts=allow_hosts, cors_origins=cors)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            if token is not None:
                spec.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
                spec["security"] = [{"bearer": []}]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(MemtapeError)
    async def refused(_request: Request, exc: MemtapeError) -> JSONResponse:
        return JSONResponse({"error": _one_line(str(exc) or type(exc).__name__)}, status_code=_status(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return JSONResponse({"error": _one_line(f"request body is not JSON: {first.get('ctx', {}).get('error', '')}")},
                                status_code=400)
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

    @app.post("/runs", response_model=RunId, status_code=201)
    async def start_run(request: Request, body: RunStart) -> Any:
        def work() -> RunId:
            run = memory.start_run(goal=body.goal, start_url=body.start_url, session_id=body.session_id)
            live[run.run_id] = run
            return RunId(run_id=run.run_id, session_id=run.session_id)
        return await answered(request, work, 201)

    @app.post("/runs/{run_id}/steps", response_model=Recorded)
    async def record_step(request: Request, run_id: str, body: StepBody) -> Any:
        def work() -> Recorded:
            run_of(run_id).record_step(step=body.step, action=body.action, target=body.target, url=body.url,
                                       ok=body.ok, error=body.error, args=body.args, sensitive=body.sensitive)
            return Recorded()
        return await answered(request, work)

    @app.post("/runs/{run_id}/lessons", response_model=Recorded)
    async def record_lesson(request: Request, run_id: str, body: LessonBody) -> Any:
        def work() -> Recorded:
            return Recorded(id=run_of(run_id).record_lesson(body.text, category=body.category,
                                                            failed_command=body.failed_command,
                                                            error_pattern=body.error_pattern,
                                                            scope_domain=body.scope_domain, step=body.step))
        return await answered(request, work)

    @app.post("/runs/{run_id}/facts", response_model=Recorded)
    async def observe_fact(request: Request, run_id: str, body: FactBody) -> Any:
        def work() -> Recorded:
            run_of(run_id).observe_fact(kind=body.kind, key=body.key, value=body.value, step=body.step)
            return Recorded()
        return await answered(request, work)

    @app.post("/runs/{run_id}/selectors", response_model=Recorded)
    async def selector_result(request: Request, run_id: str, body: SelectorBody) -> Any:
        def work() -> Recorded:
            run_of(run_id).selector_result(element=body.element, selector=body.selector, ok=body.ok, step=body.step)
            return Recorded()
        return await answered(request, work)

    @app.post("/runs/{run_id}/context", response_model=Recorded)
    async def record_context(request: Request, run_id: str, body: ContextBody) -> Any:
        def work() -> Recorded:
            run = run_of(run_id)
            if body.budget is None:
                run.record_context(items=body.items, step=body.step, counted_by=body.counted_by)
            else:
                run.record_context(items=body.items, step=body.step, budget=body.budget, counted_by=body.counted_by)
            return Recorded()
        return await answered(request, work)

    @app.post("/runs/{run_id}/finish")
    async def finish(request: Request, run_id: str, body: FinishBody) -> Any:
        def work() -> Any:
            learned = run_of(run_id).finish(success=body.success, outcome=body.outcome)
            live.pop(run_id, None)
            return plain(learned)
        return await answered(request, work)

    @app.get("/runs/{run_id}/recall/error")
    async def recall_error(run_id: str, command: str, error: str, step: int | None = None) -> Any:
        return plain(run_of(run_id).recall_error(command=command, error=error, step=step))

    @app.get("/runs/{run_id}/recall/domain")
    async def recall_domain(run_id: str, step: int | None = None) -> Any:
        return plain(run_of(run_id).recall_domain(step=step))

    @app.get("/runs/{run_id}/recall/trajectory")
    async def recall_trajectory(run_id: str, step: int | None = None) -> Any:
        return plain(run_of(run_id).recall_trajectory(step=step))

    @app.get("/runs/{run_id}/tier1")
    async def tier1(run_id: str) -> Any:
        return plain(run_of(run_id).tier1())

    @app.get("/state/{projection}")
    async def state(projection: str, as_of: str | None = Query(default=None, description="a seq or an ISO time"),
                    domain: str | None = None) -> Any:
        return memory.state(projection, as_of=as_of_point(as_of), domain=domain)

    @app.get("/audit/{run_id}")
    async def audit(run_id: str, step: int | None = None) -> Any:
        return memory.audit(run_id, step=step)

    @app.post("/events", response_model=Appended,
              openapi_extra={"requestBody": {"required": True, "content": {"application/x-ndjson": {
                  "schema": {"type": "string", "description": "JSON Lines, exactly as `memtape append` takes them"}}}}})
    async def append(request: Request) -> Any:
        lines = parse_lines(await request.body())
        refusal = caller_refusal(lines)
        if refusal is not None:
            raise InvalidEvent(refusal)

        def work() -> Appended:
            recorded = memory.append(lines)
            live.clear()  # a run finished by these lines must not be recorded into from a stale object
            if not recorded:
                return Appended(appended=0)
            return Appended(appended=len(recorded), first_seq=recorded[0].seq, last_seq=recorded[-1].seq)
        return await answered(request, work)

    return app


def serve(memory: Memory, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          allow_hosts: Iterable[str] = (), cors_origins: Iterable[str] = (),
          announce: Callable[[str], None] = print) -> None:
    """Serve `memory` until interrupted (uvicorn, one process). The port is bound before anything
    is said: `announce` gets the URL only once the server can answer on it."""
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    app = create_app(memory, token, host=host, allow_hosts=allow_hosts, cors_origins=cors_origins)
    announce(f"http://{shown}:{bound}")
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        sock.close()
