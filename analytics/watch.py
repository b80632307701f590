"""`watch`: follow the ledger while agents run elsewhere, keep projections.db current, say what changed.

The store's `subscribe` wakes on each commit (watchfiles on the SQLite file,
LISTEN/NOTIFY on PostgreSQL). Each new event is folded into an in-memory
state to describe what it changed (a lesson's use count, a fact's confidence,
a run's status...); once the follower has read everything committed so far,
the projections' materializer (`Catchup`) brings projections.db to the same
head, and the changes are reported with the time they became visible there.
Forgotten subjects are not named: a forget is reported as what it removed.

Usage::

    stop = threading.Event()
    follow_projections(store, Path(".agent-memory/projections.db"), on_change=print, stop=stop)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtape.analytics.forget_filter import lesson_id_of
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import Catchup
from memtape.projections.folds.lessons import dedup_key
from memtape.projections.folds.state import fold
from memtape.projections.parameters import DEFAULT_POLICY


@dataclass
class ProjectedChange:
    """What one event changed, and when projections.db had it (time.perf_counter())."""

    seq: int
    type: str
    run_id: str | None
    domain: str | None
    changes: list[str] = field(default_factory=list)
    projected_at: float = 0.0

    def line(self) -> str:
        where = " ".join(x for x in (self.run_id or "", self.domain or "") if x)
        what = "; ".join(self.changes) if self.changes else "no memory change"
        return f"{self.seq:>7}  {self.type:<20} {where:<30} {what}"


def _snap(state: Any, ev: RecordedEvent) -> dict[tuple[str, str], str]:
    """The items this event can touch, rendered, so before/after shows what changed."""
    out: dict[tuple[str, str], str] = {}
    d = ev.data
    t = ev.type
    lessons = state.lessons.lessons
    ids = [x for x in [lesson_id_of(ev), *(d.get("lesson_ids") or ())] if x]
    if t == "lesson_recorded":
        key = dedup_key(d.get("failed_command"), d.get("error_pattern"), d.get("scope_domain"), d.get("lesson", ""))
        if key in state.lessons.by_key:
            ids.append(state.lessons.by_key[key])
    if t == "subject_forgotten":
        ids = list(lessons)
    for lid in ids:
        l = lessons.get(lid)
        if l is not None:
            out[("lesson", lid)] = f"{l.category}, used {l.use_count}x"
    dom = ev.domain or ""
    if t in ("fact_observed", "fact_contradicted", "facts_pruned", "subject_forgotten"):
        doms = [dom] if t != "facts_pruned" and t != "subject_forgotten" else list(state.knowledge.current)
        for dm in doms:
            for f in state.knowledge.current.get(dm, {}).values():
                out[("fact", f"{f.domain} {f.fact_type}:{f.key}={f.value}")] = f"confidence {f.confidence:.3f}"
    if t in ("selector_succeeded", "selector_failed"):
        for s in state.selectors.by_domain.get(dom, {}).values():
            if s.selector == d.get("selector"):
                out[("selector", f"{dom} {s.role} {s.name!r} {s.selector}")] = f"{s.successes} ok / {s.failures} failed"
    if t in ("trajectory_recorded", "trajectories_expired", "subject_forgotten"):
        for items in state.trajectories.by_domain.values():
            for tid in items:
                out[("trajectory", tid)] = "live"
    if t in ("run_started", "run_progress", "run_completed") and ev.run_id:
        run = state.runs.runs.get(ev.run_id)
        if run is not None:
            out[("run", ev.run_id)] = f"{run.status}, {run.turn_count} turns"
    if t in ("step_recorded", "step_graded") and ev.run_id and ev.step is not None:
        mem = state.step_memories.by_run.get(ev.run_id, {}).get(ev.step)
        if mem is not None:
            out[("step memory", f"{ev.run_id}#{ev.step}")] = f"{mem.action.get('command')} {mem.outcome}"
    if t == "session_recorded":
        out[("sessions", dom)] = f"{len(state.sessions.by_domain.get(dom, ()))} kept"
    return out


def describe(before: dict[tuple[str, str], str], after: dict[tuple[str, str], str], ev: RecordedEvent) -> list[str]:
    if ev.type == "subject_forgotten":
        gone = [k for k in before if k not in after]
        kinds = sorted({k[0] for k in gone})
        return [
            f"forgot a {ev.data['subject_kind']}: removed {len(gone)} item(s)"
            + (f" ({', '.join(kinds)})" if kinds else "")
        ]
    out = []
    for key in list(before) + [k for k in after if k not in before]:
        kind, name = key
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        if b is None:
            out.append(f"{kind} {name}: new ({a})")
        elif a is None:
            out.append(f"{kind} {name}: removed")
        else:
            out.append(f"{kind} {name}: {b} -> {a}")
    return out


def follow_projections(
    store: Store,
    projections_path: Path,
    policy: Any | None = None,
    on_change: Callable[[ProjectedChange], None] | None = None,
    stop: threading.Event | None = None,
    max_events: int | None = None,
) -> int:
    """Keep projections.db current until `stop` is set (or `max_events` were seen); returns the last seq."""
    policy = policy or DEFAULT_POLICY
    path = Path(projections_path)
    live = Catchup(store, path, policy).run()
    head = live.head
    pending: list[ProjectedChange] = []
    for seen, ev in enumerate(store.subscribe(head + 1, stop), 1):
        before = _snap(live, ev)
        fold(live, [ev], policy)
        pending.append(ProjectedChange(ev.seq, ev.type, ev.run_id, ev.domain, describe(before, _snap(live, ev), ev)))
        head = ev.seq
        done = max_events is not None and seen >= max_events
        if done or store.head() <= ev.seq:
            Catchup(store, path, policy).run()
            now = time.perf_counter()
            for change in pending:
                change.projected_at = now
                if on_change is not None:
                    on_change(change)
            pending.clear()
        if done or (stop is not None and stop.is_set()):
            break
    return head
