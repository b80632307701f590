"""`memtape mcp`: the MCP server over stdio, driven by the official SDK's own client."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import memtape
from memtape.mcp_server import build_server

from .cli_runner import run_cli
from .faces_support import TOOLS as FACE_TOOLS

TOOLS = set(FACE_TOOLS.values())
#: the tools `memtape mcp` offers by default (issue 37), among at most 12
COMPACT = {
    "start_run",
    "tier1",
    "recall_domain",
    "recall_error",
    "record_step",
    "record_lesson",
    "observe_fact",
    "finish_run",
    "audit",
    "search",
}
OVERLAY = "Element <div id=consent> covers the link: click not delivered"


def _server(memory_dir: Path) -> StdioServerParameters:
    """`memtape mcp` with the test's environment (the SDK passes only a few variables by default, and
    PYTHONPATH may name the memtape under test)."""
    return StdioServerParameters(
        command=sys.executable, env=dict(os.environ), args=["-m", "memtape", "--memory-dir", str(memory_dir), "mcp"]
    )


async def _call(session: ClientSession | Client, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text) if result.content else None  # type: ignore[union-attr]


def _error(result: Any) -> str:
    assert result.is_error
    text = result.content[0].text
    assert "\n" not in text
    return str(text)


async def _two_runs(memory_dir: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with stdio_client(_server(memory_dir)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        seen["tools"] = {t.name: t for t in listed.tools}
        seen["definitions"] = len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in listed.tools]))

        first = await _call(session, "start_run", goal="Open Wool Socks", start_url="http://shop.test/")
        seen["first"] = first["run_id"]
        await _call(session, "tier1", run_id=first["run_id"])
        await _call(
            session,
            "record_step",
            run_id=first["run_id"],
            step=1,
            action="click",
            target='link "Wool Socks"',
            ok=False,
            error=OVERLAY,
        )
        taught = await _call(
            session,
            "record_lesson",
            run_id=first["run_id"],
            step=1,
            text='Click button "Accept all cookies" before anything else on this shop.',
            category="site_specific",
            failed_command="click",
            error_pattern="click not delivered",
        )
        seen["lesson_id"] = taught["lesson_id"]
        await _call(
            session,
            "record_step",
            run_id=first["run_id"],
            step=2,
            action="click",
            target='button "Accept all cookies"',
            ok=True,
        )
        await _call(
            session,
            "observe_fact",
            run_id=first["run_id"],
            kind="quirk",
            key="cookie banner",
            value="blocks clicks until accepted",
            step=2,
        )
        seen["finished"] = await _call(
            session, "finish_run", run_id=first["run_id"], success=True, outcome="on the socks page"
        )

        second = await _call(session, "start_run", goal="Open Rain Jacket", start_url="http://shop.test/")
        seen["second"] = second["run_id"]
        seen["domain"] = await _call(session, "recall_domain", run_id=second["run_id"], step=1)
        seen["recalled"] = await _call(
            session, "recall_error", run_id=second["run_id"], command="click", error=OVERLAY, step=1
        )
        seen["bad_step"] = _error(
            await session.call_tool("record_step", {"run_id": second["run_id"], "step": -1, "action": "click"})
        )
        seen["no_run"] = _error(await session.call_tool("tier1", {"run_id": "run_nope"}))
        seen["audit"] = await _call(session, "audit", run_id=second["run_id"], step=1)
    return seen


def test_mcp_server_over_stdio_teaches_the_next_run(tmp_path: Path) -> None:
    memory_dir = tmp_path / "mem"
    seen = asyncio.run(_two_runs(memory_dir))

    # `memtape mcp` offers the compact set by default: a run's calls and its audit, in few characters
    assert COMPACT <= set(seen["tools"]) <= TOOLS and len(seen["tools"]) <= 12
    assert seen["definitions"] <= 16_000
    step_schema = seen["tools"]["record_step"].input_schema
    assert {"run_id", "step", "action"} <= set(step_schema["required"])
    assert seen["finished"]["run_id"] == seen["first"] and seen["finished"]["success"] is True

    recalled = {l["lesson_id"]: l for l in seen["recalled"]["lessons"]}
    assert seen["lesson_id"] in recalled
    lesson = recalled[seen["lesson_id"]]
    assert lesson["failed_command"] == "click" and "Accept all cookies" in lesson["text"]
    assert (lesson["matched"], lesson["score"]) == ("pattern+command", 5.0)

    # the library's one line, behind the SDK's "Error executing tool NAME: "
    assert seen["bad_step"] == "Error executing tool record_step: step must be an integer from 0 to 2**63-1, got -1"
    assert seen["no_run"] == "Error executing tool tier1: no run 'run_nope' in the ledger"

    # the audit of run 2 names what it recalled, taught by run 1's events
    with memtape.open(memory_dir) as mem:
        taught = {e.id for e in mem.store.read(run_id=seen["first"], types=["lesson_recorded"])}
        recalls = list(mem.store.read(run_id=seen["second"], types=["error_recall"]))
        steps = list(mem.store.read(run_id=seen["second"], types=["step_recorded"]))
    assert taught and len(recalls) == 1 and steps == []  # the bad record_step wrote nothing
    assert seen["lesson_id"] in recalls[0].data["lesson_ids"]
    audited = json.dumps(seen["audit"])
    assert seen["lesson_id"] in audited and any(event_id in audited for event_id in taught)
    assert seen["first"] in audited  # the provenance names the teaching run


def test_mcp_help_says_how_to_connect() -> None:
    result = run_cli("mcp", "--help")
    out = result.out
    assert result.code == 0
    assert '"command": "memtape"' in out and '"mcp"' in out and "stdio" in out


def _count(memory_dir: Path) -> int:
    with memtape.open(memory_dir) as mem:
        return sum(1 for _ in mem.store.read())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    step=st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=2**63),
        st.booleans(),
        st.text(max_size=5),
        st.floats(allow_nan=True),
    ),
    action=st.one_of(st.just(""), st.just("   "), st.integers(), st.none()),
)
def test_bad_tool_arguments_are_one_line_errors_and_write_nothing(
    tmp_path_factory: Any, step: Any, action: Any
) -> None:
    memory_dir = tmp_path_factory.mktemp("mem")
    with memtape.open(memory_dir) as mem:
        run_id = mem.start_run(goal="g", start_url="http://shop.test/").run_id
    before = _count(memory_dir)

    async def calls() -> list[str]:
        with memtape.open(memory_dir) as mem:
            async with Client(build_server(mem)) as client:
                return [
                    _error(await client.call_tool("record_step", {"run_id": run_id, "step": step, "action": "click"})),
                    _error(await client.call_tool("record_step", {"run_id": run_id, "step": 1, "action": action})),
                ]

    errors = asyncio.run(calls())
    assert all(e.strip() for e in errors)
    assert _count(memory_dir) == before


# ---- the door over stdio: what the SDK cannot read is answered at once, the rest meets append's limits ----


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"n": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


class RawClient:
    """JSON-RPC lines straight onto `memtape mcp`'s stdin: lines an SDK client cannot even build (a
    JSON `\\ud800` escape, as a JavaScript client sends a lone surrogate; 50,000 levels of nesting)."""

    def __init__(self, memory_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memtape", "--memory-dir", str(memory_dir), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def ask(self, line: str) -> dict[str, Any] | None:
        """Send one line; the answer, or None when none came within a minute (the client would hang)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        return json.loads(self.process.stdout.readline()) if ready else None

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def _request(id_: int, tool: str, arguments: str) -> str:
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}'


def test_lines_the_sdk_cannot_read_are_answered_at_once_naming_the_request(tmp_path: Path) -> None:
    memory_dir = tmp_path / "mem"
    client = RawClient(memory_dir)
    try:
        hello = client.ask(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "1"},
                    },
                }
            )
        )
        assert hello is not None and hello["id"] == 1
        client.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')  # type: ignore[union-attr]
        started = client.ask(_request(2, "start_run", '{"goal":"g","start_url":"http://shop.test/"}'))
        assert started is not None
        run_id = json.loads(started["result"]["content"][0]["text"])["run_id"]  # the compact set answers as text
        surrogate = client.ask(_request(3, "record_step", f'{{"run_id":"{run_id}","step":1,"action":"cl\\ud800ick"}}'))
        deep = client.ask(
            _request(
                4,
                "record_step",
                f'{{"run_id":"{run_id}","step":2,"action":"click","args":'
                + '{"a":' * 50_000
                + "1"
                + "}" * 50_000
                + "}",
            )
        )
        garbled = client.ask('{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":')
        fine = client.ask(_request(6, "record_step", f'{{"run_id":"{run_id}","step":3,"action":"click"}}'))
    finally:
        client.close()
    assert surrogate is not None and deep is not None and garbled is not None  # answered, not dropped
    assert (surrogate["id"], surrogate["error"]["code"]) == (3, -32700)
    assert surrogate["error"]["message"] == (
        "params.arguments.action: text contains a NUL character or a lone surrogate; nothing was written"
    )
    assert (deep["id"], deep["error"]["code"]) == (4, -32700)
    assert "50003 levels deep" in deep["error"]["message"] and "at most 64" in deep["error"]["message"]
    assert (garbled["id"], garbled["error"]["code"]) == ("five", -32700)
    assert garbled["error"]["message"].startswith("malformed JSON")
    assert fine is not None and fine["id"] == 6 and not fine["result"]["isError"]  # the connection goes on
    with memtape.open(memory_dir) as mem:
        assert [e.step for e in mem.store.read(types=["step_recorded"])] == [3]


async def _over_stdio(memory_dir: Path, calls: list[dict[str, Any]]) -> list[str]:
    async with stdio_client(_server(memory_dir)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        run_id = (await _call(session, "start_run", goal="g", start_url="http://shop.test/"))["run_id"]
        return [_error(await session.call_tool("record_step", {"run_id": run_id, **call})) for call in calls]


def test_a_tool_call_meets_the_limits_of_append(tmp_path: Path) -> None:
    """A 10 MB action, args nested past the door's depth, or a NaN are refused as `append` refuses them."""
    memory_dir = tmp_path / "mem"
    errors = asyncio.run(
        _over_stdio(
            memory_dir,
            [
                {"step": 1, "action": "x" * 10_000_000},
                {"step": 2, "action": "x" * 100_001},
                {"step": 3, "action": "click", "args": _deep(66)},
                {"step": 4, "action": "click", "args": {"n": 2**64}},
            ],
        )
    )
    assert (
        errors[0]
        == errors[1]
        == ("Error executing tool record_step: step_recorded: action.command: text longer than 100000 characters")
    )
    assert errors[2].startswith("Error executing tool record_step: step_recorded: action.args.a.") and errors[
        2
    ].endswith("nested more than 63 levels deep")
    assert "outside the signed 64-bit range" in errors[3]
    with memtape.open(memory_dir) as mem:
        assert list(mem.store.read(types=["step_recorded"])) == []
    lines = [
        {"type": "step_recorded", "run_id": "r1", "step": 1, "ok": True, "action": {"command": "x" * 100_001}},
        {"type": "step_recorded", "run_id": "r1", "step": 3, "ok": True, "action": {"command": "c", "args": _deep(66)}},
    ]
    for line in lines:
        appended = run_cli(
            "--memory-dir", str(tmp_path / "other"), "append", "--raw", "-", stdin=json.dumps(line).encode()
        )
        assert appended.code == 1 and ("longer than 100000" in appended.err or "63 levels deep" in appended.err)
