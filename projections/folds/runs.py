"""Run registry (seed 000): one manifest per run, lineage through parent_run_id,
listing by session / domain / status, and resume / fork scenarios."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.text import add_event_id, build, domain_matches, evolve

TYPES = ("run_started", "run_progress", "run_completed", "subject_forgotten")


#: a run's outcome as a person filters and reads it (`state runs|sessions --outcome`, the viewer),
#: by its status: a run is running until it completes, then completed on success, failed otherwise
OUTCOME_OF_STATUS = {"running": "running", "completed": "success", "failed": "failed"}


def finished_status(success: bool) -> str:
    """The status of a run that finished with `success`."""
    return "completed" if success else "failed"


@dataclass(frozen=True, slots=True)
class RunManifest:
    run_id: str
    session_id: str | None
    parent_run_id: str | None
    status: str  # running | completed | failed
    goal: str
    domain: str
    start_url: str | None
    final_url: str | None
    current_url: str | None
    started_at: str
    updated_at: str
    completed_at: str | None
    success: bool | None
    summary: str | None
    artifact_paths: tuple[str, ...]
    turn_count: int
    result: str | None
    reason: str | None
    mode: str = "new"
    tokens_in: int = 0
    tokens_out: int = 0
    duration_ms: float = 0.0
    memory_enabled: bool = True
    policy_decisions: int = 0
    replayed_steps: int = 0
    case_id: str | None = None
    isolation: str = "shared"
    policy: dict[str, Any] = field(default_factory=dict)
    event_ids: tuple[str, ...] = ()
    #: seq of the run's last update (start, progress, completion): breaks ties of updated_at
    updated_seq: int = 0


_run_manifest = constructor(RunManifest)


@dataclass
class RunsState:
    #: run_id -> manifest, in the order runs started
    runs: dict[str, RunManifest] = field(default_factory=dict)


def empty() -> RunsState:
    return RunsState()


def apply(state: RunsState, ev: RecordedEvent, policy: Any = None) -> RunsState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    t = ev.type
    if t == "run_started" and ev.run_id:
        state.runs[ev.run_id] = _run_manifest(
            run_id=ev.run_id,
            session_id=d.get("session_id"),
            parent_run_id=d.get("parent_run_id"),
            status="running",
            goal=d["goal"],
            domain=ev.domain or "",
            start_url=d.get("start_url"),
            final_url=None,
            current_url=d.get("start_url"),
            started_at=ev.occurred_at,
            updated_at=ev.occurred_at,
            completed_at=None,
            success=None,
            summary=None,
            artifact_paths=(),
            turn_count=0,
            result=None,
            reason=None,
            mode=d.get("mode", "new"),
            memory_enabled=bool(d.get("memory_enabled", True)),
            case_id=d.get("case_id"),
            isolation=d.get("isolation", "shared"),
            policy=dict(d.get("policy") or {}),
            event_ids=(ev.id,),
            updated_seq=ev.seq,
        )
    elif t == "run_progress":
        run = state.runs.get(ev.run_id or "")
        if run is not None:
            state.runs[run.run_id] = evolve(
                run,
                current_url=d["current_url"],
                turn_count=int(d["turn"]),
                updated_at=ev.occurred_at,
                updated_seq=ev.seq,
            )
    elif t == "run_completed":
        run = state.runs.get(ev.run_id or "")
        if run is not None:
            state.runs[run.run_id] = evolve(
                run,
                status=finished_status(bool(d["success"])),
                success=bool(d["success"]),
                summary=d.get("summary"),
                result=d.get("result"),
                reason=d.get("reason"),
                final_url=d.get("final_url"),
                current_url=d.get("final_url") or run.current_url,
                turn_count=int(d.get("turns") or run.turn_count),
                tokens_in=int(d.get("tokens_in", 0)),
                tokens_out=int(d.get("tokens_out", 0)),
                duration_ms=float(d.get("duration_ms", 0)),
                artifact_paths=tuple(d.get("artifact_paths") or ()),
                policy_decisions=int(d.get("policy_decisions", 0)),
                replayed_steps=int(d.get("replayed_steps", 0)),
                completed_at=ev.occurred_at,
                updated_at=ev.occurred_at,
                updated_seq=ev.seq,
                event_ids=add_event_id(run.event_ids, ev.id),
            )
    elif t == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        gone = {r for r, m in state.runs.items() if covered(kind, subject, r, m.session_id, m.domain)}
        for rid in gone:
            del state.runs[rid]
        for rid, run in list(state.runs.items()):  # a run resumed or forked from a forgotten one no longer names it
            if run.parent_run_id is not None and (
                run.parent_run_id in gone or covered(kind, subject, run.parent_run_id, None, None)
            ):
                state.runs[rid] = evolve(run, parent_run_id=None)
    return state


def covered(kind: str, subject: str, run_id: str | None, session_id: str | None, domain: str | None) -> bool:
    """Does forgetting `subject` (of `kind`) take this run along? The run itself, a run of the
    session, a run started on the domain or one of its subdomains. The one rule: this fold, the
    `run_ids` a forget records and analytics' hiding all ask it."""
    if kind == "run":
        return run_id == subject
    if kind == "session":
        return session_id is not None and session_id == subject
    return kind == "domain" and domain_matches(domain, subject)


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"runs": 1}


def touched(state: RunsState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    return [("runs", ev.run_id or "")] if ev.type != "subject_forgotten" else None


def newest(run: RunManifest) -> tuple[str, int]:
    """The key runs are listed by, newest-updated first: updated_at (occurred time), then the seq of
    the run's last update (its start, progress or completion)."""
    return (run.updated_at, run.updated_seq)


def matching(
    state: RunsState,
    session_id: str | None = None,
    domain: str | None = None,
    status: str | None = None,
) -> list[RunManifest]:
    """The runs `listRuns` keeps, in the order they started (`listed` orders them; a count needs not)."""
    return [
        run
        for run in state.runs.values()
        if (session_id is None or run.session_id == session_id)
        and (domain is None or domain_matches(run.domain, domain))
        and (status is None or run.status == status)
    ]


def ordered(runs: list[RunManifest], limit: int | None = None) -> list[RunManifest]:
    """Newest-updated first (by `newest`; completing a run moves it up). With a `limit`, only the
    first `limit` are ordered, by a heap: a page of 33,000 runs costs one pass, not a sort
    (heapq.nlargest is sorted(reverse=True)[:limit], ties included)."""
    if limit is not None:
        return heapq.nlargest(limit, runs, key=newest)
    return sorted(runs, key=newest, reverse=True)


def listed(
    state: RunsState,
    session_id: str | None = None,
    domain: str | None = None,
    status: str | None = None,
    limit: int | None = None,
) -> list[RunManifest]:
    """As seed 000's registry lists them: filtered like `listRuns`, newest-updated first."""
    return ordered(matching(state, session_id, domain, status), limit)


def decode(raw: dict[str, Any]) -> RunsState:
    return RunsState(
        runs={
            rid: build(RunManifest, r, artifact_paths=tuple(r["artifact_paths"]), event_ids=tuple(r["event_ids"]))
            for rid, r in raw.get("runs", {}).items()
        }
    )


def tables(state: RunsState) -> dict[str, list[dict[str, Any]]]:
    rows = []
    for r in state.runs.values():
        rows.append(
            {
                "run_id": r.run_id,
                "session_id": r.session_id,
                "parent_run_id": r.parent_run_id,
                "status": r.status,
                "goal": r.goal,
                "domain": r.domain,
                "start_url": r.start_url,
                "final_url": r.final_url,
                "current_url": r.current_url,
                "started_at": r.started_at,
                "updated_at": r.updated_at,
                "completed_at": r.completed_at,
                "success": None if r.success is None else int(r.success),
                "summary": r.summary,
                "artifact_paths": orjson.dumps(r.artifact_paths).decode(),
                "turn_count": r.turn_count,
                "result": r.result,
                "reason": r.reason,
                "mode": r.mode,
                "tokens_in": r.tokens_in,
                "tokens_out": r.tokens_out,
                "duration_ms": r.duration_ms,
                "memory_enabled": int(r.memory_enabled),
                "policy_decisions": r.policy_decisions,
                "replayed_steps": r.replayed_steps,
                "case_id": r.case_id,
                "isolation": r.isolation,
                "event_ids": orjson.dumps(r.event_ids).decode(),
                "updated_seq": r.updated_seq,
            }
        )
    return {"runs": rows}
