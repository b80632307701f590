"""MCP is a full face of the Python API: every argument of every library call is an argument of
its tool, with the library's default; an agent's two runs made with every argument through
`memtape mcp` over stdio (the SDK's own client) log the events the library logs and get the same
answers; an argument no tool has is refused in one line and nothing is recorded."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import memtape
from memtape.mcp_server import MemoryServer, build_server
from tests.faces_support import (
    FLOW,
    LOCAL_CALLS,
    MEMORY_CALLS,
    ONE_FACE_CALLS,
    RECORDING,
    RUN_READS,
    RUN_REFUSED,
    SECRET,
    SHARED,
    SHOP,
    TOOLS,
    answers_equal,
    extremes,
    finished_run,
    library_call,
    public_calls,
    qualified,
    raw_bytes,
    run_events,
    steady,
    through_library,
)

#: the single key each list answer comes under (a tool answers one JSON object)
LISTED = {
    "tier1": "lessons",
    "recall_domain": "lessons",
    "recall_error": "lessons",
    "recall_trajectory": "recall",
    "sessions": "sessions",
    "facts": "facts",
    "selectors": "selectors",
    "step_memories": "step_memories",
    "loop_warnings": "warnings",
    "state": "items",
    "count": "count",
    "diff": "changes",
    "prompt_context": "context",
    "relevant_context": "context",
    "get_scratch": "value",
    "scratch": "scratch",
    "get_page_map": "page_map",
    "has_page_map": "has_page_map",
    "get_all_page_maps": "page_maps",
    "get_page_summary": "summary",
    "memory_tier1": "lessons",
    "memory_recall_domain": "lessons",
    "memory_recall_error": "lessons",
    "memory_recall_trajectory": "recall",
    "abandon_stale_runs": "abandoned",
    "infer_context": "recorded",
    "patterns": "patterns",
    "extraction": "extraction",
    "extractions": "extractions",
    "snapshots": "snapshots",
    "known_failure": "signature",
    "short_term": "short_term",
    "recorded_embedding": "vector",
    "sitemap": "sitemap",
}


def _server(memory_dir: Path) -> StdioServerParameters:
    """`memtape mcp --tools all` with this process's environment (the SDK passes only a few variables
    on, and PYTHONPATH may name the memtape under test)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memtape", "--memory-dir", str(memory_dir), "mcp", "--tools", "all"],
        env=dict(os.environ),
    )


def _unwrap(name: str, answer: Any) -> Any:
    return answer[LISTED[name]] if name in LISTED else answer


async def _flow(memory_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    answers: list[Any] = []
    async with stdio_client(_server(memory_dir)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        run = ""
        for name, arguments in FLOW:
            call = dict(arguments) if name in MEMORY_CALLS else {"run_id": run, **arguments}
            result = await session.call_tool(TOOLS[name], call)
            assert not result.is_error, (name, result.content)
            answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
            assert result.structured_content == answer, name  # the typed answer, as the output schema says
            if name == "start_run":
                run = answer["run_id"]
            answers.append(answer)
    return tools, answers


def test_two_runs_with_every_argument_over_stdio_log_what_the_library_logs(tmp_path: Path) -> None:
    tools, answers = asyncio.run(_flow(tmp_path / "mcp"))
    assert set(tools) == set(TOOLS.values())
    # a public method added to `Run` or `Memory` fails here until it has a tool (or a reason not to)
    assert {qualified(name) for name in TOOLS} == public_calls() - LOCAL_CALLS.keys() - ONE_FACE_CALLS.keys()
    for name, tool in TOOLS.items():
        wanted = {p.name: p.default for p in list(inspect.signature(library_call(name)).parameters.values())[1:]}
        schema = tools[tool].input_schema
        assert schema["additionalProperties"] is False and tools[tool].output_schema, tool
        taken = {field: spec.get("default", ...) for field, spec in schema["properties"].items()}
        if name not in MEMORY_CALLS:
            assert taken.pop("run_id") is ...
        if name in SHARED:  # the tool of another call, taking more: every argument of this one
            assert set(wanted) <= set(taken), tool
        else:
            assert set(taken) == set(wanted), tool
        for field, default in wanted.items():  # required where the library requires it, else its default
            expected = (
                ...
                if default is inspect.Parameter.empty
                else (list(default) if isinstance(default, tuple) else default)
            )
            assert taken[field] == expected, (tool, field)
    answers_equal(answers, through_library(tmp_path / "library"), _unwrap)
    assert run_events(tmp_path / "mcp") == run_events(tmp_path / "library")
    assert SECRET.encode() not in raw_bytes(tmp_path / "mcp")


async def _finished(memory_dir: Path, run: str) -> tuple[list[Any], list[str]]:
    """RUN_READS' answers and RUN_REFUSED's refusals for run `run` over stdio."""
    async with stdio_client(_server(memory_dir)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        answers = []
        for name, arguments in RUN_READS:
            result = await session.call_tool(TOOLS[name], {"run_id": run, **arguments})
            assert not result.is_error, (name, result.content)
            answers.append(_unwrap(name, result.structured_content))
        refusals = []
        for name, arguments in RUN_REFUSED:
            result = await session.call_tool(TOOLS[name], {"run_id": run, **arguments})
            assert result.is_error, name
            refusals.append(str(result.content[0].text))  # type: ignore[union-attr]
    return answers, refusals


def test_a_finished_run_is_read_as_the_library_reads_it_and_refuses_writes(tmp_path: Path) -> None:
    memory_dir = tmp_path / "mem"
    run, library = finished_run(memory_dir)
    before = _count(memory_dir)
    answers, refusals = asyncio.run(_finished(memory_dir, run))
    assert steady(answers) == steady(library)
    for (name, _), refusal in zip(RUN_REFUSED, refusals, strict=True):
        assert refusal.startswith(f"Error executing tool {TOOLS[name]}: run ") and run in refusal, refusal
    assert _count(memory_dir) == before  # the reads logged nothing, the refusals wrote nothing


def _count(memory_dir: Path) -> int:
    with memtape.open(memory_dir) as mem:
        return int(mem.store.head())


async def _unknown(memory_dir: Path, run_id: str, tool: str, arguments: dict[str, Any]) -> str:
    async with stdio_client(_server(memory_dir)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(tool, {**arguments, "run_id": run_id} if tool != "start_run" else arguments)
    assert result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


def test_an_unknown_argument_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    memory_dir = tmp_path / "mem"
    with memtape.open(memory_dir) as mem:
        run_id = mem.start_run(goal="Log in", start_url=SHOP).run_id
    before = _count(memory_dir)
    # a misspelt `sensitive`: the password would be stored if the argument were dropped
    error = asyncio.run(
        _unknown(
            memory_dir,
            run_id,
            "record_step",
            {"step": 1, "action": "type", "target": 'textbox "Nickname"', "args": {"text": SECRET}, "sensitve": True},
        )
    )
    assert error.startswith("Error executing tool record_step: unknown argument 'sensitve'; known: run_id, step,")
    assert "\n" not in error
    assert _count(memory_dir) == before
    assert SECRET.encode() not in raw_bytes(memory_dir)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.sampled_from(sorted(set(TOOLS.values()))),
    extra=st.text(min_size=1, max_size=40).filter(lambda k: k not in {"run_id", "goal", "step", "text", "kind"}),
)
def test_any_unknown_argument_of_any_tool_writes_nothing(tmp_path_factory: Any, tool: str, extra: str) -> None:
    memory_dir = tmp_path_factory.mktemp("mem")
    with memtape.open(memory_dir) as mem:
        run_id = mem.start_run(goal="g", start_url=SHOP).run_id
    before = _count(memory_dir)

    async def call() -> Any:
        with memtape.open(memory_dir) as mem:
            async with Client(build_server(mem)) as client:
                tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
                if extra in tools[tool]["properties"]:
                    return None
                return await client.call_tool(tool, {"run_id": run_id, extra: 1})

    result = asyncio.run(call())
    if result is not None:
        assert result.is_error and "unknown argument" in result.content[0].text, result.content
        assert "\n" not in result.content[0].text
    assert _count(memory_dir) == before


@pytest.fixture(scope="module")
def open_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[memtape.Memory, MemoryServer]]:
    """One memory and its server for many calls (building a server's tools takes a while)."""
    with memtape.open(tmp_path_factory.mktemp("any") / "mem") as mem:
        yield mem, build_server(mem)


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(sorted(RECORDING)), field=st.data(), value=extremes())
def test_any_value_in_any_argument_of_a_recording_tool_is_taken_or_refused_in_one_line(
    open_memory: tuple[memtape.Memory, MemoryServer], name: str, field: st.DataObject, value: Any
) -> None:
    """Never a crash: a tool's answer, or a tool error in one line that writes nothing."""
    arguments = dict(RECORDING[name])
    arguments[field.draw(st.sampled_from(sorted(arguments)), label="field")] = value
    memory, server = open_memory
    run_id = memory.start_run(goal="Any value", start_url=SHOP).run_id
    before = memory.store.head()

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool(TOOLS[name], {"run_id": run_id, **arguments})

    result = asyncio.run(call())
    if result.is_error:
        assert "\n" not in result.content[0].text and result.content[0].text.startswith("Error executing tool")
        assert memory.store.head() == before, (name, arguments, result.content[0].text)


def test_a_run_abandoned_when_another_starts_is_refused_by_its_tools(tmp_path: Path) -> None:
    """The server's handle on a run does not outlive the run: once `start_run` abandoned it as
    stale, its recall and writes are tool errors naming it, as `memory.run` refuses it."""
    with memtape.open(tmp_path / "mem", stale_after=timedelta(0)) as mem:

        async def calls() -> list[Any]:
            async with Client(build_server(mem)) as client:
                first = (await client.call_tool("start_run", {"goal": "g", "start_url": SHOP})).structured_content
                await client.call_tool("record_step", {"run_id": first["run_id"], "step": 1, "action": "click"})
                await client.call_tool("start_run", {"goal": "h", "start_url": SHOP})  # abandons the first
                return [
                    await client.call_tool(tool, {"run_id": first["run_id"], **arguments})
                    for tool, arguments in (("tier1", {}), ("record_step", {"step": 2, "action": "click"}))
                ]

        results = asyncio.run(calls())
        assert [e.type for e in mem.store.read(types=["tier1_loaded", "step_recorded"])] == ["step_recorded"]
    for result in results:
        assert result.is_error and "is already failed" in result.content[0].text, result.content
