"""How `memtape serve` answers a request it cannot parse: `{"error": ...}` like every other refusal.

uvicorn answers a request line, header or head that its parser (h11) refuses with a plain-text
`Invalid HTTP request received.` and status 400, whatever the fault. A client of this server reads
every error as JSON, so the parser's refusals are answered here instead: the same one-line
`{"error": "..."}` body and `application/json` type as the routes, 431 for a head over the limit
(the one the ASGI guard in memtape/http_guard.py answers below uvicorn's own, far higher limit),
and 400 (or the parser's own 4xx) for a malformed request line, header name or value, or
Content-Length. The refused bytes are never echoed back: the reason is the parser's words only.
"""

from __future__ import annotations

import re
from http import HTTPStatus

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
    """The status and one-line reason for a request the parser refused."""
    if refusal is None:
        return 400, "malformed HTTP request"
    status = refusal.error_status_hint if 400 <= refusal.error_status_hint < 500 else 400
    if status == 431:
        return 431, f"request line and headers over {MAX_HEADER_BYTES} bytes"
    reason = _ECHO.split(str(refusal), maxsplit=1)[0].strip()[:100]
    reason = reason[:1].lower() + reason[1:]
    return status, f"malformed HTTP request: {reason}" if reason else "malformed HTTP request"


class JsonFramesProtocol(H11Protocol):
    """uvicorn's h11 protocol whose parser refusals are answered as JSON (given to uvicorn as `http=`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.conn = _RememberingConnection(h11.SERVER, self.config.h11_max_incomplete_event_size or 16 * 1024)

    def send_400_response(self, msg: str) -> None:
        refusal = self.conn.refusal if isinstance(self.conn, _RememberingConnection) else None
        status, reason = refusal_answer(refusal)
        if self.conn.our_state is not h11.IDLE and self.conn.our_state is not h11.SEND_RESPONSE:
            self.transport.close()  # a response is already under way: nothing more can be said on this connection
            return
        body = orjson.dumps({"error": reason})
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()
