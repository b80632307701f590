"""The `postgres` marker is on every test that starts PostgreSQL: `-m "not postgres"` sets up no
PostgreSQL server, and `-m postgres` selects every test that does (pytest's own setup plan says
which fixtures each test would start, without running any)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a test in pytest's setup plan: its id and the fixtures it uses
TEST_LINE = r"^\s+(tests/\S+::.*?) \(fixtures used: (.*)\)$"


def _plan(marker: str, files: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-q", "-n", "0", "-p", "no:randomly", "-m", marker, *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]  # 5: nothing selected
    return done.stdout


def test_every_test_that_starts_postgresql_is_marked_postgres() -> None:
    # the test files that can reach the server: they name its fixtures or start one themselves
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").glob("test_*.py")
        if re.search(r"\bpg_server\b|\bpg_url\b|TempPostgres", p.read_text()) and p.name != Path(__file__).name
    )
    assert len(files) >= 5
    unmarked = re.findall(TEST_LINE, _plan("not postgres", files), re.M)
    assert unmarked and not [test for test, used in unmarked if "pg_server" in used.split(", ")]
    marked = re.findall(TEST_LINE, _plan("postgres", files), re.M)
    assert len(marked) >= 52 and [test for test, used in marked if "pg_server" not in used.split(", ")] == []
