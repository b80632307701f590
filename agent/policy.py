"""Decision policies: who chooses the next browser action.

`DecisionPolicy` is the protocol (named so it does not clash with
`projections.parameters.Thresholds`, which holds memory thresholds). Two real
implementations:

- `ScriptedPolicy` (default, no model): parses the goal into sub-goals
  (open/click "X", search for "X", log in as "U" with password "P", set "F"
  to "V", select "O" in "F", find "X", wait for "X"), reads the page, and
  reads memory the way a model would read its prompt: Tier 1 lessons ("press
  Enter to submit"), tips for this site ('click "Accept all cookies"
  first'), tips recalled on an error, the reference trajectory and app
  knowledge. Without memory it explores generic fallbacks after a failure
  (Escape, a dismiss-like button, Enter, click then type), which costs turns;
  with memory it acts right the first time. That difference is what the demo
  measures. A decision that follows memory names every prompt section that
  told it so (`memory (domain_tips): ...`, `memory (tier1, learned_patterns):
  ...`), so the log tells which decisions used memory.
- `OpenAIPolicy`: an OpenAI-compatible chat-completions client with tool
  calls over HTTP (MEMTAPE_LLM_BASE_URL, MEMTAPE_LLM_MODEL,
  MEMTAPE_LLM_API_KEY).

Example:
    policy = ScriptedPolicy()
    policy.start(goal, system_prompt)
    decision = policy.decide(ctx)        # Decision(command="click", args={"ref": "e12"}, ...)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import openai

from memtape.agent.browser import Element, Observation
from memtape.ledger.credentials import QUOTED, clauses, login_in
from memtape.ledger.errors import LedgerError
from memtape.projections.budget import count_tokens
from memtape.projections.folds.knowledge import fill_fails_key
from memtape.projections.pattern_learning import fill_placeholders

CLICKABLE = ("button", "link", "tab", "menuitem", "option", "checkbox", "radio", "switch", "menuitemcheckbox")
FIELDS = ("textbox", "searchbox", "combobox", "spinbutton")
DISMISS = re.compile(r"\b(accept|agree|allow|close|dismiss|got it|ok|okay|no thanks|continue|reject)\b", re.I)
SUBMIT = re.compile(r"\b(search|submit|go|find)\b", re.I)
SIGN_IN = re.compile(r"\b(sign in|log ?in|submit|continue)\b", re.I)
NEXT = re.compile(r"\b(next|more|older)\b", re.I)


class PolicyError(LedgerError):
    """The policy could not produce a decision (e.g. the model endpoint failed)."""


#: what an endpoint call returns
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class StepView:
    """A past step as a policy sees it."""

    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None = None
    role: str | None = None
    name: str | None = None
    url_before: str = ""
    url_after: str = ""
    decided_by: str = "policy"


@dataclass
class DecisionContext:
    """Everything a policy may read for one decision (memory parts are empty with memory off)."""

    goal: str
    observation: Observation
    history: list[StepView]
    system_prompt: str = ""
    step_prompt: str = ""
    tier1: list[str] = field(default_factory=list)
    domain_tips: list[str] = field(default_factory=list)
    error_tips: list[str] = field(default_factory=list)
    last_error: str | None = None
    trajectory_steps: list[Any] = field(default_factory=list)
    facts: list[tuple[str, str, str]] = field(default_factory=list)
    #: elements (role, name) that led to a dead end the agent backtracked from
    avoid: list[tuple[str, str]] = field(default_factory=list)
    #: seed 003's learned patterns for this site, best first
    patterns: list[Any] = field(default_factory=list)


@dataclass
class Decision:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    target: Element | None = None
    think: str = ""
    success: bool | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    #: the learned pattern this decision follows, if any
    pattern_id: str | None = None


class DecisionPolicy(Protocol):
    name: str

    def start(self, goal: str, system_prompt: str) -> None: ...

    def decide(self, ctx: DecisionContext) -> Decision: ...


# ---- the goal grammar of the scripted policy -----------------------------------------


@dataclass(frozen=True)
class SubGoal:
    kind: str  # click | search | login | set | select | find | wait | goto
    a: str = ""
    b: str = ""


def parse_goal(goal: str) -> list[SubGoal]:
    """Sub-goals in order; quoted strings are the arguments. Clauses and logins are read by
    `ledger.credentials`, the parser the scrubber hides passwords with."""
    out: list[SubGoal] = []
    for clause in clauses(goal):
        args = clause.args
        low = clause.text.lower()
        login = login_in(clause)
        if login is not None:
            out.append(SubGoal("login", login.user, login.password))
        elif "search" in low and args:
            out.append(SubGoal("search", args[0]))
        elif re.search(r"\b(set|fill)\b", low) and len(args) >= 2:
            out.append(SubGoal("set", args[0], args[1]))
        elif re.search(r"\btype\b", low) and len(args) >= 2:
            out.append(SubGoal("set", args[1], args[0]))
        elif re.search(r"\b(select|choose)\b", low) and len(args) >= 2:
            out.append(SubGoal("select", args[0], args[1]))
        elif re.search(r"\bwait\b", low) and args:
            out.append(SubGoal("wait", args[0]))
        elif re.search(r"\bfind\b", low) and args:
            out.append(SubGoal("find", args[0]))
        elif re.search(r"\bgo ?to\b|\bnavigate\b", low) and args and args[0].startswith(("http://", "https://")):
            out.append(SubGoal("goto", args[0]))
        elif args:
            out.append(SubGoal("click", args[0]))
    return out


def _named(name: str | None, want: str) -> bool:
    n, w = (name or "").strip().lower(), want.strip().lower()
    return bool(w) and (n == w or w in n)


def completes(sub: SubGoal, steps: list[StepView]) -> bool:
    """Whether `steps` (ok ones, the last just taken) finish the sub-goal."""
    last = steps[-1]
    if sub.kind in ("click", "find"):
        return last.command == "click" and _named(last.name, sub.a)
    if sub.kind == "search":
        typed = any(s.command in ("fill", "type") and s.ok and _value(s) == sub.a for s in steps)
        return typed and (
            (last.command == "press" and last.args.get("key") == "Enter")
            or (last.command == "click" and bool(SUBMIT.search(last.name or "")))
        )
    if sub.kind == "login":
        typed = any(s.command in ("fill", "type") and s.ok and _value(s) == sub.a for s in steps)
        return typed and last.command == "click" and bool(SIGN_IN.search(last.name or ""))
    if sub.kind == "set":
        return last.command in ("fill", "type") and _value(last) == sub.b
    if sub.kind == "select":
        return last.command == "select" and str(last.args.get("value", "")) == sub.a
    if sub.kind == "wait":
        return last.command == "wait" and str(last.args.get("text", "")) == sub.a
    if sub.kind == "goto":
        return last.command == "goto"
    return False


def _value(s: StepView) -> str:
    return str(s.args.get("value", s.args.get("text", "")))


def progress(plan: list[SubGoal], history: list[StepView]) -> tuple[int, int]:
    """(index of the first unfinished sub-goal, history index where it started)."""
    i, start = 0, 0
    for k, h in enumerate(history):
        if i >= len(plan):
            break
        if not h.ok:
            continue
        if completes(plan[i], [s for s in history[start : k + 1] if s.ok]):
            i, start = i + 1, k + 1
    return i, start


# ---- the scripted policy ---------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """An action planned before the page it acts on is seen: the target by role and name."""

    command: str
    args: dict[str, Any]
    role: str | None = None
    name: str | None = None
    note: str = ""


@dataclass
class Option:
    actions: list[Planned]
    retry: bool


class ScriptedPolicy:
    """Deterministic policy: goal grammar + page + memory tips; explores fallbacks on failure."""

    name = "scripted"

    def __init__(self) -> None:
        self.plan: list[SubGoal] = []
        self.queue: list[Planned] = []
        self.options: list[Option] | None = None
        self.option_idx = 0
        self.primary: Planned | None = None

    def start(self, goal: str, system_prompt: str = "") -> None:
        self.plan = parse_goal(goal)
        self.queue, self.options, self.option_idx, self.primary = [], None, 0, None

    def decide(self, ctx: DecisionContext) -> Decision:
        d = self._decide(ctx)
        prompt = (ctx.system_prompt or "") + (ctx.step_prompt or "")
        d.tokens_in = count_tokens(prompt)
        d.tokens_out = count_tokens(json.dumps({"name": d.command, "arguments": d.args}), "json")
        return d

    # -- internals --

    def _decide(self, ctx: DecisionContext) -> Decision:
        if not self.plan:
            self.plan = parse_goal(ctx.goal)
        if not self.plan:
            return Decision(
                "finish",
                {"result": "the goal names nothing to do"},
                success=False,
                think="no actionable clause in the goal",
            )
        obs, hist = ctx.observation, ctx.history
        last = hist[-1] if hist else None
        if last is not None and not last.ok:
            self.queue = []
            if self.options is None:
                self.primary = Planned(last.command, _plain(last.args), last.role, last.name)
                self.options = self._options(ctx, self.primary, last.error or "")
                self.option_idx = 0
            else:
                self.option_idx += 1
            while self.option_idx < len(self.options):
                opt = self.options[self.option_idx]
                self.queue = list(opt.actions) + ([self.primary] if opt.retry and self.primary else [])
                d = self._next_queued(obs)
                if d is not None:
                    return d
                self.option_idx += 1
            self.options, self.primary = None, None
            return Decision(
                "finish",
                {"result": f"stuck after trying every fallback: {(last.error or '')[:120]}"},
                success=False,
                think="no fallback left",
            )
        if self.queue:
            d = self._next_queued(obs)
            if d is not None:
                return d
        self.options, self.primary = None, None
        i, start = progress(self.plan, hist)
        if i >= len(self.plan):
            return Decision(
                "finish", {"result": "all steps of the goal are done"}, success=True, think="every sub-goal is complete"
            )
        pre = self._proactive(ctx, hist)
        if pre is not None:
            return pre
        return self._primary(ctx, self.plan[i], [s for s in hist[start:] if s.ok], i)

    def _next_queued(self, obs: Observation) -> Decision | None:
        while self.queue:
            p = self.queue.pop(0)
            d = _resolve(p, obs)
            if d is not None:
                return d
        return None

    def _tip_source(self, ctx: DecisionContext, pattern: str) -> str | None:
        """The prompt section whose tips say `pattern` (a regex, lower case): Tier 1 in the system
        prompt, this site's tips, the tips under the last error; None when no tip says it."""
        for source, tips in (("tier1", ctx.tier1), ("domain_tips", ctx.domain_tips), ("last_error", ctx.error_tips)):
            if any(re.search(pattern, t.lower()) for t in tips):
                return source
        return None

    def _proactive(self, ctx: DecisionContext, hist: list[StepView]) -> Decision | None:
        """Memory says an element must be clicked first on this site: do it before anything else."""
        names = [(n, "domain_tips") for t in ctx.domain_tips for n in QUOTED.findall(t)]
        names += [
            (s.name, "reference_trajectory")
            for s in ctx.trajectory_steps
            if getattr(s, "command", "") == "click" and s.name and DISMISS.search(s.name)
        ]
        last = hist[-1] if hist else None
        for name, source in names:
            el = ctx.observation.find(name, roles=("button", "link"), exact=True)
            if el is None:
                continue
            if (
                last is not None
                and last.command == "click"
                and last.name == el.name
                and last.url_after == ctx.observation.url
            ):
                continue
            return Decision(
                "click", {"ref": el.ref}, el, think=f"memory ({source}): click {el.role} {name!r} first on this site"
            )
        return None

    def _prefers_enter(self, ctx: DecisionContext) -> str | None:
        """The prompt sections that say to submit with Enter (a tip, a learned pattern or the
        reference trajectory that pressed it), if any, comma-separated."""
        sources = [s for s in (self._tip_source(ctx, r"press enter"),) if s is not None]
        sources += [
            source
            for source, steps in _recorded(ctx)
            if any(getattr(s, "command", "") == "press" and (s.args or {}).get("key") == "Enter" for s in steps)
        ]
        return ", ".join(dict.fromkeys(sources)) or None

    def _types_into(self, ctx: DecisionContext, field_name: str) -> str | None:
        """The prompt sections that know `fill` fails on this field (a fact, or a learned pattern or
        the reference trajectory that typed into it after focusing it), if any, comma-separated."""
        sources = [
            "app_knowledge"
            for kind, key, _value in ctx.facts
            if kind == "quirk" and key.lower() == fill_fails_key(field_name).lower()
        ]
        sources += [
            source
            for source, steps in _recorded(ctx)
            if any(
                getattr(s, "command", "") == "type" and i > 0 and _named(steps[i - 1].name, field_name)
                for i, s in enumerate(steps)
            )
        ]
        return ", ".join(dict.fromkeys(sources)) or None

    def _primary(self, ctx: DecisionContext, sub: SubGoal, done: list[StepView], index: int) -> Decision:
        obs = ctx.observation
        where = f"goal step {index + 1}/{len(self.plan)}"
        if sub.kind in ("click", "find"):
            el = obs.find(sub.a, roles=CLICKABLE) or obs.find(sub.a)
            if el is not None:
                return Decision("click", {"ref": el.ref}, el, think=f"click {sub.a!r} ({where})")
            nxt = next(
                (
                    e
                    for e in obs.elements
                    if e.role in ("link", "button") and NEXT.search(e.name) and (e.role, e.name) not in ctx.avoid
                ),
                None,
            )
            if sub.kind == "find" and nxt is not None:
                return Decision(
                    "click", {"ref": nxt.ref}, nxt, think=f"{sub.a!r} not on this page: next page ({where})"
                )
            return Decision(
                "finish",
                {"result": f"no element named {sub.a[:60]!r} on the page"},
                success=False,
                think=f"cannot find {sub.a!r}",
            )
        if sub.kind == "search":
            box = next((e for e in obs.elements if e.role in ("searchbox", "combobox")), None) or obs.find(
                "search", roles=FIELDS
            )
            if box is None:
                return Decision("finish", {"result": "no search box on the page"}, success=False)
            if not any(s.command in ("fill", "type") and _value(s) == sub.a for s in done):
                return Decision("fill", {"ref": box.ref, "value": sub.a}, box, think=f"type the query ({where})")
            enter = self._prefers_enter(ctx)
            if enter is not None:
                return Decision(
                    "press",
                    {"ref": box.ref, "key": "Enter"},
                    box,
                    think=f"memory ({enter}): press Enter to submit the search",
                )
            btn = obs.find("search", roles=("button",))
            if btn is not None:
                return Decision("click", {"ref": btn.ref}, btn, think=f"submit the search ({where})")
            return Decision("press", {"ref": box.ref, "key": "Enter"}, box, think="no submit button: press Enter")
        if sub.kind == "login":
            learned = self._login_pattern(ctx, sub, done)
            if learned is not None:
                return learned
            user = next(
                (e for e in obs.elements if e.role == "textbox" and re.search(r"user|e-?mail|login", e.name, re.I)),
                None,
            )
            pw = next((e for e in obs.elements if e.role == "textbox" and re.search(r"pass", e.name, re.I)), None)
            if user is not None and not any(s.command in ("fill", "type") and _value(s) == sub.a for s in done):
                return Decision("fill", {"ref": user.ref, "value": sub.a}, user, think=f"enter the user name ({where})")
            if pw is not None and not any(s.command in ("fill", "type") and _value(s) == sub.b for s in done):
                return Decision("fill", {"ref": pw.ref, "value": sub.b}, pw, think=f"enter the password ({where})")
            btn = next((e for e in obs.elements if e.role == "button" and SIGN_IN.search(e.name)), None)
            if btn is None:
                return Decision("finish", {"result": "no sign-in button on the page"}, success=False)
            return Decision("click", {"ref": btn.ref}, btn, think=f"sign in ({where})")
        if sub.kind == "set":
            el = obs.find(sub.a, roles=FIELDS) or obs.find(sub.a)
            if el is None:
                return Decision("finish", {"result": f"no field named {sub.a[:60]!r}"}, success=False)
            typed = self._types_into(ctx, sub.a)
            if typed is not None:
                self.queue = [Planned("type", {"text": sub.b}, note=f"memory ({typed}): fill fails here, type instead")]
                return Decision(
                    "click", {"ref": el.ref}, el, think=f"memory ({typed}): focus {sub.a!r}, then type ({where})"
                )
            return Decision("fill", {"ref": el.ref, "value": sub.b}, el, think=f"fill {sub.a!r} ({where})")
        if sub.kind == "select":
            el = obs.find(sub.b, roles=("combobox", "listbox")) or obs.find(sub.b)
            if el is None:
                return Decision("finish", {"result": f"no list named {sub.b[:60]!r}"}, success=False)
            return Decision("select", {"ref": el.ref, "value": sub.a}, el, think=f"choose {sub.a!r} ({where})")
        if sub.kind == "wait":
            return Decision("wait", {"text": sub.a}, think=f"wait for {sub.a!r} ({where})")
        return Decision("goto", {"url": sub.a}, think=f"open {sub.a} ({where})")

    def _login_pattern(self, ctx: DecisionContext, sub: SubGoal, done: list[StepView]) -> Decision | None:
        """Seed 003's long-term memory: follow this site's learned login flow (its placeholders
        filled with the goal's user and password) when nothing of the login is done yet."""
        pattern = next((p for p in ctx.patterns if p.pattern_type == "login_flow"), None)
        if pattern is None or done:
            return None
        self.queue = [
            _planned(s, f"memory (learned_patterns): learned pattern {pattern.pattern_id}")
            for s in fill_placeholders(pattern.steps, sub.a, sub.b)
        ]
        d = self._next_queued(ctx.observation)
        if d is not None:
            d.pattern_id = pattern.pattern_id
        return d

    def _options(self, ctx: DecisionContext, failed: Planned, error: str) -> list[Option]:
        """Fallbacks after a failure; memory's tips decide their order."""
        obs = ctx.observation
        opts: list[Option] = []
        if "intercepts pointer events" in error:
            tip_names = [
                (n, source)
                for source, tips in (("last_error", ctx.error_tips), ("domain_tips", ctx.domain_tips))
                for t in tips
                for n in QUOTED.findall(t)
            ]
            for n, source in tip_names:
                el = obs.find(n, roles=("button", "link"), exact=True)
                if el is not None:
                    opts.append(
                        Option(
                            [Planned("click", {}, el.role, el.name, f"memory ({source}): a tip names it")], retry=True
                        )
                    )
                    break
            enter: Option | None = None
            told = self._tip_source(ctx, r"press enter")
            filled = self._last_filled(ctx)
            if filled is not None and failed.name and SUBMIT.search(failed.name):
                note = f"memory ({told}): press Enter to submit" if told else "fallback: press"
                enter = Option([Planned("press", {"key": "Enter"}, filled.role, filled.name, note)], retry=False)
            if enter is not None and told:
                opts.append(enter)
            opts.append(Option([Planned("press", {"key": "Escape"})], retry=True))
            dismiss = next(
                (e for e in obs.elements if e.role == "button" and DISMISS.search(e.name) and e.name != failed.name),
                None,
            )
            if dismiss is not None:
                opts.append(
                    Option(
                        [Planned("click", {}, dismiss.role, dismiss.name, "looks like a dismiss button")], retry=True
                    )
                )
            if enter is not None and not told:
                opts.append(enter)
        elif failed.command == "fill":
            value = str(failed.args.get("value", ""))
            told = self._tip_source(ctx, r"\btype\b")
            click_type = Option(
                [
                    Planned(
                        "click", {}, failed.role, failed.name, f"memory ({told}): click, then type" if told else ""
                    ),
                    Planned("type", {"text": value}, note=f"memory ({told}): type instead" if told else ""),
                ],
                retry=False,
            )
            if told:
                opts.append(click_type)
            else:
                opts += [Option([Planned("click", {}, failed.role, failed.name)], retry=True), click_type]
        else:
            opts += [
                Option([Planned("wait", {"ms": 500})], retry=True),
                Option([Planned("scroll", {"direction": "down"})], retry=True),
            ]
        return opts

    def _last_filled(self, ctx: DecisionContext) -> Element | None:
        for s in reversed(ctx.history):
            if s.ok and s.command in ("fill", "type") and s.name:
                return ctx.observation.by_identity(s.role or "", s.name)
        return None


def _planned(step: dict[str, Any], note: str = "") -> Planned:
    """A learned pattern's step as an action to take (its value as the argument its command takes)."""
    command, value = str(step.get("command", "")), step.get("value")
    arg = "text" if command == "type" else "key" if command == "press" else "value"
    return Planned(command, {} if value is None else {arg: value}, step.get("role"), step.get("name"), note)


def _recorded(ctx: DecisionContext) -> list[tuple[str, list[Any]]]:
    """The recorded step lists this decision's prompt shows, with the section that shows them:
    the reference trajectory's steps, and each learned pattern's."""
    return [("reference_trajectory", list(ctx.trajectory_steps))] + [
        ("learned_patterns", [_planned(s) for s in p.steps]) for p in ctx.patterns
    ]


def _plain(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != "ref"}


def _resolve(p: Planned, obs: Observation) -> Decision | None:
    """Bind a planned action to the current page (None when its target is gone)."""
    args = dict(p.args)
    el: Element | None = None
    if p.name is not None and p.role is not None:
        el = obs.by_identity(p.role, p.name) or obs.find(p.name, roles=(p.role,))
        if el is None:
            return None
        args["ref"] = el.ref
    return Decision(p.command, args, el, think=p.note or f"fallback: {p.command}")


# ---- the OpenAI-compatible policy -------------------------------------------------------


def _tool(name: str, desc: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


_REF = {"type": "string", "description": "element ref from the element list, e.g. e12"}
TOOLS = [
    _tool("goto", "Open a URL", {"url": {"type": "string"}}, ["url"]),
    _tool("click", "Click an element", {"ref": _REF}, ["ref"]),
    _tool("fill", "Replace the value of an input", {"ref": _REF, "value": {"type": "string"}}, ["ref", "value"]),
    _tool(
        "type", "Type text into the focused element (or the ref)", {"text": {"type": "string"}, "ref": _REF}, ["text"]
    ),
    _tool("press", "Press a key (Enter, Escape, Tab...)", {"key": {"type": "string"}, "ref": _REF}, ["key"]),
    _tool(
        "select", "Choose an option of a select element", {"ref": _REF, "value": {"type": "string"}}, ["ref", "value"]
    ),
    _tool("scroll", "Scroll the page", {"direction": {"type": "string", "enum": ["up", "down"]}}, ["direction"]),
    _tool(
        "wait",
        "Wait for text to appear or for some milliseconds",
        {"text": {"type": "string"}, "ms": {"type": "number"}},
        [],
    ),
    _tool("back", "Go back in history", {}, []),
    _tool(
        "finish",
        "Stop: the goal is done or cannot be done",
        {"result": {"type": "string"}, "success": {"type": "boolean"}},
        ["result"],
    ),
]


def endpoint_call(what: str, base_url: str, timeout: float, call: Callable[[], Answer]) -> Answer:
    """One request to an OpenAI-compatible endpoint through the `openai` client, its failures
    as one-line `PolicyError`s naming the endpoint (`what`: model, embeddings)."""
    try:
        return call()
    except openai.APIStatusError as exc:
        raise PolicyError(f"{what} endpoint {base_url} answered HTTP {exc.status_code}") from exc
    except openai.APITimeoutError as exc:
        raise PolicyError(f"{what} endpoint {base_url} timed out after {timeout:g} s") from exc
    except openai.APIConnectionError as exc:
        raise PolicyError(f"{what} endpoint {base_url} unreachable: {exc.__cause__ or exc}") from exc
    except openai.OpenAIError as exc:  # e.g. a body that is not JSON
        raise PolicyError(f"{what} endpoint {base_url} returned an invalid answer ({type(exc).__name__})") from exc


class OpenAIPolicy:
    """Chat completions with tool calls against any OpenAI-compatible endpoint, through the official
    `openai` client: every request has a timeout, and a 408, 409, 429 or 5xx answer (or a dropped
    connection) is retried up to `max_retries` times with exponential backoff (0.5 s doubling,
    jittered, at most 8 s; a `Retry-After` header is honoured)."""

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
    ):
        self.base_url = (base_url or os.environ.get("MEMTAPE_LLM_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.model = model or os.environ.get("MEMTAPE_LLM_MODEL") or "gpt-4o-mini"
        self.api_key = api_key if api_key is not None else os.environ.get("MEMTAPE_LLM_API_KEY", "")
        self.timeout = timeout
        self.system_prompt = ""
        # the client insists on a key; a local endpoint that needs none gets a placeholder bearer token
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key or "no-key", timeout=timeout, max_retries=max_retries
        )

    def start(self, goal: str, system_prompt: str) -> None:
        self.system_prompt = system_prompt

    def request(self, ctx: DecisionContext) -> dict[str, Any]:
        return {
            "model": self.model,
            "tool_choice": "required",
            "tools": TOOLS,
            "messages": [
                {"role": "system", "content": ctx.system_prompt or self.system_prompt},
                {"role": "user", "content": ctx.step_prompt},
            ],
        }

    def decide(self, ctx: DecisionContext) -> Decision:
        completion = endpoint_call(
            "model", self.base_url, self.timeout, lambda: self.client.chat.completions.create(**self.request(ctx))
        )
        return self.parse(completion.model_dump(), ctx)

    def parse(self, data: dict[str, Any], ctx: DecisionContext) -> Decision:
        usage = data.get("usage") or {}
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyError("model response has no choices[0].message") from exc
        calls = message.get("tool_calls") or []
        if not calls:
            text = (message.get("content") or "").strip()
            return Decision(
                "finish",
                {"result": text[:500] or "model returned no tool call"},
                success=False,
                think="no tool call",
                tokens_in=int(usage.get("prompt_tokens", 0)),
                tokens_out=int(usage.get("completion_tokens", 0)),
            )
        fn = calls[0].get("function") or {}
        name = str(fn.get("name", ""))
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        target = None
        if args.get("ref"):
            target = next((e for e in ctx.observation.elements if e.ref == args["ref"]), None)
        success = bool(args.get("success", True)) if name == "finish" else None
        return Decision(
            name,
            args,
            target,
            think=str(message.get("content") or "")[:500],
            success=success,
            tokens_in=int(usage.get("prompt_tokens", 0)),
            tokens_out=int(usage.get("completion_tokens", 0)),
        )


def make_policy(name: str, **kwargs: Any) -> DecisionPolicy:
    """`scripted` (default) or `openai`."""
    if name == "scripted":
        return ScriptedPolicy()
    if name == "openai":
        return OpenAIPolicy(**kwargs)
    raise PolicyError(f"unknown policy {name!r}: expected scripted or openai")
