"""Decision policies: who chooses the next browser action.

`DecisionPolicy` is the protocol (named so it does not clash with
`projections.parameters.Thresholds`, which holds memory thresholds). A policy decides from its
conversation alone (`memtape.agent.conversation`): the recorded system prompt, its own earlier
replies in the run and the recorded step prompt. Nothing else reaches it, so the same recorded
messages give the same decision and a decision can be asked again from the ledger
(`memtape.agent.decisions`). Two real implementations:

- `ScriptedPolicy` (default, no model): parses the goal of its system prompt into sub-goals
  (open/click "X", search for "X", log in as "U" with password "P", set "F" to "V", select "O"
  in "F", find "X", wait for "X") and reads the page as a competent model would: an open dialog
  is closed with its own button first, a failed click on a search button after typing is
  submitted with Enter, a field that is not an input is focused and typed into. Memory adds
  what the page does not show: Tier 1 lessons, tips for this site and under an error, learned
  patterns, the reference trajectory and app knowledge. A decision that follows memory names
  every prompt section that told it so (`memory (domain_tips): ...`). What it needs to carry
  from one decision to the next (the sub-goals done, an action it planned, the fallbacks it
  tried) it writes in its own reply, on a last line `notes: {...}`, as a model would think
  aloud, and reads back from its last reply.
- `OpenAIPolicy`: an OpenAI-compatible chat-completions client with tool calls over HTTP
  (MEMTAPE_LLM_BASE_URL, MEMTAPE_LLM_MODEL, MEMTAPE_LLM_API_KEY), sent the same conversation.

Example:
    messages = conversation(system_prompt, replies, step_prompt)
    decision = ScriptedPolicy().decide(messages)   # Decision(command="click", args={"ref": "e12"}, ...)
    replies.append(decision.reply())
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

import openai

from memtape.agent.browser import Element
from memtape.agent.conversation import Message, Reading, RecentAction, read_prompts
from memtape.ledger.credentials import QUOTED, clauses, login_in
from memtape.ledger.errors import LedgerError
from memtape.projections.budget import count_tokens
from memtape.projections.folds.knowledge import fill_fails_key
from memtape.projections.pattern_learning import fill_placeholders

CLICKABLE = ("button", "link", "tab", "menuitem", "option", "checkbox", "radio", "switch", "menuitemcheckbox")
FIELDS = ("textbox", "searchbox", "combobox", "spinbutton")
DISMISS = re.compile(r"\b(accept|agree|allow|close|dismiss|got it|ok|okay|no thanks|continue|reject)\b", re.I)
#: the buttons that close a dialog, in the order a reader tries them: consent first, then closing
DIALOG_BUTTONS = (
    re.compile(r"\b(accept|agree|allow|got it|ok|okay)\b", re.I),
    re.compile(r"\b(close|dismiss|no thanks|not now|continue)\b", re.I),
)
SUBMIT = re.compile(r"\b(search|submit|go|find)\b", re.I)
SIGN_IN = re.compile(r"\b(sign in|log ?in|submit|continue)\b", re.I)
NEXT = re.compile(r"\b(next|more|older)\b", re.I)
#: the last line of a scripted reply: what the policy carries to its next decision
NOTES = "notes: "
#: prompt sections as a reply's notes name them (no section name appears in notes, so a reason
#: names a section only where the decision itself follows it)
_CODES = {
    "tier1": "T",
    "domain_tips": "D",
    "last_error": "E",
    "learned_patterns": "L",
    "reference_trajectory": "R",
    "app_knowledge": "K",
}
_SOURCES = {code: source for source, code in _CODES.items()}


class PolicyError(LedgerError):
    """The policy could not produce a decision (e.g. the model endpoint failed)."""


#: what an endpoint call returns
Answer = TypeVar("Answer")


@dataclass
class Decision:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    #: the element acted on (the loop binds the ref to the page it observed)
    target: Element | None = None
    think: str = ""
    success: bool | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    #: the learned pattern this decision follows: its place in LEARNED PATTERNS (0 first) ...
    pattern: int | None = None
    #: ... and its id (the loop knows which patterns the prompt listed)
    pattern_id: str | None = None
    #: what the policy carries to its next decision, written in its reply
    notes: str = ""

    def reply(self) -> Message:
        """The decision as the policy's reply in its conversation (and as `step_recorded` keeps it:
        the reasoning is the step's `think`)."""
        return Message("assistant", self.reasoning(), self.command, dict(self.args))

    def reasoning(self) -> str:
        return f"{self.think}\n{NOTES}{self.notes}" if self.notes else self.think


class DecisionPolicy(Protocol):
    name: str

    def decide(self, messages: Sequence[Message]) -> Decision: ...


def prompts_of(messages: Sequence[Message]) -> tuple[str, str, list[Message]]:
    """(system prompt, step prompt, the policy's earlier replies) of a conversation."""
    system = next((m.content for m in messages if m.role == "system"), "")
    step = messages[-1].content if messages and messages[-1].role == "user" else ""
    return system, step, [m for m in messages if m.role == "assistant"]


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


@dataclass(frozen=True)
class Done:
    """An action taken, as the policy remembers it: `value` is what it typed, selected or waited
    for (None where it cannot know: a step it did not decide, whose value the prompt hides)."""

    command: str
    role: str | None = None
    name: str | None = None
    value: str | None = None
    key: str | None = None


def _typed(s: Done, want: str) -> bool:
    return s.command in ("fill", "type") and (s.value is None or s.value == want)


def completes(sub: SubGoal, steps: Sequence[Done]) -> bool:
    """Whether `steps` (ok ones, the last just taken) finish the sub-goal."""
    last = steps[-1]
    if sub.kind in ("click", "find"):
        return last.command == "click" and _named(last.name, sub.a)
    if sub.kind == "search":
        return any(_typed(s, sub.a) for s in steps) and (
            (last.command == "press" and last.key == "Enter")
            or (last.command == "click" and bool(SUBMIT.search(last.name or "")))
        )
    if sub.kind == "login":
        return (
            any(_typed(s, sub.a) for s in steps) and last.command == "click" and bool(SIGN_IN.search(last.name or ""))
        )
    if sub.kind == "set":
        return _typed(last, sub.b)
    if sub.kind == "select":
        return last.command == "select" and last.value in (None, sub.a)
    if sub.kind == "wait":
        return last.command == "wait" and last.value in (None, sub.a)
    if sub.kind == "goto":
        return last.command == "goto"
    return False


# ---- the scripted policy ---------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """An action planned before the page it acts on is seen: the target by role and name, the
    reason, and the prompt sections that told it (none: the page itself did)."""

    command: str
    args: dict[str, Any]
    role: str | None = None
    name: str | None = None
    why: str = ""
    sources: tuple[str, ...] = ()

    def reason(self) -> str:
        if self.sources:
            return f"memory ({', '.join(self.sources)}): {self.why}"
        return self.why or f"fallback: {self.command}"


@dataclass
class Option:
    actions: list[Planned]
    retry: bool


@dataclass
class Fallback:
    """What the policy tries after `primary` failed: `options` in order, `tried` the current one."""

    primary: Planned
    options: list[Option]
    tried: int = 0


@dataclass
class Notes:
    """What the scripted policy carries from one decision to the next, in its reply."""

    goal_done: int = 0
    steps: list[Done] = field(default_factory=list)
    queue: list[Planned] = field(default_factory=list)
    fallback: Fallback | None = None
    act: Done | None = None
    filled: tuple[str, str] | None = None

    def dump(self) -> str:
        def planned(p: Planned) -> list[Any]:
            # no empty strings: a run of `""` misaligns the quote reading the secret scrubber does, which
            # then takes JSON punctuation after a quoted "Log in" for a password and redacts it
            return [p.command, p.args, p.role, p.name, p.why or None, "".join(_CODES[s] for s in p.sources) or None]

        data: dict[str, Any] = {"g": self.goal_done}
        if self.steps:
            data["s"] = [list(asdict(s).values()) for s in self.steps]
        if self.queue:
            data["q"] = [planned(p) for p in self.queue]
        if self.fallback is not None:
            f = self.fallback
            data["f"] = [planned(f.primary), [[[planned(a) for a in o.actions], o.retry] for o in f.options], f.tried]
        if self.act is not None:
            data["a"] = list(asdict(self.act).values())
        if self.filled is not None:
            data["l"] = list(self.filled)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def load(cls, reply: str) -> Notes | None:
        """The notes of a reply (None when it has none, or they do not parse)."""
        line = reply.rsplit("\n", 1)[-1]
        if not line.startswith(NOTES):
            return None
        try:
            data = json.loads(line[len(NOTES) :])

            def planned(p: list[Any]) -> Planned:
                return Planned(p[0], dict(p[1]), p[2], p[3], p[4] or "", tuple(_SOURCES[c] for c in p[5] or ""))

            fb = data.get("f")
            return cls(
                goal_done=int(data.get("g", 0)),
                steps=[Done(*s) for s in data.get("s", [])],
                queue=[planned(p) for p in data.get("q", [])],
                fallback=None
                if fb is None
                else Fallback(planned(fb[0]), [Option([planned(a) for a in o[0]], bool(o[1])) for o in fb[1]], fb[2]),
                act=Done(*data["a"]) if data.get("a") else None,
                filled=tuple(data["l"]) if data.get("l") else None,  # type: ignore[arg-type]
            )
        except (ValueError, TypeError, KeyError, IndexError):
            return None


def _done_of(d: Decision) -> Done:
    value = d.args.get("value", d.args.get("text"))
    return Done(
        d.command,
        d.target.role if d.target else None,
        d.target.name if d.target else None,
        None if value is None else str(value),
        d.args.get("key"),
    )


def _same(recent: RecentAction, act: Done) -> bool:
    """Whether a Recent Actions line (names cut at 50 characters) is the action `act`."""
    if recent.command != act.command or (recent.role or None) != (act.role or None):
        return False
    shown, name = recent.name or "", act.name or ""
    return shown == name or (shown.endswith("…") and name.startswith(shown[:-1]))


class ScriptedPolicy:
    """Deterministic policy: goal grammar + the page as a reader sees it + memory's sections of its prompts."""

    name = "scripted"

    def decide(self, messages: Sequence[Message]) -> Decision:
        system, step, replies = prompts_of(messages)
        seen = read_prompts(system, step)
        d = self._decide(seen, replies)
        d.tokens_in = sum(count_tokens(m.text()) for m in messages)
        d.tokens_out = count_tokens(json.dumps({"name": d.command, "arguments": d.args}), "json")
        return d

    # -- internals --

    def _carried(self, seen: Reading, replies: list[Message], plan: list[SubGoal]) -> tuple[Notes, bool]:
        """The notes of the last reply brought up to date with what the step prompt shows of its
        action: (notes, whether that action failed)."""
        failed = seen.error is not None or (bool(seen.recent) and not seen.recent[-1].ok)
        notes = Notes.load(replies[-1].content) if replies else None
        if notes is None:  # the first decision (perhaps after a replayed trajectory the prompt shows)
            notes = Notes()
            for r in seen.recent:
                if r.ok:
                    self._advance(plan, notes, Done(r.command, r.role, r.name, None, r.key))
            return notes, False
        act, notes.act = notes.act, None
        mine = act is not None and act.command != "finish" and (not seen.recent or _same(seen.recent[-1], act))
        if act is None or not mine:  # something else happened since (a backtrack): plans start over
            notes.queue, notes.fallback = [], None
            return notes, False
        if failed:
            if notes.fallback is None:
                args = {k: v for k, v in replies[-1].args.items() if k != "ref"}
                notes.fallback = Fallback(Planned(act.command, args, act.role, act.name), [], -1)
            return notes, True
        self._advance(plan, notes, act)
        if not notes.queue:
            notes.fallback = None
        return notes, False

    @staticmethod
    def _advance(plan: list[SubGoal], notes: Notes, done: Done) -> None:
        notes.steps.append(done)
        if done.command in ("fill", "type") and done.name:
            notes.filled = (done.role or "", done.name)
        if notes.goal_done < len(plan) and completes(plan[notes.goal_done], notes.steps):
            notes.goal_done, notes.steps = notes.goal_done + 1, []

    def _decide(self, seen: Reading, replies: list[Message]) -> Decision:
        plan = parse_goal(seen.goal)
        if not plan:
            return Decision(
                "finish",
                {"result": "the goal names nothing to do"},
                success=False,
                think="no actionable clause in the goal",
            )
        notes, failed = self._carried(seen, replies, plan)
        d = self._failed(seen, notes) if failed else self._next(seen, notes, plan)
        if d.command != "finish":
            notes.act = _done_of(d)
            d.notes = notes.dump()
        return d

    def _failed(self, seen: Reading, notes: Notes) -> Decision:
        """The last action failed: the next fallback (the first ones computed from this page)."""
        fb = notes.fallback
        assert fb is not None  # set by _carried on a failure
        notes.queue = []
        if fb.tried < 0:
            fb.options, fb.tried = self._options(seen, notes, fb.primary, seen.error or ""), 0
        else:
            fb.tried += 1
        if seen.warned:  # the action chosen already failed here: not that one again
            fb.tried += 1
        while fb.tried < len(fb.options):
            opt = fb.options[fb.tried]
            notes.queue = list(opt.actions) + ([fb.primary] if opt.retry else [])
            d = self._next_queued(seen, notes)
            if d is not None:
                return d
            fb.tried += 1
        notes.fallback = None
        return Decision(
            "finish",
            {"result": f"stuck after trying every fallback: {(seen.error or '')[:120]}"},
            success=False,
            think="no fallback left",
        )

    def _next(self, seen: Reading, notes: Notes, plan: list[SubGoal]) -> Decision:
        if notes.queue:
            d = self._next_queued(seen, notes)
            if d is not None:
                return d
        notes.fallback = None
        i = notes.goal_done
        if i >= len(plan):
            return Decision(
                "finish", {"result": "all steps of the goal are done"}, success=True, think="every sub-goal is complete"
            )
        first = self._dialog(seen, notes) or self._proactive(seen, notes)
        if first is not None:
            return first
        return self._primary(seen, notes, plan, i)

    def _next_queued(self, seen: Reading, notes: Notes) -> Decision | None:
        while notes.queue:
            p = notes.queue.pop(0)
            d = _resolve(p, seen)
            if d is not None:
                return d
        return None

    @staticmethod
    def _clicked_last(notes: Notes, el: Element) -> bool:
        last = notes.steps[-1] if notes.steps else None
        return last is not None and last.command == "click" and last.name == el.name

    def _dialog(self, seen: Reading, notes: Notes) -> Decision | None:
        """The page shows an open dialog: close it with its own button before anything else (what
        any reader of the page does; no memory needed)."""
        if not seen.dialogs:
            return None
        el = _dialog_button(seen)
        if el is None or self._clicked_last(notes, el):
            return None
        return Decision(
            "click", {"ref": el.ref}, el, think=f"the page shows an open dialog {seen.dialogs[0]!r}: click {el.name!r}"
        )

    def _tip_source(self, seen: Reading, pattern: str) -> str | None:
        """The prompt section whose tips say `pattern` (a regex, lower case): Tier 1 in the system
        prompt, this site's tips, the tips under the last error; None when no tip says it."""
        for source, tips in (("tier1", seen.tier1), ("domain_tips", seen.domain_tips), ("last_error", seen.error_tips)):
            if any(re.search(pattern, t.lower()) for t in tips):
                return source
        return None

    def _proactive(self, seen: Reading, notes: Notes) -> Decision | None:
        """Memory says an element must be clicked first on this site: do it before anything else."""
        names = [(n, "domain_tips") for t in seen.domain_tips for n in QUOTED.findall(t)]
        names += [
            (s.name, "reference_trajectory")
            for s in seen.trajectory
            if s.command == "click" and s.name and DISMISS.search(s.name)
        ]
        for name, source in names:
            el = seen.find(name, roles=("button", "link"), exact=True)
            if el is None or self._clicked_last(notes, el):
                continue
            return Decision(
                "click", {"ref": el.ref}, el, think=f"memory ({source}): click {el.role} {name!r} first on this site"
            )
        return None

    def _prefers_enter(self, seen: Reading) -> str | None:
        """The prompt sections that say to submit with Enter (a tip, a learned pattern or the
        reference trajectory that pressed it), if any, comma-separated."""
        sources = [s for s in (self._tip_source(seen, r"press enter"),) if s is not None]
        sources += [
            source
            for source, steps in _recorded(seen)
            if any(s.command == "press" and s.args.get("key") == "Enter" for s in steps)
        ]
        return ", ".join(dict.fromkeys(sources)) or None

    def _types_into(self, seen: Reading, field_name: str) -> str | None:
        """The prompt sections that know `fill` fails on this field (a fact, or a learned pattern or
        the reference trajectory that typed into it after focusing it), if any, comma-separated."""
        sources = [
            "app_knowledge"
            for kind, key, _value in seen.facts
            if kind == "quirk" and key.lower() == fill_fails_key(field_name).lower()
        ]
        sources += [
            source
            for source, steps in _recorded(seen)
            if any(s.command == "type" and i > 0 and _named(steps[i - 1].name, field_name) for i, s in enumerate(steps))
        ]
        return ", ".join(dict.fromkeys(sources)) or None

    def _primary(self, seen: Reading, notes: Notes, plan: list[SubGoal], index: int) -> Decision:
        sub, done = plan[index], notes.steps
        where = f"goal step {index + 1}/{len(plan)}"
        if sub.kind in ("click", "find"):
            el = seen.find(sub.a, roles=CLICKABLE) or seen.find(sub.a)
            worked = _worked_before(seen, sub.a, el, [s.a for s in plan if s != sub])
            if worked is not None:
                (source, better) = worked
                why = f"memory ({source}): of the controls named like {sub.a!r}, {better.role} {better.name!r} worked"
                return Decision("click", {"ref": better.ref}, better, think=f"{why} ({where})")
            if el is not None:
                return Decision("click", {"ref": el.ref}, el, think=f"click {sub.a!r} ({where})")
            route = _learned_route(seen, sub.a)
            if route is not None:
                source, via = route
                why = f"memory ({source}): the way to {sub.a!r} learned before goes through {via.name!r}"
                return Decision("click", {"ref": via.ref}, via, think=f"{why} ({where})")
            nxt = next(
                (
                    e
                    for e in seen.elements
                    if e.role in ("link", "button") and NEXT.search(e.name) and (e.role, e.name) not in seen.dead_ends
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
            box = next((e for e in seen.elements if e.role in ("searchbox", "combobox")), None) or seen.find(
                "search", roles=FIELDS
            )
            if box is None:
                return Decision("finish", {"result": "no search box on the page"}, success=False)
            if not any(_typed(s, sub.a) for s in done):
                return Decision("fill", {"ref": box.ref, "value": sub.a}, box, think=f"type the query ({where})")
            enter = self._prefers_enter(seen)
            if enter is not None:
                return Decision(
                    "press",
                    {"ref": box.ref, "key": "Enter"},
                    box,
                    think=f"memory ({enter}): press Enter to submit the search",
                )
            btn = seen.find("search", roles=("button",))
            if btn is not None:
                return Decision("click", {"ref": btn.ref}, btn, think=f"submit the search ({where})")
            return Decision("press", {"ref": box.ref, "key": "Enter"}, box, think="no submit button: press Enter")
        if sub.kind == "login":
            learned = self._login_pattern(seen, notes, sub)
            if learned is not None:
                return learned
            user = next(
                (e for e in seen.elements if e.role == "textbox" and re.search(r"user|e-?mail|login", e.name, re.I)),
                None,
            )
            pw = next((e for e in seen.elements if e.role == "textbox" and re.search(r"pass", e.name, re.I)), None)
            if user is not None and not any(_typed(s, sub.a) and not _password_field(s, sub) for s in done):
                return Decision("fill", {"ref": user.ref, "value": sub.a}, user, think=f"enter the user name ({where})")
            if pw is not None and not any(_typed(s, sub.b) and _password_field(s, sub) for s in done):
                return Decision("fill", {"ref": pw.ref, "value": sub.b}, pw, think=f"enter the password ({where})")
            btn = next((e for e in seen.elements if e.role == "button" and SIGN_IN.search(e.name)), None)
            if btn is None:
                return Decision("finish", {"result": "no sign-in button on the page"}, success=False)
            return Decision("click", {"ref": btn.ref}, btn, think=f"sign in ({where})")
        if sub.kind == "set":
            el = seen.find(sub.a, roles=FIELDS) or seen.find(sub.a)
            if el is None:
                return Decision("finish", {"result": f"no field named {sub.a[:60]!r}"}, success=False)
            typed = self._types_into(seen, sub.a)
            if typed is not None:
                notes.queue = [
                    Planned("type", {"text": sub.b}, why="fill fails here, type instead", sources=_split(typed))
                ]
                return Decision(
                    "click", {"ref": el.ref}, el, think=f"memory ({typed}): focus {sub.a!r}, then type ({where})"
                )
            return Decision("fill", {"ref": el.ref, "value": sub.b}, el, think=f"fill {sub.a!r} ({where})")
        if sub.kind == "select":
            el = seen.find(sub.b, roles=("combobox", "listbox")) or seen.find(sub.b)
            if el is None:
                return Decision("finish", {"result": f"no list named {sub.b[:60]!r}"}, success=False)
            return Decision("select", {"ref": el.ref, "value": sub.a}, el, think=f"choose {sub.a!r} ({where})")
        if sub.kind == "wait":
            return Decision("wait", {"text": sub.a}, think=f"wait for {sub.a!r} ({where})")
        return Decision("goto", {"url": sub.a}, think=f"open {sub.a} ({where})")

    def _login_pattern(self, seen: Reading, notes: Notes, sub: SubGoal) -> Decision | None:
        """Seed 003's long-term memory: follow this site's learned login flow (its placeholders
        filled with the goal's user and password) when nothing of the login is done yet (a click
        that only cleared the page, such as an overlay's button, is not part of it)."""
        pattern = next((p for p in seen.patterns if p.pattern_type == "login_flow"), None)
        if pattern is None or any(
            s.command in ("fill", "type") or any(_same_step(s, step) for step in pattern.steps) for s in notes.steps
        ):  # the login has begun (typing), or the flow was followed once: a flow that led nowhere is not repeated
            return None
        notes.queue = [
            _planned(s, f"learned pattern {pattern.position + 1}", ("learned_patterns",))
            for s in fill_placeholders(pattern.steps, sub.a, sub.b)
        ]
        d = self._next_queued(seen, notes)
        if d is not None:
            d.pattern = pattern.position
        return d

    def _options(self, seen: Reading, notes: Notes, failed: Planned, error: str) -> list[Option]:
        """Fallbacks after a failure: what the page shows first, then what memory's tips say,
        then generic moves."""
        opts: list[Option] = []
        if "intercepts pointer events" in error:
            if seen.dialogs and (btn := _dialog_button(seen)) is not None:
                why = f"an open dialog {seen.dialogs[0]!r} covers the page: click {btn.name!r}"
                opts.append(Option([Planned("click", {}, btn.role, btn.name, why)], retry=True))
            filled = seen.by_identity(*notes.filled) if notes.filled else None
            if filled is not None and failed.name and SUBMIT.search(failed.name):
                told = self._tip_source(seen, r"press enter")
                opts.append(
                    Option(
                        [
                            Planned(
                                "press",
                                {"key": "Enter"},
                                filled.role,
                                filled.name,
                                "press Enter to submit",
                                _split(told),
                            )
                        ],
                        retry=False,
                    )
                )
            tip_names = [
                (n, source)
                for source, tips in (("last_error", seen.error_tips), ("domain_tips", seen.domain_tips))
                for t in tips
                for n in QUOTED.findall(t)
            ]
            for n, source in tip_names:
                el = seen.find(n, roles=("button", "link"), exact=True)
                if el is not None:
                    opts.append(
                        Option([Planned("click", {}, el.role, el.name, "a tip names it", (source,))], retry=True)
                    )
                    break
            opts.append(Option([Planned("press", {"key": "Escape"})], retry=True))
            dismiss = next(
                (e for e in seen.elements if e.role == "button" and DISMISS.search(e.name) and e.name != failed.name),
                None,
            )
            if dismiss is not None:
                opts.append(
                    Option(
                        [Planned("click", {}, dismiss.role, dismiss.name, "looks like a dismiss button")], retry=True
                    )
                )
        elif failed.command == "fill":
            value = str(failed.args.get("value", ""))
            typed = _split(self._tip_source(seen, r"\btype\b"))
            why = "the field takes no fill: focus it, then type" if "not an <input>" in error else "click, then type"
            opts.append(
                Option(
                    [
                        Planned("click", {}, failed.role, failed.name, why, typed),
                        Planned("type", {"text": value}, why="type instead", sources=typed),
                    ],
                    retry=False,
                )
            )
            opts.append(Option([Planned("click", {}, failed.role, failed.name)], retry=True))
        else:
            opts += [
                Option([Planned("wait", {"ms": 500})], retry=True),
                Option([Planned("scroll", {"direction": "down"})], retry=True),
            ]
        return opts


def _same_step(done: Done, step: dict[str, Any]) -> bool:
    """Whether an action taken is a learned pattern's step (its command on the same element)."""
    return done.command == step.get("command") and done.name == step.get("name") and done.role == step.get("role")


def _password_field(s: Done, sub: SubGoal) -> bool:
    """Whether a typing step went into the password (its value says so, or where the prompt hid the
    value, its field's name)."""
    return s.value == sub.b if s.value is not None else bool(re.search(r"pass", s.name or "", re.I))


def _split(sources: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in sources.split(",")) if sources else ()


def _dialog_button(seen: Reading) -> Element | None:
    """The button a reader closes an open dialog with (consent first, then closing)."""
    buttons = [e for e in seen.elements if e.role == "button"]
    for pattern in DIALOG_BUTTONS:
        el = next((e for e in buttons if pattern.search(e.name)), None)
        if el is not None:
            return el
    return None


def _planned(step: dict[str, Any], why: str = "", sources: tuple[str, ...] = ()) -> Planned:
    """A learned pattern's step as an action to take (its value as the argument its command takes)."""
    command, value = str(step.get("command", "")), step.get("value")
    arg = "text" if command == "type" else "key" if command == "press" else "value"
    return Planned(command, {} if value is None else {arg: value}, step.get("role"), step.get("name"), why, sources)


@dataclass(frozen=True)
class _Step:
    command: str
    name: str | None
    args: dict[str, Any]


def _clicks(seen: Reading) -> list[tuple[str, list[tuple[str, str]]]]:
    """The clicks (role, name) of each recorded step list the prompt shows, with its section."""
    out = [("reference_trajectory", [(s.role or "", s.name or "") for s in seen.trajectory if s.command == "click"])]
    for p in seen.patterns:
        steps = [(str(s.get("role") or ""), str(s.get("name") or "")) for s in p.steps if s.get("command") == "click"]
        out.append(("learned_patterns", steps))
    return out


def _worked_before(
    seen: Reading, target: str, default: Element | None, others: Sequence[str] = ()
) -> tuple[str, Element] | None:
    """Of several controls on the page named like `target` (the name, or a name holding it; not one
    the goal names for another of its steps, `others`), the one a recorded step list the prompt
    shows clicked, where it is not the one a reader would pick anyway: (the section that says so,
    the element). None when the page shows one such control, or memory names none of them."""
    want = target.strip().lower()
    taken = {o.strip().lower() for o in others}
    plausible = [
        e
        for e in seen.elements
        if e.role in CLICKABLE and want and want in e.name.lower() and e.name.strip().lower() not in taken
    ]
    if len(plausible) < 2:
        return None
    for source, clicks in _clicks(seen):
        for role, name in clicks:
            el = next((e for e in plausible if e.role == role and e.name == name), None)
            if el is not None:
                return None if default is not None and el.ref == default.ref else (source, el)
    return None


def _learned_route(seen: Reading, target: str) -> tuple[str, Element] | None:
    """`target` is not on this page, but a recorded step list the prompt shows reached it by clicks:
    the latest click of that path before it whose element this page shows (the section, the element).
    None when memory knows no way there from here."""
    for source, clicks in _clicks(seen):
        k = next((i for i, (_role, name) in enumerate(clicks) if _named(name, target)), None)
        if k is None:
            continue
        for role, name in reversed(clicks[:k]):
            if (role, name) in seen.dead_ends:
                continue
            el = seen.by_identity(role, name) or seen.find(name, roles=(role,), exact=True)
            if el is not None:
                return source, el
    return None


def _recorded(seen: Reading) -> list[tuple[str, list[_Step]]]:
    """The recorded step lists this decision's prompt shows, with the section that shows them:
    the reference trajectory's steps, and each learned pattern's."""
    out = [("reference_trajectory", [_Step(s.command, s.name, s.args) for s in seen.trajectory])]
    for p in seen.patterns:
        steps = [_planned(s) for s in p.steps]
        out.append(("learned_patterns", [_Step(s.command, s.name, s.args) for s in steps]))
    return out


def _resolve(p: Planned, seen: Reading) -> Decision | None:
    """Bind a planned action to the current page (None when its target is gone)."""
    args = dict(p.args)
    el: Element | None = None
    if p.name is not None and p.role is not None:
        el = seen.by_identity(p.role, p.name) or seen.find(p.name, roles=(p.role,))
        if el is None:
            return None
        args["ref"] = el.ref
    return Decision(p.command, args, el, think=p.reason())


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
        # the client insists on a key; a local endpoint that needs none gets a placeholder bearer token
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key or "no-key", timeout=timeout, max_retries=max_retries
        )

    def request(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The chat request of one decision: its conversation as messages (an earlier reply as the
        assistant's text and the call it made), at temperature 0."""
        return {
            "model": self.model,
            "temperature": 0,
            "tool_choice": "required",
            "tools": TOOLS,
            "messages": [{"role": m.role, "content": m.text()} for m in messages],
        }

    def decide(self, messages: Sequence[Message]) -> Decision:
        completion = endpoint_call(
            "model", self.base_url, self.timeout, lambda: self.client.chat.completions.create(**self.request(messages))
        )
        return self.parse(completion.model_dump())

    def parse(self, data: dict[str, Any]) -> Decision:
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
        success = bool(args.get("success", True)) if name == "finish" else None
        return Decision(
            name,
            args,
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
