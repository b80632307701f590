"""The sitemap graph (seed 003's SitemapGraph), per domain, kept across runs.

`exploration_started` sets the limits (max depth, max pages) of a new
exploration of the domain; `sitemap_links_discovered` adds pages (with the
link's text and type: main_nav, content, footer) one level below their
parent; `sitemap_page_visited` marks a page visited with its title, summary
and section count. `next_page` picks the next page to visit — unvisited, within
the depth limit, shallowest first, then in discovery order — until
`max_pages` pages were visited in this exploration; `complete` says when
there is none. `exploration_completed` records the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, domain_matches, evolve

TYPES = (
    "exploration_started",
    "sitemap_links_discovered",
    "sitemap_page_visited",
    "exploration_completed",
    "subject_forgotten",
)


@dataclass(frozen=True, slots=True)
class SitePage:
    url: str
    domain: str
    depth: int
    title: str
    summary: str
    section_count: int
    visited: bool
    link_text: str
    link_type: str
    discovered_from: str | None
    order: int
    event_ids: tuple[str, ...]
    visited_at: str | None = None


@dataclass(frozen=True, slots=True)
class SiteMap:
    domain: str
    homepage_url: str
    max_depth: int
    max_pages: int
    visited_this_exploration: int
    explorations: int
    complete: bool
    summary: str
    pages: dict[str, SitePage]


@dataclass
class SitemapState:
    by_domain: dict[str, SiteMap] = field(default_factory=dict)


def empty() -> SitemapState:
    return SitemapState()


def _site(state: SitemapState, domain: str) -> SiteMap:
    return state.by_domain.get(domain) or SiteMap(domain, "", 2, 50, 0, 0, False, "", {})


def apply(state: SitemapState, ev: RecordedEvent, policy: Any = None) -> SitemapState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    domain = ev.domain or ""
    if t == "exploration_started":
        site = _site(state, domain)
        pages = dict(site.pages)
        home = d["homepage_url"]
        if home not in pages:
            pages[home] = SitePage(home, domain, 0, "", "", 0, False, "", "homepage", None, len(pages), (ev.id,))
        state.by_domain[domain] = evolve(
            site,
            homepage_url=home,
            max_depth=int(d["max_depth"]),
            max_pages=int(d["max_pages"]),
            visited_this_exploration=0,
            explorations=site.explorations + 1,
            complete=False,
            pages=pages,
        )
    elif t == "sitemap_links_discovered":
        site = _site(state, domain)
        pages = dict(site.pages)
        depth = int(d["depth"]) + 1
        for link in d.get("links") or ():
            url = link["url"]
            old = pages.get(url)
            if old is None:
                pages[url] = SitePage(
                    url,
                    domain,
                    depth,
                    "",
                    "",
                    0,
                    False,
                    link.get("text", ""),
                    link.get("link_type", "content"),
                    d["parent_url"],
                    len(pages),
                    (ev.id,),
                )
            elif depth < old.depth:
                pages[url] = evolve(
                    old, depth=depth, discovered_from=d["parent_url"], event_ids=add_event_id(old.event_ids, ev.id)
                )
        state.by_domain[domain] = evolve(site, pages=pages)
    elif t == "sitemap_page_visited":
        site = _site(state, domain)
        pages = dict(site.pages)
        url = d["url"]
        old = pages.get(url) or SitePage(
            url, domain, int(d.get("depth", 0)), "", "", 0, False, "", "content", None, len(pages), ()
        )
        pages[url] = evolve(
            old,
            title=d.get("title", ""),
            summary=d.get("summary", ""),
            section_count=int(d.get("section_count", 0)),
            visited=True,
            visited_at=ev.occurred_at,
            event_ids=add_event_id(old.event_ids, ev.id),
        )
        state.by_domain[domain] = evolve(site, pages=pages, visited_this_exploration=site.visited_this_exploration + 1)
    elif t == "exploration_completed":
        site = _site(state, domain)
        state.by_domain[domain] = evolve(site, complete=bool(d["complete"]), summary=d.get("summary", ""))
    elif t == "subject_forgotten" and d["subject_kind"] == "domain":
        for dom in [k for k in state.by_domain if domain_matches(k, d["subject"])]:
            del state.by_domain[dom]
    return state


def next_page(site: SiteMap, visited_now: set[str] | frozenset[str] = frozenset()) -> SitePage | None:
    """The next page to visit in this exploration, or None when it is complete: unvisited in this
    exploration (`visited_now`), within max_depth, shallowest first, then in discovery order."""
    if site.visited_this_exploration >= site.max_pages:
        return None
    todo = [p for p in site.pages.values() if p.url not in visited_now and p.depth <= site.max_depth]
    return min(todo, key=lambda p: (p.depth, p.order)) if todo else None


def summary_text(site: SiteMap) -> str:
    """Seed 003's format_site_exploration_summary: the visited pages, shallowest first."""
    visited = sorted((p for p in site.pages.values() if p.visited), key=lambda p: (p.depth, p.order))
    lines = [f"Explored pages ({len(visited)} total) of {site.domain}:"]
    lines += [
        f"  - {p.title or p.url}: {p.summary[:120]} ({p.section_count} sections, depth {p.depth})" for p in visited
    ]
    return "\n".join(lines)


def pages(state: SitemapState, domain: str | None = None) -> list[SitePage]:
    doms = [d for d in sorted(state.by_domain) if domain is None or domain_matches(d, domain)]
    return [p for d in doms for p in sorted(state.by_domain[d].pages.values(), key=lambda p: (p.depth, p.order))]


def decode(raw: dict[str, Any]) -> SitemapState:
    return SitemapState(
        by_domain={
            dom: build(
                SiteMap,
                s,
                pages={u: build(SitePage, p, event_ids=tuple(p["event_ids"])) for u, p in s["pages"].items()},
            )
            for dom, s in raw.get("by_domain", {}).items()
        }
    )


def tables(state: SitemapState) -> dict[str, list[dict[str, Any]]]:
    return {
        "sitemap": [
            {
                "domain": p.domain,
                "url": p.url,
                "depth": p.depth,
                "title": p.title,
                "summary": p.summary,
                "section_count": p.section_count,
                "visited": int(p.visited),
                "link_text": p.link_text,
                "link_type": p.link_type,
                "discovered_from": p.discovered_from,
                "visited_at": p.visited_at,
                "event_ids": orjson.dumps(p.event_ids).decode(),
            }
            for p in pages(state)
        ]
    }
