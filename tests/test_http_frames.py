"""Requests the HTTP parser refuses are answered like every other refusal: `{"error": ...}`, 4xx.

Raw sockets against a real `memtape serve`, once with each parser (`--http httptools`, the
default, and `--http h11`): a client library would refuse to send most of these.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import h11
import httptools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from memtape.http_frames import refusal_answer
from memtape.http_guard import ServeRefused
from memtape.httptools_frames import HeadRefused, httptools_answer
from memtape.server import PARSERS, chosen_parser
from tests.server_support import Served, live_server

SHOP = "https://shop.example"


@pytest.fixture(scope="module", params=["httptools", "h11"])
def server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[tuple[Served, Path]]:
    memory = tmp_path_factory.mktemp("frames") / "memory"
    with live_server(memory, args=["--http", request.param]) as served:
        with served.client() as http:
            assert http.post("/runs", json={"goal": "Buy socks", "start_url": SHOP}).status_code == 201
        yield served, memory


def _exchange(port: int, head: bytes) -> bytes:
    """Send `head`, read until the server closes (every refusal closes the connection)."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        try:
            raw.sendall(head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest of an oversized head was sent
        try:
            while chunk := raw.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass  # closed with our unread bytes still queued: the answer came before the reset
    return answer


def _parsed(answer: bytes) -> tuple[int, dict[str, str], object]:
    """The first response in `answer`: status, headers, JSON body."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split(" ")[1]), headers, json.loads(body[: int(headers["content-length"])])


def _ok_headers(served: Served) -> bytes:
    return f"Host: 127.0.0.1:{served.port}\r\nAuthorization: Bearer {served.token}\r\n".encode()


def _head_count(memory: Path) -> int:
    with memtape.open(memory) as mem:
        return int(mem.store.head())


def _cases(served: Served) -> list[tuple[str, bytes, int, str]]:
    """(name, raw request, status, error) for each way a head is malformed or too large."""
    ok = _ok_headers(served)
    get = b"GET /state/lessons HTTP/1.1\r\n" + ok
    post = b"POST /events HTTP/1.1\r\n" + ok + b"Content-Type: application/x-ndjson\r\n"
    over = "request line and headers over 65536 bytes"
    return [
        ("bad request line", b"GARBAGE\r\n\r\n", 400, "malformed HTTP request: illegal request line"),
        (
            "NUL in the target",
            b"GET /\x00 HTTP/1.1\r\n" + ok + b"\r\n",
            400,
            "malformed HTTP request: illegal request line",
        ),
        (
            "space in the target",
            b"GET /a b HTTP/1.1\r\n" + ok + b"\r\n",
            400,
            "malformed HTTP request: illegal request line",
        ),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, ""),
        ("invalid header name", get + b"Bad Name: x\r\n\r\n", 400, "malformed HTTP request: illegal header line"),
        ("header without colon", get + b"NoColonHere\r\n\r\n", 400, "malformed HTTP request: illegal header line"),
        ("continuation first", b"GET / HTTP/1.1\r\n folded\r\n\r\n", 400, "malformed HTTP request"),
        ("no Host", b"GET /state/lessons HTTP/1.1\r\n\r\n", 400, "malformed HTTP request: missing mandatory Host"),
        ("two Hosts", get + b"Host: other\r\n\r\n", 400, "malformed HTTP request: found multiple Host"),
        (
            "bad Content-Length",
            post + b"Content-Length: abc\r\n\r\n",
            400,
            "malformed HTTP request: bad Content-Length",
        ),
        (
            "negative Content-Length",
            post + b"Content-Length: -1\r\n\r\n",
            400,
            "malformed HTTP request: bad Content-Length",
        ),
        ("two Content-Lengths", post + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "conflicting"),
        ("huge Content-Length", post + b"Content-Length: " + b"9" * 200 + b"\r\n\r\n", 400, "bad Content-Length"),
        ("gzip transfer-encoding", post + b"Transfer-Encoding: gzip\r\n\r\n", 400, "transfer-encoding"),
        ("bad chunk", post + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "malformed HTTP request"),
        ("100 kB header line", get + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n", 431, over),
        ("1 MB header", get + b"X-Big: " + b"a" * 1_000_000 + b"\r\n\r\n", 431, over),
        ("5 MB header, over uvicorn's limit too", get + b"X-Big: " + b"a" * 5_000_000 + b"\r\n\r\n", 431, over),
        ("5 MB head that never ends", get + b"X-Big: " + b"a" * 5_000_000, 431, over),
        ("10000 small headers", get + b"".join(b"X-%d: v\r\n" % i for i in range(10_000)) + b"\r\n", 431, over),
        ("100 kB request target", b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n" + ok + b"\r\n", 431, over),
    ]


def test_each_malformed_or_oversized_head_is_answered_as_json(server: tuple[Served, Path]) -> None:
    served, memory = server
    before = _head_count(memory)
    for name, head, status, words in _cases(served):
        answer = _exchange(served.port, head)
        got, headers, body = _parsed(answer)
        if name == "HTTP/2 preface":  # refused by the guard (no Host) or the parser: 4xx either way
            assert 400 <= got < 500, (name, answer[:300])
        else:
            assert got == status, (name, answer[:300])
        assert headers["content-type"] == "application/json", (name, headers)
        assert isinstance(body, dict) and list(body) == ["error"], (name, body)
        error = body["error"]
        assert isinstance(error, str) and "\n" not in error and words.lower() in error.lower(), (name, error)
        assert "aaaa" not in error and "GARBAGE" not in error  # the refused bytes are not echoed back
    assert _head_count(memory) == before
    with served.client() as http:
        assert http.get("/state/lessons").status_code == 200
        assert http.get("/state/runs").json()[0]["goal"] == "Buy socks"


@pytest.mark.parametrize("good_ones", [1, 3])
def test_good_requests_pipelined_before_a_bad_one_are_answered(server: tuple[Served, Path], good_ones: int) -> None:
    served, _ = server
    good = b"GET /state/lessons HTTP/1.1\r\n" + _ok_headers(served) + b"\r\n"
    answer = _exchange(served.port, good * good_ones + b"GARBAGE\r\n\r\n")
    first, _, rest = answer.partition(b"HTTP/1.1 400 ")
    assert first.startswith(b"HTTP/1.1 200 ") and first.count(b"HTTP/1.1 200 ") == good_ones, answer
    assert _parsed(b"HTTP/1.1 400 " + rest) == (
        400,
        {"content-type": "application/json", "content-length": "56", "connection": "close"},
        {"error": "malformed HTTP request: illegal request line"},
    )


@pytest.mark.parametrize("fault", [b"zz\r\n", b"5\r\nab"])
def test_a_bad_body_pipelined_after_a_good_request_is_answered_after_it(
    server: tuple[Served, Path], fault: bytes
) -> None:
    """The second request's chunked body is malformed (or cut short, then the head limit is not
    what answers): the first is answered, then the refusal (or the connection closes)."""
    served, memory = server
    before = _head_count(memory)
    good = b"GET /state/lessons HTTP/1.1\r\n" + _ok_headers(served) + b"\r\n"
    bad = b"POST /events HTTP/1.1\r\n" + _ok_headers(served)
    bad += b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + fault
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as raw:
        raw.sendall(good + bad)
        if fault.endswith(b"ab"):
            raw.shutdown(socket.SHUT_WR)  # the body never ends: the server sees the end of the stream
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    rest = answer.partition(b"HTTP/1.1 200 ")[2]
    if b"HTTP/1.1 4" in rest:
        status, headers, body = _parsed(b"HTTP/1.1 4" + rest.partition(b"HTTP/1.1 4")[2])
        assert 400 <= status < 500 and headers["content-type"] == "application/json", rest[:300]
        assert isinstance(body, dict) and list(body) == ["error"]
    assert _head_count(memory) == before


def test_serve_uses_httptools_where_it_is_installed() -> None:
    assert list(PARSERS) == ["httptools", "h11"]
    assert chosen_parser(None) == "httptools" and chosen_parser("h11") == "h11"
    with pytest.raises(ServeRefused, match="--http spdy: not installed here"):
        chosen_parser("spdy")


_NO_LINE_BREAK = st.binary(min_size=0, max_size=300).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_NAME = st.binary(min_size=1, max_size=60).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"") or b" ")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.sampled_from(["request line", "header name", "header value", "content-length"]),
    junk=_NO_LINE_BREAK,
    name=_NAME,
)
def test_any_head_is_answered_as_json_and_reads_still_work(
    server: tuple[Served, Path], where: str, junk: bytes, name: bytes
) -> None:
    served, _ = server
    ok = _ok_headers(served)
    if where == "request line":
        head = junk + b"\r\n" + ok + b"\r\n"
    elif where == "header name":
        if name.strip().lower().startswith((b"content-length", b"transfer-encoding")):
            name = b"X-" + name  # a valid framing header would make the server wait for a body
        head = b"GET /state/lessons HTTP/1.1\r\n" + ok + name + b": v\r\nConnection: close\r\n\r\n"
    elif where == "header value":
        head = b"GET /state/lessons HTTP/1.1\r\n" + ok + b"X-Junk: " + junk + b"\r\nConnection: close\r\n\r\n"
    else:
        head = b"POST /events HTTP/1.1\r\n" + ok + b"Content-Type: application/x-ndjson\r\nContent-Length: x" + junk
        head += b"\r\nConnection: close\r\n\r\n"
    answer = _exchange(served.port, head)
    status, headers, body = _parsed(answer)
    assert headers["content-type"] == "application/json", answer[:300]
    if status >= 400:
        assert 400 <= status < 500 and isinstance(body, dict) and list(body) == ["error"], answer[:300]
        assert "\n" not in body["error"]
    with served.client() as http:
        assert http.get("/state/lessons").status_code == 200


@pytest.mark.parametrize(
    ("refusal", "status", "error"),
    [
        (None, 400, "malformed HTTP request"),
        (h11.RemoteProtocolError("Receive buffer too long", error_status_hint=431), 431, "over 65536 bytes"),
        (h11.RemoteProtocolError("illegal header line: bytearray(b'secret')"), 400, "illegal header line"),
        (h11.RemoteProtocolError("Illegal header name b'tok\\x00'"), 400, "illegal header name"),
        (h11.RemoteProtocolError("Only chunked", error_status_hint=501), 400, "only chunked"),
    ],
)
def test_the_answer_names_the_fault_without_its_bytes(
    refusal: h11.RemoteProtocolError | None, status: int, error: str
) -> None:
    got_status, got_error = refusal_answer(refusal)
    assert got_status == status and error in got_error
    assert "secret" not in got_error and "tok" not in got_error and "\n" not in got_error


@pytest.mark.parametrize(
    ("refusal", "status", "error"),
    [
        (None, 400, "malformed HTTP request"),
        (HeadRefused("head over the limit", 431), 431, "request line and headers over 65536 bytes"),
        (HeadRefused("missing mandatory Host: header"), 400, "malformed HTTP request: missing mandatory Host: header"),
        (httptools.HttpParserInvalidMethodError("Invalid method encountered"), 400, "illegal request line"),
        (httptools.HttpParserInvalidURLError("Invalid char in url path"), 400, "illegal request line"),
        (httptools.HttpParserError("Expected HTTP/, RTSP/ or ICE/"), 400, "illegal request line"),
        (httptools.HttpParserError("Invalid header token"), 400, "illegal header line"),
        (httptools.HttpParserError("Duplicate Content-Length"), 400, "conflicting Content-Length headers"),
        (httptools.HttpParserError("Content-Length overflow"), 400, "bad Content-Length"),
        (httptools.HttpParserError("Request has invalid `Transfer-Encoding`"), 400, "only Transfer-Encoding"),
        (httptools.HttpParserError("Invalid character in chunk size"), 400, "illegal chunk header"),
        (httptools.HttpParserError("Some new fault\nof llhttp"), 400, "malformed HTTP request: some new fault of"),
    ],
)
def test_httptools_faults_are_named_in_h11s_words(refusal: Exception | None, status: int, error: str) -> None:
    """A client reads the same error whichever parser the server runs."""
    got_status, got_error = httptools_answer(refusal)
    assert got_status == status and error in got_error and "\n" not in got_error
    assert got_error.startswith("malformed HTTP request") or status == 431


def test_a_refusal_raised_in_httptools_callback_keeps_its_own_words() -> None:
    """httptools wraps what a callback raises; the answer is the callback's own refusal."""
    wrapped = httptools.HttpParserCallbackError("User callback error")
    wrapped.__context__ = HeadRefused("found multiple Host: headers")
    assert httptools_answer(wrapped) == (400, "malformed HTTP request: found multiple Host: headers")
