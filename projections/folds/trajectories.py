"""Reference trajectories (seed 000): successful runs' step lists, per host.

Matching: Jaccard of the goals' lower-cased word sets ≥ 0.5 (a goal without
words matches nothing); filter by the threshold first, then rank — by
similarity, or with trace scoring by 60% similarity + 20% recency
(exp(−age/14 days)) + 10% speed + 10% verification rate. Speed is absolute,
1 / (1 + duration in minutes) (a 0 s run 1.0, one minute 0.5, three minutes 0.25), so a
lone or fastest candidate gets no full credit for being alone and scores compare across
queries. A trajectory more
than `trace_ttl_days` old (occurred time) is never offered (exactly 30 days
is kept), and the `trajectories_expired` decision drops it from the state.

A prompt shows a match's steps only as far as they apply to the run's goal
(`applicable_steps`): a trajectory of another goal stops before its first step
that serves only that goal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.credentials import QUOTED
from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.text import age_days, build, domain_matches, goal_words, jaccard, older_than

TYPES = ("run_started", "trajectory_recorded", "trajectories_expired", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class TrajectoryStep:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    role: str | None = None
    name: str | None = None
    selector: str | None = None
    url: str = ""
    verified: bool = False
    effect: str | None = None
    duration_ms: float = 0


@dataclass(frozen=True, slots=True)
class Trajectory:
    trajectory_id: str
    domain: str
    goal: str
    origin: str
    steps: tuple[TrajectoryStep, ...]
    recorded_at: str
    occurred_at: str
    duration_ms: float
    turns: int
    run_id: str | None
    event_ids: tuple[str, ...]

    @property
    def verification_rate(self) -> float:
        return sum(1 for s in self.steps if s.verified) / len(self.steps) if self.steps else 0.0


_trajectory = constructor(Trajectory)


@dataclass(frozen=True, slots=True)
class TrajectoryMatch:
    trajectory: Trajectory
    similarity: float
    score: float


@dataclass
class TrajectoriesState:
    #: host -> trajectory_id -> trajectory, in recording order
    by_domain: dict[str, dict[str, Trajectory]] = field(default_factory=dict)
    #: run_id -> session_id, so that forgetting a session forgets its runs' trajectories
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> TrajectoriesState:
    return TrajectoriesState()


def _step(raw: dict[str, Any]) -> TrajectoryStep:
    return build(TrajectoryStep, raw)


def apply(state: TrajectoriesState, ev: RecordedEvent, policy: Any = None) -> TrajectoriesState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    if ev.type == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif ev.type == "trajectory_recorded":
        if not d.get("success", True):
            return state
        domain = ev.domain or ""
        state.by_domain.setdefault(domain, {})[d["trajectory_id"]] = _trajectory(
            trajectory_id=d["trajectory_id"],
            domain=domain,
            goal=d["goal"],
            origin=d.get("origin", ""),
            steps=tuple(_step(s) for s in d.get("steps") or ()),
            recorded_at=ev.recorded_at,
            occurred_at=ev.occurred_at,
            duration_ms=float(d.get("duration_ms", 0)),
            turns=int(d.get("turns", 0)),
            run_id=ev.run_id,
            event_ids=(ev.id,),
        )
    elif ev.type == "trajectories_expired":
        drop = set(d.get("trajectory_ids") or ())
        for dom in list(state.by_domain):
            items = state.by_domain[dom]
            for tid in [t for t in items if t in drop]:
                del items[tid]
            if not items:
                del state.by_domain[dom]
    elif ev.type == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        runs = {r for r, s in state.session_of.items() if s == subject} if kind == "session" else {subject}
        if kind in ("run", "session"):
            for r in runs:
                state.session_of.pop(r, None)
        for dom in list(state.by_domain):
            if kind == "domain" and domain_matches(dom, subject):
                del state.by_domain[dom]
            elif kind in ("run", "session"):
                items = state.by_domain[dom]
                for tid in [t for t, tr in items.items() if tr.run_id in runs]:
                    del items[tid]
                if not items:
                    del state.by_domain[dom]
    return state


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"by_domain": 2, "session_of": 1}


def touched(state: TrajectoriesState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    if ev.type == "run_started":
        return [("session_of", ev.run_id)] if ev.run_id else []
    if ev.type == "trajectory_recorded":
        return [("by_domain", ev.domain or "", ev.data["trajectory_id"])]
    return None


def expired(state: TrajectoriesState, now: str, ttl_days: float) -> list[str]:
    """Ids of trajectories MORE than ttl_days old at `now` (sorted)."""
    return sorted(
        t.trajectory_id
        for items in state.by_domain.values()
        for t in items.values()
        if older_than(t.occurred_at, now, ttl_days)
    )


def speed(duration_ms: float) -> float:
    """Trace scoring's speed term: 1 / (1 + minutes), absolute (not relative to the other candidates)."""
    return 1.0 / (1.0 + max(duration_ms, 0.0) / 60000.0)


def rank(candidates: Iterable[Trajectory], goal: str, now: str, policy: Any) -> list[TrajectoryMatch]:
    """Filter by similarity ≥ threshold and by TTL, then rank (best first, deterministic ties)."""
    wanted = goal_words(goal)
    live = []
    for t in candidates:
        sim = jaccard(wanted, goal_words(t.goal))
        if sim >= policy.trajectory_min_similarity and not older_than(t.occurred_at, now, policy.trace_ttl_days):
            live.append((t, sim))
    if not live:
        return []
    out = []
    for t, sim in live:
        if policy.trace_scoring:
            recency = math.exp(-max(age_days(t.occurred_at, now), 0.0) / policy.trace_recency_days)
            score = 0.6 * sim + 0.2 * recency + 0.1 * speed(t.duration_ms) + 0.1 * t.verification_rate
        else:
            score = sim
        out.append(TrajectoryMatch(t, sim, score))
    out.sort(key=lambda m: (-m.score, -m.similarity, _neg(m.trajectory.occurred_at), m.trajectory.trajectory_id))
    return out


def argument_words(goal: str) -> frozenset[str]:
    """The words of what a goal names: its quoted arguments (`Open "Wool Socks"`: wool, socks),
    or every word of a goal that quotes nothing."""
    quoted = QUOTED.findall(goal)
    return goal_words(" ".join(quoted) if quoted else goal)


def applicable_steps(trajectory: Trajectory, goal: str) -> tuple[TrajectoryStep, ...]:
    """The recorded steps as far as they apply to `goal`: up to the first one that serves only
    the recorded goal, its target's name or typed value holding a word the recorded goal names
    and `goal` does not. A trajectory of the same goal applies whole; one that logged in, then
    opened "Profile", applies to a goal that logs in, then opens "Settings", as far as the login."""
    extra = argument_words(trajectory.goal) - argument_words(goal)
    if not extra:
        return trajectory.steps
    for i, step in enumerate(trajectory.steps):
        args = step.args or {}
        said = " ".join(str(v) for v in (step.name, args.get("value"), args.get("text")) if v)
        if goal_words(said) & extra:
            return trajectory.steps[:i]
    return trajectory.steps


def _neg(text: str) -> tuple[int, ...]:
    """Sort key putting later timestamps first."""
    return tuple(-ord(c) for c in text)


def decode(raw: dict[str, Any]) -> TrajectoriesState:
    return TrajectoriesState(
        by_domain={
            dom: {
                tid: build(Trajectory, r, steps=tuple(_step(s) for s in r["steps"]), event_ids=tuple(r["event_ids"]))
                for tid, r in items.items()
            }
            for dom, items in raw.get("by_domain", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: TrajectoriesState) -> dict[str, list[dict[str, Any]]]:
    rows = [
        {
            "trajectory_id": t.trajectory_id,
            "domain": t.domain,
            "goal": t.goal,
            "origin": t.origin,
            "steps": orjson.dumps(t.steps).decode(),
            "step_count": len(t.steps),
            "recorded_at": t.recorded_at,
            "occurred_at": t.occurred_at,
            "duration_ms": t.duration_ms,
            "turns": t.turns,
            "run_id": t.run_id,
            "event_ids": orjson.dumps(t.event_ids).decode(),
        }
        for items in state.by_domain.values()
        for t in items.values()
    ]
    return {"trajectories": rows}
