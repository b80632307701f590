"""The HTML report opened in real Chromium, and `watch` keeping projections.db current."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from memtape.agent.browser import CHROMIUM, LAUNCH_FLAGS
from memtape.analytics.report import build_report
from memtape.analytics.watch import ProjectedChange, follow_projections
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import LessonRecorded, RunStarted, SubjectForgotten
from memtape.ledger.store import SqliteStore
from memtape.projections.view import MemoryView
from tests.analytics_builders import learning_ledger
from tests.cli_runner import run_cli


@pytest.mark.browser
def test_report_opens_in_chromium(memory_path: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    clock = SteppingClock()
    store = SqliteStore.open(memory_path / "ledger.db", clock=clock)
    learning_ledger(store, clock, runs=5, forget_domain="d.test")
    long_goal = "Open the archive, " + "then find the article about the river clean-up and read it, " * 6 + "done"
    store.append(
        [
            event(
                RunStarted(goal=long_goal, start_url="http://news.test/" + "a" * 200),
                run_id="long_run",
                domain="news.test",
            )
        ]
    )
    store.close()
    out = tmp_path / "report"
    res = run_cli("--memory-dir", str(memory_path), "report", "--out", str(out))
    assert res.code == 0, res.err
    page_path = out / "report.html"
    text = page_path.read_text()
    assert "d.test" not in text and "run3" not in text  # forgotten, with the runs on it
    assert "<script" not in text and "src='http" not in text and 'src="http' not in text  # self-contained
    assert sorted(p.name for p in out.glob("*.png")) == sorted(
        ["promotions.png", "decay.png", "recall.png", "memory-effect.png", "runs.png", "credit.png"]
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            images = page.evaluate("Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth])")
            widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            # every table title is followed by a table with data rows or by the sentence saying why not
            sections = page.evaluate("""Array.from(document.querySelectorAll('h3')).map(h => {
                const next = h.nextElementSibling;
                return [h.textContent, next.tagName, next.tagName === 'TABLE' ? next.rows.length : 0,
                        next.textContent];
            })""")
            empty_tables = page.evaluate(
                "Array.from(document.querySelectorAll('table')).filter(t => t.rows.length < 2).length"
            )
            goal_cell = page.evaluate("""(() => { const td = Array.from(document.querySelectorAll('td'))
                .find(c => c.textContent.startsWith('Open the archive')); return [td.offsetHeight, td.offsetWidth]; })()""")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert len(images) == 6 and all(done and width > 0 for _, done, width in images), images
    assert widths[0] <= widths[1] == 1280, widths  # read top to bottom: no sideways scrolling at 1,280 px
    assert empty_tables == 0
    for title, tag, rows, said in sections:
        assert (tag == "TABLE" and rows >= 2) or (tag == "P" and said.endswith(".") and len(said) > 10), title
    titles = [title for title, *_ in sections]
    assert len(titles) == len(set(titles))  # one title per table
    assert goal_cell[0] > 30 and goal_cell[1] < 900  # the long goal wraps in its column
    assert "no rows" not in text and not re.search(
        r"<td[^>]*>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\.\d", text
    )  # human times
    assert shot.stat().st_size > 10_000


def test_report_of_an_empty_ledger_still_draws(memory_path: Path, tmp_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db")
    path = build_report(store, tmp_path / "r")
    store.close()
    page = path.read_text()
    assert path.exists() and "no rows" not in page and "No run was started in this ledger." in page
    assert all(
        (tmp_path / "r" / f"{n}.png").read_bytes()[:4] == b"\x89PNG"
        for n in ("promotions", "decay", "recall", "memory-effect", "runs")
    )


def test_watch_keeps_projections_current(memory_path: Path) -> None:
    clock = SteppingClock()
    ledger = memory_path / "ledger.db"
    proj = memory_path / "projections.db"
    writer_store = SqliteStore.open(ledger, clock=clock)
    learning_ledger(writer_store, clock, runs=2)
    reader = SqliteStore.open(ledger)
    changes: list[ProjectedChange] = []
    stop = threading.Event()
    n_new = 3
    thread = threading.Thread(
        target=lambda: follow_projections(reader, proj, on_change=changes.append, stop=stop, max_events=n_new),
        daemon=True,
    )
    thread.start()
    time.sleep(0.5)
    lid = "lsn_watch"
    appended = writer_store.append(
        [
            event(
                LessonRecorded(lesson_id=lid, lesson="Scroll first", category="site_specific", scope_domain="a.test"),
                domain="a.test",
            )
        ]
    )
    appended += writer_store.append(
        [
            event(
                LessonRecorded(lesson_id="lsn_other", lesson="Wait", category="best_practice", failed_command="wait"),
                domain="a.test",
            ),
            event(SubjectForgotten(subject_kind="lesson", subject=lid)),
        ]
    )
    thread.join(timeout=20)
    stop.set()
    assert not thread.is_alive()
    assert [c.seq for c in changes] == [e.seq for e in appended]
    assert changes[0].changes == [f"lesson {lid}: new (site_specific, used 1x)"]
    assert changes[2].changes == ["forgot a lesson: removed 1 item(s) (lesson)"]
    assert all(c.projected_at > 0 for c in changes)
    # projections.db is at the head: opening a view there needs no catch-up and sees the changes
    view = MemoryView.open(reader, proj)
    assert view.head == appended[-1].seq and view.lesson(lid) is None and view.lesson("lsn_other") is not None
    reader.close()
    writer_store.close()
