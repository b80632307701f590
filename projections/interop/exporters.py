"""Export the projections' state in the seed systems' formats.

Every format is built from `MemoryView.state` at some seq (so `--as-of`
works for all of them and forgotten subjects are gone), then written only
below `--out` (see files.py):

- `agent-memory`: seed 000's folder — domains/<host>/knowledge.json (facts and
  the last 5 sessions), selectors.json (with each selector's own counts),
  trajectories/traj_*.json, agent-runs/<runId>.json, runs/<runId>.json (a
  suite summary per finished run) and hints.json.
- `memory-json`: seed 001's memory.json, version 1, every lesson field.
- `memory-events`: seed 001's run_<id>/memory_events.jsonl, one per run.
- `json`, `csv`, `prompt`: seed 002's MemoryEntry records and the
  REPEAT/AVOID text, for the graded step memories.

What a state does not hold verbatim is read from the events it names
(`event_ids`): a step's think, internal state and its embedding (Trayn's
internalStateEmbedding, empty unless an embeddings endpoint made one), a
grade's task_incomplete, and a run's last reported current URL. Seed 000's
per-step snapshotHash and trajectory model have no place in the ledger and
come out absent.

Usage::

    view = MemoryView.open(store, projections_path, as_of=120)
    export_memory(view.state, store, "agent-memory", Path("out/.agent-memory"))
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import orjson

from memtape.ledger.clock import parse_ts
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import Store
from memtape.ledger.urls import url_parts
from memtape.projections.folds import lessons as lessons_projection
from memtape.projections.folds.knowledge import current_facts
from memtape.projections.folds.lessons import key_in, lesson_id_in, removed_by
from memtape.projections.interop.files import MAX_NAME, ExportTree, pretty, safe_name, write_single
from memtape.projections.interop.sources import SEED001_EVENTS, join_element, js_time, ts_to_ms
from memtape.projections.text import covered_runs, domain_matches

EXPORT_FORMATS = ("agent-memory", "memory-json", "memory-events", "json", "csv", "prompt")
RUN_FILE_RE = re.compile(r"[^A-Za-z0-9_-]")
CSV_COLUMNS = (
    "id",
    "stepId",
    "stepNum",
    "rep",
    "createdAt",
    "outcome",
    "action",
    "actionElementText",
    "outcomeReason",
    "correction",
    "taskIncomplete",
    "internalState",
    "think",
    "envPre",
    "envPost",
)
PROMPT_HEADER = (
    "# Lessons From Previous Attempt\n"
    "\n"
    "These are results from a PREVIOUS attempt at this task.\n"
    "- REPEAT: actions that worked before — do them again now\n"
    "- AVOID: mistakes from before — do NOT repeat them\n"
)


@dataclass
class ExportResult:
    fmt: str
    out: Path
    files: list[Path] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _num(x: float | int) -> float | int:
    """JSON numbers the way JavaScript writes them: 45000, not 45000.0."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def _date(text: str) -> str:
    """Seed 001 keeps dates (YYYY-MM-DD); a value that is no time at all is passed on as it is."""
    try:
        return parse_ts(text).strftime("%Y-%m-%d")
    except (ValueError, OverflowError):
        return text


def _drop_none(obj: dict[str, Any]) -> dict[str, Any]:
    """`JSON.stringify` leaves out undefined fields."""
    return {k: v for k, v in obj.items() if v is not None}


# ---- seed 001 -----------------------------------------------------------------------


def memory_json(state: Any) -> dict[str, Any]:
    """Seed 001's memory.json: every lesson, in the order the ledger learned them."""
    lessons = []
    for les in state.lessons.lessons.values():
        lessons.append(
            {
                "lesson": les.lesson,
                "category": les.category,
                "failed_command": les.failed_command,
                "error_pattern": les.error_pattern,
                "domain": les.scope_domain,
                "use_count": les.use_count,
                "created_at": _date(les.created_at),
                "last_used": _date(les.last_used),
                "source": "seed" if les.source == "seed" else "learned",
                "triggered_domains": list(les.triggered_domains),
            }
        )
    return {"version": 1, "lessons": lessons}


def memory_event_line(ev: Any, hidden: Callable[[str], bool]) -> dict[str, Any] | None:
    """One seed 001 memory_events.jsonl line for a ledger event, with the document's fields in its
    order, then `ts` (the event's occurred time: memtape's one addition, so that an import keeps the
    times). None for a line about a lesson `hidden` says was forgotten after it; recalls list only
    the lessons not hidden (a pruned lesson stays: seed 001's log keeps what it said then)."""
    d, t = ev.data, ev.type
    line: dict[str, Any] = {"event": t}
    if t in ("tier1_loaded", "error_recall", "domain_recall"):
        shown = shown_lessons(d, hidden)
        lessons = [text for _, text in shown] if d.get("lesson_ids") else list(d.get("lessons") or [])
        if t == "tier1_loaded":
            line.update(count=len(lessons), lessons=lessons)
        elif t == "error_recall":
            line.update(command=d["command"], error_snippet=d["error_snippet"], matched=len(lessons), lessons=lessons)
        else:
            line.update(domain=ev.domain or "", matched=len(lessons), lessons=lessons)
    elif t in ("lesson_recorded", "lesson_deduplicated", "lesson_promoted"):
        if hidden(lesson_id_in(d)):
            return None
        if t == "lesson_recorded":
            line.update(
                lesson=d["lesson"],
                category=d["category"],
                failed_command=d.get("failed_command"),
                error_pattern=d.get("error_pattern"),
                domain=d.get("scope_domain"),
            )
        elif t == "lesson_deduplicated":
            line.update(lesson=d["lesson"], new_use_count=d["new_use_count"])
        else:
            line.update(lesson=d["lesson"], use_count=d["use_count"], triggered_domains=d["triggered_domains"])
    else:
        line.update(pruned_count=d["pruned_count"], remaining_count=d["remaining_count"])
    line["ts"] = js_time(ev.occurred_at)
    return line


def shown_lessons(d: dict[str, Any], hidden: Callable[[str], bool]) -> list[tuple[str, str]]:
    """The (id, text) of each lesson a recall listed that its line still shows: the one rule for a
    line's `lessons` and its `counted`, so that a forgotten lesson leaves both."""
    return [(lid, text) for lid, text in zip(d.get("lesson_ids") or [], d.get("lessons") or []) if not hidden(lid)]


def event_line_bytes(line: dict[str, Any]) -> bytes:
    """A line as seed 001's agent appends it (`json.dumps(evt)`: `", "` and `": "` separators);
    text stays UTF-8 rather than \\u escapes."""
    return json.dumps(line, ensure_ascii=False).encode()


@dataclass
class ForgottenOnExport:
    """What `forget` took, and when: an event is hidden when a forget after it covers it."""

    lessons: dict[str, int] = field(default_factory=dict)
    domains: list[tuple[str, int]] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, store: Store, head: int) -> ForgottenOnExport:
        out = cls()
        for ev in store.read(to_seq=head, types=["subject_forgotten"]):
            d = ev.data
            if d["subject_kind"] == "lesson":
                out.lessons[d["subject"]] = ev.seq
            elif d["subject_kind"] == "domain":
                out.domains.append((d["subject"], ev.seq))
            for run_id in covered_runs(d):
                out.runs[run_id] = ev.seq
        return out

    def lesson(self, lesson_id: str, scope: str | None, seq: int) -> bool:
        return self.lessons.get(lesson_id, 0) > seq or any(
            s > seq and removed_by("domain", dom, lesson_id, scope) for dom, s in self.domains
        )

    def hides(self, scope_of: dict[str, str | None], seq: int) -> Callable[[str], bool]:
        """Whether a lesson an event at `seq` names is hidden, by its id (`scope_of`: each lesson's domain)."""
        return lambda lesson_id: self.lesson(lesson_id, scope_of.get(lesson_id), seq)

    def domain(self, domain: str | None, seq: int) -> bool:
        return bool(domain) and any(s > seq and domain_matches(domain, dom) for dom, s in self.domains)


def outcome_counted(ev: RecordedEvent, used: set[str]) -> RecordedEvent:
    """A run's recall on error as its outcome counted it: the lessons it counted at once and the
    pending ones the run's `lessons_used` counted, for the line's `counted` (memtape's addition to
    seed 001's line, which an import takes as given; without it a reader counts every pattern
    match) and for the logs' own fold."""
    d = ev.data
    counted = [*(d.get("counted_ids") or ()), *(lid for lid in d["pending_ids"] if lid in used)]
    return replace(ev, data={**d, "counted_ids": counted, "pending_ids": []}, _model=[])


def memory_events_files(
    state: Any,
    store: Store,
    only_run: str | None = None,
) -> tuple[list[tuple[list[str], bytes]], dict[str, int]]:
    """Seed 001's per-run logs, `run_<id>/memory_events.jsonl`, for every run with memory events up
    to the state's head (a live view: any run, running or finished, at any seq).

    The ledger keeps the agent's observation and the policy's decision apart: a lesson learned
    again is a `lesson_recorded` followed by the `lesson_deduplicated` it caused. Seed 001's log
    has one line for it, so a `lesson_recorded` is a line only when it creates a lesson in the
    logs themselves: the lessons fold replayed over the seeds and the lines written so far, which
    is what an import of the logs replays (a lesson first learned in a forgotten run is created by
    the next run's line, and the dedup the ledger made of that line is left out). Forgotten runs,
    and lines about forgotten lessons and domains, are left out, and a pruning counts the lessons
    the logs hold; the seed lessons have no line (seed 001 seeds silently). `only_run`: that run's file only."""
    head = state.head
    gone = ForgottenOnExport.read(store, head)
    logs = lessons_projection.empty()  # the lessons as the logs tell them
    scope_of: dict[str, str | None] = {}
    by_run: dict[str, list[bytes]] = {}
    ledger = lessons_projection.empty()  # the lessons as the ledger tells them, forgotten runs too
    relearned: str | None = None  # a lesson the previous line created in the logs and the ledger deduplicated
    used: dict[tuple[str | None, int], set[str]] = {}  # the pending lessons a run's outcome counted, by recall
    for ev in store.read(to_seq=head, types=["lessons_used"]):
        used.setdefault((ev.run_id, ev.data["recall_step"]), set()).update(ev.data["lesson_ids"])
    for ev in store.read(to_seq=head, types=sorted({"lesson_seeded", *SEED001_EVENTS})):
        if ev.type == "error_recall" and ev.data.get("pending_ids") is not None:
            ev = outcome_counted(ev, used.get((ev.run_id, ev.step or 0), set()))
        says_counted = ev.type == "error_recall" and ev.data.get("counted_ids") is not None
        d = ev.data
        known = ev.type == "lesson_recorded" and key_in(d) in ledger.by_key
        lessons_projection.apply(ledger, ev)
        if ev.type == "lesson_deduplicated" and relearned is not None and lesson_id_in(d) == relearned:
            relearned = None
            continue  # the dedup the ledger made of the lesson_recorded line that created it in the logs
        relearned = None
        if ev.type in ("lesson_recorded", "lesson_seeded"):
            scope_of.setdefault(lesson_id_in(d), d.get("scope_domain"))
        if ev.type == "lesson_seeded":
            lessons_projection.apply(logs, ev)
            continue
        if ev.run_id is None or ev.run_id in gone.runs or (ev.type == "domain_recall" and not ev.domain):
            continue
        if ev.type in ("tier1_loaded", "error_recall", "domain_recall") and gone.domain(ev.domain, ev.seq):
            continue  # what happened on a forgotten domain; a lesson's own lines follow the lesson
        if ev.type == "lesson_recorded" and key_in(d) in logs.by_key:
            continue  # it only confirmed a lesson: its lesson_deduplicated is the line
        if known:
            relearned = lesson_id_in(d)  # first learned in a forgotten run: this line creates it
        seq = ev.seq
        hidden = gone.hides(scope_of, seq)
        line = memory_event_line(ev, hidden)
        if line is None:
            continue
        if says_counted:
            shown = dict(shown_lessons(d, hidden))
            line.update(counted=[shown[lid] for lid in d["counted_ids"] if lid in shown], ts=line.pop("ts"))
        if ev.type == "lesson_promoted":
            line["triggered_domains"] = [t for t in line["triggered_domains"] if not gone.domain(t, seq)]
        elif ev.type == "lessons_pruned":
            pruned = len({lid for lid in d.get("lesson_ids") or () if lid in logs.lessons})
            line.update(pruned_count=pruned, remaining_count=len(logs.lessons) - pruned, ts=line.pop("ts"))
        lessons_projection.apply(logs, ev)
        if only_run is None or ev.run_id == only_run:
            by_run.setdefault(ev.run_id, []).append(event_line_bytes(line))
    files = []
    for run_id, lines in by_run.items():
        files.append(([run_dir_name(run_id), "memory_events.jsonl"], b"\n".join(lines) + b"\n"))
    return files, {"runs": len(files), "lines": sum(len(v) for v in by_run.values())}


def run_dir_name(run_id: str) -> str:
    """Seed 001's run folder (`run_20260312T143000Z`): the run id when it already reads `run...`."""
    return safe_name(run_id if run_id.startswith("run") else f"run_{run_id}")


def run_memory_events(store: Store, run_id: str, head: int | None = None) -> bytes:
    """One run's memory_events.jsonl as it stands (empty when the run has no memory events)."""
    state = SimpleNamespace(head=store.head() if head is None else head)
    files, _counts = memory_events_files(state, store, only_run=run_id)
    return files[0][1] if files else b""


# ---- seed 000 -----------------------------------------------------------------------


def _unique(name: str, raw: str, taken: set[str]) -> str:
    if name in taken:
        name = f"{name[:160]}_{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    taken.add(name)
    return name


def knowledge_json(state: Any, domain: str) -> dict[str, Any]:
    facts = [
        {
            "type": f.fact_type,
            "key": f.key,
            "value": f.value,
            "confidence": f.confidence,
            "sources": f.sources,
            "lastSeen": js_time(f.last_seen),
        }
        for f in current_facts(state.knowledge, domain)
    ]
    sessions = [
        {
            "id": s.session_id,
            "goal": s.goal,
            "outcome": s.outcome,
            "success": s.success,
            "finalUrl": s.final_url,
            "timestamp": s.timestamp,
            "turnsUsed": s.turns_used,
            "durationMs": _num(s.duration_ms),
        }
        for s in state.sessions.by_domain.get(domain, [])
    ]
    times = cast(list[str], [f["lastSeen"] for f in facts] + [s["timestamp"] for s in sessions])
    updated = max(times, key=lambda t: parse_ts(t)) if times else None
    return _drop_none({"domain": domain, "facts": facts, "sessions": sessions, "updatedAt": updated})


def selectors_json(state: Any, domain: str) -> dict[str, Any] | None:
    """Seed 000 keeps one entry per element: its last @ref, its best stable selector, all successes;
    memtape adds `failureCount` (when any), keeps elements whose selectors never succeeded, and
    gives each selector its own counts under `selectors` (in the order memory first saw them)."""
    groups: dict[str, list[Any]] = {}
    for entry in state.selectors.by_domain.get(domain, {}).values():
        groups.setdefault(join_element(entry.role, entry.name), []).append(entry)
    if not groups:
        return None
    entries: dict[str, Any] = {}
    for element, items in groups.items():
        best = sorted(items, key=lambda e: (-e.successes, e.failures, e.selector))
        ref = next((e.selector for e in best if e.selector.startswith("@")), None)
        stable = next((e.selector for e in best if not e.selector.startswith("@")), None)
        last = max((e.last_used for e in items), key=lambda t: parse_ts(t))
        failures = sum(e.failures for e in items)
        own = {
            e.selector: _drop_none(
                {"successCount": e.successes, "failureCount": e.failures or None, "lastUsed": js_time(e.last_used)}
            )
            for e in items
        }
        entries[element] = _drop_none(
            {
                "element": element,
                "lastRef": ref,
                "stableSelector": stable,
                "successCount": sum(e.successes for e in items),
                "failureCount": failures or None,
                "lastUsed": js_time(last),
                "selectors": own,
            }
        )
    updated = max((e["lastUsed"] for e in entries.values()), key=lambda t: parse_ts(t))
    return {"entries": entries, "updatedAt": updated}


#: seed 000's analyzer thresholds (TrajectoryAnalyzer.generateHints)
HIGH_FAILURE_RATE, HIGH_FAILURE_MIN_USES, SLOW_GOAL_TURNS, SLOW_GOAL_MIN_RUNS = 0.3, 3, 15, 2


def hints_json(state: Any) -> dict[str, Any] | None:
    """hints.json: seed 000's FEEDBACK FROM PREVIOUS RUNS, from what this folder itself holds (the
    selectors' own counts and the finished runs), so that an import of the folder gives the same
    hints back. Seed 000's hints drawn from per-turn traces (efficiency, stale refs, loops) need
    steps the folder does not carry and are not written. None when there is nothing to say."""
    hints: list[str] = []
    times: list[str] = []
    failing = []
    for domain in sorted(state.selectors.by_domain):
        for e in state.selectors.by_domain[domain].values():
            uses = e.successes + e.failures
            if uses >= HIGH_FAILURE_MIN_USES and e.failures / uses > HIGH_FAILURE_RATE:
                failing.append((e.failures / uses, e, uses))
    failing.sort(key=lambda f: -f[0])  # stable: domain, then first seen
    if failing:
        parts = [
            f'{join_element(e.role, e.name)} on "{e.selector}" fails {rate * 100:.0f}% of the time '
            f"({e.failures}/{uses})"
            for rate, e, uses in failing[:3]
        ]
        hints.append(f"HIGH-FAILURE SELECTORS: {'; '.join(parts)}. Try alternative approaches.")
        times += [e.last_used for _rate, e, _uses in failing]
    finished = [r for r in state.runs.runs.values() if r.status != "running"]
    goals: dict[str, list[Any]] = {}
    for r in finished:
        goals.setdefault(r.goal.split("\n")[0][:80], []).append(r)
    slow = [
        (sum(r.turn_count for r in rs) / len(rs), prefix, rs)
        for prefix, rs in goals.items()
        if len(rs) >= SLOW_GOAL_MIN_RUNS and sum(r.turn_count for r in rs) / len(rs) > SLOW_GOAL_TURNS
    ]
    slow.sort(key=lambda g: -g[0])
    if slow:
        parts = [f'"{prefix}" averages {avg:.0f} turns' for avg, prefix, _rs in slow[:2]]
        hints.append(f"SLOW GOALS: {'; '.join(parts)}. Consider more direct navigation strategies.")
        times += [r.updated_at for _avg, _prefix, rs in slow for r in rs]
    reasons: dict[str, int] = {}
    for r in finished:
        if not r.success and (r.summary or r.reason):
            reasons[r.summary or r.reason] = reasons.get(r.summary or r.reason, 0) + 1
            times.append(r.updated_at)
    if reasons:
        top = sorted(reasons, key=lambda k: -reasons[k])[:3]  # stable: first failed first
        hints.append(f"COMMON FAILURES: {'; '.join(top)}")
    if not hints:
        return None
    text = "FEEDBACK FROM PREVIOUS RUNS:\n" + "\n".join(f"- {h}" for h in hints)
    return {"hints": text, "updatedAt": js_time(max(times, key=lambda t: parse_ts(t)))}


def run_summary_json(run: Any) -> dict[str, Any]:
    """runs/<runId>.json: seed 000's suite summary for one finished run (a suite of one test: the
    ledger records runs, not suite invocations); `model` is the run's decision policy."""
    passed = 1 if run.success else 0
    model = run.policy.get("decision_policy")
    duration = _num(run.duration_ms)
    return _drop_none(
        {
            "id": run.run_id,
            "model": model if isinstance(model, str) else None,
            "timestamp": js_time(run.started_at),
            "total": 1,
            "passed": passed,
            "failed": 1 - passed,
            "passRate": passed,
            "avgTurns": run.turn_count,
            "avgDurationMs": duration,
            "totalDurationMs": duration,
            "tests": [
                {
                    "id": run.case_id or run.run_id,
                    "name": run.goal,
                    "verified": bool(run.success),
                    "turnsUsed": run.turn_count,
                    "durationMs": duration,
                }
            ],
        }
    )


def trajectory_json(t: Any) -> dict[str, Any]:
    steps = []
    for s in t.steps:
        action: dict[str, Any] = {"action": s.command}
        if s.selector is not None:
            action["selector"] = s.selector
        action.update({k: v for k, v in (s.args or {}).items() if k not in ("action", "selector")})
        steps.append({"url": s.url, "action": action, "verified": s.verified})
    return _drop_none(
        {
            "id": t.trajectory_id,
            "goal": t.goal,
            "origin": t.origin or None,
            "steps": steps,
            "success": True,
            "durationMs": _num(t.duration_ms),
            "timestamp": js_time(t.occurred_at),
        }
    )


def _last_progress_url(store: Store, run_id: str, head: int) -> str | None:
    url = None
    for ev in store.read(to_seq=head, types=["run_progress"], run_id=run_id):
        url = ev.data.get("current_url")
    return url


def run_manifest_json(run: Any, current_url: str | None) -> dict[str, Any]:
    return _drop_none(
        {
            "runId": run.run_id,
            "sessionId": run.session_id,
            "parentRunId": run.parent_run_id,
            "status": run.status,
            "goal": run.goal,
            "domain": run.domain,
            "startUrl": run.start_url,
            "finalUrl": run.final_url,
            "currentUrl": current_url,
            "startedAt": js_time(run.started_at),
            "updatedAt": js_time(run.updated_at),
            "completedAt": js_time(run.completed_at) if run.completed_at else None,
            "success": run.success,
            "summary": run.summary or None,
            "artifactPaths": list(run.artifact_paths),
            "turnCount": run.turn_count,
            "result": run.result,
            "reason": run.reason,
        }
    )


def agent_memory_files(state: Any, store: Store) -> tuple[list[tuple[list[str], Any]], dict[str, int]]:
    """(path parts under the root, JSON object) for seed 000's folder, and what went in."""
    files: list[tuple[list[str], Any]] = []
    counts = {
        "domains": 0,
        "facts": 0,
        "sessions": 0,
        "selectors": 0,
        "trajectories": 0,
        "runs": 0,
        "summaries": 0,
        "hints": 0,
    }
    domains = (
        set(state.knowledge.current)
        | set(state.sessions.by_domain)
        | set(state.selectors.by_domain)
        | set(state.trajectories.by_domain)
    )
    domains.discard("")
    taken: set[str] = set()
    for domain in sorted(domains):
        dname = _unique(safe_name(domain), domain, taken)
        knowledge = knowledge_json(state, domain)
        files.append((["domains", dname, "knowledge.json"], knowledge))
        counts["domains"] += 1
        counts["facts"] += len(knowledge["facts"])
        counts["sessions"] += len(knowledge["sessions"])
        selectors = selectors_json(state, domain)
        if selectors is not None:
            files.append((["domains", dname, "selectors.json"], selectors))
            counts["selectors"] += len(selectors["entries"])
        traj_names: set[str] = set()
        for t in state.trajectories.by_domain.get(domain, {}).values():
            base = safe_name(t.trajectory_id)
            if not base.startswith("traj_"):
                base = f"traj_{base}"
            name = _unique(base, t.trajectory_id, traj_names)
            files.append((["domains", dname, "trajectories", f"{name}.json"], trajectory_json(t)))
            counts["trajectories"] += 1
    run_names: set[str] = set()
    head = state.head
    for run in state.runs.runs.values():
        name = _unique(RUN_FILE_RE.sub("_", run.run_id)[:MAX_NAME] or "run", run.run_id, run_names)
        files.append(
            (["agent-runs", f"{name}.json"], run_manifest_json(run, _last_progress_url(store, run.run_id, head)))
        )
        counts["runs"] += 1
        if run.status != "running":
            files.append((["runs", f"{name}.json"], run_summary_json(run)))
            counts["summaries"] += 1
    hints = hints_json(state)
    if hints is not None:
        files.append((["hints.json"], hints))
        counts["hints"] = 1
    return files, counts


# ---- seed 002 ---------------------------------------------------------------------------


def _env_json(env: dict[str, Any]) -> dict[str, Any]:
    return {
        "url": env.get("url", ""),
        "title": env.get("title", ""),
        "pageType": env.get("page_type", ""),
        "elements": list(env.get("elements") or []),
    }


def _action_text(action: dict[str, Any]) -> str:
    """Trayn writes actions as calls (`click('42')`); an import kept the original in args.call."""
    args = action.get("args") or {}
    call = args.get("call")
    if isinstance(call, str):
        return call
    parts = [repr(v) if isinstance(v, str) else str(v) for k, v in args.items() if k not in ("record_id", "step_id")]
    return f"{action.get('command', '')}({', '.join(parts)})"


def _events(store: Store, ids: Iterable[str]) -> list[Any]:
    out = []
    for eid in ids:
        ev = store.get(eid)
        if ev is not None:
            out.append(ev)
    return out


def step_entries(state: Any, store: Store) -> list[dict[str, Any]]:
    """Every step memory as a Trayn MemoryEntry (pending ones too), by record id.

    An imported record keeps its id; other steps are numbered after the largest one, run by
    run and step by step."""
    memories = [
        m for steps in state.step_memories.by_run.values() for m in sorted(steps.values(), key=lambda m: m.step)
    ]
    wanted = [m.action.get("args", {}).get("record_id") for m in memories]
    kept: set[int] = set()
    ids: list[int | None] = []
    for rid in wanted:
        if isinstance(rid, int) and not isinstance(rid, bool) and rid not in kept:
            kept.add(rid)
            ids.append(rid)
        else:
            ids.append(None)
    next_id = max(kept, default=0) + 1
    entries = []
    for m, rid in zip(memories, ids):
        if rid is None:
            rid, next_id = next_id, next_id + 1
        events = _events(store, m.event_ids)
        recorded = next((e for e in events if e.type == "step_recorded"), None)
        graded = next((e for e in reversed(events) if e.type == "step_graded"), None)
        rec = recorded.data if recorded is not None else {}
        args = m.action.get("args") or {}
        entry = {
            "id": rid,
            "stepId": args.get("step_id") if isinstance(args.get("step_id"), str) else None,
            "envPre": _env_json(m.env_before),
            "internalState": (rec.get("internal_state") if recorded is not None else m.intent) or "",
            "think": rec.get("think"),
            "internalStateEmbedding": rec.get("internal_state_embedding") or [],
            "action": _action_text(m.action),
            "actionElementText": m.target_text or "",
            "envPost": _env_json(m.env_after),
            "outcome": m.outcome,
            "outcomeReason": m.reason,
            "correction": m.correction,
            "taskIncomplete": graded.data.get("task_incomplete") if graded is not None else None,
            "createdAt": ts_to_ms(recorded.occurred_at) if recorded is not None else 0,
            "stepNum": m.step,
            "rep": m.rep,
        }
        entries.append(_drop_none(entry))
    entries.sort(key=lambda e: e["id"])  # record ids are creation order, as Trayn's store lists them
    return entries


def entries_csv(entries: list[dict[str, Any]]) -> str:
    """One row per MemoryEntry; the page states are JSON in their cells, the embedding is left out."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    for e in entries:
        row = {k: e.get(k) for k in CSV_COLUMNS}
        row["envPre"] = orjson.dumps(e["envPre"]).decode()
        row["envPost"] = orjson.dumps(e["envPost"]).decode()
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


@dataclass(frozen=True)
class PromptItem:
    """One graded memory as the prompt shows it."""

    kind: str  # REPEAT | AVOID
    url: str
    similarity: float | None  # to the current page; None in an export (there is no current page)
    command: str
    target: str
    reason: str | None
    correction: str | None


#: what an action without a target element acted with (`press` a key, `goto` a URL...)
_ARG_KEYS = ("key", "text", "value", "url", "direction", "ms")


def _what(m: Any) -> str:
    if m.target_text:
        return str(m.target_text)
    args = m.action.get("args") or {}
    return next((str(args[k]) for k in _ARG_KEYS if args.get(k) not in (None, "")), "")


def prompt_items(state: Any) -> list[PromptItem]:
    """Graded step memories in export order (no similarity: there is no current page to compare with)."""
    items = []
    for steps in state.step_memories.by_run.values():
        for m in sorted(steps.values(), key=lambda m: m.step):
            if m.outcome == "pending":
                continue
            items.append(
                PromptItem(
                    m.kind,
                    m.env_before.get("url", ""),
                    None,
                    m.action.get("command", ""),
                    _what(m),
                    m.reason,
                    m.correction,
                )
            )
    return items


def render_prompt(items: Iterable[PromptItem]) -> str:
    """Seed 002's REPEAT/AVOID text, exactly its shape when the similarity to a current page is
    known (`[/tickets 85%]`); without one, the page is named by host and path (`[shop.test/cart]`);
    an action with no target shows nothing after its command."""
    lines = [PROMPT_HEADER]
    for n, it in enumerate(items, start=1):
        parts = url_parts(it.url) if it.url else None
        path = (parts.path or "/") if parts else "/"
        where = (
            f"{path} {round(it.similarity * 100)}%"
            if it.similarity is not None
            else (f"{parts.netloc}{path}" if parts and parts.netloc else path)
        )
        what = f": '{it.target}'" if it.target else ""
        lines.append(f"{n}. {it.kind}: [{where}] {it.command}{what}\n")
        if it.kind == "REPEAT":
            if it.reason:
                lines.append(f"   This worked: {it.reason}\n")
        else:
            if it.reason:
                lines.append(f"   This failed: {it.reason}\n")
            if it.correction:
                lines.append(f"   Do this instead: {it.correction}\n")
    if len(lines) > 1:
        lines[0] += "\n"
    return "".join(lines)


# ---- the export --------------------------------------------------------------------------


def export_memory(state: Any, store: Store, fmt: str, out: Path) -> ExportResult:
    """Write `state` in format `fmt` at `out` (a directory for agent-memory, else one file)."""
    out = Path(out)
    result = ExportResult(fmt, out)
    if fmt == "agent-memory":
        files, counts = agent_memory_files(state, store)
        tree = ExportTree(out)
        tree.prepare_root(must_be_empty=True)
        for top in ("domains", "agent-runs", "runs"):  # seed 000 creates these even when empty
            tree.mkdir([top])
        for parts, obj in files:
            tree.write(parts, pretty(obj))
        result.files, result.counts = tree.written, counts
    elif fmt == "memory-events":
        files, counts = memory_events_files(state, store)
        tree = ExportTree(out)
        tree.prepare_root(must_be_empty=True)
        for parts, data in files:
            tree.write(parts, data)
        result.files, result.counts = tree.written, counts
    elif fmt == "memory-json":
        doc = memory_json(state)
        result.files = [write_single(out, pretty(doc))]
        result.counts = {"lessons": len(doc["lessons"])}
    elif fmt in ("json", "csv"):
        entries = step_entries(state, store)
        data = pretty(entries) if fmt == "json" else entries_csv(entries).encode()
        result.files = [write_single(out, data)]
        result.counts = {"memories": len(entries), "graded": sum(e["outcome"] != "pending" for e in entries)}
    elif fmt == "prompt":
        items = prompt_items(state)
        result.files = [write_single(out, render_prompt(items).encode())]
        result.counts = {"memories": len(items)}
    else:
        raise LedgerError(f"unknown export format {fmt!r}: one of {', '.join(EXPORT_FORMATS)}")
    return result
