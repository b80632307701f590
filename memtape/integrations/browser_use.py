"""memtape as the memory of a browser-use Agent (`pip install 'memtape[browser-use]'`).

    import memtape
    from browser_use import Agent
    from memtape.integrations.browser_use import BrowserUseMemory

    agent = Agent(task='Open "Wool Socks"', llm=llm, browser_session=session)
    with memtape.open(".agent-memory") as mem:
        history = await BrowserUseMemory(mem, agent, start_url="http://shop.test/").run(max_steps=20)

browser-use has hooks but no memory of its own between runs. The adapter starts a
memtape run for the agent's task and, through the hooks browser-use offers
(`on_step_start`, `on_step_end`), records every action (its URL, target element, error
and result) as a step, recalls what memory knows at the moments the bundled agent does
(Tier 1 and the start site's tips and reference trajectory before the first step, the
tips of each new site, error tips after a failed action), puts them into the messages
browser-use sends its model (the system message, then the agent history that every
later state message repeats), and records each injection as `context_built` with the
event ids it came from, so `memtape audit` shows what the model was told and which
run taught it. The run finishes with browser-use's result, and post-run learning turns
its failure→recovery steps into lessons for the next run.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from memtape.agent.budget import DEFAULT_BUDGET, PRIORITIES
from memtape.agent.memory import Lesson, Run
from memtape.agent.prompt import cap, domain_tips, last_error, lessons_from_experience, quoted_name, reference_trajectory
from memtape.api import Memory, MemtapeError
from memtape.ledger.extras import require

require("browser-use integration", "browser-use")  # without the extra: one MemtapeError line, not an ImportError

from browser_use import Agent  # noqa: E402
from browser_use.agent.views import ActionResult, AgentHistory, AgentHistoryList  # noqa: E402
from browser_use.llm.messages import SystemMessage  # noqa: E402

#: the tag around what memtape adds to browser-use's messages (the model sees where memory starts and ends)
TAG = "memtape_memory"
#: the element roles of the tags browser-use interacts with, for `role "name"` targets
TAG_ROLES = {"a": "link", "button": "button", "input": "textbox", "textarea": "textbox", "select": "combobox",
             "option": "option", "img": "img"}


@dataclass
class Injection:
    """What memory put into one model call: sections for the prompt and `context_built`."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def add(self, source: str, text: str, event_ids: tuple[str, ...] | list[str] = ()) -> None:
        self.items.append({"source": source, "priority": PRIORITIES.get(source, 100), "text": text,
                           "event_ids": list(event_ids)})

    def text(self) -> str:
        return f"<{TAG}>\n" + "\n\n".join(i["text"] for i in self.items) + f"\n</{TAG}>"


def _ids(lessons: list[Lesson]) -> list[str]:
    return [i for lesson in lessons for i in lesson.event_ids[-2:]]


def _sensitive_values(data: Mapping[str, Any] | None) -> Iterator[str]:
    """browser-use's `sensitive_data`: {name: value} or {domain: {name: value}}."""
    for value in (data or {}).values():
        if isinstance(value, Mapping):
            yield from (v for v in value.values() if isinstance(v, str))
        elif isinstance(value, str):
            yield value


class BrowserUseMemory:
    """One browser-use Agent run with memtape memory. `memory_run` is the memtape `Run`
    (record lessons or facts into it from your own code while the agent runs)."""

    def __init__(self, memory: Memory, agent: Agent, *, start_url: str, session_id: str | None = None,
                 budget: int = DEFAULT_BUDGET):
        if not isinstance(agent, Agent):
            raise MemtapeError(f"agent must be a browser_use.Agent, got {type(agent).__name__}")
        if not isinstance(start_url, str) or not start_url.strip():
            raise MemtapeError(f"start_url must be a non-empty string, got {start_url!r:.60}")
        self.memory = memory
        self.agent = agent
        self.start_url = start_url
        self.session_id = session_id
        self.budget = budget
        self.memory_run: Run | None = None
        self.step = 0              # memtape step numbers: one per browser-use action
        self._recorded = 0         # browser-use history items already recorded
        self._failures: list[tuple[str, str]] = []  # (action, error) of the last browser-use step
        self._sites: set[str] = set()

    async def run(self, max_steps: int = 100) -> AgentHistoryList:
        """Run the agent with memory: start the memtape run, run browser-use with the hooks,
        finish with its result (an exception finishes the run as failed and is re-raised)."""
        run = self.start()
        with run:
            history = await self.agent.run(max_steps=max_steps, on_step_start=self.on_step_start,
                                           on_step_end=self.on_step_end)
            self.finish(history)
        return history

    # ---- the run's ends -------------------------------------------------------------------

    def start(self) -> Run:
        """Start the memtape run; Tier 1, the start site's tips and a reference trajectory go
        into the agent's system message (browser-use keeps it for every model call)."""
        run = self.memory.start_run(goal=self.agent.task, start_url=self.start_url, session_id=self.session_id)
        self.memory_run = run
        for secret in _sensitive_values(self.agent.sensitive_data):
            run.add_secret(secret)
        injection = Injection()
        tier1 = run.tier1()
        if tier1:
            injection.add("tier1", lessons_from_experience([l.text for l in tier1]), _ids(tier1))
        self._sites.add(run.domain)
        self._site_tips(run, injection, step=1)
        found = run.recall_trajectory(step=1)
        if found is not None:
            t = found.trajectory
            item = reference_trajectory(t.goal, found.similarity, t.steps, t.event_ids[-2:])
            injection.add(item.source, item.text, item.event_ids)
        if injection.items:
            manager = self.agent.message_manager
            system = SystemMessage(content=f"{manager.system_prompt.text}\n\n{injection.text()}",
                                   cache=manager.system_prompt.cache)
            manager.system_prompt = system
            manager.state.history.system_message = system
            run.record_context(injection.items, step=0, budget=self.budget, prompt="system")
        return run

    def finish(self, history: AgentHistoryList) -> None:
        """Finish the memtape run with browser-use's verdict (`done(success=...)`) and result."""
        run = self._run()
        result = history.final_result()
        success = bool(history.is_done() and history.is_successful())
        errors = [e for e in history.errors() if e]
        outcome = result or (errors[-1] if errors else f"stopped after {len(history.history)} steps")
        usage = history.usage
        run.finish(success=success, outcome=cap(outcome, 2000), result=result, turns=len(history.history),
                   tokens_in=usage.total_prompt_tokens if usage else 0,
                   tokens_out=usage.total_completion_tokens if usage else 0)

    # ---- browser-use's hooks --------------------------------------------------------------

    async def on_step_start(self, agent: Agent) -> None:
        """Before the model is asked: error tips for the failed actions of the last step and the
        tips of a site entered since, added to the agent history that every later state message
        repeats, and recorded as `context_built`."""
        run = self._run()
        injection = Injection()
        for action, error in self._failures:
            tips = run.recall_error(command=action, error=error, step=self.step)
            if tips:
                item = last_error(error, [l.text for l in tips], _ids(tips))
                injection.add(item.source, item.text, item.event_ids)
        self._failures = []
        if run.domain and run.domain not in self._sites:
            self._sites.add(run.domain)
            self._site_tips(run, injection, step=self.step + 1)
        if injection.items:
            # an extra result of the last step: browser-use writes it into the agent history right
            # after that step's own results (as it does with a solved CAPTCHA's outcome)
            agent.state.last_result = [*(agent.state.last_result or []), ActionResult(long_term_memory=injection.text())]
            run.record_context(injection.items, step=self.step + 1, budget=self.budget, prompt="step")

    async def on_step_end(self, agent: Agent) -> None:
        """Record each action of the step browser-use just took (a step event per action)."""
        url_now = await agent.browser_session.get_current_page_url() if agent.browser_session else None
        items = agent.history.history[self._recorded:]
        self._recorded = len(agent.history.history)
        for item in items:
            self._record(item, url_now)

    # ---- plumbing -------------------------------------------------------------------------

    def _run(self) -> Run:
        if self.memory_run is None:
            raise MemtapeError("the memtape run has not started: call run() or start() first")
        return self.memory_run

    def _site_tips(self, run: Run, injection: Injection, step: int) -> None:
        tips = run.recall_domain(step=step)
        if tips:
            item = domain_tips([l.text for l in tips], _ids(tips))
            injection.add(item.source, item.text, item.event_ids)

    def _record(self, item: AgentHistory, url_now: str | None) -> None:
        run = self._run()
        actions = item.model_output.action if item.model_output else []
        elements = item.state.interacted_element or []
        think = item.model_output.current_state.next_goal if item.model_output else None
        url = item.state.url or run.url
        for i, (action, result) in enumerate(zip(actions, item.result)):
            name, args = next(iter(action.model_dump(exclude_none=True).items()), ("unknown", {}))
            if name == "done":
                continue
            last = i == len(item.result) - 1
            error = result.error
            self.step += 1
            run.record_step(step=self.step, action=name, target=_target(elements[i] if i < len(elements) else None),
                            url=url, url_after=url_now if last and url_now else url, ok=error is None,
                            error=error, args=args if isinstance(args, dict) else {"value": args},
                            think=think, duration_ms=_duration_ms(item, len(actions)))
            if error is not None:
                self._failures.append((name, error))
            url = run.url


def _target(element: Any) -> str | None:
    """A browser-use interacted element as `role "name"` (memtape's element text)."""
    if element is None:
        return None
    attributes = element.attributes or {}
    role = attributes.get("role") or TAG_ROLES.get(element.node_name.lower(), element.node_name.lower())
    name = element.ax_name or attributes.get("aria-label") or attributes.get("placeholder") or ""
    return f"{role} {quoted_name(name)}" if role else None


def _duration_ms(item: AgentHistory, actions: int) -> float:
    meta = item.metadata
    return max(0.0, (meta.step_end_time - meta.step_start_time) * 1000 / max(actions, 1)) if meta else 0.0


__all__ = ["BrowserUseMemory"]
