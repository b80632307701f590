"""The OpenAI-compatible policy against a local stub that replays failures: 429 and 500 are retried
with growing backoff until the answer comes; a 400 is not retried; a slow endpoint times out; each
failure the caller sees is one line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memtape.agent.conversation import Message, conversation
from memtape.agent.policy import OpenAIPolicy, PolicyError

ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "stub",
    "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "click", "arguments": json.dumps({"ref": "e1"})},
                    }
                ],
            },
        }
    ],
}


class Replay(BaseHTTPRequestHandler):
    """Answers each POST with the next (status, delay) of `script`; after the script, the answer."""

    script: list[tuple[int, float]] = []
    seen: list[float] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(time.monotonic())
        status, delay = self.script.pop(0) if self.script else (200, 0.0)
        time.sleep(delay)
        body = json.dumps(ANSWER if status == 200 else {"error": {"message": f"stub {status}"}}).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (timeout)
            pass


@pytest.fixture
def replay() -> Iterator[str]:
    Replay.script, Replay.seen = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def context() -> tuple[Message, ...]:
    """A decision's conversation: the system prompt and the step prompt."""
    return conversation("SYSTEM", [], "STEP")


def test_429_and_500_are_retried_with_backoff_until_success(replay: str) -> None:
    Replay.script = [(429, 0.0), (500, 0.0)]
    d = OpenAIPolicy(base_url=replay, model="stub", api_key="k").decide(context())
    assert (d.command, d.args, d.tokens_in, d.tokens_out) == ("click", {"ref": "e1"}, 40, 5)
    assert len(Replay.seen) == 3
    first, second = Replay.seen[1] - Replay.seen[0], Replay.seen[2] - Replay.seen[1]
    assert (
        first >= 0.35 and second >= 0.7
    )  # backoff: 0.5 s then 1 s, jittered to 75-100% (lower bounds hold under load)


def test_retries_run_out_into_one_line(replay: str) -> None:
    Replay.script = [(503, 0.0)] * 3
    with pytest.raises(PolicyError, match=r"^model endpoint http://127\.0\.0\.1:\d+/v1 answered HTTP 503$"):
        OpenAIPolicy(base_url=replay, model="stub", api_key="k", max_retries=2).decide(context())
    assert len(Replay.seen) == 3


def test_a_client_error_is_not_retried(replay: str) -> None:
    Replay.script = [(400, 0.0)]
    with pytest.raises(PolicyError, match="answered HTTP 400"):
        OpenAIPolicy(base_url=replay, model="stub", api_key="k").decide(context())
    assert len(Replay.seen) == 1


def test_a_slow_endpoint_times_out(replay: str) -> None:
    Replay.script = [(200, 3.0)]
    started = time.monotonic()
    with pytest.raises(PolicyError, match="timed out after 0.5 s"):
        OpenAIPolicy(base_url=replay, model="stub", api_key="k", timeout=0.5, max_retries=0).decide(context())
    assert time.monotonic() - started < 2.5
