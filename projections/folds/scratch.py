"""The scratch pad of each run (seed 003's working memory `set_scratch` / `get_scratch`): working
data an agent keeps between cycles, read back by key within the run.

A key set again holds its latest value (`writes` counts how often it was set). The pad belongs to
its run: it is kept after the run completes, as every projection is (so `state scratch --run R`
and audits show it), but no other run reads it. Forgetting a run or session drops its pad;
forgetting a domain drops what was set on that site and the pads of the runs started there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forget_per_run

TYPES = ("run_started", "scratch_set", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class ScratchEntry:
    run_id: str
    key: str
    #: the latest value set (any JSON value)
    value: Any
    domain: str
    step: int | None
    occurred_at: str
    event_ids: tuple[str, ...]
    writes: int = 1


@dataclass
class ScratchState:
    #: run_id -> key -> entry, keys in the order they were first set
    by_run: dict[str, dict[str, ScratchEntry]] = field(default_factory=dict)
    #: run_id -> session_id, so that forgetting a session forgets its runs' pads
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> ScratchState:
    return ScratchState()


def apply(state: ScratchState, ev: RecordedEvent, policy: Any = None) -> ScratchState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    if t == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif t == "scratch_set" and ev.run_id:
        pad = state.by_run.setdefault(ev.run_id, {})
        old = pad.get(d["key"])
        fresh = ScratchEntry(
            run_id=ev.run_id,
            key=d["key"],
            value=d.get("value"),
            domain=ev.domain or "",
            step=ev.step,
            occurred_at=ev.occurred_at,
            event_ids=(ev.id,),
        )
        pad[d["key"]] = (
            fresh if old is None else evolve(fresh, writes=old.writes + 1, event_ids=add_event_id(old.event_ids, ev.id))
        )
    elif t == "subject_forgotten":
        forget_per_run(state.by_run, state.session_of, d)
    return state


def pad(state: ScratchState, run_id: str) -> dict[str, ScratchEntry]:
    """One run's scratch pad, key -> entry (empty for a run that set nothing)."""
    return dict(state.by_run.get(run_id, {}))


def listed(state: ScratchState, run_id: str | None = None, domain: str | None = None) -> list[ScratchEntry]:
    """Every entry (of one run, of one domain and its subdomains), runs in the order they first set one."""
    runs = [run_id] if run_id is not None else list(state.by_run)
    return [
        e for r in runs for e in state.by_run.get(r, {}).values() if domain is None or domain_matches(e.domain, domain)
    ]


def decode(raw: dict[str, Any]) -> ScratchState:
    return ScratchState(
        by_run={
            r: {k: build(ScratchEntry, e, event_ids=tuple(e["event_ids"])) for k, e in entries.items()}
            for r, entries in raw.get("by_run", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: ScratchState) -> dict[str, list[dict[str, Any]]]:
    return {
        "scratch": [
            {
                "run_id": e.run_id,
                "key": e.key,
                "value": orjson.dumps(e.value, option=orjson.OPT_SORT_KEYS).decode(),
                "domain": e.domain,
                "step": e.step,
                "occurred_at": e.occurred_at,
                "writes": e.writes,
                "event_ids": orjson.dumps(e.event_ids).decode(),
            }
            for entries in state.by_run.values()
            for e in entries.values()
        ]
    }
