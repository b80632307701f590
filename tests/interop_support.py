"""Helpers for the interop tests: a fresh ledger, import/export in one call, and the
"equivalent source" comparison (parsed content, times as instants, the fields the
ledger does not keep left out)."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from memtape.api import Memory
from memtape.ledger.clock import SteppingClock, normalize_ts
from memtape.ledger.store import SqliteStore
from memtape.projections.interop.exporters import export_memory
from memtape.projections.interop.importers import import_source
from memtape.projections.interop.sources import (
    Seed000Knowledge,
    Seed000RunManifest,
    Seed000Selectors,
    Seed000Trajectory,
    Seed001Memory,
    TraynEntry,
)
from memtape.projections.view import MemoryView

DATA = Path(__file__).parent / "data" / "interop"


def memory_at(root: Path, start: str = "2026-03-12T14:30:00Z") -> tuple[Memory, SteppingClock]:
    """A memory in `root` whose clock starts at `start` and steps 250 ms an event."""
    root.mkdir(parents=True, exist_ok=True)
    clock = SteppingClock(start, step=timedelta(milliseconds=250))
    return Memory(SqliteStore.open(root / "ledger.db", clock=clock, synchronous="OFF")), clock


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by its relative path: what a byte-for-byte round trip compares."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def new_store(root: Path) -> SqliteStore:
    root.mkdir(parents=True, exist_ok=True)
    return SqliteStore.open(root / "ledger.db", clock=SteppingClock(), synchronous="OFF")


def export_of(store: SqliteStore, fmt: str, out: Path, as_of: int | None = None) -> Path:
    view = MemoryView.open(store, None, as_of=as_of)
    export_memory(view.state, store, fmt, out)
    return out


def roundtrip(source: Path, fmt: str, out: Path, import_fmt: str = "auto") -> tuple[SqliteStore, Path]:
    """Import `source` into a new ledger beside `out`, export it as `fmt` to `out`."""
    store = new_store(Path(tempfile.mkdtemp(dir=out.parent)))
    import_source(store, source, import_fmt)
    return store, export_of(store, fmt, out)


def _t(value: str | None) -> str | None:
    return normalize_ts(value) if value is not None else None


def norm_memory_json(path: Path) -> list[dict[str, Any]]:
    doc = Seed001Memory.model_validate(orjson.loads(path.read_bytes()))
    return [les.model_dump() for les in doc.lessons]


def norm_agent_memory(root: Path) -> dict[str, Any]:
    """Everything seed 000's folder says, keyed so order and formatting do not matter.

    Left out: updatedAt (derived: the latest time in the file), a trajectory's model and
    each step's snapshotHash (the ledger has no place for them), each selector's own counts
    (memtape's addition: seed 000's files have only the element's total), runs/ and hints.json. A run's updatedAt is
    its completion time once completed (the fold sets both from the same event).
    """
    out: dict[str, Any] = {"domains": {}, "runs": {}}
    for ddir in sorted((root / "domains").iterdir()) if (root / "domains").is_dir() else []:
        k_file, s_file, t_dir = ddir / "knowledge.json", ddir / "selectors.json", ddir / "trajectories"
        domain = None
        entry: dict[str, Any] = {"facts": [], "sessions": [], "selectors": {}, "trajectories": {}}
        if k_file.exists():
            k = Seed000Knowledge.model_validate(orjson.loads(k_file.read_bytes()))
            domain = k.domain
            entry["facts"] = sorted(
                ({**f.model_dump(), "lastSeen": _t(f.lastSeen)} for f in k.facts),
                key=lambda f: (f["type"], f["key"], f["value"]),
            )
            entry["sessions"] = [{**s.model_dump(), "timestamp": _t(s.timestamp)} for s in k.sessions]
        if s_file.exists():
            s = Seed000Selectors.model_validate(orjson.loads(s_file.read_bytes()))
            entry["selectors"] = {
                key: {**e.model_dump(exclude={"selectors"}), "lastUsed": _t(e.lastUsed)} for key, e in s.entries.items()
            }
        if t_dir.is_dir():
            for f in sorted(t_dir.iterdir()):
                t = Seed000Trajectory.model_validate(orjson.loads(f.read_bytes()))
                d = t.model_dump(exclude={"model"})
                d["timestamp"] = _t(t.timestamp)
                d["origin"] = t.origin or None
                d["steps"] = [{**st, "snapshotHash": None} for st in d["steps"]]
                entry["trajectories"][t.id] = d
        if domain is None:
            from memtape.projections.interop.importers import _dir_domain

            domain = _dir_domain(ddir.name)
        if any(entry.values()):
            out["domains"][domain] = entry
    runs_dir = root / "agent-runs"
    for f in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        m = Seed000RunManifest.model_validate(orjson.loads(f.read_bytes()))
        d = m.model_dump()
        for key in ("startedAt", "updatedAt", "completedAt"):
            d[key] = _t(d[key])
        if m.status != "running":
            d["updatedAt"] = _t(m.completedAt or m.updatedAt)
            d["completedAt"] = d["updatedAt"]
        d["summary"] = m.summary or None
        out["runs"][m.runId] = d
    return out


def norm_trayn(path: Path) -> list[dict[str, Any]]:
    """Trayn records by id, the embedding included."""
    raw = orjson.loads(path.read_bytes())
    entries = [TraynEntry.model_validate(e) for e in (raw if isinstance(raw, list) else raw["memories"])]
    return sorted((e.model_dump() for e in entries), key=lambda e: e["id"])
