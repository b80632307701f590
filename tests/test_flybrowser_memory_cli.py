"""`memtape run --explore/--context` and `memtape state` for seed 003's layered memory, end to
end in real Chromium (one browser for both runs: a cases file with an exploration and a goal)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

pytestmark = pytest.mark.browser


def test_run_explore_and_context_then_state(tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps(
            [
                {"id": "explore", "site": "docs.test", "start_url": "/", "explore": {"max_depth": 1, "max_pages": 4}},
                {"id": "older", "site": "help.test", "start_url": "/", "goal": 'Open "Older topics"'},
            ]
        )
    )
    mem = str(tmp_path / "mem")
    res = run_cli(
        "--memory-dir",
        mem,
        "run",
        "--cases",
        str(cases),
        "--context",
        "order_number=A-1234",
        "--context",
        "preferred_language=English",
    )
    assert res.code == 0, res.err
    pages = json.loads(run_cli("--memory-dir", mem, "state", "sitemap", "--domain", "docs.test", "--json").out)
    assert sum(p["visited"] for p in pages) == 4 and all(p["depth"] <= 1 for p in pages if p["visited"])
    run_id = json.loads(run_cli("--memory-dir", mem, "runs", "--domain", "help.test", "--json").out)[0]["run_id"]
    ctx = json.loads(run_cli("--memory-dir", mem, "state", "context", "--run", run_id, "--json").out)
    assert {(c["kind"], c["key"], c["value"]) for c in ctx} == {
        ("user", "order_number", "A-1234"),
        ("user", "preferred_language", "English"),
    }
    short = json.loads(run_cli("--memory-dir", mem, "state", "short-term", "--run", run_id, "--json").out)
    assert len(short) == 1 and short[0]["completed"] and short[0]["navigation_path"][-1] == "http://help.test/older"
    snaps = json.loads(run_cli("--memory-dir", mem, "state", "snapshots", "--run", run_id, "--json").out)
    assert [s["url"] for s in snaps] == ["http://help.test/", "http://help.test/older"]


def test_bad_run_options_are_refused_before_anything_runs(tmp_path: Path) -> None:
    mem = str(tmp_path / "mem")
    bad = run_cli("--memory-dir", mem, "run", "--goal", "x", "--url", "http://help.test/", "--context", "novalue")
    assert bad.code == 2 and "KEY=VALUE" in bad.err
    both = run_cli("--memory-dir", mem, "run", "--goal", "x", "--explore", "http://docs.test/")
    assert both.code == 2 and "--explore URL runs alone" in both.err
    deep = run_cli("--memory-dir", mem, "run", "--explore", "http://docs.test/", "--max-depth", "-1")
    assert deep.code == 2 and "--max-depth" in deep.err
    assert not (tmp_path / "mem" / "ledger.db").exists()
