"""The bundled local sites: one small HTTP server, several host names.

Real sites have quirks that break naive agents (a cookie banner that
intercepts clicks, an autocomplete list over a submit button, a modal in
shadow DOM, a slow page, a login form, a custom text widget that `fill`
cannot handle). Lessons are learned from exactly those failures, so the
bundled sites reproduce them offline and deterministically.

The server routes by host name: the browser is pointed at it as an HTTP
proxy (and `--host-resolver-rules` maps `*.test` to 127.0.0.1), so URLs stay
port-free (`http://shop.test/`) and each site is its own domain.

The sites the demo runs on (shop, search, news, portal) carry what real pages
carry around their task — header navigation, banners, sidebars, product and
article grids, footers — so that a prompt's page state weighs what it weighs in
use (1,500 to 4,000 tokens), not a toy's hundred. What every page of a site
repeats is written once, in the site's `_parts/`, and put in place of an
`<!--#include "NAME.html" -->` line when a page is served.

Example:
    with SitesServer() as sites:
        print(sites.url("shop.test", "/"))   # http://shop.test/
"""

from __future__ import annotations

import json
import mimetypes
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent
#: host name -> directory of its static files
HOSTS: dict[str, str] = {
    "shop.test": "shop",
    "search.test": "search",
    "news.test": "news",
    "portal.test": "portal",
    "forum.test": "forum",
    "club.test": "club",  # a login behind a link: learned once as a pattern, then reused
    "help.test": "help",  # a dead end that needs backtracking
    "docs.test": "docs",  # a small site to explore (sitemap)
    "records.test": "records",  # knowledge the pages do not show: hidden paths, a dead control, a moved login
}
#: a site's later release: `?release=N` on any page sets the `release` cookie, and from then on a page
#: (or part) under the site's `_releaseN/` replaces the one at the same path: the site changed
RELEASE = re.compile(r"(?:^|[?&])release=(\d{1,2})(?:&|$)")
_COOKIE_RELEASE = re.compile(r"(?:^|;\s*)release=(\d{1,2})(?:;|$)")
#: paths whose page the server delays (seconds): the slow page quirk
SLOW_PATHS: dict[str, float] = {"/article/election-results": 1.2}
CASES_FILE = ROOT / "cases.json"
HOSTILE_CASES_FILE = ROOT / "hostile_cases.json"
#: cases for seed 003's layered memory that the demo's suite does not reach (run in this order)
MEMORY_CASES_FILE = ROOT / "memory_cases.json"


#: a page's placeholder for a part its site's pages share (`_parts/NAME.html`)
_INCLUDE = re.compile(r'<!--#include "([a-z0-9-]+\.html)" -->')


def _assemble(page: Path, sites: list[Path]) -> bytes:
    """A page as served: each include line replaced by the part of that name (a part may include
    parts), taken from the first of `sites` (a release, then the site) that has it."""

    def part(m: re.Match[str]) -> str:
        found = next((s / "_parts" / m.group(1) for s in sites if (s / "_parts" / m.group(1)).is_file()), None)
        return "" if found is None else _INCLUDE.sub(part, found.read_text(encoding="utf-8"))

    return _INCLUDE.sub(part, page.read_text(encoding="utf-8")).encode()


def _sites(host: str, release: str | None) -> list[Path]:
    """Where a host's files are looked up, in order: its release's folder (when one is set), then its own."""
    base = ROOT / HOSTS[host]
    return ([base / f"_release{release}"] if release else []) + [base]


def _resolve(host: str, path: str, release: str | None = None) -> Path | None:
    """Map a request path to a file: `/`, `/x` -> x.html, `/product/shoes` -> product.html; each
    form looked up in the release first (when one is set), so a release's `staff.html` never
    stands in for the site's `staff/desk.html`."""
    if host not in HOSTS:
        return None
    clean = path.split("?", 1)[0].split("#", 1)[0]
    parts = [p for p in clean.split("/") if p]
    if any(p.startswith((".", "_")) for p in parts):
        return None
    forms: list[tuple[str, ...]] = (
        [("index.html",)] if not parts else [tuple(parts), (*parts[:-1], parts[-1] + ".html"), (parts[0] + ".html",)]
    )
    for form in forms:
        for base in _sites(host, release):
            c = base.joinpath(*form)
            if c.is_file() and base in c.resolve().parents:
                return c
    return None


class _Handler(BaseHTTPRequestHandler):
    server_version = "memtape-sites/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default stderr log
        return

    def _target(self) -> tuple[str, str]:
        raw = self.path
        if raw.startswith(("http://", "https://")):
            parts = urlsplit(raw)
            host = (parts.hostname or "").lower()
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            return host, path
        host = (self.headers.get("Host") or "").split(":", 1)[0].lower()
        return host, raw

    def do_CONNECT(self) -> None:  # noqa: N802 - no TLS here; refuse fast so the browser falls back
        self.send_error(405, "no TLS on the bundled sites")

    def do_GET(self) -> None:  # noqa: N802
        host, path = self._target()
        delay = SLOW_PATHS.get(path.split("?", 1)[0]) if host == "news.test" else None
        if path.split("?", 1)[0] == "/health":
            self._send(200, b"ok", "text/plain")
            return
        release = self._release(path)
        file = _resolve(host, path, release)
        if file is None:
            body = f"<!doctype html><title>Not found</title><h1>404 Not found</h1><p>{host}{path}</p>".encode()
            self._send(404, body, "text/html; charset=utf-8")
            return
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        body = _assemble(file, _sites(host, release)) if ctype.startswith("text/html") else file.read_bytes()
        self._send(200, body, ctype, delay, release if RELEASE.search(urlsplit(path).query) else None)

    def _release(self, path: str) -> str | None:
        """The site release this request asks for: `?release=N`, else the `release` cookie."""
        m = RELEASE.search(urlsplit(path).query) or _COOKIE_RELEASE.search(self.headers.get("Cookie") or "")
        return m.group(1) if m else None

    def _send(
        self, status: int, body: bytes, ctype: str, delay: float | None = None, release: str | None = None
    ) -> None:
        """The response; a slow page sends its head at once and the rest after `delay` seconds, so
        a click that opens it returns when the navigation starts (well inside the action timeout,
        however loaded the machine) and the page takes `delay` to load, every time."""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if release:
            self.send_header("Set-Cookie", f"release={release}; Path=/")
        self.end_headers()
        if delay:
            head = body.find(b"<body>") + len(b"<body>") if b"<body>" in body else 0
            self.wfile.write(body[:head])
            self.wfile.flush()
            time.sleep(delay)
            body = body[head:]
        self.wfile.write(body)


class _Quiet(ThreadingHTTPServer):
    """A browser that hangs up mid-answer (a refused CONNECT, a page left early) is no error of the
    sites': the socket server would print its traceback over the demo's table."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class SitesServer:
    """Serves every bundled site on 127.0.0.1 (a free port unless one is given)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1"):
        self.httpd = _Quiet((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def proxy(self) -> str:
        """The proxy address the browser sends the bundled hosts' requests to."""
        return f"http://127.0.0.1:{self.port}"

    @staticmethod
    def url(host: str, path: str = "/") -> str:
        return f"http://{host}{path if path.startswith('/') else '/' + path}"

    def start(self) -> SitesServer:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="memtape-sites", daemon=True
        )
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> SitesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def is_bundled(url: str) -> bool:
    """True when a URL points at one of the bundled hosts (the run command then serves them)."""
    return (urlsplit(url).hostname or "").lower() in HOSTS


def load_cases(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read a cases file: a JSON list of {id, goal, site, start_url, success}; start_url may be relative."""
    file = Path(path) if path is not None else CASES_FILE
    cases = json.loads(file.read_text(encoding="utf-8"))
    if isinstance(cases, dict):
        cases = cases.get("cases", [])
    out = []
    for case in cases:
        case = dict(case)
        start = case.get("start_url") or case.get("url") or "/"
        if not start.startswith(("http://", "https://")):
            case["start_url"] = SitesServer.url(case["site"], start)
        out.append(case)
    return out
