"""Sitemap exploration (seed 003's SitemapGraph): `memtape run --explore URL`.

The memory picks the next page (unvisited in this exploration, within the depth
limit, shallowest first) until `max_pages` are visited or none is left. Each
page is extracted through the extraction cache (a page extracted less than the
TTL ago is served from memory and logged as such, without loading it again),
marked visited with its title, summary and section count, and its links on
the same site are added to the graph with their type. The graph persists per
domain across runs; the exploration ends with its summary.

Example:
    with SitesServer() as sites, Browser(proxy=sites.proxy) as browser:
        result = explore(browser, RecordingMemory(store, path), "http://docs.test/", max_depth=2)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from memtape.agent.browser import Browser
from memtape.agent.records import finish_run, record_step
from memtape.ledger.events import EnvState, RunCompleted
from memtape.ledger.ids import short_id
from memtape.projections.folds.sitemap import next_page, summary_text
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.values import StepRecord
from memtape.projections.text import domain_of


@dataclass
class ExploreResult:
    run_id: str
    homepage_url: str
    visited: list[str] = field(default_factory=list)
    served_from_cache: list[str] = field(default_factory=list)
    discovered: int = 0
    complete: bool = False
    summary: str = ""
    #: milliseconds spent in memory
    memory_ms: float = 0.0


def page_summary(extracted: Any) -> str:
    """One line for a visited page: its first lines of text, without the title repeated."""
    page_text = extracted.text.split("\n\nLinks:\n", 1)[0]
    lines = [ln.strip() for ln in page_text.splitlines() if ln.strip() and ln.strip() != extracted.title]
    return " ".join(lines)[:300]


def explore(
    browser: Browser,
    memory: RecordingMemory,
    homepage_url: str,
    *,
    max_depth: int = 2,
    max_pages: int = 50,
    run_id: str | None = None,
    session_id: str | None = None,
) -> ExploreResult:
    """Explore a site from `homepage_url` within the limits; everything is recorded as events."""
    run_id = run_id or short_id("run")
    domain = domain_of(homepage_url)
    t0 = time.perf_counter()
    run = memory.start_run(
        goal=f"Explore {homepage_url}", start_url=homepage_url, session_id=session_id, run_id=run_id, agent="explore"
    )
    run.exploration_started(homepage_url, max_depth, max_pages)
    browser.new_page()
    result = ExploreResult(run_id, homepage_url)
    seen: set[str] = set()
    step = 0
    while True:
        site = run.sitemap(domain)
        page = next_page(site, seen) if site is not None else None
        if page is None:
            break
        seen.add(page.url)
        step += 1

        def load(url: str = page.url, depth: int = page.depth, step: int = step) -> dict[str, Any]:
            nav = browser.execute("goto", {"url": url})
            rec = StepRecord(
                step,
                "goto",
                {"url": url},
                nav.ok,
                nav.error,
                nav.url_before,
                nav.url_after,
                duration_ms=nav.duration_ms,
            )
            obs = browser.observe()
            record_step(run, rec, EnvState(url=nav.url_before), obs.env(), f"explore depth {depth}", run.take_step_ms())
            run.snapshot(obs.url, obs.title, obs.summary, browser.form_state(), browser.scroll_position(), step)
            if not nav.ok:
                return {"title": "", "text": nav.error or "", "links": []}
            data = browser.page_extract()
            links = "\n".join(f"{l['text'] or '(no text)'} -> {l['url']}" for l in data["links"])
            return {**data, "text": f"{data['text']}\n\nLinks:\n{links}" if links else data["text"]}

        got = run.extraction(f"page:{page.url}", "extract_text", page.url, load, step=step)
        (result.served_from_cache if got.served_from_cache else result.visited).append(page.url)
        run.sitemap_visited(page.url, got.title, page_summary(got), got.section_count, page.depth, step)
        same_site = [dict(l) for l in got.links if domain_of(l["url"]) == domain and l["url"] != page.url]
        unique = list({l["url"]: l for l in same_site}.values())
        run.sitemap_links(page.url, page.depth, unique, step)
    site = run.sitemap(domain)
    result.discovered = len(site.pages) if site is not None else 0
    result.complete = site is not None and not any(
        p.url not in seen and p.depth <= max_depth for p in site.pages.values()
    )
    result.summary = summary_text(site) if site is not None else ""
    run.exploration_completed(homepage_url, len(seen), result.discovered, result.complete, result.summary)
    duration = (time.perf_counter() - t0) * 1000
    outcome = RunCompleted(
        success=bool(seen),
        summary=f"Explored {len(seen)} pages of {domain}",
        reason=None,
        final_url=browser.page.url if browser.page is not None else homepage_url,
        turns=step,
        tokens_in=0,
        tokens_out=0,
        duration_ms=duration,
        policy_decisions=0,
        replayed_steps=0,
        result=result.summary[:500],
    )
    finish_run(run, outcome, learn=False)
    result.memory_ms = run.ms_total
    return result
