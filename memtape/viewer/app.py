"""The viewer's routes under `/ui/`: one function per page, each a few reads through the public
API (`pages.py`) rendered by a Jinja2 template with autoescaping on, so memory text (a lesson
holding `<script>`) is shown as text and never runs.

The app is mounted into `memtape serve`'s FastAPI app (memtape/server.py), behind the same Host
and origin checks; instead of the bearer header the API asks for, `gate.py` checks the viewer's
cookie. Handlers are `async`: like the API's routes they run one at a time on the server's event
loop, so the memory's connection stays on one thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from memtape.api import Memory, MemtapeError
from memtape.ledger.errors import UnknownItem
from memtape.projections.state_rows import OUTCOMES
from memtape.viewer import charts, pages
from memtape.viewer.gate import COOKIE, SecurityHeaders, judge

PREFIX = "/ui"
HERE = Path(__file__).parent
#: paths (under the prefix) anyone may fetch: the stylesheet and script hold no memory
OPEN_PATHS = ("/static/",)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["segment"] = lambda value: quote(str(value), safe="")
    env.filters["query"] = lambda values: urlencode({k: v for k, v in values.items() if v not in (None, "")})
    env.filters["shown"] = shown
    env.globals["ui"] = PREFIX
    return env


def shown(value: Any) -> str:
    """A record's field as a person reads it: nothing as a dash, yes/no, a float to 3 places, a list joined."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "—"
    return str(value)


class Gatekeeper:
    """The viewer behind the token (gate.py): logs a login link in, refuses a caller without the cookie."""

    def __init__(self, app: ASGIApp, token: str | None, env: Environment):
        self.app, self.token, self.env = app, token, env

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path = request.url.path
        inner = path[len(PREFIX) :] if path.startswith(PREFIX) else path
        if inner.startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        verdict = judge(self.token, path, list(request.query_params.multi_items()), Headers(scope=scope))
        if verdict.allowed:
            await self.app(scope, receive, send)
            return
        if verdict.redirect is not None and verdict.cookie is not None:
            answer: Response = RedirectResponse(verdict.redirect, status_code=303)
            answer.set_cookie(COOKIE, verdict.cookie, httponly=True, samesite="strict", path=PREFIX)
        else:
            answer = _html(self.env, "message.html", {"title": "Log in", "message": verdict.reason}, 401)
        await answer(scope, receive, send)


def _html(env: Environment, template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    return HTMLResponse(env.get_template(template).render(**context), status_code=status)


def _one(request: Request, name: str) -> str | None:
    """A query parameter given once (a repeated one is refused, as the API's are)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise MemtapeError(f"{name} given {len(values)} times: give it once")
    return values[0] if values else None


def viewer_app(memory: Memory, token: str | None) -> ASGIApp:
    """The viewer of `memory` (mounted at PREFIX), behind `token` (None: --no-token)."""
    env = _environment()
    reads = pages.Reads(memory)

    def render(template: str, **context: Any) -> HTMLResponse:
        return _html(env, template, context)

    async def index(request: Request) -> Response:
        site, session, result = _one(request, "site"), _one(request, "session"), _one(request, "outcome")
        number = pages.page_number(_one(request, "page"))
        return render(
            "runs.html",
            title="Runs",
            page=pages.runs(reads, number, site=site or None, session=session or None, result=result or None),
            outcomes=OUTCOMES,
            filters={"site": site, "session": session, "outcome": result},
            funnel=charts.funnel(pages.funnel(reads)),
        )

    async def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        audit = reads.audit(run_id)
        number = pages.page_number(_one(request, "page"))
        started = int(audit["run"]["started_seq"])
        return render(
            "run.html",
            title=f"Run {run_id}",
            audit=audit,
            page=pages.paged(audit["steps"], number),
            tokens=pages.step_tokens,
            taught=pages.taught(reads, run_id),
            before_run=max(started - 1, 0),
        )

    async def step(request: Request) -> Response:
        run_id, raw = request.path_params["run_id"], request.path_params["n"]
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
            raise MemtapeError(f"a step is a whole number, got {raw[:40]!r}")
        audit = reads.audit(run_id, step=int(raw))
        steps = [s["step"] for s in reads.audit(run_id)["steps"]]
        here = audit["steps"][0]
        at = steps.index(here["step"])
        return render(
            "step.html",
            title=f"Run {run_id} step {here['step']}",
            audit=audit,
            s=here,
            credit=reads.credit(),
            previous=steps[at - 1] if at > 0 else None,
            following=steps[at + 1] if at + 1 < len(steps) else None,
        )

    async def item(request: Request) -> Response:
        item_id = request.path_params["item_id"]
        explained = reads.explain(item_id, domain=_one(request, "domain") or None)
        number = pages.page_number(_one(request, "page"))
        chart = None
        if explained["kind"] == "fact":
            chart = charts.line(pages.confidence_points(explained["life"]), floor=reads.policy.fact_prune_below)
        return render(
            "item.html",
            title=f"{explained['kind'].capitalize()} {item_id}",
            e=explained,
            records=pages.records_now(explained),
            page=pages.paged(explained["life"], number),
            chart=chart,
        )

    async def diff(request: Request) -> Response:
        start, end = _one(request, "from"), _one(request, "to")
        number = pages.page_number(_one(request, "page"))
        changes = None
        if start or end:
            if not start or not end:
                raise MemtapeError("a diff needs both from= and to= (a seq, an ISO time or a run id)")
            changes = reads.diff(start.strip(), end.strip())
        shown = pages.paged(changes or [], number)
        return render(
            "diff.html",
            title="Diff",
            start=start or "",
            end=end or "",
            page=shown,
            grouped=pages.changes_by_projection(shown.rows),
            asked=changes is not None,
        )

    async def search(request: Request) -> Response:
        query = _one(request, "q") or ""
        return render(
            "search.html", title="Search", q=query, found=pages.search(reads, query), item_kinds=pages.ITEM_KINDS
        )

    async def refused(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, UnknownItem) else 400
        message = " ".join(str(exc).split())[:500] or type(exc).__name__
        return _html(
            env, "message.html", {"title": "Not found" if status == 404 else "Refused", "message": message}, status
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = {404: f"no page {request.url.path[:200]}", 405: "only GET reads the viewer"}.get(
            exc.status_code, str(exc.detail)
        )
        return _html(env, "message.html", {"title": "Not found", "message": message}, exc.status_code)

    async def failed(request: Request, exc: Exception) -> Response:
        return _html(env, "message.html", {"title": "Error", "message": f"internal error ({type(exc).__name__})"}, 500)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/runs/{run_id}", run),
            Route("/runs/{run_id}/steps/{n}", step),
            Route("/items/{item_id:path}", item),
            Route("/diff", diff),
            Route("/search", search),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        exception_handlers={MemtapeError: refused, HTTPException: http_error, Exception: failed},
    )
    return SecurityHeaders(Gatekeeper(app, token, env))
