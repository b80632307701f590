"""ledger/extras.py: the one place an optional dependency is asked for. A missing one is a
MissingExtra (a LedgerError, so the face prints it as its one line and the API raises it as
MemtapeError) naming the extra to install; a module that is there but broken is not hidden."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

import memtape
from memtape.ledger.errors import LedgerError
from memtape.ledger.extras import EXTRAS, MissingExtra, load, missing, require

ROOT = Path(__file__).resolve().parent.parent


def test_every_extra_named_here_is_one_of_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras) and {
        "agent",
        "analytics",
        "server",
        "mcp",
        "postgres",
        "browser-use",
        "all",
    } <= set(extras)


def test_a_missing_module_is_one_line_naming_its_extra() -> None:
    with pytest.raises(MissingExtra) as caught:
        load("memtape_test_no_such_package", "analytics", "analytics")
    assert str(caught.value) == "memtape analytics needs the analytics extra: pip install 'memtape[analytics]'"
    assert isinstance(caught.value, LedgerError) and isinstance(caught.value, memtape.MemtapeError)
    assert (caught.value.what, caught.value.extra) == ("analytics", "analytics")


def test_an_installed_extra_loads_and_requires_nothing_more() -> None:
    """The test environment has every extra (scripts/setup installs .[all,dev])."""
    assert all(missing(extra) == [] for extra in EXTRAS)
    for extra in EXTRAS:
        require("this test", extra)
    assert load("duckdb", "analytics", "analytics") is sys.modules["duckdb"]


def test_a_broken_module_is_not_called_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that is there but imports something absent raises that, not a wrong advice."""
    (tmp_path / "memtape_test_broken.py").write_text("import memtape_test_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="memtape_test_absent_dependency"):
        load("memtape_test_broken", "analytics", "analytics")
