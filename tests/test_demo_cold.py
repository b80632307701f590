"""`memtape demo` always measures a cold start: run twice on one directory, it says the memory is
there, runs in a fresh `demo-N/` beside it and prints the same table (the README's main command)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memtape.agent.sites import CASES_FILE
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli

pytestmark = pytest.mark.browser


def _totals(out: str) -> list[list[str]]:
    """The Totals rows without the columns that are timings (memory share, wall time)."""
    rows = [
        [c.strip() for c in line.split("│")[1:-1]]
        for line in out.splitlines()
        if re.match(r"│ memory (off|on #\d)", line)
    ]
    return [row[:-2] for row in rows]


def _memory(out: str) -> list[list[str]]:
    """The rows of the memory table: memory tokens by source per pass, and the decisions that used memory."""
    table = out.split("Memory tokens by source", 1)[1]
    return [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]


def test_the_demo_twice_on_one_directory_prints_the_same_table(tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([c for c in json.loads(Path(CASES_FILE).read_text()) if c["id"] == "shop-add-shoes"]))
    memory = tmp_path / ".agent-memory"
    first = run_cli("--memory-dir", str(memory), "demo", "--cases", str(cases), "--no-audit")
    assert first.code == 0, first.err
    assert "already holds memory" not in first.out
    with SqliteStore.open(memory / "ledger.db") as store:
        head = store.head()
    second = run_cli("--memory-dir", str(memory), "demo", "--cases", str(cases), "--no-audit")
    assert second.code == 0, second.err
    assert f"{memory} already holds memory ({head} events); the demo starts cold in {memory / 'demo-2'}" in " ".join(
        second.out.split()
    )
    assert _totals(first.out) == _totals(second.out) and len(_totals(first.out)) == 4
    # the warm pass without replay: every step decided by the policy, none replayed
    no_replay = next(row for row in _totals(first.out) if row[0] == "memory on #2, no replay")
    assert no_replay[3] == no_replay[2] != "0" and no_replay[4] == "0"
    assert _memory(first.out) == _memory(second.out)
    sources = [row[0] for row in _memory(first.out)]
    assert sources[-2:] == ["all memory", "decisions using memory"] and "tier1" in sources
    off, on1, on2, warm = _memory(first.out)[-1][1:]
    assert off.startswith("0/") and on2.split("/")[0] == on2.split("/")[1]  # nothing read off; #2 replays every step
    assert warm.split("/")[1] == no_replay[3]  # without replay every decision is the policy's
    assert "counted by the BPE tokenizer cl100k_base" in " ".join(first.out.split())
    with SqliteStore.open(memory / "ledger.db") as store:
        assert store.head() == head  # the first memory is left as it was
        system = [
            [(i["source"], bool(i["event_ids"])) for i in e.data["items"]]
            for e in store.read(types=["context_built"])
            if e.data["prompt"] == "system"
        ]
        # the instruction and the goal are the agent's own text; Tier 1, memory, is an item of its own (none
        # with memory off); a pass that replays every step asks no model, so records no system prompt
        assert system == [[("system", False), ("goal", False)], [("system", False), ("tier1", True), ("goal", False)]]
    with SqliteStore.open(memory / "demo-2" / "ledger.db") as store:
        assert store.head() > 0  # the second demo wrote into its own ledger
