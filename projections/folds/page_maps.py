"""PageMaps of each run (seed 003's working memory `store_page_map`): per URL, the run's spatial
understanding of the page — title, summary, dimensions, and its regions (header, navigation,
content, ...) with the key elements in each.

A map stored again for the same URL replaces the earlier one (`stored` counts how often it was
stored). Maps belong to their run, kept after it completes as every projection is; forgetting a
run or session drops its maps, forgetting a domain drops the maps of its pages and of the runs
started there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forget_per_run

TYPES = ("run_started", "page_map_stored", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class PageMap:
    run_id: str
    url: str
    domain: str
    title: str
    summary: str
    total_width: int
    total_height: int
    #: each region as stored: kind, name, description, elements, start_y, end_y
    regions: tuple[dict[str, Any], ...]
    step: int | None
    occurred_at: str
    event_ids: tuple[str, ...]
    stored: int = 1


@dataclass
class PageMapsState:
    #: run_id -> url -> map, URLs in the order they were first mapped
    by_run: dict[str, dict[str, PageMap]] = field(default_factory=dict)
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> PageMapsState:
    return PageMapsState()


def apply(state: PageMapsState, ev: RecordedEvent, policy: Any = None) -> PageMapsState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    if t == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif t == "page_map_stored" and ev.run_id:
        maps = state.by_run.setdefault(ev.run_id, {})
        old = maps.get(d["url"])
        fresh = PageMap(
            run_id=ev.run_id,
            url=d["url"],
            domain=ev.domain or "",
            title=d.get("title", ""),
            summary=d.get("summary", ""),
            total_width=int(d.get("total_width", 0)),
            total_height=int(d.get("total_height", 0)),
            regions=tuple(dict(r) for r in d.get("regions") or ()),
            step=ev.step,
            occurred_at=ev.occurred_at,
            event_ids=(ev.id,),
        )
        maps[d["url"]] = (
            fresh if old is None else evolve(fresh, stored=old.stored + 1, event_ids=add_event_id(old.event_ids, ev.id))
        )
    elif t == "subject_forgotten":
        forget_per_run(state.by_run, state.session_of, d)
    return state


def of_run(state: PageMapsState, run_id: str) -> dict[str, PageMap]:
    """One run's maps, URL -> map (empty for a run that stored none)."""
    return dict(state.by_run.get(run_id, {}))


def listed(state: PageMapsState, run_id: str | None = None, domain: str | None = None) -> list[PageMap]:
    """Every map (of one run, of one domain and its subdomains), runs in the order they first stored one."""
    runs = [run_id] if run_id is not None else list(state.by_run)
    return [
        m for r in runs for m in state.by_run.get(r, {}).values() if domain is None or domain_matches(m.domain, domain)
    ]


def decode(raw: dict[str, Any]) -> PageMapsState:
    return PageMapsState(
        by_run={
            r: {
                u: build(PageMap, m, event_ids=tuple(m["event_ids"]), regions=tuple(m["regions"]))
                for u, m in maps.items()
            }
            for r, maps in raw.get("by_run", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: PageMapsState) -> dict[str, list[dict[str, Any]]]:
    return {
        "page_maps": [
            {
                "run_id": m.run_id,
                "url": m.url,
                "domain": m.domain,
                "title": m.title,
                "summary": m.summary,
                "total_width": m.total_width,
                "total_height": m.total_height,
                "regions": orjson.dumps(m.regions, option=orjson.OPT_SORT_KEYS).decode(),
                "step": m.step,
                "occurred_at": m.occurred_at,
                "stored": m.stored,
                "event_ids": orjson.dumps(m.event_ids).decode(),
            }
            for maps in state.by_run.values()
            for m in maps.values()
        ]
    }
