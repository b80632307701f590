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
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks() -> list[tuple[int, str]]:
    """(line number, source) of every python block."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_readme_shows_the_api_with_python() -> None:
    assert any("memledger.open(" in code for _, code in python_blocks())


@pytest.mark.parametrize(("line", "code"), python_blocks(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_python_block_runs(tmp_path: Path, line: int, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")}
    done = subprocess.run([sys.executable, "-"], input=code, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, f"README.md line {line}: the block failed:\n{done.stderr[-3000:]}"
