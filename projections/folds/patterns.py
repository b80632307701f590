"""Long-term memory (seed 003's LongTermMemory): site-specific patterns learned from
successful runs and reused.

A pattern is a sequence of steps (typed values as placeholders such as
`{password}`, never the values) with a `pattern_type` — `login_flow` when a
step types into a password field, `form_fill` when steps fill or select,
`navigation` otherwise. Learning a pattern counts as its first success
(`pattern_learned` again, from another successful run, is another success);
`pattern_used` counts a reuse's success or failure. `success_rate` and
`last_used` (occurred time) rank patterns for pruning: when there are more than
`max_patterns`, the `patterns_pruned` decision removes the bottom 20% by
(success_rate, last_used), as seed 003's `_prune_patterns` does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forgotten_runs, goal_names

TYPES = ("pattern_learned", "pattern_used", "patterns_pruned", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class Pattern:
    pattern_id: str
    domain: str
    description: str
    pattern_type: str
    steps: tuple[dict[str, Any], ...]
    success_count: int
    failure_count: int
    success_rate: float
    last_used: str
    learned_at: str
    event_ids: tuple[str, ...]
    #: the run that first learned it (its element names came from that run's pages)
    first_run: str | None = None


@dataclass
class PatternsState:
    #: pattern_id -> pattern, in learning order
    patterns: dict[str, Pattern] = field(default_factory=dict)


def empty() -> PatternsState:
    return PatternsState()


def pattern_id_for(domain: str, pattern_type: str, steps: list[dict[str, Any]]) -> str:
    body = orjson.dumps([domain, pattern_type, steps], option=orjson.OPT_SORT_KEYS)
    return "pat_" + hashlib.sha256(body).hexdigest()[:16]


def rate(success: int, failure: int) -> float:
    """Seed 003's success_rate: successes over uses, 0.0 when never used."""
    total = success + failure
    return success / total if total else 0.0


def _counted(p: Pattern, ok: bool, at: str, event_id: str) -> Pattern:
    s, f = p.success_count + ok, p.failure_count + (not ok)
    return evolve(
        p,
        success_count=s,
        failure_count=f,
        success_rate=rate(s, f),
        last_used=at,
        event_ids=add_event_id(p.event_ids, event_id),
    )


def apply(state: PatternsState, ev: RecordedEvent, policy: Any = None) -> PatternsState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    if t == "pattern_learned":
        old = state.patterns.get(d["pattern_id"])
        if old is not None:
            state.patterns[d["pattern_id"]] = _counted(old, True, ev.occurred_at, ev.id)
        else:
            state.patterns[d["pattern_id"]] = Pattern(
                pattern_id=d["pattern_id"],
                domain=ev.domain or "",
                description=d["description"],
                pattern_type=d["pattern_type"],
                steps=tuple(d["steps"]),
                success_count=1,
                failure_count=0,
                success_rate=1.0,
                last_used=ev.occurred_at,
                learned_at=ev.occurred_at,
                event_ids=(ev.id,),
                first_run=ev.run_id,
            )
    elif t == "pattern_used":
        old = state.patterns.get(d["pattern_id"])
        if old is not None:
            state.patterns[d["pattern_id"]] = _counted(old, bool(d["success"]), ev.occurred_at, ev.id)
    elif t == "patterns_pruned":
        for pid in d.get("pattern_ids") or ():
            state.patterns.pop(pid, None)
    elif t == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        runs = forgotten_runs(d) if kind in ("run", "session") else set()
        for pid in [
            pid
            for pid, p in state.patterns.items()
            if (kind == "domain" and domain_matches(p.domain, subject)) or p.first_run in runs
        ]:
            del state.patterns[pid]
    return state


def to_prune(state: PatternsState, max_patterns: int, adding: int = 0) -> list[str]:
    """Seed 003's pruning: when the patterns (with `adding` new ones, which are the newest with a
    success rate of 1.0, so never the lowest) exceed max_patterns, remove down to 80% of it, lowest
    (success_rate, last_used) first (pattern_id breaks ties)."""
    total = len(state.patterns) + adding
    if total <= max_patterns:
        return []
    ranked = sorted(state.patterns.values(), key=lambda p: (p.success_rate, p.last_used, p.pattern_id))
    return [p.pattern_id for p in ranked[: total - int(max_patterns * 0.8)]]


def best_first(p: Pattern) -> tuple[float, int, tuple[int, ...], str]:
    """Where a pattern ranks: success rate, uses, recency, then its id."""
    return (-p.success_rate, -p.success_count, _neg(p.last_used), p.pattern_id)


def for_domain(state: PatternsState, domain: str | None) -> list[Pattern]:
    """Patterns of a domain (subdomains included), best first: success rate, uses, recency."""
    out = [p for p in state.patterns.values() if domain is None or domain_matches(p.domain, domain)]
    out.sort(key=best_first)
    return out


def for_goal(patterns: Iterable[Pattern], goal: str) -> list[Pattern]:
    """The patterns a run with `goal` can follow (seed 003's relevance-based retrieval): those with a
    step on an element the goal names (`text.goal_names`), in their order. A login flow (its
    "Password" field) goes to a goal that logs in "with password"; the path Archive → Next page →
    "Local bakery wins award" is another task's, and a goal that opens an election article gets
    none of it."""
    return [p for p in patterns if any(goal_names(goal, s.get("name")) for s in p.steps)]


def _step_key(command: str, role: str | None, name: str | None) -> tuple[str, str, str]:
    """A step as a pattern and a recorded trajectory both list it: its command and its target
    (typed values aside: a pattern holds placeholders where a trajectory holds what was typed)."""
    return command, role or "", name or ""


def shown_by(steps: Sequence[Any], patterns: Iterable[Pattern]) -> bool:
    """Whether one of `patterns` lists every one of `steps` (recorded trajectory steps, at least
    one): a reference trajectory whose steps are a learned login flow says nothing the pattern
    does not, so a prompt shows it once, as the pattern the policy follows."""
    wanted = {_step_key(s.command, s.role, s.name) for s in steps}
    return bool(wanted) and any(
        wanted <= {_step_key(str(x.get("command", "")), x.get("role"), x.get("name")) for x in p.steps}
        for p in patterns
    )


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def decode(raw: dict[str, Any]) -> PatternsState:
    return PatternsState(
        patterns={
            pid: build(Pattern, r, steps=tuple(r["steps"]), event_ids=tuple(r["event_ids"]))
            for pid, r in raw.get("patterns", {}).items()
        }
    )


def tables(state: PatternsState) -> dict[str, list[dict[str, Any]]]:
    return {
        "patterns": [
            {
                "pattern_id": p.pattern_id,
                "domain": p.domain,
                "description": p.description,
                "pattern_type": p.pattern_type,
                "steps": orjson.dumps(p.steps).decode(),
                "success_count": p.success_count,
                "failure_count": p.failure_count,
                "success_rate": p.success_rate,
                "last_used": p.last_used,
                "learned_at": p.learned_at,
                "event_ids": orjson.dumps(p.event_ids).decode(),
            }
            for p in state.patterns.values()
        ]
    }
