"""Every ```bash example of the README and of docs/ runs as written, in reading order (the README,
then the pages in mkdocs.yml's nav order), in one fresh directory with the installed `memtape` on
PATH — except the few marked `<!-- docs-test: skip (reason) -->`, which install from PyPI, drive
Chromium for minutes or need a PostgreSQL server (each names the test that covers it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli_runner import run_cli
from tests.docs_support import ROOT, blocks, pages


def test_every_bash_example_runs_as_written(tmp_path: Path) -> None:
    examples = blocks("bash")
    runnable = [b for b in examples if b.skip is None]
    # skipped: the two set-up commands, pip install, serve, the TypeScript client, copy to PostgreSQL, Chromium x2
    assert len(runnable) >= 10 and len(examples) - len(runnable) <= 8
    work = tmp_path / "work"
    (work / "agent" / "sites").mkdir(parents=True)
    shutil.copy(ROOT / "agent" / "sites" / "cases.json", work / "agent" / "sites" / "cases.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_") and k != "COLUMNS"}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    for block in runnable:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0 and "error:" not in done.stderr, (
            f"{block.where}\n{block.code}\n--- stderr:\n{done.stderr}"
        )
    # what the examples promise is there
    assert (work / "exported" / ".agent-memory").is_dir() and (work / "exported" / "prompt.txt").exists()
    assert (work / "effect.parquet").exists() and (work / "report" / "report.html").exists()
    assert (work / "lessons.csv").read_text().startswith("lesson_id,")


def test_docs_and_help_name_the_systems() -> None:
    docs = "\n".join(p.read_text() for p in pages())
    names = ("`bad`'s `.agent-memory/`", "mycompagent's `memory.json`", "`memory_events.jsonl`", "Trayn's JSON export")
    assert all(n in docs for n in names) and not re.search(r"seed 00\d", docs)
    for command in ("import", "export"):
        text = " ".join(run_cli(command, "--help").out.split())
        assert all(n in text for n in ("bad's .agent-memory", "mycompagent's memory.json", "Trayn's")), command
        assert not re.search(r"seed 00\d", text)
    assert "memory_events.jsonl" in " ".join(run_cli("import", "--help").out.split())
