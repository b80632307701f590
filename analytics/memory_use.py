"""What memory costs a run's prompts, and what of it the decisions used.

Read off the log alone, for any agent that records its prompts (`context_built`)
and its steps (`step_recorded`), so the demo and `memtape analytics
memory-effect` give the same figures:

- **memory tokens**: the tokens of the prompt items that came from memory — an
  item naming the events it came from (a lesson, a fact, a trajectory, a graded
  step...); the page, the agent's own instruction and its recent actions name
  none. An item counts whole. Every model call reads its step prompt and the
  system prompt in force (the latest `context_built` of prompt `system`), so a
  system prompt's memory counts once per call, as a model reads it.
- **used**: an item of a call's kept prompt is used when the decision's recorded
  reason (`think`) names it — its source (`domain_tips`, `tier1`...) or one of
  its event ids. A decision uses memory when it names such an item, or when it
  is a replayed step of a recorded trajectory (which asks no model at all).

Usage::

    use = run_memory_use(store.read(run_id=run_id, types=list(TYPES)))
    use.tokens, use.by_source, use.used_share, use.decisions_using_memory
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.store import Store

#: the events the figures are read from
TYPES = ("context_built", "step_recorded")
#: how a step was decided; a backtrack is the agent's own move, not a decision
DECIDED_BY = ("policy", "replay", "approval")


def is_memory(item: Mapping[str, Any]) -> bool:
    """A prompt item that came from memory: it names the events it came from."""
    return bool(item.get("event_ids"))


def names(reason: str, item: Mapping[str, Any]) -> bool:
    """Whether a decision's reason names a prompt item: its source as a word, or one of its event ids."""
    source = str(item.get("source") or "")
    if source and re.search(rf"(?<![\w-]){re.escape(source)}(?![\w-])", reason):
        return True
    return any(str(i) in reason for i in item.get("event_ids") or ())


@dataclass
class MemoryUse:
    """A run's (or several runs') memory tokens by source, the tokens of sections a decision used,
    and how many decisions used memory."""

    by_source: dict[str, int] = field(default_factory=dict)
    used_by_source: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    decisions_using_memory: int = 0

    @property
    def tokens(self) -> int:
        return sum(self.by_source.values())

    @property
    def used_tokens(self) -> int:
        return sum(self.used_by_source.values())

    @property
    def used_share(self) -> float | None:
        """Share of memory tokens in sections a decision used (None when memory gave nothing)."""
        return self.used_tokens / self.tokens if self.tokens else None

    def add(self, other: MemoryUse) -> MemoryUse:
        for mine, theirs in ((self.by_source, other.by_source), (self.used_by_source, other.used_by_source)):
            for source, tokens in theirs.items():
                mine[source] = mine.get(source, 0) + tokens
        self.decisions += other.decisions
        self.decisions_using_memory += other.decisions_using_memory
        return self


@dataclass(frozen=True)
class Read:
    """One memory item one model call read, and whether the decision of its step named it."""

    run_id: str | None
    step: int
    source: str
    tokens: int
    used: bool


@dataclass(frozen=True)
class Decision:
    """One decided step: who decided it and whether it used memory."""

    run_id: str | None
    step: int
    decided_by: str
    used_memory: bool


def reads(events: Iterable[RecordedEvent]) -> tuple[list[Read], list[Decision]]:
    """Every memory item each call read, and every decision, of the runs in `events` (in seq order)."""
    system: dict[str | None, list[Mapping[str, Any]]] = {}
    calls: dict[tuple[str | None, int], list[list[Mapping[str, Any]]]] = {}
    decided: dict[tuple[str | None, int], RecordedEvent] = {}
    for ev in events:
        if ev.type == "context_built":
            items = [i for i in ev.data.get("items") or () if is_memory(i)]
            if ev.data.get("prompt") == "system":
                system[ev.run_id] = items
            else:
                calls.setdefault((ev.run_id, ev.step or 0), []).append([*system.get(ev.run_id, ()), *items])
        elif ev.type == "step_recorded" and ev.data.get("decided_by", "policy") in DECIDED_BY:
            decided[(ev.run_id, ev.step or 0)] = ev
    out: list[Read] = []
    for (run_id, step), prompts in calls.items():
        reason = str((decided[(run_id, step)].data.get("think") or "") if (run_id, step) in decided else "")
        out += [
            Read(run_id, step, str(i.get("source")), int(i.get("tokens") or 0), names(reason, i))
            for items in prompts
            for i in items
        ]
    named = {(r.run_id, r.step) for r in out if r.used}
    return out, [
        Decision(
            run_id,
            step,
            str(ev.data.get("decided_by", "policy")),
            ev.data.get("decided_by") == "replay" or (run_id, step) in named,
        )
        for (run_id, step), ev in decided.items()
    ]


def run_memory_use(events: Iterable[RecordedEvent]) -> MemoryUse:
    """The figures of the runs in `events` together."""
    got, decisions = reads(events)
    use = MemoryUse(decisions=len(decisions), decisions_using_memory=sum(d.used_memory for d in decisions))
    for r in got:
        use.by_source[r.source] = use.by_source.get(r.source, 0) + r.tokens
        if r.used:
            use.used_by_source[r.source] = use.used_by_source.get(r.source, 0) + r.tokens
    return use


def memory_use(store: Store, run_ids: Iterable[str]) -> MemoryUse:
    """The figures of `run_ids` together, read from the ledger run by run."""
    total = MemoryUse()
    for run_id in run_ids:
        total.add(run_memory_use(store.read(run_id=run_id, types=list(TYPES))))
    return total
