"""Short-term and working memory per run (seed 003): recent actions, failure
signatures, action frequency, loop warnings (the same action ≥ 3 times in the
last 10), the navigation path and the visited URLs. Kept after the run
completes (marked `completed`), as every projection is, so `state short-term
--run R` and audits show it.

Each entry has seed 003's MemoryPriority: the step's own when it gives one,
else by rule — CRITICAL for errors and key discoveries (an extraction, a
successful finish), HIGH for successful actions that changed the page or the
form, NORMAL for other successful actions, LOW for routine ones (wait, scroll,
a key press without a target). When more than MAX_RECENT entries are kept,
the oldest entry of the lowest priority goes first; CRITICAL entries are
never pruned."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.folds.steps import action_parts, signature
from memtape.projections.text import add_event_id, build, domain_matches, evolve

TYPES = ("run_started", "step_recorded", "run_completed", "subject_forgotten")
MAX_RECENT = 50
PRIORITY_RANK = {"critical": 0, "high": 1, "normal": 2, "low": 3}
ROUTINE = frozenset({"wait", "scroll"})
DISCOVERIES = frozenset({"extract"})


@dataclass(frozen=True, slots=True)
class ShortTerm:
    run_id: str
    goal: str
    domain: str
    recent: tuple[dict[str, Any], ...]  # last 50 actions: step, action, url, ok, error, signature
    failed_signatures: tuple[str, ...]
    action_frequency: dict[str, int]
    loop_warnings: tuple[str, ...]
    navigation_path: tuple[str, ...]
    current_url: str
    cycle_count: int
    event_ids: tuple[str, ...]
    session_id: str | None = None
    visited_urls: tuple[str, ...] = ()
    completed: bool = False

    def has_failed(self, signature: str) -> bool:
        return signature in self.failed_signatures


_short_term = constructor(ShortTerm)


def empty_run(run_id: str, goal: str = "", domain: str = "", session_id: str | None = None) -> ShortTerm:
    return _short_term(run_id, goal, domain, (), (), {}, (), (), "", 0, (), session_id)


@dataclass
class ShortTermState:
    by_run: dict[str, ShortTerm] = field(default_factory=dict)


def empty() -> ShortTermState:
    return ShortTermState()


def priority_of(d: dict[str, Any], before: str, after: str) -> str:
    """Seed 003's MemoryPriority of a step as a short-term entry (see the module docstring)."""
    given = d.get("priority")
    if given:
        return str(given)
    command = d["action"].get("command", "")
    if not d["ok"]:
        return "critical"
    if command in DISCOVERIES or command == "finish":
        return "critical"
    if command in ROUTINE or (command == "press" and not (d["action"].get("args") or {}).get("ref")):
        return "low"
    if after != before or command in ("fill", "type", "select", "goto", "back"):
        return "high"
    return "normal"


def trim(recent: tuple[dict[str, Any], ...], limit: int = MAX_RECENT) -> tuple[dict[str, Any], ...]:
    """At most `limit` entries: drop the oldest of the lowest priority first, never a critical one."""
    if len(recent) <= limit:
        return recent
    out = list(recent)
    while len(out) > limit:
        victims = [(PRIORITY_RANK[e["priority"]], -i) for i, e in enumerate(out) if e["priority"] != "critical"]
        if not victims:
            break
        del out[-max(victims)[1]]
    return tuple(out)


def loop_warnings(recent: tuple[dict[str, Any], ...], threshold: int, window: int) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for entry in recent[-window:]:
        key = entry["key"]
        counts[key] = counts.get(key, 0) + 1
    hits = [(-n, k) for k, n in counts.items() if n >= threshold]
    if not hits:
        return ()
    hits.sort()
    return tuple(f"Warning: {k} repeated {-n} times in last {window} actions!" for n, k in hits)


def apply(state: ShortTermState, ev: RecordedEvent, policy: Any) -> ShortTermState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    t = ev.type
    if t == "run_started" and ev.run_id:
        state.by_run[ev.run_id] = empty_run(ev.run_id, d.get("goal", ""), ev.domain or "", d.get("session_id"))
    elif t == "step_recorded" and ev.run_id:
        st = state.by_run.get(ev.run_id) or empty_run(ev.run_id, "", ev.domain or "")
        action = d["action"]
        before = (d.get("env_before") or {}).get("url", "")
        after = (d.get("env_after") or {}).get("url", "") or before
        command, args = action_parts(action)
        key = f"{command}({args})"  # `click({"selector":"#submit"})`: as loop detection and frequency count it
        sig = signature(command, args, before)
        # keys in sorted order, as the canonical JSON of a stored version gives them back
        entry = {
            "error": d.get("error"),
            "key": key,
            "ok": bool(d["ok"]),
            "priority": priority_of(d, before, after),
            "signature": sig,
            "step": ev.step,
            "url": before,
        }
        recent = trim((*st.recent, entry))
        freq = dict(st.action_frequency)
        freq[key] = freq.get(key, 0) + 1
        failed = st.failed_signatures if d["ok"] or sig in st.failed_signatures else (*st.failed_signatures, sig)
        path, visited = st.navigation_path, st.visited_urls
        for url in (before, after):
            if url and (not path or path[-1] != url):
                path = (*path, url)
            if url and url not in visited:
                visited = (*visited, url)
        state.by_run[ev.run_id] = evolve(
            st,
            recent=recent,
            failed_signatures=failed,
            action_frequency=freq,
            loop_warnings=loop_warnings(recent, policy.loop_threshold, policy.loop_window),
            navigation_path=path,
            visited_urls=visited,
            current_url=after or st.current_url,
            cycle_count=st.cycle_count + 1,
            event_ids=add_event_id(st.event_ids, ev.id),
        )
    elif t == "run_completed" and ev.run_id and ev.run_id in state.by_run:
        state.by_run[ev.run_id] = evolve(state.by_run[ev.run_id], completed=True)
    elif t == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        if kind == "run":
            state.by_run.pop(subject, None)
        elif kind == "session":
            for rid in [r for r, st in state.by_run.items() if st.session_id == subject]:
                del state.by_run[rid]
        elif kind == "domain":
            for rid in [r for r, st in state.by_run.items() if domain_matches(st.domain, subject)]:
                del state.by_run[rid]
    return state


#: how projections/cache/intervals.py files this state (field -> depth): one version per run each time
#: a step, its start or its end changes it, so its short-term memory as of any seq is a lookup
LAYOUT = {"by_run": 1}


def touched(state: ShortTermState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    if ev.type == "subject_forgotten":
        return None
    return [("by_run", ev.run_id)] if ev.run_id else []


def decode(raw: dict[str, Any]) -> ShortTermState:
    return ShortTermState(
        by_run={
            rid: build(
                ShortTerm,
                r,
                recent=tuple(r["recent"]),
                failed_signatures=tuple(r["failed_signatures"]),
                loop_warnings=tuple(r["loop_warnings"]),
                navigation_path=tuple(r["navigation_path"]),
                visited_urls=tuple(r.get("visited_urls") or ()),
                event_ids=tuple(r["event_ids"]),
            )
            for rid, r in raw.get("by_run", {}).items()
        }
    )


def tables(state: ShortTermState) -> dict[str, list[dict[str, Any]]]:
    rows = [
        {
            "run_id": st.run_id,
            "goal": st.goal,
            "domain": st.domain,
            "cycle_count": st.cycle_count,
            "current_url": st.current_url,
            "failed_signatures": orjson.dumps(st.failed_signatures).decode(),
            "action_frequency": orjson.dumps(st.action_frequency, option=orjson.OPT_SORT_KEYS).decode(),
            "loop_warnings": orjson.dumps(st.loop_warnings).decode(),
            "navigation_path": orjson.dumps(st.navigation_path).decode(),
            "visited_urls": orjson.dumps(st.visited_urls).decode(),
            "completed": int(st.completed),
            "recent": orjson.dumps(st.recent).decode(),
            "event_ids": orjson.dumps(st.event_ids).decode(),
        }
        for st in state.by_run.values()
    ]
    return {"short_term": rows}
