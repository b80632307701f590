"""memtape/http_frames.py's twin over httptools: the same JSON answers to a request the parser refuses.

uvicorn's httptools protocol parses a request in about two thirds of h11's time (a bare ASGI app
answering `{}` on this machine: 0.59 ms a request against 0.92 ms, docs/benchmarks.md), so
`memtape serve` uses it when httptools is installed. Its parser (llhttp) differs from h11 in
three ways this protocol makes up for, so that a client sees the same answers either way:

- llhttp buffers a head of any size: the bytes of an unfinished head are counted here and over
  uvicorn's limit (`h11_max_incomplete_event_size`, the one h11 is given) answered 431;
- llhttp takes an HTTP/1.1 request without a Host header, or with two: refused here as h11 does;
- httptools refuses a request target over 65,535 bytes, past the door's limit on a head: 431;
- llhttp parses a pipelined request's successor at once, and uvicorn would answer its fault
  before the request ahead of it: the refusal waits for the answers owed ahead of it.

llhttp's reasons are static words (never the request's bytes); they are put in h11's words
where the two name the same fault, so the error a client reads does not depend on the parser.
"""

from __future__ import annotations

import asyncio
from array import array

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memtape.http_frames import CoalescedWrites, parser_answer, refusal_bytes
from memtape.http_guard import MAX_HEADER_BYTES

#: llhttp's words (a part of its reason) -> h11's for the same fault, the first that matches
_H11_WORDS = (
    ("Duplicate Content-Length", "conflicting Content-Length headers"),
    ("can't be present with", "Content-Length and Transfer-Encoding together"),
    ("Content-Length", "bad Content-Length"),
    ("Transfer-Encoding", "only Transfer-Encoding: chunked is supported"),
    ("chunk size", "illegal chunk header"),
    ("chunk extension", "illegal chunk header"),
    ("chunk", "illegal chunk"),
    ("PRI/Upgrade", "HTTP/2 is not served: HTTP/1.1 only"),
    ("header", "illegal header line"),
    ("after start line", "illegal header line"),
    ("method", "illegal request line"),
    ("url", "illegal request line"),
    ("version", "illegal request line"),
    ("Expected", "illegal request line"),
)


class HeadRefused(Exception):
    """A head llhttp takes and h11 refuses (raised in a parser callback, answered by the protocol)."""

    def __init__(self, fault: str, status: int = 400):
        super().__init__(fault)
        self.fault = fault
        self.status = status


class _RememberingParser(httptools.HttpRequestParser):
    """httptools' parser keeping its last refusal, which uvicorn catches and drops."""

    refusal: httptools.HttpParserError | None = None

    def feed_data(self, data: bytes | bytearray | memoryview | array[int]) -> None:
        try:
            super().feed_data(data)
        except httptools.HttpParserError as exc:
            self.refusal = exc
            raise


def httptools_answer(refusal: Exception | None) -> tuple[int, str]:
    """The status and one-line reason for a request httptools (or this protocol) refused."""
    own = refusal if isinstance(refusal, HeadRefused) else getattr(refusal, "__context__", None)
    if isinstance(own, HeadRefused):
        return parser_answer(own.status, own.fault)
    if refusal is None:
        return parser_answer(400, "")
    if isinstance(refusal, httptools.HttpParserInvalidMethodError | httptools.HttpParserInvalidURLError):
        return parser_answer(400, "illegal request line")
    said = str(refusal)
    return parser_answer(400, next((h11_words for words, h11_words in _H11_WORDS if words in said), said))


class JsonToolsFramesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose parser refusals are answered as JSON (given to uvicorn as `http=`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.parser = _RememberingParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # as uvicorn sets its own
        self.head_limit = self.config.h11_max_incomplete_event_size or 16 * 1024
        #: bytes received since the last head began (None while a body is read: it is not counted)
        self.head_bytes: int | None = 0
        #: the refusal owed once the requests pipelined ahead of its fault are answered, and how many
        self.owed: tuple[int, str] | None = None
        self.owed_answers = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = CoalescedWrites(transport, self.loop)

    def data_received(self, data: bytes) -> None:
        if self.owed is not None:
            return  # the connection is refused: what follows its fault is not read
        if self.head_bytes is not None:
            self.head_bytes += len(data)
            if self.head_bytes > self.head_limit:
                self._refuse(HeadRefused("head over the limit", 431))
                return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        self._refuse(self.parser.refusal if isinstance(self.parser, _RememberingParser) else None)

    def _refuse(self, refusal: Exception | None) -> None:
        """Answer now, or once the requests received whole before the fault are answered (as h11,
        which parses a pipelined request only after the answer ahead of it)."""
        answer = httptools_answer(refusal)
        cycle = self.cycle
        queued = next((item for item in self.pipeline if item[0] is cycle), None)
        if queued is not None and cycle.more_body:
            self.pipeline.remove(queued)  # the fault is in this queued request's body: it is never whole
        if queued is not None or (cycle is not None and not cycle.more_body and not cycle.response_complete):
            self.owed, self.owed_answers = answer, len(self.pipeline) + 1
            self.flow.pause_reading()
        elif cycle is not None and cycle.response_started and not cycle.response_complete:
            self.transport.close()  # a response is under way: nothing more can be said on this connection
        else:
            self.transport.write(refusal_bytes(*answer))
            self.transport.close()

    def on_headers_complete(self) -> None:
        hosts = sum(1 for name, _ in self.headers if name == b"host")
        if hosts > 1:
            raise HeadRefused("found multiple Host: headers")
        if not hosts and self.parser.get_http_version() == "1.1":
            raise HeadRefused("missing mandatory Host: header")
        if len(self.url) >= MAX_HEADER_BYTES:  # over the door's limit (and httptools' own, 65,535 bytes)
            raise HeadRefused("request target over the limit", 431)
        self.head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.head_bytes = 0
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.owed is None:
            return
        self.owed_answers -= 1
        if not self.owed_answers and not self.transport.is_closing():
            self.transport.write(refusal_bytes(*self.owed))
            self.transport.close()
