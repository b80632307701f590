"""The linters and the layer contracts run inside the suite, from the repository root, as a developer would."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


CHECKS = [["ruff", "format", "--check", "."], ["ruff", "check", "."], ["mypy"], ["lint-imports"]]


@pytest.mark.parametrize("command", CHECKS, ids=" ".join)
def test_linter_passes_from_the_repository_root(command: list[str]) -> None:
    done = subprocess.run([str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_pre_commit_runs_the_checks_the_suite_runs() -> None:
    """A developer's commit hook and the suite check the same things, the same way."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert [hook["entry"].split() for hook in hooks] == [[f".venv/bin/{c[0]}", *c[1:]] for c in CHECKS]
    assert all(hook["pass_filenames"] is False and hook["language"] == "system" for hook in hooks)


def test_mypy_checks_every_module_of_the_library() -> None:
    """The links in memtape/ give mypy the folders' import names, so a bare `mypy` checks ledger/, projections/, ... too."""
    layers = sum(len(list((ROOT / folder).rglob("*.py"))) for folder in ["ledger", "projections", "agent", "analytics"])
    modules = layers + len(list((ROOT / "memtape").glob("*.py")))
    done = subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=280)
    checked = re.search(r"in (\d+) source files", done.stdout)
    assert checked and int(checked.group(1)) >= modules, done.stdout[-2000:]


def _contract(kind: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["type"] == kind)


def test_the_layers_contract_names_the_whole_face() -> None:
    """The top layer lists every module of memtape/ itself (the links to the library folders aside),
    so a new face module cannot slip under the layers; below it agent | analytics, projections, ledger."""
    layers = _contract("layers")["layers"]
    face = {m.strip() for m in layers[0].split(":")}
    found = {f"memtape.{p.stem}" for p in (ROOT / "memtape").glob("*.py") if p.stem != "__init__"}
    found |= {
        f"memtape.{p.name}"
        for p in (ROOT / "memtape").iterdir()
        if p.is_dir() and not p.is_symlink() and (p / "__init__.py").exists()
    }
    assert face == found
    assert layers[1:] == ["memtape.agent | memtape.analytics", "memtape.projections", "memtape.ledger"]


def test_lint_imports_sees_the_library_under_its_installed_name() -> None:
    """Every module of ledger/, projections/, agent/ and analytics/ is in the graph lint-imports builds
    from the repository root, as memtape.<folder>.<module> (the name setuptools' package-dir installs),
    so the contracts cover all of them."""
    graph = grimp.build_graph("memtape", cache_dir=None)
    for folder in ("ledger", "projections", "agent", "analytics"):
        for path in (ROOT / folder).rglob("*.py"):
            name = ".".join(("memtape", folder, *path.relative_to(ROOT / folder).with_suffix("").parts))
            assert name.removesuffix(".__init__") in graph.modules, name


def test_no_module_of_the_package_is_over_1000_lines() -> None:
    """A module that outgrows 1,000 lines is split by job (issue 36): the API, the events, the folds."""
    linked = {p for p in (ROOT / "memtape").iterdir() if p.is_symlink()}  # the layers, read in their folders
    paths = [p for folder in ("ledger", "projections", "agent", "analytics") for p in (ROOT / folder).rglob("*.py")]
    paths += [p for p in (ROOT / "memtape").rglob("*.py") if not any(link in p.parents for link in linked)]
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in paths}
    assert len(sizes) > 100 and {path: n for path, n in sizes.items() if n > 1000} == {}
