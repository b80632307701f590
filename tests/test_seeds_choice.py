"""Seeds that fit the agent (issue 37 item 5): `memtape.open(path, seeds="default" | "none" |
"browser-use" | PATH)` and `--seeds` on the command line; the choice is recorded with each run
start, so the seeding decision replays (`verify --decisions`, experiments)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import memtape
from memtape.projections.replay import verify_decisions
from memtape.projections.seeds import BROWSER_USE_SEEDS, SEEDS
from tests.cli_runner import run_cli

SHOP = "https://shop.example/"
OWN = [
    {"lesson": "Prefer the site's own search box to browsing menus.", "category": "best_practice"},
    {
        "lesson": "When a date picker refuses typed dates, click the day in the calendar.",
        "category": "tool_fallback",
        "failed_command": "type",
        "error_pattern": "date picker",
    },
]


def tier1_texts(mem: Any) -> list[str]:
    with mem.start_run(goal="g", start_url=SHOP) as run:
        texts = [l.text for l in run.tier1()]
        run.finish(success=True)
    return texts


def seeded(mem: Any) -> list[str]:
    return [e.data["lesson"] for e in mem.store.read(types=["lesson_seeded"])]


def test_default_seeds_are_seed_001s(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "a") as mem:
        assert sorted(tier1_texts(mem)) == sorted(s[0] for s in SEEDS)
    with memtape.open(tmp_path / "b", seeds="default") as mem:
        tier1_texts(mem)
        assert sorted(seeded(mem)) == sorted(s[0] for s in SEEDS)


def test_no_seeds_give_an_empty_tier1_and_replay(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem", seeds="none") as mem:
        assert tier1_texts(mem) == [] and tier1_texts(mem) == []
        assert seeded(mem) == []
        (started, *_) = mem.store.read(types=["run_started"])
        assert started.data["policy"]["seeds"] == []
        check = verify_decisions(mem.store)
        assert check.ok, check.reason
        assert mem.experiment({"promotion_min_uses": 3})["decisions"] is not None


def test_a_json_file_of_the_agents_own_seeds(tmp_path: Path) -> None:
    own = tmp_path / "seeds.json"
    own.write_text(json.dumps(OWN))
    with memtape.open(tmp_path / "mem", seeds=own) as mem:
        assert sorted(tier1_texts(mem)) == sorted(s["lesson"] for s in OWN)
        with mem.start_run(goal="g", start_url=SHOP) as run:
            hits = run.recall_error(command="type", error="the date picker ignored the text", step=1)
            assert [l.text for l in hits] == [OWN[1]["lesson"]]
            run.finish(success=True)
        check = verify_decisions(mem.store)
        assert check.ok, check.reason


def test_browser_use_seeds_name_browser_use_actions(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem", seeds="browser-use") as mem:
        texts = tier1_texts(mem)
    assert sorted(texts) == sorted(s.lesson for s in BROWSER_USE_SEEDS if s.category != "error_recovery")
    assert all("fill" not in t and "type(text)" not in t for t in texts)
    assert any("input_text" in t for t in texts)


def test_seeds_are_written_once_by_the_first_run(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        tier1_texts(mem)
    with memtape.open(tmp_path / "mem", seeds="none") as mem:  # already seeded: nothing is unseeded
        assert sorted(tier1_texts(mem)) == sorted(s[0] for s in SEEDS)
        assert len(seeded(mem)) == len(SEEDS)


BAD_FILES = [
    ("not json", "is not JSON"),
    ('{"lesson": "x"}', "list"),
    ('[{"lesson": ""}]', "lesson"),
    ('[{"lesson": "x", "category": "site_spcific"}]', "category"),
    ('[{"lesson": "x", "surprise": 1}]', "surprise"),
    (json.dumps([{"lesson": f"l{i}"} for i in range(51)]), "50"),
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES)
def test_a_bad_seeds_file_is_refused_in_one_line_and_writes_nothing(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "seeds.json"
    bad.write_text(content)
    with pytest.raises(memtape.MemtapeError) as refused:
        memtape.open(tmp_path / "mem", seeds=bad)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "mem").exists()
    result = run_cli(
        "--memory-dir", str(tmp_path / "mem"), "--seeds", str(bad), "start-run", "--goal", "g", "--url", SHOP
    )
    assert result.code == 1 and message in result.err and len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "mem" / "ledger.db").exists()


@pytest.mark.parametrize("choice", ["", "nope", 3, "/no/such/seeds.json"])
def test_a_bad_choice_is_refused(tmp_path: Path, choice: Any) -> None:
    with pytest.raises(memtape.MemtapeError):
        memtape.open(tmp_path / "mem", seeds=choice)
    assert not (tmp_path / "mem").exists()


def test_the_command_line_takes_seeds(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    run_id = run_cli("--memory-dir", str(memory), "--seeds", "none", "start-run", "--goal", "g", "--url", SHOP).out
    assert run_id.startswith("run_")
    tier1 = json.loads(run_cli("--memory-dir", str(memory), "state", "tier1", "--json").out)
    assert tier1 == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.fixed_dictionaries(
            {"lesson": st.text(min_size=1, max_size=80).filter(str.strip)},
            optional={
                "category": st.sampled_from(["tool_fallback", "best_practice", "error_recovery"]),
                "failed_command": st.text(min_size=1, max_size=20),
                "error_pattern": st.text(min_size=1, max_size=20),
            },
        ),
        max_size=5,
    )
)
def test_any_valid_seeds_file_replays(tmp_path_factory: pytest.TempPathFactory, lessons: list[dict[str, str]]) -> None:
    where = tmp_path_factory.mktemp("seeds")
    own = where / "seeds.json"
    own.write_text(json.dumps(lessons))
    try:
        mem = memtape.open(where / "mem", seeds=own)
    except memtape.MemtapeError as refused:  # text the ledger cannot store (NUL, lone surrogates)
        assert any("\x00" in v or any("\ud800" <= c <= "\udfff" for c in v) for l in lessons for v in l.values()), (
            refused
        )
        return
    with mem:
        tier1_texts(mem)
        check = verify_decisions(mem.store)
        assert check.ok, check.reason


def _mcp(memory: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, env=dict(os.environ), args=["-m", "memtape", "--memory-dir", str(memory), "mcp", *args]
    )


def test_mcp_takes_seeds(tmp_path: Path) -> None:
    async def tier1(memory: Path, *args: str) -> Any:
        async with stdio_client(_mcp(memory, *args)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            started = await session.call_tool("start_run", {"goal": "g", "start_url": SHOP})
            run_id = json.loads(started.content[0].text)["run_id"]  # type: ignore[union-attr]
            await session.call_tool("tier1", {"run_id": run_id})
        with memtape.open(memory) as mem:
            return seeded(mem)

    assert asyncio.run(tier1(tmp_path / "none", "--seeds", "none")) == []
    assert sorted(asyncio.run(tier1(tmp_path / "bu", "--seeds", "browser-use"))) == sorted(
        s.lesson for s in BROWSER_USE_SEEDS
    )


def test_serve_refuses_a_bad_seeds_file_before_anything_is_written(tmp_path: Path) -> None:
    bad = tmp_path / "seeds.json"
    bad.write_text('[{"lesson": "x", "category": "site_spcific"}]')
    for args in (("serve", "--seeds", str(bad)), ("--seeds", str(bad), "serve")):
        result = run_cli("--memory-dir", str(tmp_path / "mem"), *args, "--port", "0")
        assert result.code == 1 and "category" in result.err and len(result.err.strip().splitlines()) == 1
        assert not (tmp_path / "mem").exists()
