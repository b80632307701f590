"""Session history (seed 000): the last `session_history` (5) completed runs per domain,
successes and failures, in the order their completion was recorded in the log.

A prompt shows a site's sessions only where they continue the run (`continued`): runs of
its own session, the run it resumes or forks, and runs of the same goal; of those, the
`session_full_detail` newest in full (`history_lines`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.text import build, domain_matches, fenced

TYPES = ("session_recorded", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class SessionEntry:
    session_id: str
    run_id: str | None
    goal: str
    outcome: str
    success: bool
    final_url: str
    timestamp: str
    turns_used: int
    duration_ms: float
    event_ids: tuple[str, ...]


_session_entry = constructor(SessionEntry)


@dataclass
class SessionsState:
    #: domain -> entries, oldest..newest, at most policy.session_history
    by_domain: dict[str, list[SessionEntry]] = field(default_factory=dict)


def empty() -> SessionsState:
    return SessionsState()


def apply(state: SessionsState, ev: RecordedEvent, policy: Any) -> SessionsState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    if ev.type == "session_recorded":
        entries = state.by_domain.setdefault(ev.domain or "", [])
        entries.append(
            _session_entry(
                session_id=d["session_id"],
                run_id=ev.run_id,
                goal=d["goal"],
                outcome=d.get("outcome", ""),
                success=bool(d["success"]),
                final_url=d.get("final_url", ""),
                timestamp=d["timestamp"],
                turns_used=int(d.get("turns_used", 0)),
                duration_ms=float(d.get("duration_ms", 0)),
                event_ids=(ev.id,),
            )
        )
        if len(entries) > policy.session_history:
            del entries[: len(entries) - policy.session_history]
    elif ev.type == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        for dom in list(state.by_domain):
            if kind == "domain" and domain_matches(dom, subject):
                del state.by_domain[dom]
                continue
            entries = state.by_domain[dom]
            if kind == "run":
                entries[:] = [e for e in entries if e.run_id != subject]
            elif kind == "session":
                entries[:] = [e for e in entries if e.session_id != subject]
            if not entries:
                del state.by_domain[dom]
    return state


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"by_domain": 1}


def touched(state: SessionsState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    return [("by_domain", ev.domain or "")] if ev.type == "session_recorded" else None


def decode(raw: dict[str, Any]) -> SessionsState:
    return SessionsState(
        by_domain={
            dom: [build(SessionEntry, r, event_ids=tuple(r["event_ids"])) for r in rows]
            for dom, rows in raw.get("by_domain", {}).items()
        }
    )


def tables(state: SessionsState) -> dict[str, list[dict[str, Any]]]:
    rows = []
    for dom, entries in state.by_domain.items():
        for i, e in enumerate(entries):
            rows.append(
                {
                    "domain": dom,
                    "position": i,
                    "session_id": e.session_id,
                    "run_id": e.run_id,
                    "goal": e.goal,
                    "outcome": e.outcome,
                    "success": int(e.success),
                    "final_url": e.final_url,
                    "timestamp": e.timestamp,
                    "turns_used": e.turns_used,
                    "duration_ms": e.duration_ms,
                    "event_ids": orjson.dumps(e.event_ids).decode(),
                }
            )
    return {"sessions": rows}


def same_goal(a: str, b: str) -> bool:
    """Two goals are the same task when they read the same, case and spacing aside."""
    key = " ".join(a.lower().split())
    return bool(key) and key == " ".join(b.lower().split())


def continued(
    entries: list[SessionEntry], *, session_id: str | None, parent_run_id: str | None, goal: str
) -> list[SessionEntry]:
    """The sessions a run continues, oldest first: those of its own session, the run it resumes
    or forks, and runs of the same goal. Another task's session on the same site tells the next
    decision nothing (seed 000 chains runs by session id)."""
    return [
        e
        for e in entries
        if (session_id and e.session_id == session_id)
        or (parent_run_id and e.run_id == parent_run_id)
        or same_goal(e.goal, goal)
    ]


def history_lines(entries: list[SessionEntry], full_detail: int) -> list[str]:
    """One line per session as SESSION HISTORY shows it (seed 000): the `full_detail` newest in
    full, with the final URL; older ones on one line."""
    lines = []
    for i, s in enumerate(entries):
        status = "success" if s.success else "failed"
        if i >= len(entries) - full_detail:
            lines.append(
                f"- {status}: goal: {fenced(s.goal, 200)}\n  outcome: {fenced(s.outcome, 200)}\n"
                f"  final URL: {fenced(s.final_url, 200)}\n  turns: {s.turns_used}, "
                f"duration: {s.duration_ms / 1000:.1f}s, session: {fenced(s.session_id, 80)}"
            )
        else:
            lines.append(f"- {status}: {fenced(s.goal, 80)} ({s.turns_used} turns)")
    return lines
