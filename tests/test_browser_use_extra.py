"""Without the browser-use extra (or with a browser-use older than the adapter's range),
importing the adapter is one line that names the install command."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys

import pytest

from memtape import MemtapeError

INSTALL = "pip install 'memtape[browser-use]'"


def test_without_browser_use_importing_the_adapter_names_the_extra() -> None:
    """A fresh interpreter where browser_use cannot be imported (as when it is not installed)."""
    code = (
        "import sys\n"
        "sys.modules['browser_use'] = None\n"
        "from memtape import MemtapeError\n"
        "try:\n"
        "    import memtape.integrations.browser_use\n"
        "except MemtapeError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    assert run.stdout == f"memtape browser-use integration needs the browser-use extra: {INSTALL}\n"


def test_a_browser_use_older_than_the_range_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.5.11" if name == "browser-use" else real(name))
    monkeypatch.delitem(sys.modules, "memtape.integrations.browser_use", raising=False)
    with pytest.raises(MemtapeError) as caught:
        importlib.import_module("memtape.integrations.browser_use")
    assert str(caught.value) == f"memtape.integrations.browser_use needs browser-use >= 0.6.0, found 0.5.11: {INSTALL}"
