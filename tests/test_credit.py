"""`memtape credit` (issue 34 item 3): every memory item credited by counterfactual, end to end on
the bundled sites: the runs' decisions asked again without each item, the task run again where an
item changed one, each result an `item_credited` event that `explain` and `state credit` show."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import memtape
from memtape.ledger.store import SqliteStore
from tests.cli_runner import CliResult, run_cli

pytestmark = pytest.mark.browser

#: a task on the shop, then a search: the box's suggestion list covers the Search button, which
#: only memory (the seed lesson "press Enter to submit") knows before the click fails
SHOES = ('Open "Wool Socks"', "http://shop.test/")
SOCKS = ('Search for "padel rackets"', "http://search.test/")
KEYS = {
    "item",
    "kind",
    "text",
    "shown",
    "changed",
    "turns_saved",
    "tokens_saved",
    "success_changed",
    "method",
    "runs",
}


def invoke(mem: Path, *args: str) -> CliResult:
    """The CLI in-process on its own thread (a command that starts a browser owns that thread's
    Playwright loop)."""
    box: list[CliResult] = []
    t = threading.Thread(target=lambda: box.append(run_cli("--memory-dir", str(mem), *args)))
    t.start()
    t.join(300)
    return box[0]


def ok(mem: Path, *args: str) -> str:
    result = invoke(mem, *args)
    assert result.code == 0, (result.out, result.err)
    return result.out


def credited(mem: Path) -> list[dict[str, Any]]:
    store = SqliteStore.open(mem / "ledger.db")
    try:
        return [dict(e.data) for e in store.read(types=["item_credited"])]
    finally:
        store.close()


@pytest.fixture(scope="module")
def learned_twice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tasks with memory on: the second, a search (nothing to replay, no pattern of the site
    yet), is told by a lesson alone to submit with Enter, which saves the click the list swallows."""
    mem = tmp_path_factory.mktemp("credit") / "mem"
    for goal, url in (SHOES, SOCKS):
        ok(mem, "run", "--goal", goal, "--url", url)
    return mem


def runs_of(mem: Path) -> list[str]:
    return [r["run_id"] for r in json.loads(ok(mem, "runs", "--json"))][::-1]


def test_credit_reproduces_every_decision_and_credits_the_tip_that_saved_turns(learned_twice: Path) -> None:
    mem = learned_twice
    first, second = runs_of(mem)
    report = json.loads(ok(mem, "credit", "--run", second, "--json"))
    assert set(report) == {"decisions", "reproduced", "items"}
    assert report["decisions"] > 0 and report["reproduced"] == report["decisions"]
    assert all(set(i) == KEYS for i in report["items"])
    saved = [i for i in report["items"] if i["turns_saved"] > 0]
    assert saved, report["items"]
    for item in report["items"]:
        assert item["shown"] >= item["changed"] >= 0
        if item["changed"] == 0:  # an item that changed no decision left the run as it was
            assert (item["turns_saved"], item["tokens_saved"], item["success_changed"]) == (0, 0, 0)
            assert item["method"] == "exact"
        else:
            assert item["method"] == "exact+rerun" and item["runs"][0] == second and len(item["runs"]) == 3
    top = report["items"][0]
    assert top in saved and top["kind"] == "lesson" and "press Enter" in top["text"]
    events = credited(mem)
    assert sorted(e["item"] for e in events) == sorted(i["item"] for i in report["items"])
    assert all(e["credited_run"] == second for e in events)
    explained = json.loads(ok(mem, "explain", top["item"], "--json"))
    assert explained["credit"]["turns_saved"] == top["turns_saved"] and explained["credit"]["credit"] == 1
    assert "credit: positive" in ok(mem, "explain", top["item"])
    state = json.loads(ok(mem, "state", "credit", "--json"))
    assert state[0]["item"] == top["item"] and state[0]["runs"] == [second]
    ranked = json.loads(ok(mem, "analytics", "credit", "--section", "items", "--format", "json"))
    assert [(r["item"], r["turns_saved"], r["changed"]) for r in ranked][0] == (
        top["item"],
        top["turns_saved"],
        top["changed"],
    )
    assert {r["item"] for r in ranked} == {i["item"] for i in report["items"]}
    assert all(r["tokens_spent_estimate"] >= r["shown"] > 0 for r in ranked)


def test_credit_again_replaces_the_run_s_credit_and_no_rerun_runs_nothing(learned_twice: Path) -> None:
    mem = learned_twice
    _, second = runs_of(mem)
    before = len(runs_of(mem))
    report = json.loads(ok(mem, "credit", "--run", second, "--no-rerun", "--json"))
    assert report["reproduced"] == report["decisions"] > 0
    assert all(i["method"] == "exact" and i["turns_saved"] == 0 and len(i["runs"]) == 2 for i in report["items"])
    assert any(i["changed"] > 0 for i in report["items"])
    state = json.loads(ok(mem, "state", "credit", "--json"))
    assert all(s["turns_saved"] == 0 and s["runs"] == [second] for s in state)  # the latest credit of the pair
    assert len(runs_of(mem)) == before  # the runs asked again live in forks, never in this ledger


def test_a_run_that_is_not_there_is_refused_and_nothing_is_written(learned_twice: Path) -> None:
    mem = learned_twice
    before = credited(mem)
    for bad in ("run_nosuch", ""):
        result = invoke(mem, "credit", "--run", bad, "--json")
        assert result.code == 1 and result.out == ""
        assert result.err.strip().count("\n") == 0 and "run" in result.err
    assert credited(mem) == before


def test_a_run_with_memory_off_is_skipped_with_why(learned_twice: Path) -> None:
    mem = learned_twice
    ok(mem, "run", "--goal", SOCKS[0], "--url", SOCKS[1], "--no-memory")
    off = runs_of(mem)[-1]
    assert json.loads(ok(mem, "credit", "--run", off, "--json")) == {"decisions": 0, "reproduced": 0, "items": []}
    assert "memory off" in invoke(mem, "credit", "--run", off).err


def test_the_library_answers_as_the_command_and_refuses_what_the_command_refuses(learned_twice: Path) -> None:
    mem = learned_twice
    _, second = runs_of(mem)[:2]
    with memtape.open(mem) as memory:
        before = credited(mem)
        for runs, rerun, why in (
            ("run_x", True, "runs must be a list"),
            ([""], True, "run id"),
            (["run_nosuch"], True, "no run 'run_nosuch'"),
            ([second], "yes", "rerun must be True or False"),
        ):
            with pytest.raises(memtape.MemtapeError, match=why):
                memory.credit(runs, rerun=rerun)  # type: ignore[arg-type]
        assert credited(mem) == before
        answer = memory.credit([second], rerun=False)
    by_cli = json.loads(ok(mem, "credit", "--run", second, "--no-rerun", "--json"))

    def same(report: dict[str, Any]) -> dict[str, Any]:
        """The report without the ids of the runs asked again (new ones each time)."""
        return {**report, "items": [{**i, "runs": i["runs"][:1]} for i in report["items"]]}

    assert same(answer) == same(by_cli) and answer["decisions"] == answer["reproduced"] > 0
