"""A decision's conversation, and what a reader of it can know.

A policy decides from its conversation and from nothing else: the system prompt in force (as
recorded by `context_built`, prompt `system`), its own earlier replies in the run (each one a
tool call with the reasoning that came with it, as `step_recorded` keeps them), and the step
prompt it is asked on (`context_built`, prompt `step`). No run object, no step history the
prompt does not show, no typed value the prompt does not hold: so the same recorded messages
give the same decision, and a decision can be asked again from the ledger alone
(`memtape.agent.decisions`).

`read_prompts` is how the bundled scripted policy reads the two prompts, the way a model would:
the goal, the lessons and memory sections of the system prompt, and the page, the last error
(with its tips), dead ends and recent actions of the step prompt. It reads the prompt's own
structure (one item after another, each page-data block fenced), so text inside a fenced
block, a page's or memory's, can never pose as a section of its own.

Example:
    messages = conversation(system_text, replies, step_text)
    seen = read_prompts(messages[0].content, messages[-1].content)
    seen.goal, [e.label for e in seen.elements], seen.domain_tips
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memtape.agent import prompt as P
from memtape.agent.browser import Element

#: a fenced memory item or quoted element name: double quotes, quote and backslash escaped
QUOTED_DATA = r'"((?:[^"\\]|\\.)*)"'
_UNESCAPE = re.compile(r"\\(.)")
_ELEMENT = re.compile(r"^(\S+): ([a-z]+)(?: - (.*))?$")
_TIP = re.compile(rf"^- {QUOTED_DATA}$")
_FACT = re.compile(rf"^- (\S+): {QUOTED_DATA}: {QUOTED_DATA}")
_DEAD_END = re.compile(rf"^Led to a dead end, do not take again: (\S+) {QUOTED_DATA}$")
_PATTERN_HEAD = re.compile(r"^- ([a-z_]+): ")
_PATTERN_STEP = re.compile(rf"^  (\d+)\. (\S+)(?: ([a-z]+) {QUOTED_DATA})?(?: {QUOTED_DATA})?$")
_TRAJ = re.compile(r"^\d+\. (.*?)(?: \(on " + QUOTED_DATA + r"\))?(?: \[verified\])?$")
_RECENT = re.compile(rf"^\d+\. \[(Success|Failed)\] (\S+)(?: ([a-z]+) {QUOTED_DATA})?(?: key={QUOTED_DATA})?")
_TRIMMED = re.compile(r"^\[\.\.\. \d+ characters trimmed \.\.\.\]$")
_DIALOGS = re.compile(r"; open dialog\(s\): (.*?)(?:; starts with |$)")


def unquote(text: str) -> str:
    """A fenced item's text as it was (the escapes undone)."""
    return _UNESCAPE.sub(r"\1", text)


@dataclass(frozen=True)
class Message:
    """One message of a decision's conversation. An assistant message is one of the policy's own
    replies: its reasoning (`content`) and the tool call it made (`command`, `args`)."""

    role: str  # system | assistant | user
    content: str
    command: str | None = None
    args: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """The message as a model is sent it (a reply: its reasoning, then the call it made)."""
        if self.command is None:
            return self.content
        call = f"called {self.command}({json.dumps(self.args, sort_keys=True)})"
        return f"{self.content}\n{call}" if self.content else call


def conversation(system: str, replies: Sequence[Message], step: str) -> tuple[Message, ...]:
    """The messages of one decision: the system prompt, the policy's earlier replies, the step prompt."""
    return (Message("system", system), *replies, Message("user", step))


@dataclass(frozen=True)
class ShownStep:
    """A recorded step a memory section shows (reference trajectory, learned pattern)."""

    command: str
    role: str | None = None
    name: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShownPattern:
    """A learned pattern as LEARNED PATTERNS shows it; `position` is its place in the list (0 first)."""

    position: int
    pattern_type: str
    steps: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class RecentAction:
    """A line of "## Recent Actions": what was done and whether it worked (values are not shown)."""

    ok: bool
    command: str
    role: str | None
    name: str | None
    key: str | None
    replayed: bool


@dataclass(frozen=True)
class Reading:
    """What the two prompts of a decision tell a reader (memory parts empty with memory off)."""

    goal: str = ""
    tier1: tuple[str, ...] = ()
    domain_tips: tuple[str, ...] = ()
    patterns: tuple[ShownPattern, ...] = ()
    trajectory: tuple[ShownStep, ...] = ()
    facts: tuple[tuple[str, str, str], ...] = ()
    url: str = ""
    title: str = ""
    summary: str = ""
    text: str = ""
    elements: tuple[Element, ...] = ()
    dialogs: tuple[str, ...] = ()
    error: str | None = None
    error_tips: tuple[str, ...] = ()
    dead_ends: tuple[tuple[str, str], ...] = ()
    recent: tuple[RecentAction, ...] = ()
    warned: bool = False

    def find(self, name: str, roles: Sequence[str] | None = None, exact: bool = False) -> Element | None:
        """The element whose name is `name` (exactly, else containing it), of one of `roles`."""
        want = name.strip().lower()
        pool = [e for e in self.elements if roles is None or e.role in roles]
        hit = next((e for e in pool if e.name.strip().lower() == want), None)
        if hit is not None or exact or not want:
            return hit
        return next((e for e in pool if want in e.name.lower()), None)

    def by_identity(self, role: str, name: str) -> Element | None:
        return next((e for e in self.elements if e.role == role and e.name == name), None)


def items_of(text: str) -> list[str]:
    """A prompt's items in order: items are separated by a blank line, and a fenced block (whose
    delimiters inside are defused) is never split."""
    out: list[str] = []
    i = 0
    while i < len(text):
        j = i
        while True:
            blank = text.find("\n\n", j)
            fence = text.find(P.FENCE_OPEN, j)
            if fence != -1 and (blank == -1 or fence < blank):
                close = text.find("\n" + P.FENCE_CLOSE, fence)
                j = len(text) if close == -1 else close + 1 + len(P.FENCE_CLOSE)
                continue
            end = len(text) if blank == -1 else blank
            break
        if text[i:].startswith("## Goal\n"):
            out.append(text[i:])
            break
        out.append(text[i:end])
        i = end + 2
    return out


def _fence_body(item: str) -> tuple[str, str]:
    """(the fenced block's content, what follows the block) of one item."""
    start = item.find(P.FENCE_OPEN)
    if start == -1:
        return "", ""
    body_start = start + len(P.FENCE_OPEN) + 1
    close = item.find("\n" + P.FENCE_CLOSE, body_start - 1)
    if close == -1:
        return item[body_start:], ""
    return item[body_start:close], item[close + 1 + len(P.FENCE_CLOSE) :]


def _tips(lines: Sequence[str]) -> tuple[str, ...]:
    return tuple(unquote(m.group(1)) for line in lines if (m := _TIP.match(line)))


def _trajectory_step(line: str) -> ShownStep | None:
    m = _TRAJ.match(line)
    if m is None:
        return None
    what = m.group(1)
    target = rf"(?: (\S+) {QUOTED_DATA})?$"
    if t := re.match(rf"^(fill|type|select) {QUOTED_DATA} into{target}", what):
        key = "text" if t.group(1) == "type" else "value"
        return ShownStep(t.group(1), t.group(3), _maybe(t.group(4)), {key: unquote(t.group(2))})
    if t := re.match(rf"^press {QUOTED_DATA}(?: on (\S+) {QUOTED_DATA})?$", what):
        return ShownStep("press", t.group(2), _maybe(t.group(3)), {"key": unquote(t.group(1))})
    if t := re.match(rf"^goto {QUOTED_DATA}$", what):
        return ShownStep("goto", args={"url": unquote(t.group(1))})
    if t := re.match(rf"^wait for {QUOTED_DATA}$", what):
        return ShownStep("wait", args={"text": unquote(t.group(1))})
    if t := re.match(rf"^(\S+){target}", what):
        return ShownStep(t.group(1), t.group(2), _maybe(t.group(3)))
    return None


def _maybe(quoted: str | None) -> str | None:
    return None if quoted is None else unquote(quoted)


def _patterns(body: str) -> tuple[ShownPattern, ...]:
    """The learned patterns a section lists, each with its steps as far as they are shown whole
    and in order under its header (a section the budget cut shows the first steps only)."""
    out: list[ShownPattern] = []
    kind, steps, whole = "", list[dict[str, Any]](), False
    lines = body.split("\n")
    for k, line in enumerate(lines):
        # a line that runs into the marker of a cut (`projections.budget.truncate`) may have been cut
        # short anywhere (`fill` of `fill textbox "City"`): a reader does not act on it
        cut = k + 1 < len(lines) and bool(_TRIMMED.match(lines[k + 1]))
        if m := _PATTERN_HEAD.match(line):
            if kind:
                out.append(ShownPattern(len(out), kind, tuple(steps)))
            kind, steps, whole = m.group(1), [], True
        elif whole and not cut and (m := _PATTERN_STEP.match(line)) and int(m.group(1)) == len(steps) + 1:
            step: dict[str, Any] = {"command": m.group(2), "role": m.group(3), "name": _maybe(m.group(4))}
            if m.group(5) is not None:
                step["value"] = unquote(m.group(5))
            steps.append(step)
        else:
            whole = False
    if kind:
        out.append(ShownPattern(len(out), kind, tuple(steps)))
    return tuple(out)


def _page(body: str) -> dict[str, Any]:
    lines = body.split("\n")
    got: dict[str, Any] = {"elements": []}
    where = ""
    text: list[str] = []
    for k, line in enumerate(lines):
        if where == "text":
            text.append(line)
        elif line.startswith("URL: ") and "url" not in got:
            got["url"] = line[5:]
        elif line.startswith("Title: ") and "title" not in got:
            got["title"] = line[7:]
        elif line == "Page summary:" and k + 1 < len(lines):
            got["summary"] = lines[k + 1]
        elif line == "Clickable elements:":
            where = "elements"
        elif line == "Visible text:":
            where = "text"
        elif where == "elements" and (m := _ELEMENT.match(line)):
            got["elements"].append(Element(m.group(1), m.group(2), m.group(3) or ""))
    got["text"] = "\n".join(text)
    dialogs = _DIALOGS.search(got.get("summary", ""))
    got["dialogs"] = tuple(d.strip() for d in dialogs.group(1).split(", ")) if dialogs else ()
    return got


def read_prompts(system: str, step: str) -> Reading:
    """What a reader knows from a decision's system prompt and step prompt."""
    found: dict[str, Any] = {}
    for item in items_of(system):
        head, _, rest = item.partition("\n")
        if head == "## Goal":
            found["goal"] = rest
        elif head.startswith("## Lessons from experience"):
            found["tier1"] = _tips(rest.split("\n"))
        elif head == "Tips for this site:":
            found["domain_tips"] = _tips(rest.split("\n"))
        elif head.startswith("LEARNED PATTERNS"):
            found["patterns"] = _patterns(_fence_body(item)[0])
        elif head.startswith("REFERENCE TRAJECTORY"):
            steps = (_trajectory_step(line) for line in _fence_body(item)[0].split("\n")[2:])
            found["trajectory"] = tuple(s for s in steps if s is not None)
        elif head.startswith("APP KNOWLEDGE"):
            found["facts"] = tuple(
                (m.group(1), unquote(m.group(2)), unquote(m.group(3)))
                for line in _fence_body(item)[0].split("\n")
                if (m := _FACT.match(line))
            )
    for item in items_of(step):
        head = item.partition("\n")[0]
        if head == "Current page:":
            found.update(_page(_fence_body(item)[0]))
        elif head == "IMPORTANT - Last action failed:":
            body, after = _fence_body(item)
            found["error"] = body
            found["error_tips"] = _tips(after.split("\n"))
        elif head == "WORKING MEMORY:":
            found["dead_ends"] = tuple(
                (m.group(1), unquote(m.group(2)))
                for line in _fence_body(item)[0].split("\n")
                if (m := _DEAD_END.match(line))
            )
        elif head == "## Recent Actions":
            found["recent"] = tuple(
                RecentAction(
                    m.group(1) == "Success",
                    m.group(2),
                    m.group(3),
                    _maybe(m.group(4)),
                    _maybe(m.group(5)),
                    line.endswith("[replayed]"),
                )
                for line in _fence_body(item)[0].split("\n")
                if (m := _RECENT.match(line))
            )
        elif item == P.REPEATED_FAILURE:
            found["warned"] = True
    found["elements"] = tuple(found.get("elements", ()))
    return Reading(**found)
