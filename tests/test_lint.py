"""The linters and the layer contracts run inside the suite, from the repository root, as a developer would."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("command", [["ruff", "check", "."], ["mypy"], ["lint-imports"]], ids=lambda c: c[0])
def test_linter_passes_from_the_repository_root(command: list[str]) -> None:
    done = subprocess.run([str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_checks_every_module_of_the_library() -> None:
    """The links in memledger/ give mypy the folders' import names, so a bare `mypy` checks ledger/, projections/, ... too."""
    layers = sum(len(list((ROOT / folder).rglob("*.py"))) for folder in ["ledger", "projections", "agent", "analytics"])
    modules = layers + len(list((ROOT / "memledger").glob("*.py")))
    done = subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=280)
    checked = re.search(r"in (\d+) source files", done.stdout)
    assert checked and int(checked.group(1)) >= modules, done.stdout[-2000:]
