"""Resume and fork as `Memory` calls (seed 000): what an external agent asks to continue or branch
off a recorded run, and the bundled runner asking the same calls for `--resume-run`/`--fork-run`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from memtape.agent.runner import RunOptions, run_agent
from memtape.ledger.errors import InvalidEvent, LedgerError, UnknownItem
from memtape.ledger.settings import Settings
from memtape.server import create_app

SHOP = "https://shop.example/"


def _finished(mem: Any, *, session_id: str | None = "proj_1", case_id: str | None = "case-7") -> str:
    with mem.start_run(goal="Buy wool socks", start_url=SHOP, session_id=session_id, case_id=case_id) as run:
        run.record_step(step=1, action="goto", url=SHOP, url_after=SHOP + "socks")
        run.record_step(step=2, action="click", target='button "Buy"', url_after=SHOP + "cart")
        run.finish(success=True, outcome="bought")
    return str(run.run_id)


def test_resume_continues_where_the_run_ended_in_its_session(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "m") as mem:
        first = _finished(mem)
        scenario = mem.resume_scenario(first)
        assert asdict(scenario) == {
            "goal": "Buy wool socks",
            "start_url": SHOP + "cart",
            "session_id": "proj_1",
            "parent_run_id": first,
            "mode": "resume",
            "case_id": "case-7",
        }
        with mem.start_run(**asdict(scenario)) as run:
            run.finish(success=True)
        started = [e.data for e in mem.store.read(run_id=run.run_id, types=["run_started"])][0]
        assert (started["mode"], started["parent_run_id"], started["session_id"]) == ("resume", first, "proj_1")
        assert started["start_url"] == SHOP + "cart"


def test_fork_branches_off_in_a_new_session_each_time(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "m") as mem:
        first = _finished(mem)
        one, two = mem.fork_scenario(first, goal="Buy a scarf"), mem.fork_scenario(first)
        assert one.session_id.startswith("fork_") and two.session_id.startswith("fork_")
        assert one.session_id != two.session_id
        assert (one.goal, two.goal) == ("Buy a scarf", "Buy wool socks")
        assert one.mode == "fork" and one.parent_run_id == first and one.start_url == SHOP + "cart"


def test_a_running_run_resumes_from_its_current_url(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "m") as mem:
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
        run.record_step(step=1, action="goto", url=SHOP, url_after=SHOP + "socks")
        run.progress(1, SHOP + "socks")
        assert mem.resume_scenario(run.run_id).start_url == SHOP + "socks"
        run.finish(success=False)


def test_an_unknown_run_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "m") as mem:
        _finished(mem)
        head = mem.store.head()
        for ask in (mem.resume_scenario, mem.fork_scenario):
            with pytest.raises(UnknownItem, match="no run 'run_nope' in the ledger"):
                ask("run_nope")
        assert mem.store.head() == head


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    run_id=st.one_of(st.none(), st.integers(), st.just(""), st.just("   "), st.lists(st.text(), max_size=2)),
    goal=st.one_of(st.integers(), st.just(""), st.just("  "), st.booleans(), st.binary(max_size=4)),
)
def test_bad_arguments_are_refused_in_one_line(tmp_path: Path, run_id: Any, goal: Any) -> None:
    with memtape.open(tmp_path / "m") as mem:
        head = mem.store.head()
        with pytest.raises(InvalidEvent) as bad_run:
            mem.fork_scenario(run_id)
        with pytest.raises(InvalidEvent) as bad_goal:
            mem.resume_scenario("run_any", goal=goal)
        assert "\n" not in str(bad_run.value) and "run_id" in str(bad_run.value)
        assert "\n" not in str(bad_goal.value) and "goal" in str(bad_goal.value)
        assert mem.store.head() == head


def test_the_runner_refuses_an_unknown_run_through_the_same_call(tmp_path: Path) -> None:
    """`memtape run --resume-run` asks `Memory.resume_scenario`: an unknown run is its refusal,
    before any browser starts."""
    memory_dir = tmp_path / "m"
    with memtape.open(memory_dir) as mem:
        _finished(mem)
    for opts in (RunOptions(resume_run="run_nope"), RunOptions(fork_run="run_nope")):
        with pytest.raises(LedgerError, match="no run 'run_nope' in the ledger"):
            run_agent(Settings(memory=str(memory_dir)), opts)


def test_http_answers_the_scenarios_the_library_gives(tmp_path: Path) -> None:
    """GET /runs/{run_id}/resume and /fork come from the table's rows: the library's answer, and
    its refusal of an unknown run as a 404 that writes nothing."""
    with memtape.open(tmp_path / "m") as mem:
        first = _finished(mem)
        with TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
            resumed = http.get(f"/runs/{first}/resume", params={"goal": "Buy a scarf"})
            assert resumed.status_code == 200
            assert resumed.json() == asdict(mem.resume_scenario(first, goal="Buy a scarf"))
            forked = http.get(f"/runs/{first}/fork").json()
            assert forked["mode"] == "fork" and forked["session_id"].startswith("fork_")
            head = mem.store.head()
            assert http.get("/runs/run_nope/resume").status_code == 404
            assert mem.store.head() == head
