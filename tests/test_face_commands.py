"""The command line lives in the face (memtape/commands/) and loads a command's module only
when that command runs: `memtape stats` never imports the HTTP server or the MCP SDK."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memtape.cli import COMMAND_MODULES, cli

HEAVY = ("fastapi", "uvicorn", "mcp", "duckdb", "playwright", "matplotlib")


def test_each_command_is_where_the_group_looks_for_it() -> None:
    modules = set(COMMAND_MODULES.values())
    for name in modules:
        defined = {c.name for c in importlib.import_module(f"memtape.commands.{name}").COMMANDS}
        assert defined == {c for c, m in COMMAND_MODULES.items() if m == name}, name


def test_help_lists_every_command() -> None:
    with cli.make_context("memtape", ["--help"], resilient_parsing=True) as ctx:
        assert cli.list_commands(ctx) == sorted(COMMAND_MODULES)
        assert all(cli.get_command(ctx, name) is not None for name in COMMAND_MODULES)
        assert cli.get_command(ctx, "no-such-command") is None


def _modules_after(memory: Path, *args: str) -> set[str]:
    """Every module imported by `memtape ARGS` run in a fresh interpreter."""
    script = (
        "import json, sys\nfrom memtape.cli import main\n"
        f"try:\n    main({['--memory-dir', str(memory), *args]!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _loaded_after(memory: Path, *args: str) -> set[str]:
    """The heavy top-level packages imported by `memtape ARGS` run in a fresh interpreter."""
    return {m.split(".")[0] for m in _modules_after(memory, *args)} & set(HEAVY)


@pytest.mark.parametrize("args", [["schema", "run_started"], ["stats"], ["events"], ["state", "lessons"]])
def test_a_command_loads_only_what_it_uses(tmp_path: Path, args: list[str]) -> None:
    memory = tmp_path / "memory"
    line = b'{"type":"run_started","run_id":"r1","goal":"buy socks","domain":"a.com"}\n'
    appended = subprocess.run(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory), "append", "--raw", "-"],
        input=line,
        capture_output=True,
        timeout=120,
    )
    assert appended.returncode == 0, appended.stderr
    assert _loaded_after(memory, *args) == set()


def test_serving_loads_the_server(tmp_path: Path) -> None:
    """The other side of the test above: the module of `serve` does load FastAPI."""
    assert {"fastapi", "uvicorn"} <= _loaded_after(tmp_path, "serve", "--help")


#: what a cold `memtape analytics ...` over a current mirror has no use for: the agent, the API,
#: experiments, the audit and explain commands, filling the mirror (Arrow, numpy), creating a ledger
#: (sqlite-utils), following one (watchfiles), progress bars, and rich's console and tables (a piped
#: table is drawn by memtape.output itself)
NOT_FOR_A_COLD_ANALYSIS = (
    "memtape.api",
    "memtape.agent",
    "memtape.analytics.experiment",
    "memtape.analytics.explain",
    "memtape.commands.audit",
    "memtape.commands.experiment",
    "pyarrow",
    "numpy",
    "sqlite_utils",
    "watchfiles",
    "rich.progress",
    "rich.console",
    "rich.table",
    "matplotlib",
    "playwright",
    "fastapi",
    "mcp",
)


def test_a_cold_analysis_loads_duckdb_and_little_else(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    lines = b"".join(
        b'{"type":"run_started","run_id":"r%d","goal":"buy socks","domain":"a.com"}\n' % i for i in range(3)
    )
    appended = subprocess.run(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory), "append", "--raw", "-"],
        input=lines,
        capture_output=True,
        timeout=120,
    )
    assert appended.returncode == 0, appended.stderr
    first = _modules_after(memory, "analytics", "runs")  # builds the mirror: Arrow carries the rows in
    assert "pyarrow" in first
    again = _modules_after(memory, "analytics", "runs")
    assert "duckdb" in again and "memtape.analytics.mirror" in again
    assert {m for m in again if any(m == n or m.startswith(f"{n}.") for n in NOT_FOR_A_COLD_ANALYSIS)} == set()
