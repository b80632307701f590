"""The bundled policy decides from its recorded prompts alone, as a competent reader of the page:
on real Chromium, memory off, the shop's cookie dialog is closed first; and every decision of a
run, memory off or on, is made again from the ledger alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtape.agent.decisions import ask_again, recorded_decisions, same_call
from memtape.agent.sites import CASES_FILE
from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli

pytestmark = pytest.mark.browser


def _run(memory: Path, *flags: str) -> None:
    done = run_cli(
        "--memory-dir", str(memory), "run", "--cases", str(CASES_FILE), "--case", "shop-view-socks",
        "--case", "portal-profile", *flags,
    )  # fmt: skip
    assert done.code == 0, done.err


def test_memory_off_accepts_the_cookie_dialog_first_and_every_decision_is_made_again(tmp_path: Path) -> None:
    memory = tmp_path / ".agent-memory"
    _run(memory, "--no-memory")
    _run(memory)
    _run(memory)
    with SqliteStore.open(memory / "ledger.db") as store:
        runs = [e.run_id for e in store.read(types=["run_started"])]
        cases = {e.run_id: e.data.get("case_id") for e in store.read(types=["run_started"])}
        socks_off = runs[0]
        assert cases[socks_off] == "shop-view-socks"
        clicks = [
            e for e in store.read(run_id=socks_off, types=["step_recorded"]) if e.data["action"]["command"] == "click"
        ]
        assert clicks[0].data["target"]["name"] == "Accept all cookies"
        assert "memory" not in clicks[0].data["think"]  # the page said so, not memory
        asked = [d for r in runs for d in recorded_decisions(store, r)]
        assert len(asked) >= 15
        again = [(d, ask_again(d)) for d in asked]
        assert [(d.run_id, d.step) for d, a in again if not same_call(a, d)] == []
        # the password typed at login is redacted in the ledger, and the decision made again types the redaction
        assert any(d.args.get("value") == "[REDACTED]" for d in asked)
