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
        memory = AgentMemory.open(store, projections_path)
        result = run_task(browser, memory, ScriptedPolicy(), goal='Open "Wool Socks"',
                          start_url="http://shop.test/")
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from memledger.agent import compress as C
from memledger.agent import prompt as P
from memledger.agent.browser import Browser, Observation, domain_of, origin_of
from memledger.agent.budget import DEFAULT_BUDGET, BudgetItem, fit
from memledger.agent.memory import AgentMemory, Learned, RunOutcome, StepRecord, goal_secrets
from memledger.agent.policy import Decision, DecisionContext, DecisionPolicy, PolicyError, StepView
from memledger.ledger.events import EnvState
from memledger.ledger.ids import short_id
from memledger.ledger.redact import MARKER
from memledger.projections.short_term import ShortTerm, priority_of

Approval = Callable[[Decision, Observation], bool]


@dataclass
class RunConfig:
    max_turns: int = 25
    max_errors: int = 6
    budget: int = DEFAULT_BUDGET
    repeat_limit: int = 3
    progress_every: int = 3
    approve: Approval | None = None
    #: seed 002's rep; None: numbered within the run's session (see AgentMemory.open_run)
    rep: int | None = None
    #: "session": rep 2+ retrieves the session's previous reps' step memories; "all": every other run's
    step_memory_scope: str = "session"
    #: when stuck (a loop warning or a repeated failure) and about to give up, go back to the last
    #: good snapshot instead (seed 003's backtracking)
    backtrack: bool = True


@dataclass
class RunResult:
    run_id: str
    goal: str
    success: bool
    reason: str | None
    turns: int
    policy_decisions: int
    replayed_steps: int
    tokens_in: int
    tokens_out: int
    duration_ms: float
    step_ms: float
    memory_ms: float
    final_url: str
    errors: int
    step_memory_ms: float = 0.0
    case_id: str | None = None
    memory_enabled: bool = True
    learned: Learned | None = None
    handback: str | None = None
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

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
    if check.get("text") and str(check["text"]) not in text:
        return False
    return True


def _action_key(d: Decision, url: str) -> str:
    target = f"{d.target.role}:{d.target.name}" if d.target else ""
    args = {k: v for k, v in sorted(d.args.items()) if k != "ref"}
    return f"{d.command}|{target}|{args}|{url}"


def _recent_lines(history: list[StepView], n: int = 5) -> list[str]:
    lines = []
    start = max(0, len(history) - n)
    for i, h in enumerate(history[start:], start + 1):
        target = f" {h.role} {P.quoted_name(h.name or '', 50)}" if h.role else ""
        extra = ""
        if h.command in ("press",):
            extra = f" key={h.args.get('key', '')}"
        elif h.command == "goto":
            extra = f" {P.cap(str(h.args.get('url', '')), 100)}"
        status = "Success" if h.ok else "Failed"
        lines.append(f"{i}. [{status}] {h.command}{target}{extra}" + ("" if h.ok else " (see error)") +
                     (" [replayed]" if h.decided_by == "replay" else ""))
    return lines


def infer_context(memory: AgentMemory, obs: Observation, step: int) -> None:
    """Seed 003's inferred context: what a page shows about its site (a login form, pagination)."""
    path = urlsplit(obs.url).path or "/"
    if obs.page_type == "login":
        memory.infer_context("login_required", "true", f"login form at {P.cap(path, 100)}", step, obs.domain)
    if any(e.role in ("link", "button") and re.search(r"\b(next|previous) page\b", e.name, re.I) for e in obs.elements):
        memory.infer_context("pagination_type", "numbered pages with next/previous links", f"page analysis of {P.cap(path, 100)}", step,
                             obs.domain)


def _dead_end_exit(current_url: str | None, memory: AgentMemory) -> tuple[Any, StepRecord | None] | None:
    """The last good snapshot to go back to (the newest on another page that is not a dead end
    already left) and the step that left it, or None."""
    snaps = [s for s in memory.snapshots() if s.url != current_url and current_url not in s.dead_ends]
    if not snaps:
        return None
    snap = snaps[-1]
    exit_step = next((r for r in memory.steps() if r.step >= snap.associated_step and r.ok and r.url_before == snap.url
                      and r.url_after != snap.url), None)
    return snap, exit_step


def replay_decision(browser: Browser, obs: Observation, tstep: Any, secrets: list[str]) -> tuple[Decision | None, str | None, tuple[str, str] | None]:
    """Guard a recorded step on the current page: (decision, why it cannot replay, healed selector)."""
    if tstep.command == "finish":
        return Decision("finish", {"result": "replayed trajectory complete"}, success=True,
                        think="replay: recorded trajectory complete"), None, None
    if tstep.url and origin_of(obs.url) != origin_of(tstep.url):
        return None, f"origin changed ({origin_of(obs.url)} != {origin_of(tstep.url)})", None
    el = None
    healed = None
    args = dict(tstep.args or {})
    if tstep.role:
        el = obs.by_identity(tstep.role, tstep.name or "")
        if el is None:
            return None, f"target {tstep.role} {P.quoted_name(tstep.name or '', 60)} is no longer on the page", None
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


def extraction_items(memory: AgentMemory, domain: str, budget_left: int) -> list[BudgetItem]:
    """This site's extractions, newest first: tier 1 from this run, 2 from this session, 3 older;
    cut, compressed and fitted to the extraction allowance (agent/compress.py)."""
    found = list(reversed(memory.extractions(domain)))
    if not found:
        return []
    prepared = []
    for e in found:
        tier = 1 if e.run_id == memory.run_id else 2 if e.session_id and e.session_id == memory.session_id else 3
        prepared.append((e, C.prepare(e.value, e.source, tier)))
    kept = C.fit_extractions([x.text for _, x in prepared], budget_left)
    items = []
    for (e, x), (text, cut) in zip(prepared, kept):
        note = ", ".join(n for n, on in (("cut head and tail", x.truncated or cut), ("compressed", x.compressed)) if on)
        items.append(P.extracted_data(e.title, e.url, text, x.tier, note, e.event_ids[:1], truncated=x.truncated or cut))
    return items


def step_items(obs: Observation, memory: AgentMemory, goal: str, history: list[StepView], last_error: str | None,
               error_lessons: list[Any], domain_lessons: list[Any], sessions: list[Any], match: Any,
               facts: list[Any], selectors: list[Any], patterns: Sequence[Any] = (),
               budget: int = DEFAULT_BUDGET, avoid: Sequence[tuple[str, str]] = ()) -> list[BudgetItem]:
    """The sections of one per-step prompt, each with the ids of the events it came from."""
    items = [P.page_state(obs.url, obs.title, obs.page_type, obs.summary, obs.elements, obs.text)]
    context = memory.relevant_context(obs.domain or None)
    if context:
        items.append(P.context_section(context))
    if patterns:
        items.append(P.learned_patterns(patterns))
    if last_error:
        items.append(P.last_error(last_error, [l.text for l in error_lessons],
                                  [i for l in error_lessons for i in l.event_ids[-2:]]))
    if domain_lessons:
        items.append(P.domain_tips([l.text for l in domain_lessons],
                                   [i for l in domain_lessons for i in l.event_ids[-2:]]))
    if sessions:
        items.append(P.session_history(sessions, memory.policy.session_full_detail))
    if match is not None:
        items.append(P.reference_trajectory(match.trajectory.goal, match.similarity, match.trajectory.steps,
                                            match.trajectory.event_ids))
    if facts:
        items.append(P.app_knowledge(facts))
    if selectors:
        items.append(P.known_selectors(selectors))
    mems = memory.step_memories([e.identity for e in obs.elements], goal)
    if mems:
        items.append(P.step_memories(mems))
    st = memory.short_term()
    if st.navigation_path:
        items.append(P.working_memory(st.navigation_path, st.visited_urls, _failing_here(st, obs.url), avoid))
    warnings = st.loop_warnings
    if history or warnings:
        items.append(P.recent_actions(_recent_lines(history), warnings, priorities=_recent_priorities(history)))
    used = sum(i.tokens for i in items)
    items += extraction_items(memory, obs.domain, max(budget - used, 0))
    return items


def seen_by_policy(kept: list[BudgetItem], obs: Observation, error_lessons: list[Any], domain_lessons: list[Any],
                   match: Any, facts: list[Any], patterns: Sequence[Any] = (),
                   avoid: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The memory a policy may read for one decision: only what the kept prompt items show
    (a trimmed section shows nothing; a truncated one, the entries still whole in it), so an
    audit of the step's `context_built` is exactly what the policy saw. Elements beyond the
    page section's cut are not offered either."""
    text = {i.source: i.text for i in kept}

    def shown(source: str, entries: list[Any], line: Callable[[Any], str]) -> list[Any]:
        return [e for e in entries if P.shows(text[source], line(e))] if source in text else []

    steps = list(match.trajectory.steps) if match is not None else []
    numbered = shown("reference_trajectory", list(enumerate(steps, 1)), lambda e: P.trajectory_line(*e))
    return {
        "observation": replace(obs, elements=tuple(shown("page_state", list(obs.elements), P.element_line))),
        "domain_tips": [P.cap(l.text, 300) for l in shown("domain_tips", domain_lessons, lambda l: P.tip_line(l.text))],
        "error_tips": [P.cap(l.text, 300) for l in shown("last_error", error_lessons, lambda l: P.tip_line(l.text))],
        "trajectory_steps": [s for _, s in numbered],
        "facts": [(f.fact_type, f.key, f.value) for f in shown("app_knowledge", facts, P.fact_line)],
        "patterns": shown("learned_patterns", list(patterns), P.pattern_line),
        "avoid": shown("working_memory", list(avoid), lambda a: P.dead_end_line(*a)),
    }


def _recent_priorities(history: list[StepView], n: int = 5) -> list[str]:
    """Seed 003's MemoryPriority of each recent action shown (the budget drops LOW lines first)."""
    return [priority_of({"action": {"command": h.command, "args": h.args}, "ok": h.ok}, h.url_before, h.url_after)
            for h in history[-n:]]


def run_task(browser: Browser, memory: AgentMemory, policy: DecisionPolicy, *, goal: str, start_url: str,
             run_id: str | None = None, session_id: str | None = None, parent_run_id: str | None = None,
             mode: str = "new", isolation: str = "shared", case_id: str | None = None,
             success_check: dict[str, Any] | None = None, config: RunConfig | None = None,
             context: dict[str, str] | None = None) -> RunResult:
    """Run one task to the end and record everything; returns the run's numbers. `context` is user
    context given to the run (seed 003's context store)."""
    cfg = config or RunConfig()
    run_id = run_id or short_id("run")
    t_run = time.perf_counter()
    memory.open_run(run_id, goal, start_url, session_id=session_id, parent_run_id=parent_run_id, mode=mode,
                    isolation=isolation, case_id=case_id, decision_policy=getattr(policy, "name", "custom"),
                    rep=cfg.rep, step_memory_scope=cfg.step_memory_scope)
    memory.give_context(context or {})
    tier1 = memory.tier1()
    system = P.system_instruction(goal, [l.text for l in tier1])
    sys_item = BudgetItem("system", 100, system, event_ids=tuple(i for l in tier1 for i in l.event_ids[-2:]))
    memory.context_built("system", cfg.budget, [sys_item], [], step=0, domain=domain_of(start_url) or None)
    policy.start(goal, system)
    secrets = goal_secrets(goal)

    browser.new_page()
    nav = browser.execute("goto", {"url": start_url})
    history: list[StepView] = []
    turns = decisions = replayed = errors = 0
    tokens_in = tokens_out = 0
    step_ms = 0.0
    reason: str | None = None
    success = False
    handback: str | None = None
    current_domain: str | None = None
    domain_lessons: list[Any] = []
    sessions: list[Any] = []
    facts: list[Any] = []
    selectors: list[Any] = []
    error_lessons: list[Any] = []
    last_error: str | None = None
    recent_keys: list[str] = []
    match = None
    replay_queue: list[Any] = []
    final_decision: Decision | None = None
    patterns: list[Any] = []
    snapshot_url: str | None = None
    stuck: str | None = None  # why the run is stuck (a loop warning or a repeated failure), if it is
    avoid: list[tuple[str, str]] = []
    if not nav.ok:
        reason = "navigation_failed"
        handback = nav.error

    step_mem = [0.0]

    def take() -> float:
        ms = memory.take_step_ms()
        step_mem[0] += ms
        return ms

    memory.take_step_ms()  # time before the first step (opening memory, Tier 1) is not step time
    first = True
    crash: str | None = None
    seen_after: Observation | None = None  # the page after the last action: the next step's observation
    try:
        while reason is None and turns < cfg.max_turns:
            t_step = time.perf_counter()
            step_no = turns + 1
            obs = seen_after if seen_after is not None else browser.observe()
            seen_after = None
            if obs.domain != current_domain:
                current_domain = obs.domain
                domain_lessons = memory.domain_recall(current_domain, step_no)
                sessions = memory.sessions(current_domain)
                facts = memory.facts(current_domain)
                selectors = memory.selectors(current_domain)
                patterns = memory.patterns(current_domain)
            if obs.url != snapshot_url:  # a navigation: seed 003's state snapshot, and what the page tells
                snapshot_url = obs.url
                memory.snapshot(obs.url, obs.title, obs.summary, browser.form_state(), browser.scroll_position(),
                                step_no)
                infer_context(memory, obs, step_no)
            if first:
                first = False
                match, replay = memory.recall_trajectory(obs.url, step_no)
                if replay and match is not None:
                    replay_queue = list(match.trajectory.steps)

            decision: Decision | None = None
            decided_by = "policy"
            tstep = None
            if replay_queue:
                tstep = replay_queue[0]
                decision, why, healed = replay_decision(browser, obs, tstep, secrets)
                if decision is None:
                    handback = f"step {len(match.trajectory.steps) - len(replay_queue) + 1}: {why}" if match else why
                    replay_queue = []
                else:
                    replay_queue.pop(0)
                    decided_by = "replay"
                    if healed is not None and decision.target is not None:
                        memory.selector_healed(decision.target.role, decision.target.name, healed[1], healed[0], obs.url, step_no)
            if decision is None:
                items = step_items(obs, memory, goal, history, last_error, error_lessons, domain_lessons,
                                   sessions, match, facts, selectors, patterns, cfg.budget, avoid)
                fitted = fit(items, cfg.budget)
                step_text = P.render_step(fitted.kept)
                memory.context_built("step", cfg.budget, fitted.kept, fitted.trimmed, step=step_no, domain=obs.domain or None)
                ctx = DecisionContext(
                    goal=goal, history=history, system_prompt=system, step_prompt=step_text,
                    tier1=[P.cap(l.text, 300) for l in tier1], last_error=last_error,
                    **seen_by_policy(fitted.kept, obs, error_lessons, domain_lessons, match, facts,
                                     patterns, avoid))
                decision = policy.decide(ctx)
                decisions += 1
                tokens_in += decision.tokens_in
                tokens_out += decision.tokens_out
                if decision.command != "finish":
                    known = memory.known_failure(decision.command, decision.args, obs.url)
                    if known is not None:  # seed 003's is_repeated_failure, before acting
                        again = bool(history) and not history[-1].ok and history[-1].command == decision.command \
                            and history[-1].args == decision.args and history[-1].url_before == obs.url
                        memory.repeated_failure(known, f"{decision.command}({decision.args})", obs.url,
                                                "chose_otherwise" if again else "warned", step_no)
                        if again:
                            ctx.step_prompt += ("\n\nWarning: that action already failed on this page "
                                                "(same tool, arguments and URL). Choose a different action.")
                            decision = policy.decide(ctx)
                            decisions += 1
                            tokens_in += decision.tokens_in
                            tokens_out += decision.tokens_out
                if decision.pattern_id:
                    memory.pattern_used(decision.pattern_id)
                target = _dead_end_exit(snapshot_url, memory) if decision.command == "finish" \
                    and decision.success is False and stuck and cfg.backtrack else None
                if target is not None:  # stuck and about to give up: go back to the last good snapshot
                    snap, exit_step = target
                    avoided = f"{exit_step.role}:{exit_step.name}" if exit_step and exit_step.role else ""
                    if exit_step is not None and exit_step.role:
                        avoid.append((exit_step.role, exit_step.name or ""))
                    result = browser.execute("goto", {"url": snap.url})
                    if result.ok:
                        browser.scroll_to(snap.scroll_x, snap.scroll_y)
                        browser.fill_form(snap.form_state)
                    turns += 1
                    memory.backtracked(snap.snapshot_id, obs.url, snap.url, stuck, [avoided] if avoided else [], step_no)
                    rec = StepRecord(step_no, "goto", {"url": snap.url}, result.ok, result.error, result.url_before,
                                     result.url_after, decided_by="backtrack", duration_ms=result.duration_ms)
                    history.append(StepView("goto", rec.args, rec.ok, rec.error, None, None, rec.url_before,
                                            rec.url_after, "backtrack"))
                    memory.record_step(rec, obs.env(), EnvState(url=result.url_after), f"backtrack: {stuck}", take())
                    policy.start(goal, system)
                    stuck, last_error, error_lessons = None, None, []
                    step_ms += (time.perf_counter() - t_step) * 1000
                    continue
            turns += 1

            key = _action_key(decision, obs.url)
            recent_keys.append(key)
            if decision.command != "finish" and len(recent_keys) >= cfg.repeat_limit and len(set(recent_keys[-cfg.repeat_limit:])) == 1:
                reason = "repeated_action"
                step_ms += (time.perf_counter() - t_step) * 1000
                break

            env_before = obs.env()
            if cfg.approve is not None and decided_by != "replay" and not cfg.approve(decision, obs):
                rec = StepRecord(step_no, decision.command, dict(decision.args), False, "rejected by the approval hook",
                                 obs.url, obs.url, decision.target.role if decision.target else None,
                                 decision.target.name if decision.target else None, decided_by="approval")
                history.append(StepView(rec.command, rec.args, False, rec.error, rec.role, rec.name, obs.url, obs.url, "approval"))
                memory.record_step(rec, env_before, env_before, decision.think, take())
                step_ms += (time.perf_counter() - t_step) * 1000
                continue

            if decision.command == "finish":
                final_decision = decision
                text = browser.page_text()
                success = check_success(success_check, browser.page.url, text) if success_check else bool(decision.success)
                if success_check and decision.success is False:
                    success = False
                rec = StepRecord(step_no, "finish", dict(decision.args), True, None, obs.url, obs.url, decided_by=decided_by)
                history.append(StepView("finish", rec.args, True, None, None, None, obs.url, obs.url, decided_by))
                memory.record_step(rec, env_before, env_before, decision.think, take())
                if decided_by == "replay":
                    replayed += 1
                reason = None if success else ("check_failed" if decision.success else "gave_up")
                step_ms += (time.perf_counter() - t_step) * 1000
                break

            result = browser.execute(decision.command, decision.args, decision.target)
            if decided_by == "replay":
                replayed += 1
                if result.ok and tstep is not None and tstep.effect and tstep.effect.startswith("url:") \
                        and result.url_after != tstep.effect[4:]:
                    handback = f"recorded effect did not happen (expected {tstep.effect[4:]}, got {result.url_after})"
                    replay_queue = []
                if not result.ok:
                    handback = f"replayed {decision.command} failed: {result.error}"
                    replay_queue = []
            rec = StepRecord(step=step_no, command=decision.command, args=dict(decision.args), ok=result.ok,
                             error=result.error, url_before=result.url_before, url_after=result.url_after,
                             role=decision.target.role if decision.target else None,
                             name=decision.target.name if decision.target else None, selector=result.selector,
                             sensitive=result.sensitive, duration_ms=result.duration_ms, decided_by=decided_by,
                             in_shadow=bool(result.extra.get("in_shadow")))
            history.append(StepView(rec.command, rec.args, rec.ok, rec.error, rec.role, rec.name,
                                    rec.url_before, rec.url_after, decided_by))
            if result.ok:
                last_error, error_lessons = None, []
            else:
                if memory.known_failure(decision.command, decision.args, result.url_before) is not None:
                    stuck = f"repeated failure: {decision.command} failed again on {P.cap(result.url_before, 200)}"
                errors += 1
                last_error = result.error
                error_lessons = memory.error_recall(decision.command, result.error or "", domain_of(result.url_before), step_no)
            seen_after = browser.observe()  # seed 002's env after: URL, title, page type, visible elements
            env_after = seen_after.env()
            memory.record_step(rec, env_before, env_after, decision.think, take())
            warnings = memory.loop_warnings()
            if warnings and stuck is None:
                stuck = f"loop warning: {warnings[0]}"
            if turns % cfg.progress_every == 0:
                memory.progress(turns, browser.page.url)
            step_ms += (time.perf_counter() - t_step) * 1000
            if errors >= cfg.max_errors:
                reason = "max_errors"
    except PolicyError as exc:  # the model endpoint failed: the run is still recorded, then reported
        reason, crash = "policy_error", str(exc)
    except Exception as exc:  # noqa: BLE001 - a crashed page or browser ends the run, recorded
        reason, crash = "agent_error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if reason is None and final_decision is None:
        reason = "max_turns"

    final_url = browser.page.url if browser.page is not None else ""
    duration = (time.perf_counter() - t_run) * 1000
    if success:
        summary = f"Done in {turns} turns: {P.cap(str((final_decision.args if final_decision else {}).get('result', 'goal reached')), 200)}"
    else:
        summary = f"Stopped ({reason}) after {turns} turns" + (f": {P.cap(str(final_decision.args.get('result', '')), 200)}" if final_decision else "")
        if crash:
            summary += f": {P.cap(crash, 300)}"
    outcome = RunOutcome(success=success, summary=summary, reason=reason, final_url=final_url, turns=turns,
                         tokens_in=tokens_in, tokens_out=tokens_out, duration_ms=duration, policy_decisions=decisions,
                         replayed_steps=replayed,
                         result=str(final_decision.args.get("result", ""))[:500] if final_decision else None)
    memory.take_step_ms()
    learned = memory.finish_run(outcome)
    wall = (time.perf_counter() - t_run) * 1000  # including the post-run learning just written
    return RunResult(run_id=run_id, goal=goal, success=success, reason=reason, turns=turns, policy_decisions=decisions,
                     replayed_steps=replayed, tokens_in=tokens_in, tokens_out=tokens_out, duration_ms=wall,
                     step_ms=step_ms, memory_ms=memory.ms_total, step_memory_ms=step_mem[0], final_url=final_url, errors=errors, case_id=case_id,
                     memory_enabled=memory.enabled, learned=learned, handback=handback, error=crash)
