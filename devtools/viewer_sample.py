"""A small memory for the viewer's tests, screenshots and docs, built through the public API.

Two runs on shop.example: the first clicks a link an overlay intercepts, presses Escape, accepts
the cookies and learns from it (a recovery lesson, a site tip, a fact, selectors, a trajectory);
the second recalls the site tip at step 1, shows it in its prompt (the budget trimming a
lower-priority item) and records a hostile lesson and fact whose text is HTML and script; the
tip is credited on it (an `item_credited` event as `memtape credit` writes). A
third run, on docs.example, fails and is still a separate site for the filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import memtape
from memtape.ledger.events import ItemCredited

SHOP = "https://shop.example/"
INTERCEPT = "element <div class=cookie-banner> intercepts pointer events"
#: memory text that would run if a page rendered it as HTML
HOSTILE_LESSON = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script> close it"
HOSTILE_FACT = "<script>document.title='pwned'</script>"
BANNER_TIP = "Close the newsletter banner at the bottom before scrolling to the footer."


@dataclass(frozen=True)
class Sample:
    """What the sample holds, for the tests' expectations."""

    teacher: str  #: the run that learned the site tip
    learner: str  #: the run that recalled it at step 1
    failed: str  #: a failed run on another site
    tip: str  #: the site tip's lesson id
    tip_text: str
    hostile: str  #: the hostile lesson's id
    banner: str  #: the banner tip's lesson id
    timing: str  #: the fact "search results appear after 2 s": contradicted, then confirmed


def build(location: Path) -> Sample:
    """Write the sample into the memory directory `location` (new) and describe it."""
    with memtape.open(location) as mem:
        with mem.start_run(goal='Open "Wool Socks"', start_url=SHOP, session_id="shop-session") as teacher:
            teacher.recall_domain(step=1)
            teacher.record_step(
                step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT, selector="#socks"
            )
            teacher.recall_error(command="click", error=INTERCEPT, step=1)
            teacher.record_step(step=2, action="press", args={"key": "Escape"})
            teacher.record_step(step=3, action="click", target='button "Accept all cookies"', selector="#accept")
            teacher.record_step(
                step=4, action="click", target='link "Wool Socks"', selector="#socks", url_after=SHOP + "socks"
            )
            banner = teacher.record_lesson(BANNER_TIP, "site_specific", scope_domain="shop.example", step=4)
            teacher.observe_fact(kind="timing", key="search results", value="appear after 2 s", step=4)
            teacher.finish(success=True, outcome="socks page open")
        with mem.start_run(goal='Open "Wool Socks" again', start_url=SHOP, session_id="shop-session") as learner:
            tips = learner.recall_domain(step=1)
            tip = next(t for t in tips if "Accept all cookies" in t.text)
            learner.record_context(
                items=[
                    {"source": "domain_tips", "text": tip.text, "priority": 40, "event_ids": list(tip.event_ids)},
                    {"source": "goal", "text": 'Open "Wool Socks" again', "priority": 50, "event_ids": []},
                ],
                trimmed=[{"source": "page_text", "text": "Wool Socks · Cotton Socks · " * 20, "priority": 10}],
                step=1,
                budget=120,
            )
            learner.record_step(step=1, action="click", target='button "Accept all cookies"', selector="#accept")
            learner.record_step(
                step=2, action="click", target='link "Wool Socks"', selector="#socks", url_after=SHOP + "socks"
            )
            hostile = learner.record_lesson(HOSTILE_LESSON, "site_specific", scope_domain="shop.example", step=2)
            learner.observe_fact(kind="quirk", key="footer note", value=HOSTILE_FACT, step=2)
            learner.observe_fact(kind="timing", key="search results", value="appear after 5 s", step=2)
            learner.observe_fact(kind="timing", key="search results", value="appear after 2 s", step=2)
            learner.finish(success=True, outcome="socks page open")
        with mem.start_run(goal="Find the changelog", start_url="https://docs.example/") as failed:
            failed.record_step(step=1, action="click", target='link "Changelog"', ok=False, error="no such element")
            failed.finish(success=False, outcome="gave up", reason="not found")
        # what `memtape credit` records: the tip, asked again without it at the learner's step 1
        credit = {"item": tip.lesson_id, "kind": "lesson", "text": tip.text, "credited_run": learner.run_id}
        credit |= {"method": "exact", "shown": 1, "changed": 1, "turns_saved": 2, "tokens_saved": 180}
        mem.append([mem.event(ItemCredited, credit)])
        timing = next(f.fact_id for f in mem.state("facts") if f.value == "appear after 2 s")
    return Sample(teacher.run_id, learner.run_id, failed.run_id, tip.lesson_id, tip.text, hostile, banner, timing)
