"""`memtape start-run|finish-run|recall` and `append` of a run_started: agents in other languages
get what the library gives, logged exactly like the library call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

import memtape
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli

SHOP = "https://shop.example/"
INTERCEPT = "element <div class=cookie-banner> intercepts pointer events"


def cli(d: Path, *args: str, stdin: bytes | None = None) -> Any:
    return run_cli("--memory-dir", str(d), *args, stdin=stdin)


def logged(d: Path, run_id: str | None = None) -> list[Any]:
    store = SqliteStore.open(d / "ledger.db")
    try:
        return list(store.read(run_id=run_id))
    finally:
        store.close()


def shape(events: list[Any]) -> list[tuple[Any, ...]]:
    """An event without what differs between two ledgers (ids, times, the run id)."""

    def data(ev: Any) -> Any:
        d = {
            k: v
            for k, v in ev.data.items()
            if k not in ("timestamp", "recalled_at", "duration_ms", "memory_ms", "learned_from")
        }
        if ev.type == "run_started":
            d["policy"] = {k: v for k, v in d["policy"].items() if k != "decision_policy"}
        if d.get("session_id") == ev.run_id:
            d["session_id"] = "<the run id>"
        if ev.type == "trajectory_recorded":
            d["trajectory_id"] = "-"
        return d

    return [(ev.type, ev.step, ev.domain, data(ev)) for ev in events]


#: the goal of the runs below; `Run.record_step` records it as each step's internal state
SOCKS = 'Open "Wool Socks"'


def step_line(
    run_id: str,
    step: int,
    command: str,
    url: str,
    *,
    ok: bool = True,
    error: str | None = None,
    target: dict[str, Any] | None = None,
    url_after: str | None = None,
) -> bytes:
    return (
        orjson.dumps(
            {
                "type": "step_recorded",
                "run_id": run_id,
                "step": step,
                "domain": "shop.example",
                "action": {"command": command, "args": {}},
                "target": target,
                "ok": ok,
                "error": error,
                "target_text": target["name"] if target else None,
                "internal_state": SOCKS,
                "env_before": {"url": url},
                "env_after": {"url": url_after or url},
            }
        )
        + b"\n"
    )


def test_a_run_through_the_command_line_is_logged_like_the_library_run(tmp_path: Path) -> None:
    by_cli, by_lib = tmp_path / "cli", tmp_path / "lib"
    started = cli(by_cli, "start-run", "--goal", SOCKS, "--url", SHOP, "--json")
    assert started.code == 0, started.err
    run_id = json.loads(started.out)["run_id"]
    assert cli(by_cli, "recall", "tier1", "--run", run_id, "--domain", "shop.example").code == 0
    link, accept = {"role": "link", "name": "Wool Socks"}, {"role": "button", "name": "Accept all cookies"}
    steps = (
        step_line(run_id, 1, "click", SHOP, ok=False, error=INTERCEPT, target=link)
        + step_line(run_id, 2, "press", SHOP)
        + step_line(run_id, 3, "click", SHOP, target=accept)
        + step_line(run_id, 4, "click", SHOP, target=link, url_after=SHOP + "socks")
    )
    assert cli(by_cli, "append", "-", stdin=steps).code == 0
    recalled = cli(
        by_cli,
        "recall",
        "error",
        "--command",
        "click",
        "--error",
        INTERCEPT,
        "--domain",
        "shop.example",
        "--run",
        run_id,
        "--step",
        "1",
        "--json",
    )
    # nothing learned yet: the seeds that answer a click an overlay intercepts (Enter, then Escape)
    assert recalled.code == 0 and [
        (l["failed_command"], l["source"], l["matched"], l["score"]) for l in json.loads(recalled.out)
    ] == [("click", "seed", "pattern+command", 5.0), (None, "seed", "pattern", 3.0)]
    done = cli(by_cli, "finish-run", run_id, "--success", "--outcome", "socks page open", "--json")
    assert done.code == 0, done.err
    # the click worked after "Accept all cookies", not after Escape: the site's lesson only
    assert len(json.loads(done.out)["lessons"]) == 1 and json.loads(done.out)["trajectory"] == f"traj_{run_id}"

    with memtape.open(by_lib) as mem, mem.start_run(goal=SOCKS, start_url=SHOP) as run:
        run.tier1()
        run.record_step(step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT)
        run.record_step(step=2, action="press")
        run.record_step(step=3, action="click", target='button "Accept all cookies"')
        run.record_step(step=4, action="click", target='link "Wool Socks"', url_after=SHOP + "socks")
        run.recall_error(command="click", error=INTERCEPT, step=1)
        run.finish(success=True, outcome="socks page open", duration_ms=0.0)
    cli_events = [e for e in logged(by_cli) if e.type != "error_recall"]
    lib_events = [e for e in logged(by_lib) if e.type != "error_recall"]
    assert shape(cli_events) == shape(lib_events)
    cli_recall, lib_recall = ([e for e in logged(d) if e.type == "error_recall"] for d in (by_cli, by_lib))
    assert shape(cli_recall) == shape(lib_recall)

    again = cli(
        by_cli, "recall", "error", "--command", "click", "--error", INTERCEPT, "--domain", "shop.example", "--json"
    )
    enter, escape = json.loads(again.out)  # no Escape recovery learned: the click worked after "Accept all"
    assert [(l["source"], l["failed_command"], l["error_pattern"], l["matched"]) for l in (enter, escape)] == [
        ("seed", "click", "intercepts pointer", "pattern+command"),
        ("seed", None, "intercepts pointer", "pattern"),
    ]
    assert enter["use_count"] == escape["use_count"] == 1
    site = json.loads(cli(by_cli, "recall", "domain", "--domain", "shop.example", "--json").out)
    assert len(site) == 1 and (site[0]["scope_domain"], site[0]["matched"], site[0]["score"]) == (
        "shop.example",
        "host",
        2.0,
    )
    traj = cli(by_cli, "recall", "trajectory", "--goal", 'open "wool socks"', "--url", SHOP + "x", "--json")
    found = json.loads(traj.out)
    assert found["replay"] and [s["command"] for s in found["steps"]] == ["press", "click", "click", "finish"]
    assert "replay yes" in cli(by_cli, "recall", "trajectory", "--goal", 'Open "Wool Socks"', "--url", SHOP).out
    last = logged(by_cli)[-4:]
    assert [e.type for e in last] == ["error_recall", "domain_recall", "trajectory_recalled", "trajectory_recalled"]
    assert all(e.run_id is None for e in last)


def test_recall_prints_plain_lines_and_every_recall_is_an_event(tmp_path: Path) -> None:
    assert cli(tmp_path, "recall", "tier1").out == "no lessons\n"  # the seeds come with the first run
    cli(tmp_path, "start-run", "--goal", "x", "--url", SHOP)
    out = cli(tmp_path, "recall", "tier1")
    assert out.code == 0 and out.out.count("\n") == 3 and "[tool_fallback, used 0]" in out.out
    assert cli(tmp_path, "recall", "error", "--command", "fill", "--error", "too many arguments: 3").out.startswith(
        "lsn_"
    )
    assert cli(tmp_path, "recall", "domain", "--domain", "nowhere.example").out == "no lessons\n"
    assert cli(tmp_path, "recall", "trajectory", "--goal", "x y", "--url", SHOP).out == "no trajectory\n"
    assert [e.type for e in logged(tmp_path)] == [
        "tier1_loaded",
        *["lesson_seeded"] * 3,
        "run_started",
        "tier1_loaded",
        "error_recall",
        "domain_recall",
        "trajectory_recalled",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("start-run", "--goal", "", "--url", SHOP),
        ("start-run", "--goal", "x"),
        ("start-run", "--goal", "x\x00", "--url", SHOP),
        ("finish-run", "run_nope", "--success"),
        ("finish-run", "run_nope"),
        ("recall", "error", "--command", "click", "--error", "x", "--step", "2"),
        ("recall", "error", "--command", "click", "--error", "x", "--run", "run_nope"),
        ("recall", "error", "--command", "", "--error", "x"),
        ("recall", "domain", "--domain", "not a/domain"),
        ("recall", "tier1", "--step", "-1", "--run", "r"),
        ("recall", "trajectory", "--goal", "x", "--url", ""),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    out = cli(tmp_path, *args)
    assert out.code != 0 and out.err.startswith("error: ") and out.err.count("\n") == 1, out.err
    assert not (tmp_path / "ledger.db").exists() or logged(tmp_path) == []


def test_a_reattached_run_is_where_its_last_step_left_it(tmp_path: Path) -> None:
    run_id = cli(tmp_path, "start-run", "--goal", "x", "--url", SHOP).out.strip()
    line = (
        orjson.dumps(
            {
                "type": "step_recorded",
                "run_id": run_id,
                "step": 1,
                "action": {"command": "click"},
                "ok": True,
                "env_before": {"url": SHOP + "p/1"},
            }
        )
        + b"\n"
    )
    assert cli(tmp_path, "append", "-", stdin=line).code == 0
    with memtape.open(tmp_path) as mem:
        run = mem.run(run_id)
        assert run.url == SHOP + "p/1" and [s.command for s in run.steps] == ["click"]
        run.finish(success=True)
        assert mem.state("runs")[0].final_url == SHOP + "p/1"


def test_finish_run_refuses_a_finished_run(tmp_path: Path) -> None:
    run_id = cli(tmp_path, "start-run", "--goal", "x", "--url", SHOP).out.strip()
    assert cli(tmp_path, "finish-run", run_id, "--failure").out.startswith(f"{run_id} finished (failure)")
    again = cli(tmp_path, "finish-run", run_id, "--success")
    assert again.code == 1 and again.err == f"error: run {run_id!r} is already failed\n"


def test_append_of_run_started_applies_the_start_of_run_policy(tmp_path: Path) -> None:
    """Seeds on first use, pruning of stale lessons, trajectory expiry: the same decisions as
    the library's start_run, through the writer both use; --raw applies none."""
    lesson = {
        "type": "lesson_recorded",
        "lesson_id": "",
        "lesson": "Scroll first.",
        "category": "error_recovery",
        "failed_command": "scroll",
        "error_pattern": "not visible",
        "occurred_at": "2026-01-01T00:00:00Z",
    }
    traj = {
        "type": "trajectory_recorded",
        "trajectory_id": "t1",
        "goal": "buy socks",
        "origin": "https://shop.example",
        "steps": [{"command": "click"}],
        "domain": "shop.example",
        "occurred_at": "2026-01-01T00:00:00Z",
    }
    old = orjson.dumps(lesson) + b"\n" + orjson.dumps(traj) + b"\n"
    start = (
        orjson.dumps(
            {
                "type": "run_started",
                "run_id": "r1",
                "goal": "buy socks",
                "start_url": SHOP,
                "occurred_at": "2026-06-01T00:00:00Z",
            }
        )
        + b"\n"
    )
    assert cli(tmp_path / "raw", "append", "--raw", "-", stdin=old + start).code == 0
    assert [e.type for e in logged(tmp_path / "raw")] == ["lesson_recorded", "trajectory_recorded", "run_started"]
    assert cli(tmp_path / "cli", "append", "-", stdin=old + start).code == 0
    events = logged(tmp_path / "cli")
    assert [e.type for e in events] == [
        "lesson_recorded",
        "trajectory_recorded",
        "lesson_seeded",
        "lesson_seeded",
        "lesson_seeded",
        "lessons_pruned",
        "trajectories_expired",
        "run_started",
    ]
    assert all(e.run_id == "r1" and e.occurred_at == "2026-06-01T00:00:00.000000Z" for e in events[2:7])
    off = orjson.dumps({"type": "run_started", "run_id": "r2", "goal": "x", "memory_enabled": False}) + b"\n"
    assert cli(tmp_path / "off", "append", "-", stdin=off).code == 0
    assert [e.type for e in logged(tmp_path / "off")] == ["run_started"]
