"""Plain concurrency is never taken for tampering.

Three library writers, each a process of its own that opens memory anew for every run, and a
reader asking for the lessons in a loop beside them, nothing killed and nothing edited: no
process warns that projections.db does not match its seal, none discards or rebuilds it, and
the file is never deleted under the others. (Before one read transaction held a checkpoint and
what it seals, a catch-up read them apart, took another process's save for an edit and
discarded the file: dozens of times in such a round.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memtape

ROOT = Path(__file__).resolve().parents[1]
RUNS = 8
WRITER = """
import sys
import memtape
memory, me, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(runs):
    with memtape.open(memory) as mem:
        with mem.start_run(goal=f"buy socks {me} {i}", start_url=f"https://shop{i % 3}.example/") as run:
            run.recall_domain(step=1)
            run.record_step(step=1, action="click", target='button "Buy"', ok=False,
                            error="element intercepts pointer events")
            run.recall_error(command="click", error="element intercepts pointer events", step=1)
            run.record_step(step=2, action="click", target='button "Buy now"', ok=True)
            run.finish(success=True, outcome="bought")
"""
READER = """
import os
import sys
from pathlib import Path
import memtape
memory, stop = Path(sys.argv[1]), Path(sys.argv[2])
inodes, reads = set(), 0
while not stop.exists() or reads < 3:
    with memtape.open(memory) as mem:
        mem.state("lessons")
    inodes.add(os.stat(memory / "projections.db").st_ino)
    reads += 1
print(reads, len(inodes))
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_writers_and_a_reader_at_once_raise_no_alarm(tmp_path: Path) -> None:
    memory, stop = tmp_path / "memory", tmp_path / "stop"
    with memtape.open(memory) as mem:
        mem.state("lessons")  # projections.db exists before anyone writes
    inode = (memory / "projections.db").stat().st_ino
    reader = _spawn(READER, str(memory), str(stop))
    writers = [_spawn(WRITER, str(memory), f"w{n}", str(RUNS)) for n in range(3)]
    errors = []
    try:
        for writer in writers:
            out, err = writer.communicate(timeout=600)
            errors.append(err)
            assert writer.returncode == 0, err
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=600)
    errors.append(err)
    assert reader.returncode == 0, err
    reads, inodes = map(int, out.split())
    alarms = [
        line
        for err in errors
        for line in err.splitlines()
        if "sealed digest" in line or "discarded" in line or "rebuilding" in line
    ]
    assert not alarms, alarms
    assert inodes == 1 and (memory / "projections.db").stat().st_ino == inode  # never deleted
    with memtape.open(memory) as mem:  # every run recorded
        assert sum(1 for _ in mem.store.read(types=["run_completed"])) == 3 * RUNS
