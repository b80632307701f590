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

import inspect
import json
import re
from collections.abc import Callable, Iterable
from importlib.metadata import version
from inspect import Parameter
from typing import Any, get_origin, get_type_hints

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from memtape.api import Lesson, Memory, MemtapeError, Run, TrajectoryRecall
from memtape.face_models import (
    AbandonBody,
    AbandonedRuns,
    Appended,
    Audit,
    BacktrackBody,
    Body,
    ContextBody,
    EmbeddingBody,
    Error,
    ExperimentBody,
    Explained,
    ExplorationEndBody,
    ExplorationStartBody,
    ExtractionBody,
    FactBody,
    FinishBody,
    Finished,
    InferredContext,
    InferredContextBody,
    KnownFailure,
    KnownFailureBody,
    LessonBody,
    ObservedFact,
    PageMapBody,
    PatternUsedBody,
    ProgressBody,
    Recorded,
    RecordedEmbedding,
    RecordedLesson,
    RecordedStep,
    RepeatedFailureBody,
    RunHandles,
    RunStart,
    ScratchBody,
    ScratchValue,
    SelectorBody,
    SitemapLinksBody,
    SitemapVisitBody,
    SnapshotBody,
    StartedRun,
    StepBody,
    TakenSnapshot,
    UserContextBody,
    finished,
    stale_limit,
)
from memtape.http_guard import OriginGate, RequestGuard, listen, request_digest
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
from memtape.projections.pin import caller_refusal
from memtape.projections.recording.values import Extraction
from memtape.viewer import PREFIX as VIEWER
from memtape.viewer import viewer_app

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


def create_app(
    memory: Memory,
    token: str | None = None,
    *,
    host: str = "127.0.0.1",
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
) -> FastAPI:
    """The HTTP API over one open memory (the caller keeps and closes it), answering to `host`
    (the bound address) and `allow_hosts`, to pages of `cors_origins` only, and with `token` to
    requests bearing it (None: to any local caller)."""
    app = FastAPI(
        title="memtape",
        version=version("memtape"),
        description=DESCRIPTION,
        generate_unique_id_function=lambda route: route.name,
    )  # operationId: the library call's name
    app.router.route_class = JSONRoute
    handles = RunHandles(memory)
    cors = tuple(cors_origins)

    async def answered(request: Request, work: Callable[[], BaseModel], status: int = 200) -> JSONResponse:
        """The answer of a POST: `work()` once per Idempotency-Key (see the module's docstring)."""
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

    def post(
        path: str, answer: Any, call: Callable[..., Any], status: int = 200, **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A POST route answering `answer`, documented by the library call it makes."""
        return app.post(
            path,
            response_model=answer,
            status_code=status,
            responses=refusals(BODY_REFUSALS),
            summary=call.__qualname__.replace("Run.", "run.").replace("Memory.", "mem."),
            description=inspect.getdoc(call),
            **options,
        )

    def get(
        path: str, answer: Any, call: Callable[..., Any], **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A GET route answering `answer`, documented by the library call it makes."""
        return app.get(
            path,
            response_model=answer,
            responses=refusals(QUERY_REFUSALS),
            summary=call.__qualname__.replace("Run.", "run.").replace("Memory.", "mem."),
            description=inspect.getdoc(call),
            **options,
        )

    def run_read(
        path: str,
        answer: Any,
        call: Callable[..., Any],
        handle: Callable[[str], Run] = handles.reading,
        reply: Callable[[Any], Any] = lambda value: value,
    ) -> None:
        """GET `path`: `call` on the run's handle (`handles.writing` for a recall, which logs an
        event), its arguments the library's with their defaults as query parameters (a list one
        repeated), answering `reply` of its value as `answer`."""
        hints = get_type_hints(call)
        taken = [Parameter("run_id", Parameter.KEYWORD_ONLY, annotation=str)]
        for p in list(inspect.signature(call).parameters.values())[1:]:
            default = p.default
            if get_origin(hints[p.name]) is list:  # a query parameter, not a body
                default = Query() if default is Parameter.empty else Query(default)
            taken.append(Parameter(p.name, Parameter.KEYWORD_ONLY, annotation=hints[p.name], default=default))

        async def read(run_id: str, **arguments: Any) -> Any:
            return reply(getattr(handle(run_id), call.__name__)(**arguments))

        read.__signature__ = inspect.Signature(taken)  # type: ignore[attr-defined]
        get(path, answer, call, name=call.__name__)(read)

    def run_write(
        path: str,
        call: Callable[..., Any],
        body: type[Body],
        answer: Any = Recorded,
        reply: Callable[[Any], Any] = lambda _: Recorded(),
    ) -> None:
        """POST `path`: `call` on the run's handle to record into, with `body` (exactly the
        library's arguments), once per Idempotency-Key, answering `reply` of its value as `answer`."""

        async def write(request: Request, run_id: str, body: Body) -> Any:
            return await answered(
                request, lambda: reply(getattr(handles.writing(run_id), call.__name__)(**body.arguments()))
            )

        write.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                Parameter("request", Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
                Parameter("run_id", Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
                Parameter("body", Parameter.POSITIONAL_OR_KEYWORD, annotation=body),
            ]
        )
        post(path, answer, call, name=call.__name__)(write)

    # the last added runs first: the Host and origin, then CORS (answering allowed preflights), then the token and body
    app.mount(VIEWER, viewer_app(memory, token))  # the web viewer: memtape/viewer/
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

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = documented(
                get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes), token
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(MemtapeError)
    async def refused(_request: Request, exc: MemtapeError) -> JSONResponse:
        return JSONResponse({"error": _one_line(str(exc) or type(exc).__name__)}, status_code=_status(exc))

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

    # ---- runs: what happened --------------------------------------------------------------

    @post("/runs", StartedRun, Memory.start_run, status=201)
    async def start_run(request: Request, body: RunStart) -> Any:
        def work() -> StartedRun:
            run = handles.keep(memory.start_run(**body.model_dump()))
            return StartedRun(run_id=run.run_id, session_id=run.session_id)

        return await answered(request, work, 201)

    run_write("/runs/{run_id}/steps", Run.record_step, StepBody, RecordedStep, lambda e: RecordedStep(event_id=e))
    run_write(
        "/runs/{run_id}/lessons", Run.record_lesson, LessonBody, RecordedLesson, lambda i: RecordedLesson(lesson_id=i)
    )

    @post("/runs/{run_id}/facts", ObservedFact, Run.observe_fact)
    async def observe_fact(request: Request, run_id: str, body: FactBody) -> Any:
        def work() -> ObservedFact:
            run = handles.writing(run_id)
            domain = body.domain if body.domain is not None else run.domain
            run.observe_fact(**body.model_dump())
            return ObservedFact(domain=domain, kind=body.kind, key=body.key)

        return await answered(request, work)

    run_write("/runs/{run_id}/selectors", Run.selector_result, SelectorBody)
    run_write("/runs/{run_id}/context", Run.record_context, ContextBody)

    @post("/runs/{run_id}/finish", Finished, Run.finish)
    async def finish(request: Request, run_id: str, body: FinishBody) -> Any:
        def work() -> Finished:
            learned = handles.writing(run_id).finish(**body.model_dump())
            handles.drop([run_id])
            return finished(run_id, body.success, learned)

        return await answered(request, work)

    run_write("/runs/{run_id}/progress", Run.progress, ProgressBody)

    # ---- runs: recall (each one an event) and plain reads ------------------------------------

    run_read("/runs/{run_id}/tier1", list[Lesson], Run.tier1, handles.writing)
    run_read("/runs/{run_id}/recall/domain", list[Lesson], Run.recall_domain, handles.writing)
    run_read("/runs/{run_id}/recall/error", list[Lesson], Run.recall_error, handles.writing)
    run_read("/runs/{run_id}/recall/trajectory", TrajectoryRecall | None, Run.recall_trajectory, handles.writing)
    run_read("/runs/{run_id}/sessions", list[SessionEntry], Run.sessions)
    run_read("/runs/{run_id}/facts", list[Fact], Run.facts)
    run_read("/runs/{run_id}/selectors", list[SelectorEntry], Run.selectors)
    run_read("/runs/{run_id}/step_memories", list[StepMemory], Run.step_memories)
    run_read("/runs/{run_id}/loop_warnings", list[str], Run.loop_warnings)
    run_read("/runs/{run_id}/prompt_context", list[ContextEntry], Run.prompt_context)
    run_read("/runs/{run_id}/relevant_context", list[ContextEntry], Run.relevant_context)
    run_read("/runs/{run_id}/patterns", list[Pattern], Run.patterns)
    run_read("/runs/{run_id}/extractions", list[ContextEntry], Run.extractions)
    run_read("/runs/{run_id}/snapshots", list[Snapshot], Run.snapshots)
    run_read("/runs/{run_id}/sitemap", SiteMap | None, Run.sitemap)
    run_read("/runs/{run_id}/short_term", ShortTerm, Run.short_term)
    run_read(
        "/runs/{run_id}/embedding",
        RecordedEmbedding,
        Run.recorded_embedding,
        reply=lambda v: RecordedEmbedding(vector=v),
    )

    @post("/runs/{run_id}/known_failure", KnownFailure, Run.known_failure)
    async def known_failure(run_id: str, body: KnownFailureBody) -> Any:
        # it writes nothing, so an Idempotency-Key changes nothing (as for /experiment)
        return KnownFailure(signature=handles.reading(run_id).known_failure(**body.arguments()))

    # ---- runs: working memory and layered memory (seed 003) ----------------------------------

    run_write("/runs/{run_id}/user_context", Run.give_context, UserContextBody)
    run_write(
        "/runs/{run_id}/inferred_context",
        Run.infer_context,
        InferredContextBody,
        InferredContext,
        lambda recorded: InferredContext(recorded=recorded),
    )
    run_write("/runs/{run_id}/scratch", Run.set_scratch, ScratchBody)
    run_read("/runs/{run_id}/scratch", dict[str, Any], Run.scratch)

    # a key holds anything, a slash too; `default` is the caller's own (a key never set answers null)
    @get("/runs/{run_id}/scratch/{key:path}", ScratchValue, Run.get_scratch)
    async def get_scratch(run_id: str, key: str) -> Any:
        return ScratchValue(value=handles.reading(run_id).get_scratch(key))

    run_write("/runs/{run_id}/page_maps", Run.store_page_map, PageMapBody)
    run_read("/runs/{run_id}/page_maps", dict[str, PageMap], Run.get_all_page_maps)
    run_read("/runs/{run_id}/page_map", PageMap | None, Run.get_page_map)
    run_read("/runs/{run_id}/has_page_map", bool, Run.has_page_map)
    run_read("/runs/{run_id}/page_summary", str, Run.get_page_summary)
    run_write("/runs/{run_id}/patterns_used", Run.pattern_used, PatternUsedBody)
    run_write("/runs/{run_id}/embedding", Run.use_embedding, EmbeddingBody)
    run_write("/runs/{run_id}/extractions", Run.extraction, ExtractionBody, Extraction, lambda found: found)
    run_write(
        "/runs/{run_id}/snapshots", Run.snapshot, SnapshotBody, TakenSnapshot, lambda i: TakenSnapshot(snapshot_id=i)
    )
    run_write("/runs/{run_id}/backtracked", Run.backtracked, BacktrackBody)
    run_write("/runs/{run_id}/repeated_failure", Run.repeated_failure, RepeatedFailureBody)
    run_write("/runs/{run_id}/exploration/started", Run.exploration_started, ExplorationStartBody)
    run_write("/runs/{run_id}/sitemap/links", Run.sitemap_links, SitemapLinksBody)
    run_write("/runs/{run_id}/sitemap/visited", Run.sitemap_visited, SitemapVisitBody)
    run_write("/runs/{run_id}/exploration/completed", Run.exploration_completed, ExplorationEndBody)

    # ---- the memory: recall outside a run (each one an event), runs by id ---------------------

    @get("/tier1", list[Lesson], Memory.tier1)
    async def memory_tier1(run_id: str | None = None, step: int | None = 0, domain: str | None = None) -> Any:
        return memory.tier1(run_id=run_id, step=step, domain=domain)

    @get("/recall/domain", list[Lesson], Memory.recall_domain)
    async def memory_recall_domain(domain: str, run_id: str | None = None, step: int | None = None) -> Any:
        return memory.recall_domain(domain, run_id=run_id, step=step)

    @get("/recall/error", list[Lesson], Memory.recall_error)
    async def memory_recall_error(
        command: str, error: str, domain: str | None = None, run_id: str | None = None, step: int | None = None
    ) -> Any:
        return memory.recall_error(command, error, domain=domain, run_id=run_id, step=step)

    @get("/recall/trajectory", TrajectoryRecall | None, Memory.recall_trajectory)
    async def memory_recall_trajectory(goal: str, url: str, run_id: str | None = None, step: int | None = None) -> Any:
        return memory.recall_trajectory(goal, url, run_id=run_id, step=step)

    @post("/runs/abandon_stale", AbandonedRuns, Memory.abandon_stale_runs)
    async def abandon_stale_runs(request: Request, body: AbandonBody) -> Any:
        def work() -> AbandonedRuns:
            abandoned = memory.abandon_stale_runs(stale_limit(body.older_than))
            handles.drop(abandoned)
            return AbandonedRuns(abandoned=abandoned)

        return await answered(request, work)

    # ---- the memory: state, audit, explain, experiment ---------------------------------------

    @get("/state/{kind}", list[dict[str, Any]], Memory.state)
    async def state(
        kind: str,
        as_of: str | None = Query(default=None, description="a seq or an ISO time"),
        domain: str | None = None,
        run: str | None = None,
    ) -> Any:
        return memory.state(kind, as_of=as_of_point(as_of), domain=domain, run=run)

    @get("/audit/{run_id}", Audit, Memory.audit)
    async def audit(run_id: str, step: int | None = None) -> Any:
        return memory.audit(run_id, step=step)

    @get("/explain/{item:path}", Explained, Memory.explain)  # an XPath selector holds slashes
    async def explain(item: str, domain: str | None = None) -> Any:
        return memory.explain(item, domain=domain)

    @post("/experiment", dict[str, Any], Memory.experiment)
    async def experiment(body: ExperimentBody) -> Any:
        # it writes nothing, so an Idempotency-Key changes nothing: the same question gets a fresh answer
        until = as_of_point(body.until) if isinstance(body.until, str) else body.until
        return memory.experiment(body.changes, until=until)

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

        return await answered(request, work)

    return app


def serve(
    memory: Memory,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    cors_origins: Iterable[str] = (),
    announce: Callable[[str], None] = print,
) -> None:
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
