"""scripts/browser_use_range.py: the adapter's tests pass in fresh virtualenvs at both ends of
the browser-use range (its lower bound and the newest on the index). Builds two venvs from the
package index, so it is a stress test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from memtape.integrations.browser_use import MIN_VERSION

pytestmark = [pytest.mark.stress, pytest.mark.browser]
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "browser_use_range.py"


@pytest.mark.timeout(2400)
def test_the_adapter_passes_at_both_ends_of_the_browser_use_range(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(tmp_path)], capture_output=True, text=True, timeout=2300
    )
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all(
        re.fullmatch(r"browser-use [\w.]+: passed \(\d+ passed.*\)", line) for line in lines
    ), lines
    low, newest = (line.split()[1].rstrip(":") for line in lines)
    assert low == ".".join(map(str, MIN_VERSION))
    assert tuple(int(p) for p in newest.split(".")[:3]) > MIN_VERSION
