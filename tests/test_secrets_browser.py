"""Secrets never at rest, with the real agent: `memtape run` in Chromium on the bundled portal logs
in with a goal that names its password without the word "password", then types an API key and a
GitHub token into an ordinary field the page then shows; nothing of them is in any byte written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memtape.ledger.redact import MARKER
from memtape.ledger.store import SqliteStore
from tests import secret_shapes as S
from tests.cli_runner import run_cli
from tests.security_support import produce_outputs, scan

pytestmark = pytest.mark.browser
PASSWORD = "correct-horse-battery"
DISPLAY = f"{S.OPENAI} {S.GITHUB}"
CASES = [
    {
        "id": "login-using",
        "site": "portal.test",
        "start_url": "/login",
        "goal": f'Log in as "demo" using "{PASSWORD}"',
        "success": {"url_pattern": "/dashboard$", "text": "Welcome, demo"},
    },
    {
        "id": "profile-secret",
        "site": "portal.test",
        "start_url": "/login",
        "goal": f'Sign in as "demo" using "{PASSWORD}", open "Profile", set "Display name" to "{DISPLAY}" '
        'and click "Save profile"',
        "success": {"url_pattern": "/profile$", "text": "Profile saved"},
    },
]


def test_a_real_run_stores_no_secret(tmp_path: Path) -> None:
    memory_dir = tmp_path / ".agent-memory"
    cases = tmp_path / "cases.json"
    cases.write_bytes(orjson.dumps(CASES))
    r = run_cli("--memory-dir", str(memory_dir), "run", "--cases", str(cases))
    assert r.code == 0, r.err
    r = run_cli("--memory-dir", str(memory_dir), "runs", "--json")
    runs = orjson.loads(r.out)
    assert sorted((row["case_id"], row["success"]) for row in runs) == [("login-using", True), ("profile-secret", True)]
    store = SqliteStore.open(memory_dir / "ledger.db")
    try:
        fills = [
            e.data["action"]["args"]
            for e in store.read(types=["step_recorded"])
            if e.data["action"]["command"] in ("fill", "type")
        ]
        assert {"value": MARKER, "ref": MARKER} in fills  # the password, typed into the password field
        assert any(a.get("value") == f"{MARKER} {MARKER}" for a in fills)  # the display name's two tokens
        goals = [e.data["goal"] for e in store.read(types=["run_started"])]
        assert goals[0] == f'Log in as "demo" using "{MARKER}"'
    finally:
        store.close()
    produce_outputs(memory_dir, memory_dir / "out")
    assert scan(memory_dir, [PASSWORD, S.OPENAI, S.GITHUB]) == []
