"""The switches an experiment turns: `--set NAME=VALUE` on `memtape run` and `memtape demo` (the keys
of `memtape experiment`), the memory switches of `Thresholds`, and prompt sections left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtape.agent.loop import RunConfig, run_task
from memtape.agent.policy import ScriptedPolicy
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import SqliteStore
from memtape.projections.parameters import Thresholds
from memtape.projections.recording.memory import RecordingMemory
from tests.cli_runner import run_cli
from tests.fake_sites import COOKIE_LINKS, COOKIE_PAGES, CookieSite

START = "http://cookies.test/"


@pytest.mark.parametrize(
    ("command", "pair", "said"),
    [
        ("run", "nosuch=1", "no such policy parameter"),
        ("run", "replay=maybe", "expected a bool"),
        ("run", "replay", "expected NAME=VALUE"),
        ("run", "recall_top_k=-1", "recall_top_k"),
        ("demo", "nosuch=1", "no such policy parameter"),
        ("demo", "learned_patterns=2", "expected a bool"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, command: str, pair: str, said: str
) -> None:
    memory = tmp_path / "mem"
    args = ["--goal", 'Open "X"', "--url", "http://shop.test/"] if command == "run" else []
    done = run_cli("--memory-dir", str(memory), command, *args, "--set", pair)
    assert done.code != 0 and said in done.err and done.err.strip().count("\n") == 0, done.err
    assert not (memory / "ledger.db").exists() or SqliteStore.open(memory / "ledger.db").head() == 0


def test_unknown_sections_are_refused() -> None:
    with pytest.raises(LedgerError, match="no memory section 'nope'"):
        RunConfig(sections_off=frozenset({"nope"}))


def _learn_twice(tmp_path: Path, thresholds: Thresholds, config: RunConfig | None = None) -> SqliteStore:
    """The cookie site twice with one goal: the second run could replay the first."""
    store = SqliteStore.open(tmp_path / "ledger.db")
    memory = RecordingMemory(store, tmp_path / "projections.db", thresholds)
    for _ in range(2):
        run_task(
            CookieSite(COOKIE_PAGES, COOKIE_LINKS),
            memory,
            ScriptedPolicy(),
            goal='Click "Go"',
            start_url=START,
            config=config,
        )
    return store


def test_the_switches_keep_their_memory_out(tmp_path: Path) -> None:
    (tmp_path / "on").mkdir()
    on = _learn_twice(tmp_path / "on", Thresholds())
    replayed = [e.data["replay"] for e in on.read(types=["trajectory_recalled"]) if "replay" in e.data]
    loaded = [e.data for e in on.read(types=["tier1_loaded"])]
    assert any(replayed) and loaded[0]["count"] > 0
    (tmp_path / "off").mkdir()
    off = _learn_twice(tmp_path / "off", Thresholds(replay=False, seed_lessons=False, learned_patterns=False))
    assert not any(e.data.get("replay") for e in off.read(types=["trajectory_recalled"]))
    assert all(e.data["count"] == 0 for e in off.read(types=["tier1_loaded"]))
    prompts = [i["source"] for e in off.read(types=["context_built"]) for i in e.data["items"]]
    assert "tier1" not in prompts and "learned_patterns" not in prompts
    (tmp_path / "cut").mkdir()
    cut = _learn_twice(tmp_path / "cut", Thresholds(replay=False), RunConfig(sections_off=frozenset({"tier1"})))
    assert "tier1" not in [i["source"] for e in cut.read(types=["context_built"]) for i in e.data["items"]]
