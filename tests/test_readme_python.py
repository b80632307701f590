"""Every ```python block of the README runs as written: each in a fresh empty directory, in its
own interpreter (no state shared between blocks or with the test process)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"((?:^<!--[^\n]*-->\n)*)^```python\n(.*?)^```$", re.S | re.M)
SKIP = re.compile(r"<!-- docs-test: skip \((.+?)\) -->")
TEST_FILE = re.compile(r"tests/test_\w+\.py")


def python_blocks() -> list[tuple[int, str]]:
    """(line number, source) of every python block that runs without a model API key."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in BLOCK.finditer(text)
            if not SKIP.search(m.group(1))]


def test_a_skipped_block_names_the_test_that_covers_it() -> None:
    reasons = [SKIP.search(m.group(1)) for m in BLOCK.finditer(README.read_text())]
    named = [TEST_FILE.search(r.group(1)) for r in reasons if r]
    assert len(named) <= 1 and all(n and (README.parent / n.group(0)).exists() for n in named)


def test_the_readme_shows_the_api_with_python() -> None:
    assert any("memtape.open(" in code for _, code in python_blocks())


@pytest.mark.parametrize(("line", "code"), python_blocks(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_python_block_runs(tmp_path: Path, line: int, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    done = subprocess.run([sys.executable, "-"], input=code, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, f"README.md line {line}: the block failed:\n{done.stderr[-3000:]}"
