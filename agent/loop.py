"""The decision loop: observe → decide → execute → verify, with memory and guardrails.

Seed 001's loop: a domain change fires Trigger B (tips for this site); a
failed command fires Trigger A (tips appended to the error); a repeated
action aborts as `repeated_action`; too many errors stop as `max_errors`;
an approval hook may veto an action. Seed 000's run registry gets
`run_progress` every 3 turns. Before asking the policy at all, a recorded
trajectory that matches the goal closely (similarity ≥ 0.85, same origin)
is replayed step by step under guards, and control returns to the policy at
the first failed guard.

Example:
    with SitesServer() as sites, Browser(proxy=sites.proxy) as browser:
        memory = RecordingMemory(store, projections_path)
        result = run_task(browser, memory, ScriptedPolicy(), goal='Open "Wool Socks"',
                          start_url="http://shop.test/")   # or TaskRun(...).run()
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from memtape.agent import compress as C
from memtape.agent import prompt as P
from memtape.agent.browser import Browser, Observation
from memtape.agent.conversation import Message, conversation
from memtape.agent.embeddings import Embeddings, use_embeddings
from memtape.agent.policy import Decision, DecisionPolicy, PolicyError
from memtape.agent.records import finish_run, record_prompt, record_step
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import EnvState, RunCompleted
from memtape.ledger.ids import short_id
from memtape.ledger.redact import MARKER
from memtape.projections.budget import DEFAULT_BUDGET, BudgetItem, fit
from memtape.projections.folds.knowledge import fact_line
from memtape.projections.folds.knowledge import for_prompt as prompt_facts
from memtape.projections.folds.patterns import for_goal, shown_by
from memtape.projections.folds.sessions import continued
from memtape.projections.folds.short_term import ShortTerm, priority_of
from memtape.projections.folds.steps import on_page
from memtape.projections.folds.trajectories import applicable_steps
from memtape.projections.recording.learning import goal_secrets
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.run import Run
from memtape.projections.recording.values import Learned, StepRecord, element_text
from memtape.projections.text import cap, domain_of, origin_of, quoted_name

Approval = Callable[[Decision, Observation], bool]


@dataclass(frozen=True)
class StepView:
    """A past step as the loop keeps it (its prompt shows the last few: Recent Actions)."""

    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None = None
    role: str | None = None
    name: str | None = None
    url_before: str = ""
    url_after: str = ""
    decided_by: str = "policy"


@dataclass(frozen=True)
class MemoryItem:
    """One item of memory a prompt can show, as credit names it."""

    item: str
    kind: str  # lesson | fact | pattern | trajectory
    text: str


@dataclass(frozen=True)
class Without:
    """What the policy decides on a prompt with one item removed, and the prompt sections the item was in."""

    item: MemoryItem
    decision: Decision
    sections: tuple[str, ...]


#: (step, the decision, {item: the decision without it}) for each policy decision
Probe = Callable[[int, Decision, dict[str, Without]], None]


@dataclass
class RunConfig:
    max_turns: int = 25
    max_errors: int = 6
    budget: int = DEFAULT_BUDGET
    repeat_limit: int = 3
    progress_every: int = 3
    approve: Approval | None = None
    #: seed 002's rep; None: numbered within the run's session (see RecordingMemory.start_run)
    rep: int | None = None
    #: "session": rep 2+ retrieves the session's previous reps' step memories; "all": every other run's
    step_memory_scope: str = "session"
    #: when stuck (a loop warning or a repeated failure) and about to give up, go back to the last
    #: good snapshot instead (seed 003's backtracking)
    backtrack: bool = True
    #: a user-configured embeddings endpoint: seed 002's internalStateEmbedding (None: text similarity only)
    embeddings: Embeddings | None = None
    #: memory sections left out of every prompt (an ablation): names of `prompt.MEMORY_SECTIONS`
    sections_off: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.sections_off) - set(P.MEMORY_SECTIONS))
        if unknown:
            raise LedgerError(
                f"no memory section {unknown[0][:40]!r} to leave out; known: {', '.join(P.MEMORY_SECTIONS)}"
            )

    #: memory items (lesson, fact, pattern or trajectory ids) left out of every prompt: the
    #: counterfactual run `memtape credit` measures an item by
    masked: frozenset[str] = frozenset()
    #: told, for each policy decision, the decision and what the policy decides with each memory
    #: item it was shown removed (item id -> that decision): `memtape credit`'s re-asking
    probe: Probe | None = None


@dataclass
class RunResult:
    """One run of the bundled agent: its outcome as `run_completed` records it, and what only the
    agent measures (wall time including post-run learning, step time and memory's part of it,
    failed actions, why a replay handed back to the policy, a crash)."""

    run_id: str
    goal: str
    outcome: RunCompleted
    wall_ms: float
    step_ms: float
    memory_ms: float
    errors: int
    step_memory_ms: float = 0.0
    case_id: str | None = None
    memory_enabled: bool = True
    learned: Learned | None = None
    handback: str | None = None
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.outcome.tokens_in + self.outcome.tokens_out

    @property
    def memory_share(self) -> float:
        """Share of step time spent in memory (recall, prompt provenance, recording)."""
        return self.step_memory_ms / self.step_ms if self.step_ms > 0 else 0.0


def check_success(check: dict[str, Any] | None, url: str, text: str) -> bool:
    """A case's success check: every given condition must hold (url_pattern regex, text substring)."""
    if not check:
        return True
    if check.get("url_pattern") and not re.search(str(check["url_pattern"]), url):
        return False
    return not (check.get("text") and str(check["text"]) not in text)


def _action_key(d: Decision, url: str) -> str:
    target = f"{d.target.role}:{d.target.name}" if d.target else ""
    args = {k: v for k, v in sorted(d.args.items()) if k != "ref"}
    return f"{d.command}|{target}|{args}|{url}"


def _recent_lines(history: list[StepView], n: int = 5) -> list[str]:
    lines = []
    start = max(0, len(history) - n)
    for i, h in enumerate(history[start:], start + 1):
        target = f" {h.role} {quoted_name(h.name or '', 50)}" if h.role else ""
        extra = ""
        if h.command in ("press",):
            extra = f" key={P.fenced(str(h.args.get('key', '')), 40)}"
        elif h.command == "goto":
            extra = f" {P.fenced(str(h.args.get('url', '')), 100)}"
        status = "Success" if h.ok else "Failed"
        lines.append(
            f"{i}. [{status}] {h.command}{target}{extra}"
            + ("" if h.ok else " (see error)")
            + (" [replayed]" if h.decided_by == "replay" else "")
        )
    return lines


def infer_context(run: Run, obs: Observation, step: int) -> None:
    """Seed 003's inferred context: what a page shows about its site (a login form, pagination)."""
    path = urlsplit(obs.url).path or "/"
    if obs.page_type == "login":
        run.infer_context("login_required", "true", f"login form at {cap(path, 100)}", step, obs.domain)
    if any(e.role in ("link", "button") and re.search(r"\b(next|previous) page\b", e.name, re.I) for e in obs.elements):
        run.infer_context(
            "pagination_type",
            "numbered pages with next/previous links",
            f"page analysis of {cap(path, 100)}",
            step,
            obs.domain,
        )


def _dead_end_exit(current_url: str | None, run: Run) -> tuple[Any, StepRecord | None] | None:
    """The last good snapshot to go back to (the newest on another page that is not a dead end
    already left) and the step that left it, or None."""
    snaps = [s for s in run.snapshots() if s.url != current_url and current_url not in s.dead_ends]
    if not snaps:
        return None
    snap = snaps[-1]
    exit_step = next(
        (
            r
            for r in run.steps
            if r.step >= snap.associated_step and r.ok and r.url_before == snap.url and r.url_after != snap.url
        ),
        None,
    )
    return snap, exit_step


def replay_decision(
    browser: Browser, obs: Observation, tstep: Any, secrets: list[str]
) -> tuple[Decision | None, str | None, tuple[str, str] | None]:
    """Guard a recorded step on the current page: (decision, why it cannot replay, healed selector)."""
    if tstep.command == "finish":
        return (
            Decision(
                "finish",
                {"result": "replayed trajectory complete"},
                success=True,
                think="replay: recorded trajectory complete",
            ),
            None,
            None,
        )
    if tstep.url and origin_of(obs.url) != origin_of(tstep.url):
        return None, f"origin changed ({origin_of(obs.url)} != {origin_of(tstep.url)})", None
    el = None
    healed = None
    args = dict(tstep.args or {})
    if tstep.role:
        el = obs.by_identity(tstep.role, tstep.name or "")
        if el is None:
            return None, f"target {tstep.role} {quoted_name(tstep.name or '', 60)} is no longer on the page", None
        if tstep.selector and not browser.selector_matches(tstep.selector, el):
            healed = (tstep.selector, browser.stable_selector(el))
        args["ref"] = el.ref
    for k, v in list(args.items()):
        if v == MARKER and k == "ref":  # a sensitive action's masked ref: the target is found by role and name
            del args[k]
        elif v == MARKER:
            if not secrets:
                return None, "the recorded value is a redacted secret and the goal gives none", None
            args[k] = secrets[0]
    return Decision(tstep.command, args, el, think=f"replay: {P.describe_step(tstep)}"), None, healed


def _failing_here(st: ShortTerm, url: str) -> list[str]:
    """Actions of this run that failed on this page (seed 003's failure tracking), newest last."""
    return list(dict.fromkeys(e["key"] for e in st.recent if not e["ok"] and e["url"] == url))[-3:]


def extraction_items(run: Run, domain: str, budget_left: int) -> list[BudgetItem]:
    """This site's extractions, newest first: tier 1 from this run, 2 from this session, 3 older;
    cut, compressed and fitted to the extraction allowance (agent/compress.py)."""
    found = list(reversed(run.extractions(domain)))
    tiers = [
        1 if e.run_id == run.run_id else 2 if e.session_id and e.session_id == run.session_id else 3 for e in found
    ]
    kept = C.fit_extractions([(e.value, e.source, tier) for e, tier in zip(found, tiers)], budget_left)
    items = []
    for e, x in zip(found, kept):
        note = ", ".join(n for n, on in (("cut", x.truncated), ("compressed", x.compressed)) if on)
        items.append(P.extracted_data(e.title, e.url, x.text, x.tier, note, e.event_ids[:1], truncated=x.truncated))
    return items


def site_sections(
    run: Run,
    domain_lessons: list[Any],
    sessions: list[Any],
    match: Any,
    trajectory_steps: Sequence[Any],
    facts: list[Any],
    patterns: Sequence[Any],
) -> list[BudgetItem]:
    """The memory sections that stay the same from step to step on one site (the system prompt's),
    each with the ids of the events it came from."""
    items = []
    if patterns:
        items.append(P.learned_patterns(patterns))
    if domain_lessons:
        items.append(
            P.domain_tips([l.text for l in domain_lessons], [i for l in domain_lessons for i in l.event_ids[-2:]])
        )
    if sessions:
        items.append(P.session_history(sessions, run.memory.policy.session_full_detail))
    if match is not None and trajectory_steps and not shown_by(trajectory_steps, patterns):
        items.append(
            P.reference_trajectory(
                match.trajectory.goal,
                match.similarity,
                trajectory_steps,
                match.trajectory.event_ids,
                len(match.trajectory.steps),
            )
        )
    if facts:
        items.append(P.app_knowledge(facts))
    return items


def step_items(
    obs: Observation,
    run: Run,
    history: list[StepView],
    last_error: str | None,
    error_lessons: list[Any],
    budget_left: int = DEFAULT_BUDGET,
    avoid: Sequence[tuple[str, str]] = (),
    warned: bool = False,
) -> list[BudgetItem]:
    """The sections of one step's message (what changes from step to step), each with the ids of
    the events it came from; extractions get their share of `budget_left`. `warned`: the policy
    is asked again because the action it chose already failed here."""
    items = [P.page_state(obs.url, obs.title, obs.page_type, obs.summary, obs.elements, obs.text)]
    context = run.prompt_context(obs.domain)
    if context:
        items.append(P.context_section(context))
    if last_error:
        items.append(
            P.last_error(
                last_error, [l.text for l in error_lessons], [i for l in error_lessons for i in l.event_ids[-2:]]
            )
        )
    if warned:
        items.append(P.repeated_failure())
    page = obs.env().elements
    mems = on_page(run.step_memories(page, run.safe_goal), page)
    if mems:
        items.append(P.step_memories(mems))
    st = run.short_term()
    if st.navigation_path:
        items.append(P.working_memory(st.navigation_path, st.visited_urls, _failing_here(st, obs.url), avoid))
    warnings = st.loop_warnings
    if history or warnings:
        items.append(P.recent_actions(_recent_lines(history), warnings, priorities=_recent_priorities(history)))
    used = sum(i.tokens for i in items)
    items += extraction_items(run, obs.domain, max(budget_left - used, 0))
    return items


def _bound(decision: Decision, obs: Observation, patterns: Sequence[Any]) -> Decision:
    """A policy's decision bound to the page it was asked on: its ref to the element observed, the
    learned pattern it follows (by its place in the prompt's list) to that pattern's id."""
    ref = decision.args.get("ref")
    if ref is not None:
        decision.target = next((e for e in obs.elements if e.ref == ref), None)
    if decision.pattern is not None and 0 <= decision.pattern < len(patterns):
        decision.pattern_id = patterns[decision.pattern].pattern_id
    return decision


def _pattern_shown(text: str, pattern: Any) -> Any:
    """`pattern` with the steps the LEARNED PATTERNS text shows whole under its header (None
    when the header is not shown)."""
    for k in range(len(pattern.steps), -1, -1):
        if text and P.shows(text, P.pattern_block(pattern, k)):
            return replace(pattern, steps=tuple(pattern.steps[:k]))
    return None


def _recent_priorities(history: list[StepView], n: int = 5) -> list[str]:
    """Seed 003's MemoryPriority of each recent action shown (the budget drops LOW lines first)."""
    return [
        priority_of({"action": {"command": h.command, "args": h.args}, "ok": h.ok}, h.url_before, h.url_after)
        for h in history[-n:]
    ]


class TaskRun:
    """One task, run to its end and recorded: observe → decide → act → verify, step by step.

    What the loop keeps between steps (counters, what the current site offered, the replay
    queue, why the run is stuck) lives on this object; `run()` returns the run's `RunResult`."""

    def __init__(
        self,
        browser: Browser,
        memory: RecordingMemory,
        policy: DecisionPolicy,
        *,
        goal: str,
        start_url: str,
        run_id: str | None = None,
        session_id: str | None = None,
        parent_run_id: str | None = None,
        mode: str = "new",
        isolation: str = "shared",
        case_id: str | None = None,
        success_check: dict[str, Any] | None = None,
        config: RunConfig | None = None,
        context: dict[str, str] | None = None,
    ):
        self.browser, self.memory, self.policy = browser, memory, policy
        self.memory_run: Run  # the memtape run, started by `_open`
        self.goal, self.start_url, self.case_id, self.success_check = goal, start_url, case_id, success_check
        self.cfg = config or RunConfig()
        self.run_id = run_id or short_id("run")
        self.session_id, self.parent_run_id, self.mode, self.isolation = session_id, parent_run_id, mode, isolation
        self.context = context or {}
        self.secrets = goal_secrets(goal)
        self.system = ""
        self.system_recorded: str | None = None  # the system prompt as last recorded (context_built)
        self.tier1: list[Any] = []
        # the run's numbers
        self.turns = self.decisions = self.replayed = self.errors = 0
        self.tokens_in = self.tokens_out = 0
        self.step_ms = self.step_memory_ms = 0.0
        self.reason: str | None = None
        self.success = False
        self.handback: str | None = None
        self.crash: str | None = None
        self.final_decision: Decision | None = None
        # what the loop carries from one step to the next
        self.history: list[StepView] = []
        self.current_domain: str | None = None
        self.domain_lessons: list[Any] = []
        self.sessions: list[Any] = []
        self.facts: list[Any] = []
        self.patterns: list[Any] = []
        self.error_lessons: list[Any] = []
        self.last_error: str | None = None
        self.recent_keys: list[str] = []
        self.match: Any = None
        self.trajectory_steps: tuple[Any, ...] = ()  # the match's steps as far as they apply to the goal
        self.replay_queue: list[Any] = []
        self.snapshot_url: str | None = None
        self.stuck: str | None = None  # why the run is stuck (a loop warning or a repeated failure), if it is
        self.avoid: list[tuple[str, str]] = []
        self.first = True
        self.seen_after: Observation | None = None  # the page after the last action: the next step's observation
        self.replies: list[Message] = []  # the policy's replies so far, as recorded (its conversation)
        self.shown_sections: dict[str, str] = {}  # the last prompt's sections (source -> text)

    def run(self) -> RunResult:
        t_run = time.perf_counter()
        self._open()
        try:
            if self.cfg.embeddings is not None:
                use_embeddings(self.memory_run, self.cfg.embeddings)
            while self.reason is None and self.turns < self.cfg.max_turns:
                t_step = time.perf_counter()
                go_on = self._step(self.turns + 1)
                self.step_ms += (time.perf_counter() - t_step) * 1000
                if not go_on:
                    break
                if self.errors >= self.cfg.max_errors:
                    self.reason = "max_errors"
        except PolicyError as exc:  # the model endpoint failed: the run is still recorded, then reported
            self.reason, self.crash = "policy_error", str(exc)
        except Exception as exc:  # noqa: BLE001 - a crashed page or browser ends the run, recorded
            self.reason, self.crash = (
                "agent_error",
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            )
        if self.reason is None and self.final_decision is None:
            self.reason = "max_turns"
        return self._finish(t_run)

    # ---- opening and finishing ----------------------------------------------------------

    def _open(self) -> None:
        cfg = self.cfg
        run = self.memory_run = self.memory.start_run(
            goal=self.goal,
            start_url=self.start_url,
            session_id=self.session_id,
            run_id=self.run_id,
            parent_run_id=self.parent_run_id,
            mode=self.mode,
            isolation=self.isolation,
            case_id=self.case_id,
            agent=getattr(self.policy, "name", "custom"),
            rep=cfg.rep,
            step_memory_scope=cfg.step_memory_scope,
        )
        run.give_context(self.context)
        self.tier1 = [l for l in run.tier1() if l.lesson_id not in cfg.masked]
        self.system = P.system_instruction(self.goal, [l.text for l in self.tier1])
        self.browser.new_page()
        nav = self.browser.execute("goto", {"url": self.start_url})
        if not nav.ok:
            self.reason = "navigation_failed"
            self.handback = nav.error
        run.take_step_ms()  # time before the first step (opening memory, Tier 1) is not step time

    def _finish(self, t_run: float) -> RunResult:
        browser, final = self.browser, self.final_decision
        final_url = browser.page.url if browser.page is not None else ""
        duration = (time.perf_counter() - t_run) * 1000
        if self.success:
            summary = f"Done in {self.turns} turns: {cap(str((final.args if final else {}).get('result', 'goal reached')), 200)}"
        else:
            summary = f"Stopped ({self.reason}) after {self.turns} turns" + (
                f": {cap(str(final.args.get('result', '')), 200)}" if final else ""
            )
            if self.crash:
                summary += f": {cap(self.crash, 300)}"
        outcome = RunCompleted(
            success=self.success,
            summary=summary,
            reason=self.reason,
            final_url=final_url,
            turns=self.turns,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            duration_ms=duration,
            policy_decisions=self.decisions,
            replayed_steps=self.replayed,
            result=str(final.args.get("result", ""))[:500] if final else None,
        )
        self.memory_run.take_step_ms()
        learned = finish_run(self.memory_run, outcome)
        wall = (time.perf_counter() - t_run) * 1000  # including the post-run learning just written
        return RunResult(
            run_id=self.run_id,
            goal=self.goal,
            outcome=outcome,
            wall_ms=wall,
            step_ms=self.step_ms,
            memory_ms=self.memory_run.ms_total,
            step_memory_ms=self.step_memory_ms,
            errors=self.errors,
            case_id=self.case_id,
            memory_enabled=self.memory_run.enabled,
            learned=learned,
            handback=self.handback,
            error=self.crash,
        )

    def _take(self) -> float:
        """Memory's time since the last take: spent inside this step."""
        ms = self.memory_run.take_step_ms()
        self.step_memory_ms += ms
        return ms

    # ---- one step ------------------------------------------------------------------------

    def _step(self, step_no: int) -> bool:
        """Observe, decide, act and verify once; False when the run ends here."""
        obs = self.seen_after if self.seen_after is not None else self.browser.observe()
        self.seen_after = None
        self._look(obs, step_no)
        decision, decided_by, tstep = self._replayed(obs, step_no)
        if decision is None:
            decision = self._decided(obs, step_no)
            if decision is None:  # went back to the last good snapshot instead
                return True
            self.replies.append(decision.reply())
        self.turns += 1

        key = _action_key(decision, obs.url)
        self.recent_keys.append(key)
        limit = self.cfg.repeat_limit
        if decision.command != "finish" and len(self.recent_keys) >= limit and len(set(self.recent_keys[-limit:])) == 1:
            self.reason = "repeated_action"
            return False

        env_before = obs.env()
        if self.cfg.approve is not None and decided_by != "replay" and not self.cfg.approve(decision, obs):
            rec = StepRecord(
                step_no,
                decision.command,
                dict(decision.args),
                False,
                "rejected by the approval hook",
                obs.url,
                obs.url,
                decision.target.role if decision.target else None,
                decision.target.name if decision.target else None,
                decided_by="approval",
            )
            self.history.append(
                StepView(rec.command, rec.args, False, rec.error, rec.role, rec.name, obs.url, obs.url, "approval")
            )
            record_step(self.memory_run, rec, env_before, env_before, decision.reasoning(), self._take())
            return True

        if decision.command == "finish":
            self._finished(decision, decided_by, obs, env_before, step_no)
            return False
        self._act(decision, decided_by, tstep, env_before, step_no)
        return True

    def _look(self, obs: Observation, step_no: int) -> None:
        """What the page brings: a new site's memory, a snapshot and inferred context on a
        navigation, the reference trajectory on the first step."""
        run = self.memory_run
        if obs.domain != self.current_domain:  # a new site: its memory (known selectors are for tools that take them)
            self.current_domain = obs.domain
            self.domain_lessons = run.recall_domain(step_no, self.current_domain)
            self.sessions = continued(
                run.sessions(self.current_domain),
                session_id=run.session_id,
                parent_run_id=self.parent_run_id,
                goal=run.safe_goal,
            )
            self.patterns = for_goal(run.patterns(self.current_domain), run.safe_goal)[: P.PATTERNS_SHOWN]
            self.facts = prompt_facts(
                run.facts(self.current_domain), run.safe_goal, [l.text for l in self.domain_lessons], self.patterns
            )
        if obs.url != self.snapshot_url:  # a navigation: seed 003's state snapshot, and what the page tells
            self.snapshot_url = obs.url
            run.snapshot(
                obs.url, obs.title, obs.summary, self.browser.form_state(), self.browser.scroll_position(), step_no
            )
            infer_context(run, obs, step_no)
        if self.first:
            self.first = False
            self.match = run.recall_trajectory(step_no, obs.url)
            if self.match is not None and self.match.trajectory.trajectory_id in self.cfg.masked:
                self.match = None
            if self.match is not None:
                self.trajectory_steps = applicable_steps(self.match.trajectory, run.safe_goal)
            if self.match is not None and self.match.replay:
                self.replay_queue = list(self.match.trajectory.steps)

    def _replayed(self, obs: Observation, step_no: int) -> tuple[Decision | None, str, Any]:
        """The next recorded step when it still applies here: (decision, who decided, the recorded step)."""
        if not self.replay_queue:
            return None, "policy", None
        tstep = self.replay_queue[0]
        decision, why, healed = replay_decision(self.browser, obs, tstep, self.secrets)
        if decision is None:
            match = self.match
            self.handback = f"step {len(match.trajectory.steps) - len(self.replay_queue) + 1}: {why}" if match else why
            self.replay_queue = []
            return None, "policy", tstep
        self.replay_queue.pop(0)
        if (
            healed is not None and decision.target is not None and self.memory_run.enabled
        ):  # write the new selector back
            self.memory_run.selector_result(
                element_text(decision.target.role, decision.target.name) or decision.target.name,
                healed[1],
                True,
                step_no,
                url=obs.url,
                healed_from=healed[0],
            )
        return decision, "replay", tstep

    def _ask(self, obs: Observation, asked: tuple[tuple[Message, ...], list[Any]]) -> Decision:
        """The policy's decision on its conversation, bound to the page."""
        messages, patterns = asked
        decision = _bound(self.policy.decide(messages), obs, patterns)
        self.decisions += 1
        self.tokens_in += decision.tokens_in
        self.tokens_out += decision.tokens_out
        return decision

    def items_offered(self) -> list[MemoryItem]:
        """Every memory item the next prompt may show (before the budget), each once."""
        lessons = [*self.tier1, *self.domain_lessons, *(self.error_lessons if self.last_error else [])]
        offered = [MemoryItem(l.lesson_id, "lesson", l.text) for l in lessons]
        offered += [MemoryItem(f.fact_id, "fact", fact_line(f)) for f in self.facts]
        offered += [MemoryItem(p.pattern_id, "pattern", p.description) for p in self.patterns]
        if self.match is not None and self.trajectory_steps:
            t = self.match.trajectory
            offered.append(MemoryItem(t.trajectory_id, "trajectory", f"reference trajectory: {t.goal}"))
        return list({i.item: i for i in offered}.values())

    def _prompt(
        self, obs: Observation, step_no: int, warned: bool = False, masked: frozenset[str] = frozenset()
    ) -> tuple[tuple[Message, ...], list[Any]]:
        """The budgeted prompt of one decision, recorded: the system prompt (whenever its memory
        sections change: at the first decision, on a new site) and the step's message; returned
        as the policy's conversation, with the learned patterns the prompt lists, in order.
        `masked` items (and the run's `RunConfig.masked`) are left out, and the sections of
        `RunConfig.sections_off`; a prompt built with items masked beyond the run's own is a
        counterfactual and is not recorded."""
        run, cfg = self.memory_run, self.cfg
        record = not masked
        masked = masked | cfg.masked
        off = cfg.sections_off
        tier1 = [l for l in self.tier1 if l.lesson_id not in masked and "tier1" not in off]
        domain_lessons = [l for l in self.domain_lessons if l.lesson_id not in masked]
        error_lessons = [l for l in self.error_lessons if l.lesson_id not in masked and "error_tips" not in off]
        facts = [f for f in self.facts if f.fact_id not in masked]
        patterns = [p for p in self.patterns if p.pattern_id not in masked]
        match = self.match if self.match is None or self.match.trajectory.trajectory_id not in masked else None
        trajectory_steps = self.trajectory_steps if match is not None else ()
        sections = [
            i
            for i in site_sections(run, domain_lessons, self.sessions, match, trajectory_steps, facts, patterns)
            if i.source not in off
        ]
        items = step_items(
            obs,
            run,
            self.history,
            self.last_error,
            error_lessons,
            cfg.budget - sum(i.tokens for i in sections),
            self.avoid,
            warned,
        )
        items = [i for i in items if i.source not in off]
        fitted = fit(sections + items, cfg.budget)
        system = P.system_items(
            self.goal,
            [l.text for l in tier1],
            [i for i in fitted.kept if i.source in P.SYSTEM_SECTIONS],
            [i for l in tier1 for i in l.event_ids[-2:]],
        )
        system_text = "\n\n".join(i.text for i in system)
        kept = [i for i in fitted.kept if i.source not in P.SYSTEM_SECTIONS]
        listed = [p for p in (_pattern_shown(system_text, p) for p in patterns) if p is not None]
        asked = conversation(system_text, self.replies, P.render_step(kept)), listed
        self.shown_sections = {i.source: i.text for i in [*system, *kept]}
        if not record:
            return asked
        self.system = system_text
        if self.system != self.system_recorded:
            record_prompt(
                run,
                "system",
                cfg.budget,
                system,
                [i for i in fitted.trimmed if i.source in P.SYSTEM_SECTIONS],
                step=step_no,
                domain=obs.domain or None,
            )
            self.system_recorded = self.system
        record_prompt(
            run,
            "step",
            cfg.budget,
            kept,
            [i for i in fitted.trimmed if i.source not in P.SYSTEM_SECTIONS],
            step=step_no,
            domain=obs.domain or None,
        )
        return asked

    def _decided(self, obs: Observation, step_no: int) -> Decision | None:
        """The policy's decision on the budgeted prompt, or None when the run, stuck and about to
        give up, went back to its last good snapshot instead. An action that already failed on
        this page is not taken blindly: the policy is asked again, told so in a prompt of its own."""
        run, cfg, history = self.memory_run, self.cfg, self.history
        asked = self._prompt(obs, step_no)
        decision = self._ask(obs, asked)
        if self.cfg.probe is not None:
            self.cfg.probe(step_no, decision, self._without_each(obs, step_no, asked))
        if decision.command != "finish":
            known = run.known_failure(decision.command, decision.args, obs.url)
            if known is not None:  # seed 003's is_repeated_failure, before acting
                again = (
                    bool(history)
                    and not history[-1].ok
                    and history[-1].command == decision.command
                    and history[-1].args == decision.args
                    and history[-1].url_before == obs.url
                )
                run.repeated_failure(
                    known,
                    f"{decision.command}({decision.args})",
                    obs.url,
                    "chose_otherwise" if again else "warned",
                    step_no,
                )
                if again:
                    decision = self._ask(obs, self._prompt(obs, step_no, warned=True))
        if decision.pattern_id:
            run.pattern_used(decision.pattern_id)
        target = (
            _dead_end_exit(self.snapshot_url, run)
            if decision.command == "finish" and decision.success is False and self.stuck and cfg.backtrack
            else None
        )
        if target is None:
            return decision
        self._backtrack(obs, *target, step_no)
        return None

    def _without_each(
        self, obs: Observation, step_no: int, asked: tuple[tuple[Message, ...], list[Any]]
    ) -> dict[str, Without]:
        """What the policy decides on this conversation with each memory item it shows removed (a
        policy decides from its conversation alone, so asking again leaves the run untouched), and
        the sections the removal changed. An item the budget left out changes nothing and is not asked."""
        shown = self.shown_sections
        out: dict[str, Without] = {}
        for item in self.items_offered():
            messages, patterns = self._prompt(obs, step_no, masked=frozenset({item.item}))
            if messages == asked[0]:
                continue
            sections = tuple(s for s, text in shown.items() if self.shown_sections.get(s) != text)
            out[item.item] = Without(item, _bound(self.policy.decide(messages), obs, patterns), sections)
        self.shown_sections = shown
        return out

    def _backtrack(self, obs: Observation, snap: Any, exit_step: StepRecord | None, step_no: int) -> None:
        """Stuck and about to give up: go back to the last good snapshot, avoiding the step that left it."""
        stuck = self.stuck or ""
        avoided = f"{exit_step.role}:{exit_step.name}" if exit_step and exit_step.role else ""
        if exit_step is not None and exit_step.role:
            self.avoid.append((exit_step.role, exit_step.name or ""))
        result = self.browser.execute("goto", {"url": snap.url})
        if result.ok:
            self.browser.scroll_to(snap.scroll_x, snap.scroll_y)
            self.browser.fill_form(snap.form_state)
        self.turns += 1
        self.memory_run.backtracked(snap.snapshot_id, obs.url, snap.url, stuck, [avoided] if avoided else [], step_no)
        rec = StepRecord(
            step_no,
            "goto",
            {"url": snap.url},
            result.ok,
            result.error,
            result.url_before,
            result.url_after,
            decided_by="backtrack",
            duration_ms=result.duration_ms,
        )
        self.history.append(
            StepView("goto", rec.args, rec.ok, rec.error, None, None, rec.url_before, rec.url_after, "backtrack")
        )
        record_step(
            self.memory_run, rec, obs.env(), EnvState(url=result.url_after), f"backtrack: {stuck}", self._take()
        )
        self.stuck, self.last_error, self.error_lessons = None, None, []

    def _finished(
        self, decision: Decision, decided_by: str, obs: Observation, env_before: EnvState, step_no: int
    ) -> None:
        """The decision to stop: success by the case's check (when it has one) or the decision's word."""
        self.final_decision = decision
        text = self.browser.page_text()
        check = self.success_check
        self.success = check_success(check, self.browser.page.url, text) if check else bool(decision.success)
        if check and decision.success is False:
            self.success = False
        rec = StepRecord(step_no, "finish", dict(decision.args), True, None, obs.url, obs.url, decided_by=decided_by)
        self.history.append(StepView("finish", rec.args, True, None, None, None, obs.url, obs.url, decided_by))
        record_step(self.memory_run, rec, env_before, env_before, decision.reasoning(), self._take())
        if decided_by == "replay":
            self.replayed += 1
        self.reason = None if self.success else ("check_failed" if decision.success else "gave_up")

    def _act(self, decision: Decision, decided_by: str, tstep: Any, env_before: EnvState, step_no: int) -> None:
        """Execute the decision, verify a replayed step's recorded effect, and record the step."""
        browser, run = self.browser, self.memory_run
        result = browser.execute(decision.command, decision.args, decision.target)
        if decided_by == "replay":
            self.replayed += 1
            if (
                result.ok
                and tstep is not None
                and tstep.effect
                and tstep.effect.startswith("url:")
                and result.url_after != tstep.effect[4:]
            ):
                self.handback = f"recorded effect did not happen (expected {tstep.effect[4:]}, got {result.url_after})"
                self.replay_queue = []
            if not result.ok:
                self.handback = f"replayed {decision.command} failed: {result.error}"
                self.replay_queue = []
        rec = StepRecord(
            step=step_no,
            command=decision.command,
            args=dict(decision.args),
            ok=result.ok,
            error=result.error,
            url_before=result.url_before,
            url_after=result.url_after,
            role=decision.target.role if decision.target else None,
            name=decision.target.name if decision.target else None,
            selector=result.selector,
            sensitive=result.sensitive,
            duration_ms=result.duration_ms,
            decided_by=decided_by,
            in_shadow=bool(result.extra.get("in_shadow")),
        )
        self.history.append(
            StepView(
                rec.command, rec.args, rec.ok, rec.error, rec.role, rec.name, rec.url_before, rec.url_after, decided_by
            )
        )
        if result.ok:
            self.last_error, self.error_lessons = None, []
        else:
            if run.known_failure(decision.command, decision.args, result.url_before) is not None:
                self.stuck = f"repeated failure: {decision.command} failed again on {cap(result.url_before, 200)}"
            self.errors += 1
            self.last_error = result.error
            self.error_lessons = run.recall_error(
                decision.command, result.error or "", step_no, domain_of(result.url_before)
            )
        self.seen_after = browser.observe()  # seed 002's env after: URL, title, page type, visible elements
        record_step(run, rec, env_before, self.seen_after.env(), decision.reasoning(), self._take())
        warnings = run.loop_warnings()
        if warnings and self.stuck is None:
            self.stuck = f"loop warning: {warnings[0]}"
        if self.turns % self.cfg.progress_every == 0:
            run.progress(self.turns, browser.page.url)


def run_task(
    browser: Browser,
    memory: RecordingMemory,
    policy: DecisionPolicy,
    *,
    goal: str,
    start_url: str,
    run_id: str | None = None,
    session_id: str | None = None,
    parent_run_id: str | None = None,
    mode: str = "new",
    isolation: str = "shared",
    case_id: str | None = None,
    success_check: dict[str, Any] | None = None,
    config: RunConfig | None = None,
    context: dict[str, str] | None = None,
) -> RunResult:
    """Run one task to the end and record everything; returns the run's numbers. `context` is user
    context given to the run (seed 003's context store)."""
    return TaskRun(
        browser,
        memory,
        policy,
        goal=goal,
        start_url=start_url,
        run_id=run_id,
        session_id=session_id,
        parent_run_id=parent_run_id,
        mode=mode,
        isolation=isolation,
        case_id=case_id,
        success_check=success_check,
        config=config,
        context=context,
    ).run()
