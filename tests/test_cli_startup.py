"""The command line starts with what it uses: `memtape --help` lists every command from memtape.cli's
summaries (kept equal here to each command's own short help) without importing a command's module,
a read command loads no extra, each command's module imports only the extra memtape.cli names for it,
and bench/cli_startup.py measures both beside `python -c pass`."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.utils import make_default_short_help
from packaging.requirements import Requirement

from memtape.cli import COMMANDS, cli
from memtape.ledger.extras import EXTRAS
from tests.bench_cli import assert_honest, bench_json

ROOT = Path(__file__).resolve().parent.parent
#: every module memtape imports from an extra (the top-level import names)
EXTRA_MODULES = {name for names in EXTRAS.values() for name in names}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _brought_by(extra: str) -> set[str]:
    """The top-level modules of every distribution `pip install 'memtape[extra]'` installs
    (the extra's requirements and theirs, recursively, as installed here)."""
    pending = [
        Requirement(r)
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    ]
    seen: set[str] = set()
    while pending:
        req = pending.pop()
        if req.name == "memtape":
            pending += [
                Requirement(r)
                for e in req.extras
                for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][e]
            ]
            continue
        if _name(req.name) in seen:
            continue
        seen.add(_name(req.name))
        for text in importlib.metadata.requires(req.name) or []:
            dep = Requirement(text)
            if (
                dep.marker is None
                or dep.marker.evaluate({"extra": ""})
                or any(dep.marker.evaluate({"extra": e}) for e in req.extras)
            ):
                pending.append(dep)
    return {
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if any(_name(d) in seen for d in dists)
    }


def _command(name: str) -> click.Command:
    module = importlib.import_module(f"memtape.commands.{COMMANDS[name].module}")
    return next(c for c in module.COMMANDS if c.name == name)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_summary_is_the_commands_own_short_help(name: str) -> None:
    """At every width click could list it at, the summary shortens to what the command itself would say."""
    command = _command(name)
    assert not command.hidden and not command.deprecated
    assert COMMANDS[name].summary == command.get_short_help_str(limit=10_000)
    for limit in range(12, 200):
        assert make_default_short_help(COMMANDS[name].summary, limit) == command.get_short_help_str(limit), limit


def test_help_lists_the_commands_as_click_would() -> None:
    """The listing from the summaries is the listing click draws from the commands themselves."""
    real = click.Group("memtape", commands=[_command(name) for name in COMMANDS])
    for width in (60, 80, 132):
        ours, theirs = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        with cli.make_context("memtape", ["--help"], resilient_parsing=True) as ctx:
            cli.format_commands(ctx, ours)
            real.format_commands(ctx, theirs)
        assert ours.getvalue() == theirs.getvalue() and "recall" in ours.getvalue()


def _modules_after(script: str) -> set[str]:
    """Every module a fresh interpreter has imported once `script` ran (it may exit)."""
    code = f"import json, sys\ntry:\n{script}\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_click_and_no_command() -> None:
    loaded = _modules_after("    from memtape.cli import main\n    main(['--help'])")
    assert "click" in loaded and "memtape.cli" in loaded
    assert not {m for m in loaded if m.startswith("memtape.commands")}
    assert not _tops(loaded) & {"pydantic", "rich", "sqlite_utils", "orjson", "zstandard", "numpy", *EXTRA_MODULES}
    assert "memtape.ledger.events" not in loaded and "memtape.ledger.store" not in loaded


def test_a_read_command_loads_no_extra(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "memtape",
            "--memory-dir",
            str(memory),
            "start-run",
            "--goal",
            "open the shop",
            "--url",
            "https://shop.test/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    loaded = _modules_after(
        f"    from memtape.cli import main\n    main({['--memory-dir', str(memory), 'recall', 'tier1', '--json']!r})"
    )
    assert "memtape.commands.runs" in loaded
    assert not _tops(loaded) & {"numpy", "sqlite_utils", *EXTRA_MODULES}


@pytest.mark.parametrize("module", sorted({entry.module for entry in COMMANDS.values()}))
def test_a_command_module_imports_only_the_extra_its_commands_name(module: str) -> None:
    """memtape.cli checks a command's extra before importing its module: the module imports no
    optional package beyond that extra (psycopg waits for a postgresql:// store)."""
    extras = {entry.extra for entry in COMMANDS.values() if entry.module == module}
    assert len(extras) == 1, f"the commands of memtape.commands.{module} must need the same extra"
    (extra,) = extras
    loaded = _tops(_modules_after(f"    import memtape.commands.{module}"))
    assert loaded & EXTRA_MODULES <= (_brought_by(extra) if extra else set()), (module, loaded & EXTRA_MODULES)


def test_the_start_up_bench_measures_both_commands_beside_python() -> None:
    out = bench_json("cli_startup", "--runs", "1", timeout=300)
    assert_honest(out["figures"])
    assert [f["name"] for f in out["figures"]] == ["memtape --help", "memtape recall tier1 --json"]
    assert all(f["baseline"] == "python -c pass" for f in out["figures"])
    assert out["pass_ms"] > 0 and out["help_ms"] > 0 and out["recall_ms"] > 0
    assert (out["help_bound_ms"], out["read_bound_ms"]) == (300.0, 500.0)
