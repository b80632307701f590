"""State snapshots for backtracking (seed 003's StateSnapshot), per run.

A snapshot is taken at every navigation: URL, title, a summary of the visible
elements, form state (secret values redacted before the event is built),
scroll position and the step it belongs to. `backtracked` marks the snapshot
the agent went back to when it was stuck, and the URL it left as a dead end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forgotten_runs

TYPES = ("run_started", "snapshot_taken", "backtracked", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class Snapshot:
    snapshot_id: str
    run_id: str
    domain: str
    url: str
    title: str
    visible_elements_summary: str
    form_state: dict[str, str]
    scroll_x: int
    scroll_y: int
    associated_step: int
    occurred_at: str
    event_ids: tuple[str, ...]
    #: how often the agent came back to it, and the URLs it left behind as dead ends
    restored: int = 0
    dead_ends: tuple[str, ...] = ()


@dataclass
class SnapshotsState:
    #: run_id -> snapshot_id -> snapshot, in the order they were taken
    by_run: dict[str, dict[str, Snapshot]] = field(default_factory=dict)
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> SnapshotsState:
    return SnapshotsState()


def apply(state: SnapshotsState, ev: RecordedEvent, policy: Any = None) -> SnapshotsState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    if t == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif t == "snapshot_taken" and ev.run_id:
        state.by_run.setdefault(ev.run_id, {})[d["snapshot_id"]] = Snapshot(
            snapshot_id=d["snapshot_id"],
            run_id=ev.run_id,
            domain=ev.domain or "",
            url=d["url"],
            title=d.get("title", ""),
            visible_elements_summary=d.get("visible_elements_summary", ""),
            form_state=dict(d.get("form_state") or {}),
            scroll_x=int(d.get("scroll_x", 0)),
            scroll_y=int(d.get("scroll_y", 0)),
            associated_step=int(d.get("associated_step", 0)),
            occurred_at=ev.occurred_at,
            event_ids=(ev.id,),
        )
    elif t == "backtracked" and ev.run_id:
        snaps = state.by_run.get(ev.run_id, {})
        old = snaps.get(d["snapshot_id"])
        if old is not None:
            snaps[d["snapshot_id"]] = evolve(
                old,
                restored=old.restored + 1,
                dead_ends=(*old.dead_ends, d["from_url"]),
                event_ids=add_event_id(old.event_ids, ev.id),
            )
    elif t == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        if kind == "domain":
            for run, snaps in list(state.by_run.items()):
                for sid in [s for s, snap in snaps.items() if domain_matches(snap.domain, subject)]:
                    del snaps[sid]
                if not snaps:
                    del state.by_run[run]
        elif kind in ("run", "session"):
            runs = forgotten_runs(d)
            if kind == "session":
                runs |= {r for r, s in state.session_of.items() if s == subject}
            for r in runs:
                state.by_run.pop(r, None)
                state.session_of.pop(r, None)
    return state


def listed(state: SnapshotsState, run_id: str | None = None, domain: str | None = None) -> list[Snapshot]:
    runs = [run_id] if run_id is not None else list(state.by_run)
    return [
        s for r in runs for s in state.by_run.get(r, {}).values() if domain is None or domain_matches(s.domain, domain)
    ]


def decode(raw: dict[str, Any]) -> SnapshotsState:
    return SnapshotsState(
        by_run={
            r: {
                sid: build(Snapshot, s, event_ids=tuple(s["event_ids"]), dead_ends=tuple(s["dead_ends"]))
                for sid, s in snaps.items()
            }
            for r, snaps in raw.get("by_run", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: SnapshotsState) -> dict[str, list[dict[str, Any]]]:
    return {
        "snapshots": [
            {
                "snapshot_id": s.snapshot_id,
                "run_id": s.run_id,
                "domain": s.domain,
                "url": s.url,
                "title": s.title,
                "visible_elements_summary": s.visible_elements_summary,
                "form_state": orjson.dumps(s.form_state, option=orjson.OPT_SORT_KEYS).decode(),
                "scroll_x": s.scroll_x,
                "scroll_y": s.scroll_y,
                "associated_step": s.associated_step,
                "occurred_at": s.occurred_at,
                "restored": s.restored,
                "dead_ends": orjson.dumps(s.dead_ends).decode(),
                "event_ids": orjson.dumps(s.event_ids).decode(),
            }
            for snaps in state.by_run.values()
            for s in snaps.values()
        ]
    }
