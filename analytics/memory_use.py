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
- **used**, by counterfactual (`memtape credit`, its `item_credited` events): a
  decision uses memory only where the policy, asked again without one of the
  memory items it was shown, decides otherwise (the item's `changed_steps`); a
  prompt section of that call is used when it held such an item. What a
  decision's reason names counts for nothing. A replayed step of a recorded
  trajectory (which asks no model at all) uses memory. A run never credited has
  no counterfactual: none of its decisions is counted as using memory, and
  `MemoryUse.credited_runs` says how many runs were.

Usage::

    use = run_memory_use(store.read(run_id=run_id, types=list(TYPES)))
    use.tokens, use.by_source, use.used_share, use.decisions_using_memory
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.store import Store

#: the events the figures are read from
TYPES = ("context_built", "step_recorded", "item_credited")
#: how a step was decided; a backtrack is the agent's own move, not a decision
DECIDED_BY = ("policy", "replay", "approval")


def is_memory(item: Mapping[str, Any]) -> bool:
    """A prompt item that came from memory: it names the events it came from."""
    return bool(item.get("event_ids"))


@dataclass
class MemoryUse:
    """A run's (or several runs') memory tokens by source, the tokens of sections a decision used,
    and how many decisions used memory."""

    by_source: dict[str, int] = field(default_factory=dict)
    used_by_source: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    decisions_using_memory: int = 0
    #: runs whose decisions were asked again without each item (`memtape credit`)
    credited_runs: int = 0

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
        self.credited_runs += other.credited_runs
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


def changed_by_credit(events: Iterable[RecordedEvent]) -> dict[tuple[str, int], set[str]]:
    """(run, step) -> the prompt sections holding an item that changed that step's decision, from the
    latest `item_credited` of each (item, run)."""
    latest: dict[tuple[str, str], RecordedEvent] = {}
    for ev in events:
        if ev.type == "item_credited":
            latest[(ev.data["item"], ev.data["credited_run"])] = ev
    out: dict[tuple[str, int], set[str]] = {}
    for (_, run), ev in latest.items():
        for changed in ev.data.get("changed_steps") or ():
            out.setdefault((run, int(changed["step"])), set()).update(changed.get("sections") or ())
    return out


def reads(events: Iterable[RecordedEvent]) -> tuple[list[Read], list[Decision]]:
    """Every memory item each call read, and every decision, of the runs in `events` (in seq order;
    their `item_credited` events say which decisions memory changed)."""
    system: dict[str | None, list[Mapping[str, Any]]] = {}
    calls: dict[tuple[str | None, int], list[list[Mapping[str, Any]]]] = {}
    decided: dict[tuple[str | None, int], RecordedEvent] = {}
    credits: list[RecordedEvent] = []
    for ev in events:
        if ev.type == "context_built":
            items = [i for i in ev.data.get("items") or () if is_memory(i)]
            if ev.data.get("prompt") == "system":
                system[ev.run_id] = items
            else:
                calls.setdefault((ev.run_id, ev.step or 0), []).append([*system.get(ev.run_id, ()), *items])
        elif ev.type == "step_recorded" and ev.data.get("decided_by", "policy") in DECIDED_BY:
            decided[(ev.run_id, ev.step or 0)] = ev
        elif ev.type == "item_credited":
            credits.append(ev)
    changed = changed_by_credit(credits)
    out: list[Read] = []
    for (run_id, step), prompts in calls.items():
        sections = changed.get((run_id or "", step), set())
        out += [
            Read(run_id, step, str(i.get("source")), int(i.get("tokens") or 0), str(i.get("source")) in sections)
            for items in prompts
            for i in items
        ]
    return out, [
        Decision(
            run_id,
            step,
            str(ev.data.get("decided_by", "policy")),
            ev.data.get("decided_by") == "replay" or (run_id or "", step) in changed,
        )
        for (run_id, step), ev in decided.items()
    ]


def run_memory_use(events: Iterable[RecordedEvent]) -> MemoryUse:
    """The figures of the runs in `events` together."""
    events = list(events)
    got, decisions = reads(events)
    use = MemoryUse(
        decisions=len(decisions),
        decisions_using_memory=sum(d.used_memory for d in decisions),
        credited_runs=len({ev.data["credited_run"] for ev in events if ev.type == "item_credited"}),
    )
    for r in got:
        use.by_source[r.source] = use.by_source.get(r.source, 0) + r.tokens
        if r.used:
            use.used_by_source[r.source] = use.used_by_source.get(r.source, 0) + r.tokens
    return use


def memory_use(store: Store, run_ids: Iterable[str]) -> MemoryUse:
    """The figures of `run_ids` together, read from the ledger run by run."""
    credits: dict[str, list[RecordedEvent]] = {}
    for ev in store.read(types=["item_credited"]):
        credits.setdefault(ev.data["credited_run"], []).append(ev)
    total = MemoryUse()
    for run_id in run_ids:
        total.add(run_memory_use([*store.read(run_id=run_id, types=list(TYPES)), *credits.get(run_id, ())]))
    return total
