"""How `memtape serve` answers a request it cannot parse: `{"error": ...}` like every other refusal.

uvicorn answers a request line, header or head that its parser refuses with a plain-text
`Invalid HTTP request received.` and status 400, whatever the fault. A client of this server reads
every error as JSON, so the parser's refusals are answered here instead: the same one-line
`{"error": "..."}` body and `application/json` type as the routes, 431 for a head over the limit
(the one the ASGI guard in memtape/http_guard.py answers below uvicorn's own, far higher limit),
and 400 (or the parser's own 4xx) for a malformed request line, header name or value, or
Content-Length. The refused bytes are never echoed back: the reason is the parser's words only.
This module holds the answer and h11's protocol; memtape/httptools_frames.py is its twin over
httptools (the faster parser, which `memtape serve` uses when it is installed), giving the same
answers within the same limits.
"""

from __future__ import annotations

import asyncio
import re
from http import HTTPStatus
from typing import Any

import h11
import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

from memtape.http_guard import MAX_HEADER_BYTES

#: h11 appends the offending bytes to its reason ("illegal header line: bytearray(b'...')"): cut there
_ECHO = re.compile(r":? (?:b['\"]|bytearray\()")


class _RememberingConnection(h11.Connection):
    """An h11 connection that keeps the parser's last refusal, which uvicorn catches and drops."""

    refusal: h11.RemoteProtocolError | None = None

    def next_event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:  # type: ignore[override]
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = exc
            raise


def refusal_answer(refusal: h11.RemoteProtocolError | None) -> tuple[int, str]:
    """The status and one-line reason for a request h11 refused."""
    if refusal is None:
        return 400, "malformed HTTP request"
    return parser_answer(refusal.error_status_hint, _ECHO.split(str(refusal), maxsplit=1)[0])


def parser_answer(status: int, fault: str) -> tuple[int, str]:
    """The status and one-line reason for a request a parser refused with `status` (a 4xx is kept,
    anything else is 400) and `fault` (the parser's words, already cut before any echoed bytes)."""
    status = status if 400 <= status < 500 else 400
    if status == 431:
        return 431, f"request line and headers over {MAX_HEADER_BYTES} bytes"
    reason = " ".join(fault.split())[:100]
    reason = reason[:1].lower() + reason[1:]
    return status, f"malformed HTTP request: {reason}" if reason else "malformed HTTP request"


def _refusal_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), (b"connection", b"close")]


def refusal_bytes(status: int, reason: str) -> bytes:
    """The whole answer to a refused request as it goes on the wire (what h11 writes for it)."""
    body = orjson.dumps({"error": reason})
    head = b"".join(b"%s: %s\r\n" % header for header in _refusal_headers(body))
    return b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, HTTPStatus(status).phrase.encode(), head, body)


class CoalescedWrites(asyncio.Transport):
    """A connection's transport whose writes made in one turn of the event loop leave in one send.

    uvicorn writes an answer's head and its body apart: two sends, and a client reading the head
    first wakes twice. cProfile of `memtape serve` (docs/benchmarks.md, "The lean network path")
    found those sends the largest cost of a request besides the library call on a loaded machine.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self.transport = transport
        self.loop = loop
        self.pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append(bytes(data))

    def flush(self) -> None:
        if self.pending:
            data = b"".join(self.pending)
            self.pending.clear()
            if not self.transport.is_closing():
                self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.pending.clear()
        self.transport.abort()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.flush()
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(map(len, self.pending))


class JsonFramesProtocol(H11Protocol):
    """uvicorn's h11 protocol whose parser refusals are answered as JSON (given to uvicorn as `http=`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.conn = _RememberingConnection(h11.SERVER, self.config.h11_max_incomplete_event_size or 16 * 1024)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = CoalescedWrites(transport, self.loop)

    def send_400_response(self, msg: str) -> None:
        refusal = self.conn.refusal if isinstance(self.conn, _RememberingConnection) else None
        status, reason = refusal_answer(refusal)
        if self.conn.our_state is not h11.IDLE and self.conn.our_state is not h11.SEND_RESPONSE:
            self.transport.close()  # a response is already under way: nothing more can be said on this connection
            return
        body = orjson.dumps({"error": reason})
        for event in (
            h11.Response(status_code=status, headers=_refusal_headers(body), reason=HTTPStatus(status).phrase),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()
