"""Helpers for the security tests: play runs through the real memory facade (no browser),
produce every output memtape writes (exports, report, audits), and scan bytes.

Scanning is byte-level: every file under a directory, plus the decompressed
state blobs of any projections.db found (states, snapshots and version blocks are zstd'd, so a
raw scan alone could miss a compressed secret) and every value of the analytics
mirror (analytics.duckdb: DuckDB compresses its columns).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson
import zstandard

from memtape.agent.records import finish_run, record_prompt, record_step
from memtape.ledger.events import EnvState, RunCompleted
from memtape.ledger.location import MIRROR_FILE
from memtape.projections.budget import BudgetItem
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.values import StepRecord
from memtape.projections.text import domain_of
from tests.cli_runner import run_cli

EXPORT_FILES = {
    "agent-memory": "agent-memory",
    "memory-json": "memory.json",
    "memory-events": "memory-events",
    "json": "steps.json",
    "csv": "steps.csv",
    "prompt": "prompt.txt",
}


def step(
    n: int,
    command: str,
    url: str,
    name: str | None = None,
    role: str | None = "button",
    ok: bool = True,
    error: str | None = None,
    args: dict[str, Any] | None = None,
    url_after: str | None = None,
    sensitive: bool = False,
) -> StepRecord:
    return StepRecord(
        step=n,
        command=command,
        args=args or ({"ref": f"e{n}"} if name else {}),
        ok=ok,
        error=error,
        url_before=url,
        url_after=url_after or url,
        role=role if name else None,
        name=name,
        selector=f'role={role}[name="{name}"]' if name else None,
        sensitive=sensitive,
        duration_ms=12.0,
    )


def play(
    mem: RecordingMemory,
    run_id: str,
    goal: str,
    url: str,
    steps: Sequence[StepRecord],
    *,
    session_id: str | None = None,
    page_text: str = "",
    success: bool = True,
) -> None:
    """One run as the agent loop would log it: recalls, a prompt, the steps, post-run learning."""
    domain = domain_of(url)
    run = mem.start_run(goal=goal, start_url=url, session_id=session_id, run_id=run_id, agent="scripted")
    run.tier1()
    run.recall_domain(1, domain)
    run.recall_trajectory(1, url)
    env = EnvState(
        url=url, title=page_text[:60], page_type="content", elements=[f"{s.role}:{s.name}" for s in steps if s.name]
    )
    for s in steps:
        item = BudgetItem(
            source="page_state",
            priority=80,
            text=f"<<<PAGE DATA\n{page_text}\nPAGE DATA>>>",
            content_type="text",
            event_ids=(),
        )
        record_prompt(run, "step", 4000, [item], [], step=s.step, domain=domain)
        if not s.ok:
            run.recall_error(s.command, s.error or "", s.step, domain)
        record_step(run, s, env, env, think=f"step {s.step} of {goal}", memory_ms=0.1)
    final = steps[-1].url_after if steps else url
    finish_run(
        run,
        RunCompleted(
            success=success,
            summary=f"done: {goal}",
            reason=None if success else "failed",
            final_url=final,
            turns=len(steps),
            tokens_in=100,
            tokens_out=10,
            duration_ms=500.0,
            policy_decisions=len(steps),
            replayed_steps=0,
        ),
    )


def overlay_run(
    mem: RecordingMemory,
    run_id: str,
    goal: str,
    url: str,
    target: str,
    dismiss: str,
    *,
    session_id: str | None = None,
    page_text: str = "",
    typed: str | None = None,
) -> None:
    """A click intercepted by an overlay, a dismiss, the click again (a site lesson, a fact,
    selectors, a trajectory, a session entry, graded step memories), optionally a fill."""
    steps = [
        step(
            1,
            "click",
            url,
            target,
            "link",
            ok=False,
            error=f"<div id=overlay>{page_text[:40]}</div> intercepts pointer events",
        ),
        step(2, "click", url, dismiss),
        step(3, "click", url, target, "link", url_after=url.rstrip("/") + "/item"),
    ]
    if typed is not None:
        steps.append(step(4, "fill", url.rstrip("/") + "/item", "Note", "textbox", args={"ref": "e9", "value": typed}))
    play(mem, run_id, goal, url, steps, session_id=session_id, page_text=page_text)


# ---- outputs -------------------------------------------------------------------------------


def produce_outputs(memory_dir: Path, out: Path) -> list[str]:
    """Every export format, the report and `audit --json` of every run memory still lists,
    written under `out`; returns the run ids audited."""
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    (out / "exports").mkdir(mode=0o700, exist_ok=True)
    for fmt, name in EXPORT_FILES.items():
        r = run_cli("--memory-dir", str(memory_dir), "export", "--format", fmt, "--out", str(out / "exports" / name))
        assert r.code == 0, (fmt, r.err)
    r = run_cli("--memory-dir", str(memory_dir), "report", "--out", str(out / "report"))
    assert r.code == 0, r.err
    r = run_cli("--memory-dir", str(memory_dir), "runs", "--json")
    assert r.code == 0, r.err
    runs = [row["run_id"] for row in orjson.loads(r.out)]
    (out / "audit").mkdir(exist_ok=True)
    for run_id in runs:
        r = run_cli("--memory-dir", str(memory_dir), "audit", run_id, "--json")
        assert r.code == 0, (run_id, r.err)
        (out / "audit" / f"{run_id}.json").write_text(r.out)
    return runs


# ---- scanning ------------------------------------------------------------------------------


def _db_blobs(db: Path) -> Iterable[bytes]:
    """Decompressed state blobs of a projections.db (read from a copy: never touch the original)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        shutil.copyfile(db, copy)
        wal = Path(f"{db}-wal")
        if wal.exists():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        conn = sqlite3.connect(copy)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            blobs = []
            for table, column in (("_states", "state"), ("_snapshots", "state"), ("_blocks", "data")):
                if table in tables:
                    blobs += [r[0] for r in conn.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")]
        finally:
            conn.close()
    for blob in blobs:
        yield zstandard.decompress(blob)


def _mirror_values(db: Path) -> Iterable[bytes]:
    """Every value of every table of an analytics mirror, as text (read from a copy)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / db.name
        shutil.copyfile(db, copy)
        con = duckdb.connect(str(copy), read_only=True)
        try:
            tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
            for table in tables:
                for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
                    yield "\x1f".join("" if v is None else str(v) for v in row).encode()
        finally:
            con.close()


def scan(root: Path, needles: Iterable[str], skip: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(file, needle) for every needle found (case-insensitive) in the bytes of any file under
    `root` (or `root` itself), in the decompressed states of projections databases and in the
    values of analytics mirrors."""
    wanted = [n.lower().encode() for n in needles]
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    hits: list[tuple[str, str]] = []
    skipped = set(skip)
    for f in files:
        if f.name in skipped:
            continue
        chunks = [f.read_bytes()]
        if f.name == "projections.db":
            chunks += list(_db_blobs(f))
        if f.name == MIRROR_FILE:
            chunks += list(_mirror_values(f))
        for data in chunks:
            low = data.lower()
            for n in wanted:
                if n in low and (str(f), n.decode()) not in hits:
                    hits.append((str(f), n.decode()))
    return hits
