"""What `memtape serve` checks before a request reaches a route: who may call, from where, with what body.

A web page in any browser on the machine can send requests to a server on 127.0.0.1. Without
these checks a page from any site could plant lessons, forget domains or finish someone's run
with a form or a `fetch` that needs no CORS preflight (a `text/plain` body), or reach the
server under its own name through DNS rebinding. So, in this order:

- the `Host` header must name the bound address (or a name given with `--allow-host`): a
  rebound name (`evil.example` pointing at 127.0.0.1) is refused;
- a request from another origin (its `Origin`, or Chromium's and Firefox's `Sec-Fetch-Site`
  for the `<img>` and `no-cors` requests that carry no `Origin`) is refused unless its origin
  was given with `--cors-origin`;
- a bearer token is required (every path but the OpenAPI document and its docs pages, and the
  viewer's `/ui/`, which asks the same token by a cookie: memtape/viewer/gate.py);
- a body must be `application/json` or `application/x-ndjson`, the two types a page cannot
  send without a preflight;
- a body is read up to `max_body` bytes before the route sees it, chunked or not.

Each refusal is `{"error": "<one line>"}` with its status (403, 401, 415, 413, and 431 for a
request line and headers over `MAX_HEADER_BYTES`), like every other error of the server.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import socket
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

import orjson
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memtape.api import MemtapeError

TOKEN_FILE = "serve.token"
#: the body types a page cannot send cross-origin without a CORS preflight
BODY_TYPES = frozenset({"application/json", "application/x-ndjson"})
#: methods whose requests carry a body (a POST without one still names its type: a page cannot)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: names of the loopback interface a page cannot rebind (browsers resolve `localhost` themselves)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_TOKEN = re.compile(r"[\x21-\x7e]{1,512}")
#: the most a request line and its headers may take: more is refused here as `{"error": ...}` (431),
#: ahead of uvicorn's own limit, which answers in plain text and is set well above it
MAX_HEADER_BYTES = 64 * 1024
#: uvicorn's (h11's) limit on a request's unparsed head, above ours so that ours answers first
SERVER_HEADER_BYTES = 4 * 1024 * 1024


class ServeRefused(MemtapeError):
    """`memtape serve` cannot start as asked (a port in use, a token missing off loopback, ...)."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback interface."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def checked_token(token: str, source: str) -> str:
    """A token given by the user: printable ASCII without spaces, as a header value must be."""
    if not _TOKEN.fullmatch(token):
        raise ServeRefused(f"{source}: a token is 1 to 512 printable ASCII characters without spaces")
    return token


def token_file(directory: Path) -> Path:
    return directory / TOKEN_FILE


def load_token(directory: Path) -> tuple[str, bool]:
    """The token kept in DIR/serve.token, made (random, mode 0600) when there is none: (token,
    created). The file appears whole (written aside, then linked), so a second server starting at
    the same moment reads the same token. A file others can read is refused rather than trusted."""
    path = token_file(directory)
    if path.exists() or path.is_symlink():
        return _read_token(path), False
    try:
        fd, aside = tempfile.mkstemp(prefix=".serve.token.", dir=directory)  # mode 0600
    except OSError as exc:
        raise ServeRefused(f"cannot create {path}: {exc.strerror or exc}") from None
    token = secrets.token_urlsafe(32)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.link(aside, path)
    except FileExistsError:
        return _read_token(path), False
    except OSError as exc:
        raise ServeRefused(f"cannot create {path}: {exc.strerror or exc}") from None
    finally:
        os.unlink(aside)
    return token, True


def _read_token(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ServeRefused(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd) as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise ServeRefused(f"{path} is not a regular file")
        if mode & 0o077:
            raise ServeRefused(f"{path} can be read by other users: chmod 600 it (or delete it for a new token)")
        text = f.read(1024).strip()
    return checked_token(text, str(path))


def listen(host: str, port: int) -> socket.socket:
    """A socket bound and listening on host:port, or ServeRefused in one line (a port in use, a
    name that does not resolve): binding before anything is announced means a failure never
    follows a "serving on" line."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise ServeRefused(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServeRefused(f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}") from None
    sock.set_inheritable(True)
    return sock


def _host_name(value: str) -> str:
    """The name part of a Host header: `a.example:80` -> `a.example`, `[::1]:80` -> `::1`."""
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def request_digest(method: str, path: str, body: bytes) -> str:
    """What an Idempotency-Key is bound to: the method, the path and the body as parsed JSON (keys
    sorted), so the same request re-serialized with other spacing or key order is the same request;
    a body that is no JSON object orjson reads (JSON Lines, big integers) counts by its bytes."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        canonical = body
    else:
        canonical = b"json:" + orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(f"{method} {path}\n".encode() + canonical).hexdigest()


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def head_size(scope: Scope) -> int:
    """The bytes of a request's path, query and headers, as its head carried them."""
    path = scope.get("raw_path") or scope.get("path", "").encode()
    return len(path) + len(scope.get("query_string", b"")) + sum(len(k) + len(v) + 4 for k, v in scope["headers"])


class OriginGate:
    """The outer check: the Host header and the caller's origin (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, host: str, allow_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()):
        self.app = app
        self.hosts = {host.strip("[]").lower(), *(h.lower() for h in allow_hosts)}
        if is_loopback(host):
            self.hosts |= LOOPBACK_NAMES
        self.any_address = _is_wildcard(host)
        self.cors_origins = frozenset(o.rstrip("/").lower() for o in cors_origins)

    def _host_allowed(self, name: str) -> bool:
        if name in self.hosts:
            return True
        if not self.any_address:
            return False
        try:  # bound to every address: any address literal names one of them; a name could be rebound
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def refusal(self, scope: Scope, headers: Headers) -> JSONResponse | None:
        host = headers.get("host", "")
        name = _host_name(host).lower()
        if not self._host_allowed(name):
            return _refuse(403, f"host {host[:80]!r} is not served here (name it with --allow-host)")
        origin = headers.get("origin")
        allowed = origin is not None and origin.lower() in self.cors_origins
        if origin is not None and not allowed and origin.lower() != f"{scope['scheme']}://{host}".lower():
            return _refuse(403, f"requests from origin {origin[:80]!r} are refused (allow it with --cors-origin)")
        if headers.get("sec-fetch-site") in ("cross-site", "same-site") and not allowed:
            return _refuse(403, "requests from another site are refused (allow its origin with --cors-origin)")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_size(scope) > MAX_HEADER_BYTES:
            await _refuse(431, f"request line and headers over {MAX_HEADER_BYTES} bytes")(scope, receive, send)
            return
        if scope["type"] in ("http", "websocket"):
            refusal = self.refusal(scope, Headers(scope=scope))
            if refusal is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class RequestGuard:
    """The inner check: the bearer token, the body's type, and its size while it streams in."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        public_paths: frozenset[str],
        max_body: int,
        cors: bool = False,
        own_gates: tuple[str, ...] = (),
    ):
        self.app = app
        self.expected = token.encode() if token is not None else None
        self.public_paths = public_paths
        #: path prefixes whose app checks the token its own way (the viewer: a cookie a browser sends)
        self.own_gates = own_gates
        self.max_body = max_body
        self.cors = cors

    def refusal(self, scope: Scope, headers: Headers) -> JSONResponse | None:
        preflight = self.cors and scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        path = scope["path"]
        gated = any(path == gate or path.startswith(gate + "/") for gate in self.own_gates)
        if self.expected is not None and path not in self.public_paths and not preflight and not gated:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            # the scheme's name is case-insensitive (RFC 9110 11.1), the token itself is not
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode("latin-1"), self.expected):
                return _refuse(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        has_body = "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")
        if scope["method"] in BODY_METHODS or has_body:
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind not in BODY_TYPES:
                shown = repr(kind[:60]) if kind else "no content type"
                return _refuse(
                    415, f"a body must be application/json (JSON Lines for /events: application/x-ndjson), got {shown}"
                )
        length = headers.get("content-length")
        if length is not None and (not length.isascii() or not length.isdigit()):
            return _refuse(400, "content-length is not a number")
        if length is not None and int(length) > self.max_body:
            return _refuse(413, f"request body over {self.max_body} bytes")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope, Headers(scope=scope))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:  # the whole body, bounded, before the route: a chunked body has no length to check first
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _refuse(413, f"request body over {self.max_body} bytes")(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        del chunks
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
