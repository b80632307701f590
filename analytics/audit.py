"""Audit: what the agent knew at each step of a run, and where each piece came from.

`audit_run` returns plain data (dicts and lists, JSON-ready) — the agent's
`demo` and the `audit` command render it. For every step k of the run:

- `prompt`: the `context_built` events of step k — each item with its source,
  priority, tokens, text and origins, what the budget trimmed, and what counted
  the tokens (`counted_by`: a tokenizer, `estimate`, or None when not recorded);
  a step prompt is one call of the model, which reads the system prompt in
  force with it: `system_seq` names that system prompt and `read_tokens` adds
  the two (a system prompt's own entry has neither);
- `memory`: the memory as of `as_of_seq` (the seq just before step k's
  `step_recorded`; for a step without an action, its last prompt): Tier 1,
  the lessons the step's `error_recall` / `domain_recall` events returned,
  the trajectory offered (`trajectory_recalled`), the domain's current facts
  and selectors;
- `action`: the `step_recorded` (command, args, result) and its grade.

Every item carries `taught_by`: the run and step of the event that created
it (the first of its `event_ids`), and context items list the `origins` of
all their event ids. Events before a run's first step (step None) count as
step 0. Forgotten subjects never appear (see analytics/forget_filter.py).

The memory at each step is read by key from projections.db's validity
intervals (Tier 1, the recalled lessons, the domain's facts and selectors, the
offered trajectory as of that seq: `IndexedMemory`), so auditing a run late in
a long log folds nothing. Where the intervals cannot answer (another policy,
a step before the last forget) it is folded from the log, which gives exactly
`MemoryView.as_of(seq)` at each step too (tests compare the two).

Usage::

    data = audit_run(store, "run_20260301_ab12")
    for s in data["steps"]: print(s["step"], s["action"]["command"], len(s["memory"]["tier1"]))
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any

from memtape.analytics.asof import STEP_TYPES, as_of_seq
from memtape.analytics.forget_filter import FORGOTTEN_TEXT, Forgotten
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import UnknownItem
from memtape.ledger.location import projections_path
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import caught_up, indexed_memory, projection_at
from memtape.projections.folds.state import MemoryState, fold
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.view import MemoryView


class Origins:
    """Event id -> where it happened (run, step, seq, type), looked up once each."""

    def __init__(self, store: Store, forgotten: Forgotten):
        self.store = store
        self.forgotten = forgotten
        self.cache: dict[str, dict[str, Any] | None] = {}

    def remember(self, ev: RecordedEvent) -> None:
        if ev.id not in self.cache:
            self.cache[ev.id] = self._shape(ev)

    def _shape(self, ev: RecordedEvent) -> dict[str, Any]:
        run_id, step, domain = self.forgotten.where(ev)
        return {
            "event_id": ev.id,
            "seq": ev.seq,
            "type": ev.type,
            "run_id": run_id,
            "step": step,
            "domain": domain,
            "at": ev.occurred_at,
            "hidden": self.forgotten.hides(ev),
        }

    def introduced_by_forgotten(self, event_ids: Iterable[str]) -> bool:
        """The item's first event (the one that introduced it) belongs to a forgotten subject: the
        item came from that subject's pages and is not shown (the projections dropped it too)."""
        first = next(iter(event_ids), None)
        origin = self.of(first) if first is not None else None
        return bool(origin and origin["hidden"])

    def of(self, event_id: str) -> dict[str, Any] | None:
        if event_id not in self.cache:
            ev = self.store.get(event_id)
            self.cache[event_id] = self._shape(ev) if ev is not None else None
        return self.cache[event_id]

    def taught_by(self, event_ids: Iterable[str]) -> dict[str, Any] | None:
        for eid in event_ids:
            o = self.of(eid)
            if o is not None:
                return {k: v for k, v in o.items() if k != "hidden"}
        return None

    def all(self, event_ids: Iterable[str]) -> list[dict[str, Any]]:
        out = []
        for eid in event_ids:
            o = self.of(eid)
            if o is not None and not o["hidden"]:
                out.append({k: v for k, v in o.items() if k != "hidden"})
        return out


def _lesson(lesson: Any, origins: Origins, forgotten: Forgotten) -> dict[str, Any]:
    return {
        "lesson_id": lesson.lesson_id,
        "lesson": lesson.lesson,
        "category": lesson.category,
        "tier": 1 if lesson.category in ("tool_fallback", "best_practice") else 2,
        "scope_domain": lesson.scope_domain,
        "use_count": lesson.use_count,
        "source": lesson.source,
        "triggered_domains": forgotten.domains_shown(lesson.triggered_domains),
        "taught_by": origins.taught_by(lesson.event_ids),
    }


def _lesson_hidden(lesson: Any, forgotten: Forgotten) -> bool:
    return lesson.lesson_id in forgotten.lessons or forgotten.domain(lesson.scope_domain)


def _item(item: dict[str, Any], origins: Origins, seq: int) -> dict[str, Any]:
    ids = list(item.get("event_ids") or ())
    hidden = origins.forgotten.item_forgotten(ids, seq)
    return {
        "source": item.get("source"),
        "priority": item.get("priority"),
        "tokens": item.get("tokens"),
        "content_type": item.get("content_type", "text"),
        "truncated": bool(item.get("truncated")),
        "text": FORGOTTEN_TEXT if hidden else item.get("text", ""),
        "origins": [] if hidden else origins.all(ids),
    }


def _memory(
    view: Any,
    domain: str | None,
    recalls: list[RecordedEvent],
    trajectories: list[RecordedEvent],
    origins: Origins,
    forgotten: Forgotten,
) -> dict[str, Any]:
    tier1 = [_lesson(l, origins, forgotten) for l in view.tier1() if not _lesson_hidden(l, forgotten)]
    recalled = []
    for ev in recalls:
        lessons = []
        for lid in ev.data.get("lesson_ids") or ():
            lesson = view.lesson(lid)
            if lid in forgotten.lessons or (lesson is not None and _lesson_hidden(lesson, forgotten)):
                continue
            lessons.append(
                _lesson(lesson, origins, forgotten)
                if lesson is not None
                else {"lesson_id": lid, "lesson": None, "taught_by": None}
            )
        entry: dict[str, Any] = {
            "kind": "error" if ev.type == "error_recall" else "domain",
            "seq": ev.seq,
            "matched": len(lessons),
            "lessons": lessons,
        }
        if ev.type == "error_recall":
            entry.update(command=ev.data.get("command"), error_snippet=ev.data.get("error_snippet"))
        recalled.append(entry)
    offered = None
    for ev in trajectories:
        tid = ev.data.get("trajectory_id")
        if not tid:
            continue
        traj = next((t for t in view.trajectories() if t.trajectory_id == tid), None)
        if traj is not None and (forgotten.domain(traj.domain) or forgotten.run(traj.run_id)):
            continue
        offered = {
            "trajectory_id": tid,
            "goal": ev.data.get("goal"),
            "matched_goal": ev.data.get("matched_goal"),
            "similarity": ev.data.get("similarity"),
            "score": ev.data.get("score"),
            "replay": bool(ev.data.get("replay")),
            "steps": ev.data.get("steps"),
            "seq": ev.seq,
            "taught_by": origins.taught_by(traj.event_ids) if traj is not None else None,
        }
    facts, selectors = [], []
    if domain and not forgotten.domain(domain):
        facts = [
            {
                "fact_id": f.fact_id,
                "fact_type": f.fact_type,
                "key": f.key,
                "value": f.value,
                "confidence": round(f.confidence, 6),
                "sources": f.sources,
                "taught_by": origins.taught_by(f.event_ids),
            }
            for f in view.facts(domain)
            if not origins.introduced_by_forgotten(f.event_ids)
        ]
        selectors = [
            {
                "role": s.role,
                "name": s.name,
                "selector": s.selector,
                "successes": s.successes,
                "failures": s.failures,
                "taught_by": origins.taught_by(s.event_ids),
            }
            for s in view.selectors(domain)
            if not origins.introduced_by_forgotten(s.event_ids)
        ]
    return {"tier1": tier1, "recalled": recalled, "trajectory": offered, "facts": facts, "selectors": selectors}


def _action(ev: RecordedEvent | None) -> dict[str, Any] | None:
    if ev is None:
        return None
    d = ev.data
    action = d.get("action") or {}
    return {
        "seq": ev.seq,
        "command": action.get("command"),
        "args": action.get("args") or {},
        "target_text": d.get("target_text"),
        "ok": d.get("ok"),
        "error": d.get("error"),
        "url_before": (d.get("env_before") or {}).get("url"),
        "url_after": (d.get("env_after") or {}).get("url"),
        "decided_by": d.get("decided_by"),
        "duration_ms": d.get("duration_ms"),
    }


#: the projections an audit shows (lessons, facts, selectors, trajectories); the others are not folded
AUDITED = ("lessons", "knowledge", "selectors", "trajectories")


def memory_before(store: Store, seq: int, policy: Any, from_projections: bool = True) -> Any:
    """The audited projections as of `seq`: from projections.db when the ledger has one (so a
    run late in a long log does not refold it from seq 1), else folded from the log."""
    state = MemoryState.empty(AUDITED)
    # projections.db holds the default policy's memory: another policy is folded from the log
    path = projections_path(store) if from_projections and policy == DEFAULT_POLICY else None
    if path is None or seq <= 0:
        return state
    caught_up(store, path, policy)
    for name in AUDITED:
        setattr(state, name, projection_at(store, path, policy, name, seq))
    state.head = seq
    return state


class _FoldedMemory:
    """The audited projections folded forward step by step from `memory_before` the first one."""

    def __init__(self, store: Store, first: int, policy: Any, from_projections: bool):
        self.policy = policy
        self.state = memory_before(store, first, policy, from_projections)
        self.reader = iter(store.read(self.state.head + 1))
        self.pending: RecordedEvent | None = None

    def at(
        self, seq: int, domain: str | None, lesson_ids: Iterable[str] = (), trajectory_ids: Iterable[str] = ()
    ) -> Any:
        batch = []
        if self.pending is not None and self.pending.seq <= seq:
            batch.append(self.pending)
            self.pending = None
        if self.pending is None:
            for ev in self.reader:
                if ev.seq > seq:
                    self.pending = ev
                    break
                batch.append(ev)
        return fold(self.state, batch, self.policy, names=AUDITED)


def system_in_force(events: Iterable[RecordedEvent]) -> dict[int, RecordedEvent]:
    """Step prompt seq -> the system prompt (`context_built`) a model read with it: the last one
    recorded before it in the run."""
    system: RecordedEvent | None = None
    out: dict[int, RecordedEvent] = {}
    for ev in events:
        if ev.type == "context_built" and ev.data.get("prompt") == "system":
            system = ev
        elif ev.type == "context_built" and system is not None:
            out[ev.seq] = system
    return out


def _prompt(e: RecordedEvent, system: RecordedEvent | None, origins: Origins) -> dict[str, Any]:
    call = e.data.get("prompt") != "system"
    read = (e.data.get("total_tokens") or 0) + ((system.data.get("total_tokens") or 0) if system is not None else 0)
    return {
        "seq": e.seq,
        "prompt": e.data.get("prompt"),
        "budget": e.data.get("budget"),
        "total_tokens": e.data.get("total_tokens"),
        "counted_by": e.data.get("counted_by"),
        "system_seq": system.seq if call and system is not None else None,
        "read_tokens": read if call else None,
        "items": [_item(i, origins, e.seq) for i in e.data.get("items") or ()],
        "trimmed": [_item(i, origins, e.seq) for i in e.data.get("trimmed") or ()],
    }


def _searched(ev: RecordedEvent, forgotten: Forgotten) -> dict[str, Any]:
    """What a step searched for and found (the hits a forget has since removed are left out)."""
    d = ev.data
    hidden = {
        "lessons": lambda i: i in forgotten.lessons or forgotten.lesson(i, ev.seq),
        "trajectories": forgotten.trajectory,
        "sessions": lambda i: forgotten.run(i, ev.seq),
    }
    hits = [h for h in d.get("hits") or () if not hidden.get(h["kind"], lambda _i: False)(h["item_id"])]
    return {
        "query": d.get("query"),
        "kinds": d.get("kinds"),
        "domain": d.get("domain_filter"),
        "as_of": d.get("as_of"),
        "matched": len(hits),
        "hits": hits,
    }


def _steps(
    plans: list[Any],
    memory: Any,
    policy: Any,
    started: RecordedEvent | None,
    origins: Origins,
    forgotten: Forgotten,
    systems: dict[int, RecordedEvent],
) -> dict[int, dict[str, Any]]:
    """Each planned step (in seq order) with the memory `memory(seq, domain, lesson_ids,
    trajectory_ids)` gives as of it."""
    steps_out: dict[int, dict[str, Any]] = {}
    for as_of, k, evs, action, prompts in plans:
        domain = (
            (action.domain if action is not None else None)
            or next((e.domain for e in evs if e.domain), None)
            or (started.domain if started is not None else None)
        )
        recalls = [e for e in evs if e.type in ("error_recall", "domain_recall")]
        trajs = [e for e in evs if e.type == "trajectory_recalled"]
        grade = next((e for e in evs if e.type == "step_graded"), None)
        view = MemoryView(
            memory(
                as_of,
                domain,
                [lid for e in recalls for lid in e.data.get("lesson_ids") or ()],
                [e.data["trajectory_id"] for e in trajs if e.data.get("trajectory_id")],
            ),
            policy,
        )
        steps_out[k] = {
            "step": k,
            "as_of_seq": as_of,
            "domain": domain,
            "prompt": [_prompt(e, systems.get(e.seq), origins) for e in prompts],
            "tier1_loaded": [
                lid
                for e in evs
                if e.type == "tier1_loaded"
                for lid in e.data.get("lesson_ids") or ()
                if lid not in forgotten.lessons
            ],
            "memory": _memory(view, domain, recalls, trajs, origins, forgotten),
            "searched": [_searched(e, forgotten) for e in evs if e.type == "memory_searched"],
            "action": _action(action),
            "grade": (
                {
                    "outcome": grade.data.get("outcome"),
                    "reason": grade.data.get("reason"),
                    "correction": grade.data.get("correction"),
                }
                if grade is not None
                else None
            ),
        }
    return steps_out


def audit_run(
    store: Store, run_id: str, step: int | None = None, policy: Any | None = None, indexed: bool = True
) -> dict[str, Any]:
    """What run `run_id` knew and did at each step (or only at `step`); plain data, see module doc.

    `indexed=False` folds memory from seq 1 instead of reading projections.db's intervals (the
    answer is the same; tests compare the two)."""
    policy = policy or DEFAULT_POLICY
    forgotten = Forgotten.scan(store)
    if forgotten.run(run_id):
        raise UnknownItem(f"no run {run_id!r} in the ledger")
    events = list(store.read(run_id=run_id))
    if not events:
        raise UnknownItem(f"no run {run_id!r} in the ledger")
    origins = Origins(store, forgotten)
    by_step: dict[int, list[RecordedEvent]] = {}
    started = next((e for e in events if e.type == "run_started"), None)
    completed = next((e for e in reversed(events) if e.type == "run_completed"), None)
    for ev in events:
        origins.remember(ev)
        if ev.type in STEP_TYPES:
            by_step.setdefault(ev.step if ev.step is not None else 0, []).append(ev)
    if step is not None and step not in by_step:
        raise UnknownItem(
            f"run {run_id!r} has no step {step} (steps: {', '.join(map(str, sorted(by_step))) or 'none'})"
        )
    wanted = [step] if step is not None else sorted(by_step)
    plans = []
    for k in wanted:
        evs = by_step[k]
        action = next((e for e in evs if e.type == "step_recorded"), None)
        prompts = [e for e in evs if e.type == "context_built"]
        plans.append((as_of_seq((e.seq, e.type) for e in evs), k, evs, action, prompts))
    plans.sort(key=lambda p: (p[0], p[1]))
    path = projections_path(store) if indexed and policy == DEFAULT_POLICY else None
    steps_out: dict[int, dict[str, Any]] = {}
    if plans:  # a run with no steps (started, then nothing) is audited with an empty step list
        window = (plans[0][0], plans[-1][0])
        with indexed_memory(store, path, policy, window) if path is not None else nullcontext() as index:
            if index is not None and index.answers(plans[0][0], AUDITED) and index.answers(plans[-1][0], AUDITED):
                memory = index.at
            else:
                memory = _FoldedMemory(store, plans[0][0], policy, path is not None).at
            steps_out = _steps(plans, memory, policy, started, origins, forgotten, system_in_force(events))
    run = None
    if started is not None:
        d = started.data
        run = {
            "run_id": run_id,
            "goal": d.get("goal"),
            "domain": started.domain,
            "mode": d.get("mode"),
            "parent_run_id": d.get("parent_run_id") if not forgotten.run(d.get("parent_run_id")) else None,
            "session_id": d.get("session_id"),
            "memory_enabled": d.get("memory_enabled", True),
            "case_id": d.get("case_id"),
            "started_seq": started.seq,
            "started_at": started.occurred_at,
        }
    outcome = None
    if completed is not None:
        d = completed.data
        outcome = {
            "success": d.get("success"),
            "turns": d.get("turns"),
            "tokens_in": d.get("tokens_in"),
            "tokens_out": d.get("tokens_out"),
            "duration_ms": d.get("duration_ms"),
            "final_url": d.get("final_url"),
            "completed_seq": completed.seq,
        }
    return {"run_id": run_id, "run": run, "outcome": outcome, "steps": [steps_out[k] for k in wanted]}
