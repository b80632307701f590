"""Who may look: the viewer behind the server's token, for a browser that cannot send a header.

A browser opening `/ui/` sends no `Authorization` header, so `memtape serve` prints a login link
`/ui/?token=TOKEN`. Opening it sets a cookie (HttpOnly: no script reads it; SameSite=Strict: no
other site's page or link sends it) and redirects to the same page without the token, so the
token leaves the address bar and the history. The cookie holds a keyed digest of the token, not
the token: it opens the viewer, never the API. Without it every page but the static assets
answers 401 with a page that shows no memory. Every answer carries a Content-Security-Policy
that allows no inline script and nothing from another origin, and refuses to be framed.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "memtape_ui"
#: every answer's headers: scripts and styles only from the viewer itself, no inline script,
#: no framing, no referrer (the login link's token must not leak), nothing cached
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def session_value(token: str) -> str:
    """The cookie's value for `token`: a keyed digest, so the cookie is no API credential."""
    return hmac.new(token.encode(), b"memtape viewer session", hashlib.sha256).hexdigest()


class Verdict:
    """What the gate decided for one request: let it through, log in (redirect), or refuse."""

    def __init__(self, allowed: bool, redirect: str | None = None, cookie: str | None = None, reason: str = ""):
        self.allowed, self.redirect, self.cookie, self.reason = allowed, redirect, cookie, reason


def judge(token: str | None, path: str, query: list[tuple[str, str]], headers: Headers) -> Verdict:
    """The gate's decision for a request to `path` with `query` (None token: --no-token, open to
    this machine's loopback callers, as the API is)."""
    given = [value for key, value in query if key == "token"]
    rest = [(key, value) for key, value in query if key != "token"]
    if token is None:
        return Verdict(True)
    expected = session_value(token)
    if given:
        if len(given) == 1 and hmac.compare_digest(given[0].encode(), token.encode()):
            target = path + (f"?{urlencode(rest)}" if rest else "")
            return Verdict(False, redirect=target, cookie=expected)
        return Verdict(False, reason="the login link's token is wrong: open the viewer link that memtape serve printed")
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and hmac.compare_digest(value.encode(), expected.encode()):
            return Verdict(True)
    return Verdict(False, reason="not logged in: open the viewer link that memtape serve printed (…/ui/?token=…)")


class SecurityHeaders:
    """Adds HEADERS to every answer of the wrapped app."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in HEADERS]
                message["headers"] = kept + [(k.encode(), v.encode()) for k, v in HEADERS.items()]
            await send(message)

        await self.app(scope, receive, with_headers)
