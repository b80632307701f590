"""The memory facade: the only way the agent touches memory.

Every call appends its event through `projections.writer.MemoryWriter` (so
the policy's decisions — dedup, promotion, pruning, contradiction — land in
the same transaction) and every read goes through `projections.view.MemoryView`.
With memory off the facade still logs the run (run_started, step_recorded,
context_built, step_graded, run_completed: seed 002's baseline rep) but reads
nothing and learns nothing.

Secrets never reach the ledger: passwords named in the goal and values typed
into password fields are scrubbed from every payload before it is built, and
`Action(sensitive=True)` redacts the typed value itself.

Example:
    mem = AgentMemory.open(store, projections_path)
    mem.open_run(run_id, goal, start_url)
    tips = mem.domain_recall("shop.test", step=1)
    ...
    mem.finish_run(outcome, steps)
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memledger.ledger.clock import format_ts
from memledger.ledger.events import (
    Action, ContextBuilt, ContextItem, DomainRecall, ElementRef, EnvState, ErrorRecall, FactObserved,
    LessonRecorded, NewEvent, Payload, RecordedEvent, RunCompleted, RunProgress, RunStarted, SelectorFailed,
    SelectorSucceeded, SessionRecorded, StepGraded, StepRecorded, Tier1Loaded, TrajectoryRecalled,
    TrajectoryRecorded, TrajectoryStep,
)
from memledger.ledger.redact import MARKER
from memledger.agent.browser import domain_of, origin_of
from memledger.agent.budget import BudgetItem
from memledger.agent.prompt import quoted_name
from memledger.projections.policy import DEFAULT_POLICY, Policy
from memledger.projections.view import MemoryView
from memledger.projections.writer import MemoryWriter

#: error phrases that name a failure's cause; the first found is a lesson's error_pattern
KNOWN_PATTERNS = ("intercepts pointer events", "is not an <input>", "strict mode violation",
                  "element is not visible", "element is not enabled", "not attached to the dom",
                  "too many arguments", "net::err_", "timeout")
DISMISS = re.compile(r"\b(accept|agree|allow|close|dismiss|got it|ok|okay|no thanks|continue|reject)\b", re.I)
PASSWORD_IN_GOAL = re.compile(r'password\s*(?:is\s*|[:=]\s*)?"([^"]+)"|password\s*[:=]\s*(\S+)', re.I)
SAFE_KEYS = {"Enter", "Escape", "Tab", "ArrowDown", "ArrowUp", "PageDown", "PageUp", "Space", "Backspace"}


def error_pattern(error: str) -> str:
    """The key phrase of an error: a known cause, else its first words without quoted page text."""
    low = (error or "").lower()
    for p in KNOWN_PATTERNS:
        if p in low:
            return p
    bare = re.sub(r"<[^>]*>|\"[^\"]*\"|'[^']*'", " ", low)
    return " ".join(re.findall(r"[a-z][a-z0-9:_-]*", bare)[:8])


def substantive(error: str | None) -> bool:
    return bool(error) and "rejected by the approval hook" not in (error or "") and len(error_pattern(error or "")) >= 5


def goal_secrets(goal: str) -> list[str]:
    """Passwords written in a goal (`... with password "p"`), to be scrubbed from memory."""
    return [a or b for a, b in PASSWORD_IN_GOAL.findall(goal) if (a or b)]


@dataclass
class StepRecord:
    """One executed step as the loop saw it (post-run learning reads these)."""

    step: int
    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None
    url_before: str
    url_after: str
    role: str | None = None
    name: str | None = None
    selector: str | None = None
    sensitive: bool = False
    duration_ms: float = 0.0
    decided_by: str = "policy"
    in_shadow: bool = False
    event_id: str | None = None

    @property
    def domain(self) -> str:
        return domain_of(self.url_before) or domain_of(self.url_after)

    @property
    def identity(self) -> tuple[str | None, str | None]:
        return (self.role, self.name)


@dataclass
class RunOutcome:
    success: bool
    summary: str
    reason: str | None
    final_url: str
    turns: int
    tokens_in: int
    tokens_out: int
    duration_ms: float
    policy_decisions: int
    replayed_steps: int
    memory_ms: float = 0.0
    result: str | None = None


@dataclass
class Learned:
    """What post-run learning produced (also returned to the caller for reports and tests)."""

    lessons: list[LessonRecorded] = field(default_factory=list)
    facts: list[FactObserved] = field(default_factory=list)
    trajectory: TrajectoryRecorded | None = None


class AgentMemory:
    """Reads through MemoryView, writes through MemoryWriter; times itself."""

    def __init__(self, store: Any, projections_path: Path | None = None, policy: Policy = DEFAULT_POLICY,
                 *, enabled: bool = True):
        self.store = store
        self.policy = policy
        self.enabled = enabled
        self.writer = MemoryWriter(store, policy)
        self.projections_path = projections_path
        self.view: MemoryView | None = None
        self._dirty = True
        self.secrets: list[str] = []
        self.run_id: str | None = None
        self.run_domain: str = ""
        self.goal: str = ""
        self.start_url: str = ""
        self.session_id: str | None = None
        self.started = 0.0
        self.ms_total = 0.0
        self._ms_step = 0.0

    # ---- plumbing ------------------------------------------------------------------

    @classmethod
    def open(cls, store: Any, projections_path: Path | None = None, policy: Policy = DEFAULT_POLICY,
             enabled: bool = True) -> "AgentMemory":
        return cls(store, projections_path, policy, enabled=enabled)

    @contextmanager
    def _timed(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = (time.perf_counter() - t0) * 1000
            self.ms_total += dt
            self._ms_step += dt

    def take_step_ms(self) -> float:
        """Milliseconds spent in memory since the last call (the loop reads it once per step)."""
        ms, self._ms_step = self._ms_step, 0.0
        return ms

    def now(self) -> str:
        clock = getattr(self.store, "clock", None)
        from datetime import UTC, datetime
        return format_ts(clock() if clock else datetime.now(UTC))

    def _view(self) -> MemoryView:
        if self.view is None:
            self.view = MemoryView.open(self.store, self.projections_path, self.policy)
            # later refreshes fold only the new events in memory (no projections.db round trip)
            self.view.projections_path = None
            self._dirty = False
        elif self._dirty:
            self.view.refresh()
            self._dirty = False
        return self.view

    def scrub(self, value: Any) -> Any:
        """Replace every known secret in strings of a nested value."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            for s in self.secrets:
                if s and s in value:
                    value = value.replace(s, MARKER)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value

    def add_secret(self, value: str) -> None:
        if value and value != MARKER and value not in self.secrets:
            self.secrets.append(value)
            self.secrets.sort(key=len, reverse=True)

    def _event(self, cls: type[Payload], fields: dict[str, Any], *, step: int | None = None,
               domain: str | None = None, run: bool = True) -> NewEvent:
        payload = cls(**self.scrub(fields))
        return NewEvent(payload, run_id=self.run_id if run else None, step=step, domain=domain or None)

    def _append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        if not events:
            return []
        out = self.writer.append(list(events))
        self._dirty = True
        return out

    # ---- run start -------------------------------------------------------------------

    def open_run(self, run_id: str, goal: str, start_url: str, *, session_id: str | None = None,
                 parent_run_id: str | None = None, mode: str = "new", isolation: str = "shared",
                 case_id: str | None = None, decision_policy: str = "scripted") -> list[RecordedEvent]:
        """Memory opened for a run: seeds, pruning and expiry (as decisions), then run_started."""
        self.ms_total = self._ms_step = 0.0  # memory time is counted per run
        with self._timed():
            self.run_id, self.goal, self.start_url = run_id, goal, start_url
            self.run_domain = domain_of(start_url)
            self.session_id = session_id or run_id
            self.started = time.perf_counter()
            for s in goal_secrets(goal):
                self.add_secret(s)
            out: list[RecordedEvent] = []
            if self.enabled:
                out += self.writer.open_for_run(run_id, self.now())
                self._dirty = True
            policy = {"decision_policy": decision_policy, "fingerprint": self.policy.fingerprint(),
                      **self.policy.model_dump(mode="json")}
            out += self._append([self._event(RunStarted, {
                "session_id": session_id, "parent_run_id": parent_run_id, "mode": mode, "goal": goal,
                "start_url": start_url, "memory_enabled": self.enabled, "isolation": isolation,
                "policy": policy, "case_id": case_id}, domain=self.run_domain)])
            return out

    @property
    def safe_goal(self) -> str:
        """The goal as memory stores it (secrets scrubbed): trajectories are matched on it."""
        return str(self.scrub(self.goal))

    # ---- reads that are events (seed 001's memory events) --------------------------------

    def tier1(self) -> list[Any]:
        if not self.enabled:
            return []
        with self._timed():
            lessons = self._view().tier1()
            self._append([self._event(Tier1Loaded, {
                "count": len(lessons), "lessons": [l.lesson for l in lessons],
                "lesson_ids": [l.lesson_id for l in lessons]}, step=0, domain=self.run_domain)])
            return lessons

    def domain_recall(self, domain: str, step: int) -> list[Any]:
        """Trigger B: lessons for the site just entered (only lessons scoped to it or a parent)."""
        if not self.enabled or not domain:
            return []
        with self._timed():
            lessons = self._view().recall_on_domain(domain)
            self._append([self._event(DomainRecall, {
                "matched": len(lessons), "lessons": [l.lesson for l in lessons],
                "lesson_ids": [l.lesson_id for l in lessons]}, step=step, domain=domain)])
            return lessons

    def error_recall(self, command: str, error: str, domain: str, step: int) -> list[Any]:
        """Trigger A: lessons matching a failed command or its error; their tips go under the error."""
        if not self.enabled:
            return []
        with self._timed():
            lessons = self._view().recall_on_error(command, error, domain or None)
            self._append([self._event(ErrorRecall, {
                "command": command, "error_snippet": (error or "")[:300], "matched": len(lessons),
                "lessons": [l.lesson for l in lessons], "lesson_ids": [l.lesson_id for l in lessons]},
                step=step, domain=domain)])
            return lessons

    def recall_trajectory(self, domain: str, origin: str, step: int) -> tuple[Any | None, bool]:
        """The reference trajectory for this goal on this host, and whether to replay it
        (similarity ≥ replay_min_similarity and the same origin)."""
        if not self.enabled:
            return None, False
        with self._timed():
            match = self._view().match_trajectory(self.safe_goal, domain, self.now())
            replay = bool(match and match.similarity >= self.policy.replay_min_similarity
                          and match.trajectory.origin == origin and match.trajectory.steps)
            t = match.trajectory if match else None
            self._append([self._event(TrajectoryRecalled, {
                "goal": self.goal, "trajectory_id": t.trajectory_id if t else None,
                "matched_goal": t.goal if t else None, "similarity": round(match.similarity, 6) if match else 0.0,
                "score": round(match.score, 6) if match else None, "steps": len(t.steps) if t else 0,
                "replay": replay}, step=step, domain=domain)])
            return match, replay

    # ---- plain reads (their provenance goes into context_built) ------------------------------

    def sessions(self, domain: str) -> list[Any]:
        if not self.enabled:
            return []
        with self._timed():
            return self._view().sessions(domain)

    def facts(self, domain: str) -> list[Any]:
        if not self.enabled:
            return []
        with self._timed():
            return self._view().facts(domain, min_confidence=self.policy.fact_prompt_min)

    def selectors(self, domain: str) -> list[Any]:
        if not self.enabled:
            return []
        with self._timed():
            ranked = self._view().selectors(domain)
            return sorted(ranked, key=lambda s: (-s.successes, s.failures, s.role, s.name))

    def step_memories(self, elements: list[str], intent: str) -> list[Any]:
        if not self.enabled:
            return []
        with self._timed():
            return self._view().step_memories(elements, intent, exclude_run=self.run_id)

    def loop_warnings(self) -> tuple[str, ...]:
        """Seed 003's short-term loop warnings for this run (from the short-term projection)."""
        with self._timed():
            if self.run_id is None:
                return ()
            return self._view().short_term(self.run_id).loop_warnings

    # ---- per-step writes ----------------------------------------------------------------------

    def context_built(self, prompt: str, budget: int, kept: Sequence[BudgetItem], trimmed: Sequence[BudgetItem],
                      step: int, domain: str | None = None) -> None:
        def item(i: BudgetItem) -> dict[str, Any]:
            return {"source": i.source, "priority": i.priority, "tokens": i.tokens, "content_type": i.content_type,
                    "text": i.text[:20000], "event_ids": list(dict.fromkeys(i.event_ids))[:64],
                    "truncated": i.truncated}
        with self._timed():
            self._append([self._event(ContextBuilt, {
                "prompt": prompt, "budget": budget, "total_tokens": sum(i.tokens for i in kept),
                "items": [ContextItem(**self.scrub(item(i))) for i in kept],
                "trimmed": [ContextItem(**self.scrub(item(i))) for i in trimmed]}, step=step, domain=domain)])

    def record_step(self, rec: StepRecord, env_before: EnvState, env_after: EnvState, think: str,
                    memory_ms: float, rep: int = 1) -> str:
        with self._timed():
            if rec.sensitive:
                self.add_secret(str(rec.args.get("value", rec.args.get("text", ""))))
            action = Action(command=rec.command, args={k: v for k, v in rec.args.items()}, sensitive=rec.sensitive)
            target = ElementRef(role=rec.role or "", name=rec.name or "", selector=rec.selector) if rec.role else None
            ev = self._event(StepRecorded, {
                "env_before": env_before, "env_after": env_after, "think": think[:2000] or None,
                "internal_state": think[:2000] or None, "action": action, "target": target,
                "target_text": (rec.name or None), "ok": rec.ok, "error": rec.error,
                "duration_ms": round(rec.duration_ms, 3), "memory_ms": round(memory_ms, 3),
                "decided_by": rec.decided_by, "rep": rep}, step=rec.step, domain=rec.domain or None)
            recorded = self._append([ev])
            rec.event_id = recorded[0].id
            return rec.event_id

    def progress(self, turn: int, url: str) -> None:
        with self._timed():
            self._append([self._event(RunProgress, {"turn": turn, "current_url": url}, domain=domain_of(url) or None)])

    def selector_healed(self, role: str, name: str, selector: str, healed_from: str, url: str, step: int) -> None:
        """Replay found the element by role and name at a new selector: write the new one back."""
        if not self.enabled:
            return
        with self._timed():
            self._append([self._event(SelectorSucceeded, {
                "role": role, "name": name, "selector": selector, "healed_from": healed_from, "url": url},
                step=step, domain=domain_of(url))])

    # ---- after the run ----------------------------------------------------------------------

    def finish_run(self, outcome: RunOutcome, steps: Sequence[StepRecord]) -> Learned:
        """Post-run learning and the run's completion, in one append (one transaction)."""
        with self._timed():
            learned = Learned()
            events: list[NewEvent] = []
            if self.enabled:
                for domain, step, payload in extract_lessons(steps):
                    learned.lessons.append(payload)
                    events.append(self._event(LessonRecorded, payload.model_dump(), domain=domain, step=step))
                for domain, fact in observe_facts(steps, outcome.success):
                    learned.facts.append(fact)
                    events.append(self._event(FactObserved, fact.model_dump(), domain=domain))
                events += self._selector_outcomes(steps)
                if outcome.success:
                    traj = self._trajectory(steps, outcome)
                    if traj is not None:
                        learned.trajectory = traj
                        events.append(self._event(TrajectoryRecorded, traj.model_dump(), domain=self.run_domain))
                events.append(self._event(SessionRecorded, {
                    "session_id": self.session_id, "goal": self.goal, "outcome": outcome.summary[:500],
                    "success": outcome.success, "final_url": outcome.final_url, "timestamp": self.now(),
                    "turns_used": outcome.turns, "duration_ms": round(outcome.duration_ms, 3)},
                    domain=self.run_domain))
            for step, grade in grade_steps(steps, outcome):
                events.append(self._event(StepGraded, grade, step=step, domain=None))
            outcome.memory_ms = self.ms_total
            events.append(self._event(RunCompleted, {
                "success": outcome.success, "summary": outcome.summary[:2000], "result": outcome.result,
                "reason": outcome.reason, "final_url": outcome.final_url, "turns": outcome.turns,
                "tokens_in": outcome.tokens_in, "tokens_out": outcome.tokens_out,
                "duration_ms": round(outcome.duration_ms, 3), "policy_decisions": outcome.policy_decisions,
                "replayed_steps": outcome.replayed_steps, "memory_ms": round(self.ms_total, 3)},
                domain=domain_of(outcome.final_url) or self.run_domain))
            self._append(events)
            return learned

    def _selector_outcomes(self, steps: Sequence[StepRecord]) -> list[NewEvent]:
        out: list[NewEvent] = []
        for s in steps:
            if not s.selector or not s.role or s.decided_by == "approval":
                continue
            if s.ok:
                out.append(self._event(SelectorSucceeded, {"role": s.role, "name": s.name or "", "selector": s.selector,
                                                           "url": s.url_before}, step=s.step, domain=s.domain))
            else:
                out.append(self._event(SelectorFailed, {"role": s.role, "name": s.name or "", "selector": s.selector,
                                                        "url": s.url_before, "error": (s.error or "")[:300]},
                                       step=s.step, domain=s.domain))
        return out

    def _trajectory(self, steps: Sequence[StepRecord], outcome: RunOutcome) -> TrajectoryRecorded | None:
        kept = effective_steps(steps)
        if not kept:
            return None
        tsteps = []
        for s in kept:
            args = {k: v for k, v in s.args.items() if k != "ref"}
            if s.sensitive:
                args = {k: (MARKER if k in ("value", "text") else v) for k, v in args.items()}
            effect = f"url:{s.url_after}" if s.url_after and s.url_after != s.url_before else None
            tsteps.append(TrajectoryStep(command=s.command, args=args, role=s.role, name=s.name, selector=s.selector,
                                         url=s.url_before, verified=s.ok, effect=effect,
                                         duration_ms=round(s.duration_ms, 3)))
        tsteps.append(TrajectoryStep(command="finish", args={"result": "done"}, url=outcome.final_url, verified=True))
        return TrajectoryRecorded(trajectory_id=f"traj_{self.run_id}", goal=self.safe_goal,
                                  origin=origin_of(self.start_url), steps=tsteps, success=True,
                                  duration_ms=round(outcome.duration_ms, 3), turns=outcome.turns)


# ---- post-run learning (pure functions over the steps) -----------------------------------------

def _describe_recovery(steps: Sequence[StepRecord], i: int) -> str:
    """What step i did, in tool syntax, without page text (lessons are universal)."""
    s = steps[i]
    nxt = steps[i + 1] if i + 1 < len(steps) else None
    if s.command == "click" and nxt is not None and nxt.ok and nxt.command == "type":
        return "click(ref) to focus the element, then type(text)"
    if s.command == "press":
        key = str(s.args.get("key", ""))
        return f"press(key='{key}')" if key in SAFE_KEYS else "press(key)"
    return {"click": "click(ref) on a different element", "type": "type(text)", "fill": "fill(ref, value)",
            "wait": "wait() for the page to settle", "scroll": "scroll(direction)", "back": "back()",
            "goto": "goto(url)", "select": "select(ref, value)"}.get(s.command, f"{s.command}()")


def extract_lessons(steps: Sequence[StepRecord]) -> list[tuple[str, int, LessonRecorded]]:
    """Seed 001's failure→recovery extraction, plus site-specific overlay lessons.

    Step N command A fails with a substantive error, step N+1 command B succeeds,
    A ≠ B: an error_recovery lesson (failed_command A, error_pattern from the
    error). A click intercepted by an overlay that a later click on a dismiss
    button cleared (the blocked element then worked): a site_specific lesson
    scoped to that domain, naming the button as quoted data.
    """
    from memledger.projections.lessons import lesson_id_for

    out: list[tuple[str, int, LessonRecorded]] = []
    seen: set[str] = set()
    for i in range(len(steps) - 1):
        a, b = steps[i], steps[i + 1]
        if a.ok or not b.ok or a.command == b.command or not substantive(a.error):
            continue
        pattern = error_pattern(a.error or "")
        text = f"When {a.command} fails with '{pattern}', try {_describe_recovery(steps, i + 1)}."
        lid = lesson_id_for(a.command, pattern, None, text)
        if lid in seen:
            continue
        seen.add(lid)
        out.append((a.domain, a.step, LessonRecorded(
            lesson_id=lid, lesson=text, category="error_recovery", failed_command=a.command, error_pattern=pattern,
            learned_from=[x for x in (a.event_id, b.event_id) if x])))
    for i, a in enumerate(steps):
        if a.ok or a.command != "click" or "intercepts pointer events" not in (a.error or ""):
            continue
        for j in range(i + 1, len(steps)):
            m = steps[j]
            if not (m.ok and m.command == "click" and m.name and DISMISS.search(m.name) and m.identity != a.identity):
                continue
            if not any(k.ok and k.identity == a.identity for k in steps[j + 1:]) or not a.domain:
                break
            name = quoted_name(m.name, 60)
            text = (f"An overlay on this site intercepts clicks until its {m.role} {name} is clicked: "
                    f"click {m.role} {name} first.")
            lid = lesson_id_for(None, None, a.domain, text)
            if lid not in seen:
                seen.add(lid)
                out.append((a.domain, a.step, LessonRecorded(
                    lesson_id=lid, lesson=text, category="site_specific", scope_domain=a.domain,
                    learned_from=[x for x in (a.event_id, m.event_id) if x])))
            break
    return out


def effective_steps(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The ok steps worth replaying: failures dropped, and so are recoveries that did not help
    (an ok step right after a failure, followed by the same failed action failing again)."""
    kept: list[StepRecord] = []
    for i, s in enumerate(steps):
        if not s.ok or s.command == "finish":
            continue
        prev = steps[i - 1] if i > 0 else None
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if (prev is not None and not prev.ok and nxt is not None and not nxt.ok
                and nxt.command == prev.command and nxt.identity == prev.identity):
            continue
        kept.append(s)
    return kept


def observe_facts(steps: Sequence[StepRecord], success: bool) -> list[tuple[str, FactObserved]]:
    """App knowledge seen in this run: overlays, fields where fill fails, slow pages, shadow DOM, auth flow."""
    out: dict[tuple[str, str, str], FactObserved] = {}

    def add(domain: str, kind: str, key: str, value: str) -> None:
        if domain:
            out.setdefault((domain, kind, key), FactObserved(fact_type=kind, key=key[:200], value=value[:300]))

    for i, s in enumerate(steps):
        if not s.ok and s.command == "fill" and "is not an <input>" in (s.error or "") and s.name:
            if any(k.ok and k.command == "type" for k in steps[i + 1:i + 4]):
                add(s.domain, "quirk", f"fill fails on {s.name[:80]}", "click the field, then type")
        if s.ok and s.command in ("click", "goto") and s.url_after != s.url_before and s.duration_ms > 1000:
            path = urlsplit(s.url_after).path or "/"
            add(domain_of(s.url_after), "timing", f"load time {path[:80]}", f"page load takes about {round(s.duration_ms / 1000)} s")
        if s.ok and s.in_shadow:
            add(s.domain, "quirk", "shadow DOM", "uses shadow DOM for modals")
    for i, a in enumerate(steps):
        if not a.ok and "intercepts pointer events" in (a.error or ""):
            m = next((k for k in steps[i + 1:] if k.ok and k.command == "click" and k.name and DISMISS.search(k.name)), None)
            if m is not None:
                add(a.domain, "quirk", "blocking overlay", f"{m.role} {quoted_name(m.name or '', 60)} must be clicked first")
    if success:
        login = [s for s in steps if s.ok and s.command in ("fill", "type", "click")]
        sens = next((k for k, s in enumerate(login) if s.sensitive), None)
        if sens is not None:
            flow = login[max(0, sens - 1): sens + 2]
            add(flow[0].domain, "pattern", "auth flow",
                " → ".join(f"{s.command} {quoted_name(s.name or '', 40)}" for s in flow))
    return [(k[0], v) for k, v in out.items()]


def grade_steps(steps: Sequence[StepRecord], outcome: RunOutcome) -> list[tuple[int, dict[str, Any]]]:
    """Seed 002's grading by rules: failures carry their correction (what worked instead);
    a recovery that did not help is a failure too; the last step notes an incomplete task."""
    useful = {id(s) for s in effective_steps(steps)}
    grades: list[tuple[int, dict[str, Any]]] = []
    for i, s in enumerate(steps):
        fix = next((k for k in steps[i + 1:] if k.ok and id(k) in useful
                    and (k.identity != s.identity or k.command != s.command)), None)
        correction = _correction(fix) if fix is not None else None
        if not s.ok:
            g = {"outcome": "failure", "reason": f"failed: {error_pattern(s.error or '')}"[:300], "correction": correction}
        elif id(s) not in useful and s.command != "finish":
            g = {"outcome": "failure", "reason": "did not clear the obstacle; the next attempt failed the same way",
                 "correction": correction}
        else:
            moved = s.url_after != s.url_before
            g = {"outcome": "success",
                 "reason": f"worked: navigated to {urlsplit(s.url_after).path or '/'}" if moved else "worked",
                 "correction": None}
        if i == len(steps) - 1 and not outcome.success:
            g["task_incomplete"] = (outcome.reason or outcome.summary or "task not completed")[:300]
        grades.append((s.step, g))
    return grades


def _correction(s: StepRecord) -> str:
    if s.command == "press":
        return f"press {s.args.get('key', '')}" + (f" on {s.role} {quoted_name(s.name or '', 40)}" if s.role else "")
    if s.role:
        return f"{s.command} {s.role} {quoted_name(s.name or '', 40)}"
    return s.command
