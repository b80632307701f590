"""Nothing above `ledger` knows which store it talks to: the agent, projections, audit, analytics
and `watch` run unchanged on a real PostgreSQL ledger (`--store postgresql://...`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtape.ledger.location import open_store
from memtape.projections.cache.materialize import load_state, rebuild
from memtape.projections.folds.state import digests

pytestmark = [pytest.mark.postgres, pytest.mark.browser]
CASES = str(Path(__file__).resolve().parent.parent / "agent" / "sites" / "cases.json")


def memtape(memory: Path, url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real command in its own process, on the PostgreSQL store."""
    env = {**os.environ, "MEMTAPE_STORE": url}
    done = subprocess.run(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check:
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def test_agent_projections_analytics_and_watch_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    memtape(memory, pg_url, "run", "--cases", CASES, "--case", "shop-view-socks", "--case", "shop-add-shoes")
    assert not (memory / "ledger.db").exists()  # the events went to the server, not to a SQLite file
    assert memtape(memory, pg_url, "verify").stdout.startswith("ok: ")

    with open_store(url=pg_url, create=False) as store:
        assert store.verify().ok
        head = store.head()
        runs = [e for e in store.read(types=["run_completed"])]
        assert len(runs) == 2 and all(e.data["success"] for e in runs)
        assert len(list(store.read(types=["trajectory_recorded"]))) == 2
        # the agent caught projections.db up incrementally; it equals a rebuild from the server's log
        incremental = json.loads(memtape(memory, pg_url, "state", "runs", "--json").stdout)
        fresh = rebuild(store, tmp_path / "rebuilt.db")
    assert {r["run_id"] for r in incremental} == {e.run_id for e in runs}
    assert head == fresh.head

    listed = json.loads(memtape(memory, pg_url, "runs", "--status", "completed", "--json").stdout)
    assert len(listed) == 2
    audit = json.loads(memtape(memory, pg_url, "audit", runs[0].run_id, "--json").stdout)
    assert audit["steps"] and any(s["action"] and s["action"]["command"] for s in audit["steps"])
    assert any(item["tokens"] > 0 for s in audit["steps"] for p in s["prompt"] for item in p["items"])
    analytics = json.loads(memtape(memory, pg_url, "analytics", "runs", "--format", "json").stdout)
    assert sum(len(rows) for rows in analytics.values()) > 0

    # watch follows the server with LISTEN/NOTIFY and keeps a projections.db of its own current
    watched = tmp_path / "watcher"
    env = {**os.environ, "MEMTAPE_STORE": pg_url}
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memtape",
            "--memory-dir",
            str(watched),
            "watch",
            "--max-events",
            "2",
            "--timeout",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not (watched / "projections.db").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        lines = (
            b'{"type": "fact_observed", "domain": "shop.test", "fact_type": "quirk", "key": "banner", '
            b'"value": "cookie banner on first visit"}\n'
            b'{"type": "selector_succeeded", "domain": "shop.test", "role": "button", "name": "Accept", '
            b'"selector": "#accept"}\n'
        )
        appended = subprocess.run(
            [sys.executable, "-m", "memtape", "--memory-dir", str(memory), "append", "-"],
            input=lines.decode(),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert appended.returncode == 0, appended.stderr
        out, err = watcher.communicate(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0, err
    assert "banner" in out and "#accept" in out
    with open_store(url=pg_url, create=False) as store:
        followed = load_state(store, watched / "projections.db")
        rebuilt = rebuild(store, tmp_path / "rebuilt-after.db")
        assert followed.head == rebuilt.head == store.head()
        assert digests(followed) == digests(rebuilt)
