"""Selector cache (seed 000): element identity (role + accessible name) -> selectors,
ranked by success count; failures are counted too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forgotten_runs

TYPES = ("selector_succeeded", "selector_failed", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class SelectorEntry:
    domain: str
    role: str
    name: str
    selector: str
    successes: int
    failures: int
    last_used: str
    event_ids: tuple[str, ...]
    #: the run that first used it (its element name came from that run's pages)
    first_run: str | None = None


_selector_entry = constructor(SelectorEntry)


@dataclass
class SelectorsState:
    #: domain -> "role\x1fname\x1fselector" -> entry
    by_domain: dict[str, dict[str, SelectorEntry]] = field(default_factory=dict)


def empty() -> SelectorsState:
    return SelectorsState()


def entry_key(data: dict[str, Any]) -> str:
    return f"{data['role']}\x1f{data['name']}\x1f{data['selector']}"


def apply(state: SelectorsState, ev: RecordedEvent, policy: Any = None) -> SelectorsState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    if ev.type in ("selector_succeeded", "selector_failed"):
        domain = ev.domain or ""
        entries = state.by_domain.setdefault(domain, {})
        key = entry_key(d)
        ok = ev.type == "selector_succeeded"
        old = entries.get(key)
        if old is None:
            entries[key] = _selector_entry(
                domain, d["role"], d["name"], d["selector"], int(ok), int(not ok), ev.occurred_at, (ev.id,), ev.run_id
            )
        else:
            entries[key] = evolve(
                old,
                successes=old.successes + ok,
                failures=old.failures + (not ok),
                last_used=ev.occurred_at,
                event_ids=add_event_id(old.event_ids, ev.id),
            )
    elif ev.type == "subject_forgotten" and d["subject_kind"] == "domain":
        for dom in [k for k in state.by_domain if domain_matches(k, d["subject"])]:
            del state.by_domain[dom]
    elif ev.type == "subject_forgotten" and d["subject_kind"] in ("run", "session"):
        runs = forgotten_runs(d)
        for dom, entries in list(state.by_domain.items()):
            for key in [k for k, e in entries.items() if e.first_run in runs]:
                del entries[key]
            if not entries:
                del state.by_domain[dom]
    return state


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"by_domain": 2}


def touched(state: SelectorsState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    if ev.type in ("selector_succeeded", "selector_failed"):
        d = ev.data
        return [("by_domain", ev.domain or "", entry_key(d))]
    return None


def best_selector_first(e: SelectorEntry) -> tuple[str, str, str, int, int, str]:
    """Where a selector ranks: by domain and element, most successes, fewest failures."""
    return (e.domain, e.role, e.name, -e.successes, e.failures, e.selector)


def ranked(state: SelectorsState, domain: str | None = None) -> list[SelectorEntry]:
    """Per element identity, best selector first: most successes, fewest failures."""
    doms = [domain] if domain is not None else sorted(state.by_domain)
    out = [e for dom in doms for e in state.by_domain.get(dom, {}).values()]
    out.sort(key=best_selector_first)
    return out


def known_good(entries: list[SelectorEntry]) -> list[SelectorEntry]:
    """Seed 000's KNOWN SELECTORS are known-good: a selector that never succeeded is not one."""
    return [e for e in entries if e.successes > 0]


def decode(raw: dict[str, Any]) -> SelectorsState:
    return SelectorsState(
        by_domain={
            dom: {k: build(SelectorEntry, r, event_ids=tuple(r["event_ids"])) for k, r in rows.items()}
            for dom, rows in raw.get("by_domain", {}).items()
        }
    )


def tables(state: SelectorsState) -> dict[str, list[dict[str, Any]]]:
    rows = [
        {
            "domain": e.domain,
            "role": e.role,
            "name": e.name,
            "selector": e.selector,
            "successes": e.successes,
            "failures": e.failures,
            "last_used": e.last_used,
            "event_ids": orjson.dumps(e.event_ids).decode(),
        }
        for entries in state.by_domain.values()
        for e in entries.values()
    ]
    return {"selectors": rows}
