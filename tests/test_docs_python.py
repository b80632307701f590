"""Every ```python block of the README and of docs/ runs as written: each in a fresh empty
directory, in its own interpreter (no state shared between blocks or with the test process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_support import ROOT, Block, blocks

TEST_FILE = re.compile(r"tests/test_\w+\.py")


def python_blocks() -> list[Block]:
    """Every python block that runs without a model API key."""
    return [b for b in blocks("python") if b.skip is None]


def test_a_skipped_block_names_the_test_that_covers_it() -> None:
    named = [TEST_FILE.search(b.skip) for b in blocks("python") if b.skip is not None]
    assert len(named) <= 1 and all(n and (ROOT / n.group(0)).exists() for n in named)


def test_the_readme_shows_the_api_with_python() -> None:
    assert any("memtape.open(" in b.code for b in python_blocks() if b.path.name == "README.md")


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_python_block_runs(tmp_path: Path, block: Block) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    done = subprocess.run(
        [sys.executable, "-"], input=block.code, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{block.where}: the block failed:\n{done.stderr[-3000:]}"
