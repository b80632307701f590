"""The suite never reads or writes the folder it is run from: every test runs in an empty directory
of its own with no MEMTAPE_* variable (tests/conftest.py), so the README's main command (the demo,
which leaves its memory in `.agent-memory` there) followed by its test command passes, and leaves
that memory as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import memtape

ROOT = Path(__file__).resolve().parents[1]

#: tests whose commands once fell back on the folder they ran from (`.agent-memory`) or on the
#: environment's memory, in-process and in a subprocess
PICKY = [
    "tests/test_pgstore.py::test_cli_copy_and_commands_on_a_postgresql_url",
    "tests/test_ledger_cli.py",
    "tests/test_suite_isolation.py::test_each_test_runs_in_an_empty_directory_of_its_own",
]


def plant(memory: Path) -> None:
    """A real memory: one run through the API, projections.db caught up."""
    with memtape.open(memory) as mem:
        with mem.start_run(goal="planted goal", start_url="https://planted.example/") as run:
            run.record_step(step=1, action="click", target='button "Planted"')
            run.record_lesson("a planted lesson", category="error_recovery", step=1)
            run.finish(success=True, outcome="planted")
        mem.state("lessons")


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_each_test_runs_in_an_empty_directory_of_its_own() -> None:
    here = Path.cwd()
    assert here != ROOT and ROOT not in here.parents and list(here.iterdir()) == []
    assert [name for name in os.environ if name.startswith("MEMTAPE_") or name in ("COLUMNS", "LINES")] == []


def test_the_readme_test_command_after_its_demo_leaves_the_demo_memory_alone(tmp_path: Path) -> None:
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    plant(checkout / ".agent-memory")
    plant(elsewhere / "memory")
    before = files(tmp_path)
    env = {
        **os.environ,
        "MEMTAPE_DIR": str(elsewhere / "memory"),
        "MEMTAPE_TOKEN": "planted-token",
        "MEMTAPE_STORE": f"sqlite:///{elsewhere / 'memory' / 'ledger.db'}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", *(str(ROOT / t) for t in PICKY)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert files(tmp_path) == before
