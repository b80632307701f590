"""Failure→recovery by outcome (issue 34 item 5): memory learns the step after which the failed
command worked on the same target, never a step that "succeeded" and left the failure in place."""

from __future__ import annotations

from pathlib import Path

import memtape
from memtape.api import Memory

INTERCEPT = '<div id="cookie-banner"> intercepts pointer events'
SITES = [f"shop{n}.example" for n in range(1, 7)]


def escape_that_does_nothing(mem: Memory, site: str) -> None:
    """Escape "succeeds" but the same click fails again; "Accept all" clears the banner."""
    url = f"http://{site}/"
    with mem.start_run(goal='Open "Wool Socks"', start_url=url) as run:
        run.record_step(step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT)
        run.record_step(step=2, action="press", args={"key": "Escape"})
        run.record_step(step=3, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT)
        run.record_step(step=4, action="click", target='button "Accept all"')
        run.record_step(step=5, action="click", target='link "Wool Socks"', url_after=url + "socks")
        run.finish(success=True, outcome="socks page open")


def test_six_sites_teach_accept_all_and_never_escape(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        for site in SITES:
            escape_that_does_nothing(mem, site)
        lessons = mem.state("lessons")
        assert not any("Escape" in l["lesson"] and l["source"] == "learned" for l in lessons)
        site_tips = {l["scope_domain"]: l["lesson"] for l in lessons if l["category"] == "site_specific"}
        assert sorted(site_tips) == SITES
        assert all('"Accept all"' in text for text in site_tips.values())
        assert list(mem.store.read(types=["lesson_promoted"])) == []
        tier1 = [l["lesson"] for l in lessons if l["category"] in ("best_practice", "tool_fallback")]
        assert all(l["source"] == "seed" for l in lessons if l["lesson"] in tier1)


def test_escape_that_cleared_the_banner_is_learned_once_per_site(tmp_path: Path) -> None:
    """The same six sites where Escape did clear the banner: the Escape recovery is learned, deduplicated
    across sites and promoted as seed 001's third example describes, so the test above can fail."""
    with memtape.open(tmp_path / "mem") as mem:
        for site in SITES:
            url = f"http://{site}/"
            with mem.start_run(goal='Open "Wool Socks"', start_url=url) as run:
                run.record_step(step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT)
                run.record_step(step=2, action="press", args={"key": "Escape"})
                run.record_step(step=3, action="click", target='link "Wool Socks"', url_after=url + "socks")
                run.finish(success=True, outcome="socks page open")
        learned = [l for l in mem.state("lessons") if l["source"] == "learned"]
        (escape,) = [l for l in learned if "press(key='Escape')" in l["lesson"]]
        assert escape["use_count"] == 6 and sorted(escape["triggered_domains"]) == SITES
        promoted = [e.data["lesson_id"] for e in mem.store.read(types=["lesson_promoted"])]
        assert promoted == [escape["lesson_id"]]
