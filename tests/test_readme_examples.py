"""Every ```bash example of the README runs as written, in order, in one fresh directory with the
installed `memtape` on PATH — except the few marked `<!-- docs-test: skip (reason) -->`, which
drive Chromium for minutes or need a PostgreSQL server (each names the test that covers it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"((?:^<!--[^\n]*-->\n)*)^```bash\n(.*?)^```$", re.S | re.M)
SKIP = re.compile(r"<!-- docs-test: skip \((.+?)\) -->")


def examples() -> list[tuple[str | None, str]]:
    """(reason to skip or None, the block's text) for every bash block, in README order."""
    out = []
    for m in BLOCK.finditer((ROOT / "README.md").read_text()):
        skip = SKIP.search(m.group(1))
        out.append((skip.group(1) if skip else None, m.group(2)))
    return out


def test_every_bash_example_runs_as_written(tmp_path: Path) -> None:
    blocks = examples()
    runnable = [body for reason, body in blocks if reason is None]
    assert len(runnable) >= 10 and len(blocks) - len(runnable) <= 6  # skipped: demo, suite, PG, Chromium x2, serve
    work = tmp_path / "work"
    (work / "agent" / "sites").mkdir(parents=True)
    shutil.copy(ROOT / "agent" / "sites" / "cases.json", work / "agent" / "sites" / "cases.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_") and k != "COLUMNS"}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    for body in runnable:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and "error:" not in done.stderr, f"{body}\n--- stderr:\n{done.stderr}"
    # what the examples promise is there
    assert (work / "exported" / ".agent-memory").is_dir() and (work / "exported" / "prompt.txt").exists()
    assert (work / "effect.parquet").exists() and (work / "report" / "report.html").exists()
    assert (work / "lessons.csv").read_text().startswith("lesson_id,")


def test_readme_and_help_name_the_systems() -> None:
    from tests.cli_runner import run_cli
    readme = (ROOT / "README.md").read_text()
    names = ("`bad`'s `.agent-memory/`", "mycompagent's `memory.json`", "`memory_events.jsonl`", "Trayn's JSON export")
    assert all(n in readme for n in names) and not re.search(r"seed 00\d", readme)
    for command in ("import", "export"):
        text = " ".join(run_cli(command, "--help").out.split())
        assert all(n in text for n in ("bad's .agent-memory", "mycompagent's memory.json", "Trayn's")), command
        assert not re.search(r"seed 00\d", text)
    assert "memory_events.jsonl" in " ".join(run_cli("import", "--help").out.split())
