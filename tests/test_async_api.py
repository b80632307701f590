"""The async API (issue 37 item 7): `memtape.open_async` gives `async with` memory and runs with
the sync classes' methods awaited, each call on a worker thread so the event loop keeps running."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path
from typing import Any

import pytest

import memtape
from memtape.asynchronous import AsyncMemory, AsyncRun

SHOP = "https://shop.example/"
BLOCKED = "element <div class=cookies> intercepts pointer events"


def test_a_run_with_async_with_and_awaits(tmp_path: Path) -> None:
    async def agent() -> tuple[str, list[str]]:
        async with memtape.open_async(tmp_path / "mem") as mem:
            async with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
                assert isinstance(run, AsyncRun) and run.run_id.startswith("run_")
                assert await run.tier1()
                await run.record_step(step=1, action="click", target='button "Buy"', url=SHOP, ok=False, error=BLOCKED)
                await run.record_lesson("Accept the cookie banner first", category="site_specific", step=1)
                assert [l.text for l in await run.recall_domain(step=2)] == ["Accept the cookie banner first"]
                assert [l.text for l in await mem.recall_domain("shop.example")] == ["Accept the cookie banner first"]
                hits = await run.search("cookie banner", step=2)
                assert hits[0].text == "Accept the cookie banner first"
                await run.finish(success=True, outcome="bought")
            audit = await mem.audit(run.run_id)
            return run.run_id, [e.type for e in mem.store.read(run_id=run.run_id)] + [str(audit["outcome"])]

    run_id, types = asyncio.run(agent())
    assert {"tier1_loaded", "step_recorded", "lesson_recorded", "domain_recall", "memory_searched"} <= set(types)
    assert "run_completed" in types
    with memtape.open(tmp_path / "mem") as mem:
        assert mem.read_run(run_id).finished


def test_every_public_method_is_offered_awaited_with_its_signature() -> None:
    for sync, wrapper in ((memtape.Memory, AsyncMemory), (memtape.Run, AsyncRun)):
        for name, method in inspect.getmembers(sync, inspect.isfunction):
            if name.startswith("_") or name == "close":
                continue
            offered = getattr(wrapper, name)
            assert inspect.iscoroutinefunction(offered) or name == "start_run", name
            assert inspect.signature(offered) == inspect.signature(method), name


def test_leaving_the_block_by_an_error_finishes_the_run_as_failed(tmp_path: Path) -> None:
    async def agent() -> str:
        async with memtape.open_async(tmp_path / "mem") as mem:
            run = await mem.start_run(goal="g", start_url=SHOP)
            with pytest.raises(RuntimeError):
                async with run:
                    raise RuntimeError("the browser crashed")
            return str(run.run_id)

    run_id = asyncio.run(agent())
    with memtape.open(tmp_path / "mem") as mem:
        (done,) = [e for e in mem.store.read(run_id=run_id) if e.type == "run_completed"]
        assert done.data["success"] is False and done.data["reason"] == "exception"
        assert "the browser crashed" in done.data["summary"]


def test_bad_input_is_refused_awaited_and_writes_nothing(tmp_path: Path) -> None:
    async def agent() -> None:
        mem = await memtape.open_async(tmp_path / "mem")
        try:
            before = len(list(mem.store.read()))
            with pytest.raises(memtape.MemtapeError):
                await mem.search("")
            with pytest.raises(memtape.MemtapeError):
                await mem.start_run(goal="", start_url=SHOP)
            assert len(list(mem.store.read())) == before
        finally:
            await mem.aclose()

    asyncio.run(agent())
    with pytest.raises(memtape.MemtapeError):
        memtape.open_async("")


def test_the_loop_keeps_running_while_a_call_runs(tmp_path: Path) -> None:
    """A call held open inside its write transaction (`append_to_run`'s build waits) until the loop
    has ticked: if the call ran on the loop, the loop could never tick and the call never end."""
    ticks = 0
    released = threading.Event()

    async def agent() -> int:
        nonlocal ticks
        async with memtape.open_async(tmp_path / "mem") as mem:
            run = await mem.start_run(goal="g", start_url=SHOP)

            def build(_so_far: Any) -> list[Any]:
                assert released.wait(timeout=20), "the event loop did not run while the call was waiting"
                return []

            async def heartbeat() -> None:
                nonlocal ticks
                while ticks < 5:
                    await asyncio.sleep(0.001)
                    ticks += 1
                released.set()

            await asyncio.gather(mem.append_to_run(run.run_id, build), heartbeat())
            await run.finish(success=True)
        return ticks

    assert asyncio.run(asyncio.wait_for(agent(), timeout=60)) == 5


def test_calls_run_on_one_worker_thread_in_order(tmp_path: Path) -> None:
    async def agent() -> list[str]:
        async with memtape.open_async(tmp_path / "mem") as mem:
            runs = await asyncio.gather(*(mem.start_run(goal=f"goal {i}", start_url=SHOP) for i in range(5)))
            for run in runs:
                await run.finish(success=True)
            return [r.goal for r in runs]

    assert asyncio.run(agent()) == [f"goal {i}" for i in range(5)]
