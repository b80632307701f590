"""One truth per run (DESIGN invariant 10): a run's state is the ledger's, read inside the write
transaction, so two handles or two processes may record into one run, `finish` learns from every
step any of them recorded, a finished run refuses more, and a step recorded twice is one step."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

import memtape
from memtape.ledger.errors import RunConflict
from tests.server_support import live_server
from tests.test_api import INTERCEPT, SHOP, overlay_run
from tests.test_mcp_server import _call as call
from tests.test_mcp_server import _error as error_text
from tests.test_mcp_server import _server as mcp_server

GOAL = 'Open "Wool Socks"'


def types(mem: Any, run_id: str) -> list[str]:
    return [e.type for e in mem.store.read(run_id=run_id)]


def record(location: str, run_id: str, steps: list[int]) -> None:
    """A second process recording some of the overlay run's steps (see `overlay_step`)."""
    with memtape.open(location) as mem:
        run = mem.run(run_id)
        for n in steps:
            overlay_step(run, n)


def step_into(location: str, run_id: str, step: int) -> str:
    """Another process recording a step into the run (its answer, or the refusal)."""
    with memtape.open(location) as mem:
        try:
            mem.run(run_id).record_step(step=step, action="click", target='button "Late"')
        except memtape.MemtapeError as exc:
            return f"{type(exc).__name__}: {exc}"
        return "recorded"


def overlay_step(run: Any, n: int) -> str:
    """Step n of tests.test_api.overlay_steps: a click an overlay intercepts, Escape, the overlay
    accepted, the click again."""
    if n == 1:
        return str(
            run.record_step(
                step=1,
                action="click",
                target='link "Wool Socks"',
                ok=False,
                error=INTERCEPT,
                selector="#socks",
                url=SHOP,
            )
        )
    if n == 2:
        return str(run.record_step(step=2, action="press", args={"key": "Escape"}, url=SHOP))
    if n == 3:
        return str(
            run.record_step(step=3, action="click", target='button "Accept all cookies"', selector="#accept", url=SHOP)
        )
    return str(
        run.record_step(
            step=4, action="click", target='link "Wool Socks"', selector="#socks", url=SHOP, url_after=SHOP + "socks"
        )
    )


def learned_view(learned: Any) -> Any:
    return (
        [x.model_dump(exclude={"learned_from"}) for x in learned.lessons],
        learned.facts,
        learned.trajectory.steps if learned.trajectory else None,
    )


def test_finish_on_one_handle_learns_the_steps_recorded_through_another(tmp_path: Path) -> None:
    _run, alone = overlay_run(memtape.open(tmp_path / "alone"), GOAL)
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    run = a.start_run(goal=GOAL, start_url=SHOP)
    overlay_step(run, 1)
    there = b.run(run.run_id)
    overlay_step(there, 2)
    overlay_step(run, 3)
    overlay_step(there, 4)
    learned = run.finish(success=True, outcome="socks page open")
    assert learned_view(learned) == learned_view(alone)
    assert learned.lessons and learned.trajectory is not None and len(learned.trajectory.steps) == 4
    completed = next(a.store.read(run_id=run.run_id, types=["run_completed"]))
    assert completed.data["turns"] == 4 and completed.data["final_url"] == SHOP + "socks"
    assert [e.step for e in a.store.read(run_id=run.run_id, types=["step_graded"])] == [1, 2, 3, 4]


def test_finish_on_another_handle_learns_what_the_steps_said_about_the_page(tmp_path: Path) -> None:
    """A step's every field is in the ledger: one found in a shadow root teaches the site's shadow
    DOM whichever handle (or process, or face) finishes the run."""
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    run = a.start_run(goal=GOAL, start_url=SHOP)
    run.record_step(step=1, action="click", target='button "Close dialog"', selector="#close", url=SHOP, in_shadow=True)
    learned = b.run(run.run_id).finish(success=True, outcome="dialog closed")
    assert [(f.key, f.value) for f in learned.facts if f.fact_type == "quirk"] == [
        ("shadow DOM", "uses shadow DOM for modals")
    ]
    step = next(a.store.read(run_id=run.run_id, types=["step_recorded"]))
    assert step.data["target"] == {"role": "button", "name": "Close dialog", "selector": "#close", "in_shadow": True}


def test_a_run_finished_by_one_handle_refuses_the_other(tmp_path: Path) -> None:
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    run = a.start_run(goal=GOAL, start_url=SHOP)
    overlay_step(run, 1)
    there = b.run(run.run_id)
    run.finish(success=True, outcome="done")
    before = list(a.store.read())
    rid = run.run_id
    with pytest.raises(RunConflict, match=f"^run {rid} is finished; it takes no more steps$"):
        there.record_step(step=2, action="press", args={"key": "Escape"})
    with pytest.raises(RunConflict, match=f"^run {rid} is finished; it takes no more lessons$"):
        there.record_lesson("Press Escape first", failed_command="click", error_pattern="intercepts pointer events")
    with pytest.raises(RunConflict, match=f"^run {rid} is already finished$"):
        there.finish(success=False, outcome="second finish")
    with pytest.raises(RunConflict, match=f"run {rid}"):
        there.observe_fact(kind="quirk", key="late", value="too late", domain="shop.example")
    assert list(a.store.read()) == before  # nothing written: one run_completed, one session, success stands
    assert types(a, rid).count("run_completed") == 1 and types(a, rid).count("session_recorded") == 1
    with pytest.raises(memtape.MemtapeError, match="already completed"):
        b.run(rid)
    assert there.recall_domain(step=9) is not None  # a read of memory is still logged with the run it served


def test_leaving_a_handle_of_a_run_finished_elsewhere_adds_nothing(tmp_path: Path) -> None:
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    run = a.start_run(goal=GOAL, start_url=SHOP)
    with b.run(run.run_id) as there:
        overlay_step(there, 1)
        run.finish(success=True, outcome="done")
    completed = [e for e in a.store.read(run_id=run.run_id, types=["run_completed"])]
    assert len(completed) == 1 and completed[0].data["success"] is True and there.finished


def test_a_step_recorded_again_is_one_step(tmp_path: Path) -> None:
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    run = a.start_run(goal=GOAL, start_url=SHOP)
    first = overlay_step(run, 1)
    assert overlay_step(run, 1) == first  # a retry on the same handle
    assert overlay_step(b.run(run.run_id), 1) == first  # and from another handle
    assert [e.id for e in a.store.read(run_id=run.run_id, types=["step_recorded"])] == [first]
    with pytest.raises(RunConflict, match=f"^run {run.run_id} already has a step 1 with other content"):
        run.record_step(step=1, action="click", target='link "Wool Socks"', ok=True, url=SHOP)
    assert [e.id for e in a.store.read(run_id=run.run_id, types=["step_recorded"])] == [first]
    overlay_step(run, 2)
    run.record_step(step=3, action="click", target='link "Wool Socks"', url=SHOP)  # Escape cleared it
    learned = run.finish(success=False, outcome="stopped")
    assert [e.step for e in a.store.read(run_id=run.run_id, types=["step_graded"])] == [1, 2, 3]
    assert len(learned.lessons) == 1


def test_the_same_run_started_twice_is_refused(tmp_path: Path) -> None:
    a, b = memtape.open(tmp_path / "mem"), memtape.open(tmp_path / "mem")
    b.current()  # b has read the ledger before the run existed
    a.start_run(goal=GOAL, start_url=SHOP, run_id="r1")
    with pytest.raises(memtape.MemtapeError, match="run r1 already exists"):
        b.start_run(goal=GOAL, start_url=SHOP, run_id="r1")
    assert types(a, "r1").count("run_started") == 1


def test_two_processes_record_into_one_run_and_one_finishes_it(tmp_path: Path) -> None:
    location = str(tmp_path / "mem")
    _run, alone = overlay_run(memtape.open(tmp_path / "alone"), GOAL)
    mem = memtape.open(location)
    run = mem.start_run(goal=GOAL, start_url=SHOP)
    overlay_step(run, 1)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        pool.apply(record, (location, run.run_id, [2, 3]))
        overlay_step(run, 4)
        learned = run.finish(success=True, outcome="socks page open")
        assert learned_view(learned) == learned_view(alone)
        late = pool.apply(step_into, (location, run.run_id, 5))
    assert late == f"RunConflict: run {run.run_id!r} is already completed"
    assert types(mem, run.run_id).count("step_recorded") == 4


def test_a_process_holding_a_handle_is_refused_once_another_finished_the_run(tmp_path: Path) -> None:
    location = str(tmp_path / "mem")
    mem = memtape.open(location)
    run = mem.start_run(goal=GOAL, start_url=SHOP)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_hold_then_step, args=(location, run.run_id, child))
    proc.start()
    try:
        assert parent.poll(60) and parent.recv() == "holding"
        run.finish(success=True, outcome="done")
        parent.send("go")
        assert parent.poll(60)
        answer = parent.recv()
    finally:
        proc.join(60)
    assert answer == f"RunConflict: run {run.run_id} is finished; it takes no more steps"
    assert types(mem, run.run_id).count("step_recorded") == 0 and types(mem, run.run_id).count("run_completed") == 1


def _hold_then_step(location: str, run_id: str, conn: Any) -> None:
    with memtape.open(location) as mem:
        run = mem.run(run_id)
        conn.send("holding")
        conn.recv()
        try:
            run.record_step(step=1, action="click", target='button "Late"')
            conn.send("recorded")
        except memtape.MemtapeError as exc:
            conn.send(f"{type(exc).__name__}: {exc}")
            run.finished = True  # the other process finished it: leave the handle quietly


# ---- over HTTP: two real servers on one memory directory ------------------------------------------


def _events(location: Path) -> list[Any]:
    with memtape.open(location) as mem:
        return list(mem.store.read())


def test_two_servers_share_one_run_and_a_finished_run_answers_409(tmp_path: Path) -> None:
    location = tmp_path / "mem"
    memtape.open(location).close()
    with (
        live_server(location) as served_a,
        live_server(location) as served_b,
        served_a.client() as a,
        served_b.client() as b,
    ):
        run_id = a.post("/runs", json={"goal": GOAL, "start_url": SHOP}).json()["run_id"]
        steps = [
            {"step": 1, "action": "click", "target": 'link "Wool Socks"', "url": SHOP, "ok": False, "error": INTERCEPT},
            {"step": 2, "action": "press", "url": SHOP, "ok": True},
            {"step": 3, "action": "click", "target": 'link "Wool Socks"', "url": SHOP + "socks", "ok": True},
        ]
        assert a.post(f"/runs/{run_id}/steps", json=steps[0]).status_code == 200
        assert b.post(f"/runs/{run_id}/steps", json=steps[1]).status_code == 200
        assert a.post(f"/runs/{run_id}/steps", json=steps[2]).status_code == 200
        again = b.post(f"/runs/{run_id}/steps", json=steps[1])  # a retry, on the other server
        assert again.status_code == 200
        other = b.post(f"/runs/{run_id}/steps", json={**steps[1], "ok": False, "error": "gone"})
        assert other.status_code == 409 and other.json() == {
            "error": f"run {run_id} already has a step 2 with other content; a step number is recorded once"
        }
        assert a.post(f"/runs/{run_id}/finish", json={"success": True, "outcome": "done"}).status_code == 200
        late = b.post(f"/runs/{run_id}/steps", json={**steps[2], "step": 4})
        assert late.status_code == 409 and late.json() == {"error": f"run {run_id} is finished; it takes no more steps"}
        lesson = b.post(f"/runs/{run_id}/lessons", json={"text": "Accept cookies first"})
        assert lesson.status_code == 409 and run_id in lesson.json()["error"]
        second = b.post(f"/runs/{run_id}/finish", json={"success": False, "outcome": "failed"})
        assert second.status_code == 409 and run_id in second.json()["error"]
    events = _events(location)
    mine = [e for e in events if e.run_id == run_id]
    assert [e.step for e in mine if e.type == "step_recorded"] == [1, 2, 3]
    assert [e.step for e in mine if e.type == "step_graded"] == [1, 2, 3]  # learned from both servers' steps
    assert [e.data["success"] for e in mine if e.type in ("run_completed", "session_recorded")] == [True, True]
    assert any(e.type == "lesson_recorded" and e.data["failed_command"] == "click" for e in mine)


def test_an_idempotency_key_is_answered_once_by_any_server_and_after_a_restart(tmp_path: Path) -> None:
    location = tmp_path / "mem"
    memtape.open(location).close()
    start = {"goal": GOAL, "start_url": SHOP}
    with (
        live_server(location) as served_a,
        live_server(location) as served_b,
        served_a.client() as a,
        served_b.client() as b,
    ):
        first = a.post("/runs", json=start, headers={"Idempotency-Key": "start-1"})
        assert first.status_code == 201 and "idempotent-replayed" not in first.headers
        count = len(_events(location))
        replay = b.post("/runs", json=start, headers={"Idempotency-Key": "start-1"})
        assert (replay.status_code, replay.json(), replay.headers["idempotent-replayed"]) == (201, first.json(), "true")
        assert len(_events(location)) == count  # no second run
        reused = b.post("/runs", json={**start, "goal": "another"}, headers={"Idempotency-Key": "start-1"})
        assert reused.status_code == 422 and "start-1" in reused.json()["error"]
        run_id = first.json()["run_id"]
        step = {"step": 1, "action": "press", "ok": True, "url": SHOP}
        assert a.post(f"/runs/{run_id}/steps", json=step, headers={"Idempotency-Key": "s1"}).status_code == 200
        finish = a.post(f"/runs/{run_id}/finish", json={"success": True}, headers={"Idempotency-Key": "f1"})
        assert finish.status_code == 200
        count = len(_events(location))
        retried = b.post(f"/runs/{run_id}/finish", json={"success": True}, headers={"Idempotency-Key": "f1"})
        assert (retried.status_code, retried.json()) == (200, finish.json())  # the first answer, not a 409
        assert len(_events(location)) == count
        lines = b'{"type": "fact_observed", "fact_type": "quirk", "key": "k", "value": "v", "domain": "shop.example"}\n'
        appended = a.post(
            "/events", content=lines, headers={"Idempotency-Key": "e1", "Content-Type": "application/x-ndjson"}
        )
        assert appended.status_code == 200 and appended.json()["appended"] == 1
    count = len(_events(location))
    with live_server(location) as served_c, served_c.client() as c:  # a restart remembers every key
        again = c.post(
            "/events", content=lines, headers={"Idempotency-Key": "e1", "Content-Type": "application/x-ndjson"}
        )
        assert (again.status_code, again.json()) == (200, appended.json())
        retried = c.post(f"/runs/{run_id}/finish", json={"success": True}, headers={"Idempotency-Key": "f1"})
        assert (retried.status_code, retried.json()) == (200, finish.json())
        unkeyed = c.post(f"/runs/{run_id}/finish", json={"success": True})
        assert unkeyed.status_code == 409
        assert c.post("/runs", json=start, headers={"Idempotency-Key": "x" * 256}).status_code == 400
    events = _events(location)
    assert len(events) == count
    answered = [e for e in events if e.type == "request_answered"]
    assert len(answered) == 4 and all(e.stream.startswith("request-") and "start-1" not in e.stream for e in answered)


# ---- over MCP: two stdio servers on one memory directory ------------------------------------------


async def _two_mcp_servers(location: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        stdio_client(mcp_server(location)) as (r1, w1),
        ClientSession(r1, w1) as one,
        stdio_client(mcp_server(location)) as (r2, w2),
        ClientSession(r2, w2) as two,
    ):
        await one.initialize()
        await two.initialize()
        run_id = (await call(one, "start_run", goal=GOAL, start_url=SHOP))["run_id"]
        seen["run_id"] = run_id
        await call(
            one,
            "record_step",
            run_id=run_id,
            step=1,
            action="click",
            target='link "Wool Socks"',
            ok=False,
            error=INTERCEPT,
            url=SHOP,
        )
        await call(two, "record_step", run_id=run_id, step=2, action="press", url=SHOP)
        seen["retry"] = await call(two, "record_step", run_id=run_id, step=2, action="press", url=SHOP)
        await call(one, "record_step", run_id=run_id, step=3, action="click", target='link "Wool Socks"', url=SHOP)
        seen["finished"] = await call(one, "finish_run", run_id=run_id, success=True, outcome="done")
        seen["late_step"] = error_text(
            await two.call_tool("record_step", {"run_id": run_id, "step": 4, "action": "press"})
        )
        seen["second_finish"] = error_text(await two.call_tool("finish_run", {"run_id": run_id, "success": False}))
    return seen


def test_two_mcp_servers_share_one_run_and_a_finished_run_refuses_more(tmp_path: Path) -> None:
    location = tmp_path / "mem"
    memtape.open(location).close()
    seen = asyncio.run(_two_mcp_servers(location))
    run_id = seen["run_id"]
    assert seen["finished"]["lessons"]  # learned from the failure on one server and the recovery on the other
    assert run_id in seen["late_step"] and "already completed" in seen["late_step"]
    assert run_id in seen["second_finish"]
    mine = [e for e in _events(location) if e.run_id == run_id]
    assert [e.step for e in mine if e.type == "step_recorded"] == [1, 2, 3]
    assert seen["retry"]["event_id"] == next(e.id for e in mine if e.type == "step_recorded" and e.step == 2)
    assert [e.type for e in mine].count("run_completed") == 1
