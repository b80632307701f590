"""A site the bundled agent can run on without a browser: pages of named elements, a cookie
banner that intercepts clicks until it is accepted, links that navigate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtape.agent.browser import ActionResult, Element, Observation
from memtape.agent.loop import RunConfig, RunResult, run_task
from memtape.agent.policy import ScriptedPolicy
from memtape.ledger.store import SqliteStore
from memtape.projections.recording.memory import RecordingMemory

INTERCEPT = (
    'Locator.click: Timeout 1500ms exceeded. <div id="cookie-overlay" class="cookie-overlay">…</div> '
    "intercepts pointer events"
)
ACCEPT = "Accept all cookies"


class FakePage:
    def __init__(self) -> None:
        self.url = "about:blank"

    def title(self) -> str:
        return "Fake"


class CookieSite:
    """`pages`: path -> (role, name) of its elements; `links`: element name -> the path it opens.
    A cookie banner (its button "Accept all cookies" on every page until clicked, each run's
    page anew) intercepts every click on another element of the start page."""

    def __init__(
        self, pages: dict[str, list[tuple[str, str]]], links: dict[str, str], origin: str = "http://cookies.test"
    ) -> None:
        self.pages, self.links, self.origin = pages, links, origin
        self.page = FakePage()
        self.accepted = False

    def new_page(self) -> None:
        self.page = FakePage()
        self.accepted = False

    def observe(self) -> Observation:
        path = self.page.url.removeprefix(self.origin) or "/"
        named = list(self.pages.get(path, []))
        if not self.accepted and path == "/":
            named.append(("button", ACCEPT))
        elements = tuple(Element(f"e{i}", role, name) for i, (role, name) in enumerate(named, 1))
        return Observation(url=self.page.url, title="Fake", elements=elements, text="", summary="", page_type="content")

    def execute(self, command: str, args: dict[str, Any], element: Element | None = None) -> ActionResult:
        before = self.page.url
        if command == "goto":
            self.page.url = args["url"]
            return ActionResult(command, args, True, url_before=before, url_after=self.page.url)
        selector = f"#{element.name.lower().replace(' ', '-')}" if element is not None else None
        if command == "click" and element is not None:
            if element.name == ACCEPT:
                self.accepted = True
            elif not self.accepted and before.removeprefix(self.origin) in ("", "/"):
                return ActionResult(
                    command,
                    args,
                    False,
                    INTERCEPT,
                    target=element,
                    selector=selector,
                    url_before=before,
                    url_after=before,
                )
            elif element.name in self.links:
                self.page.url = self.origin + self.links[element.name]
        return ActionResult(
            command, args, True, target=element, selector=selector, url_before=before, url_after=self.page.url
        )

    def page_text(self) -> str:
        return ""

    def form_state(self) -> dict[str, str]:
        return {}

    def scroll_position(self) -> tuple[int, int]:
        return (0, 0)

    def selector_matches(self, selector: str, element: Element) -> bool:
        return selector == f"#{element.name.lower().replace(' ', '-')}"

    def stable_selector(self, element: Element) -> str:
        return f"#{element.name.lower().replace(' ', '-')}"


#: the cookie site of `cookie_runs`: a start page whose "Go" leads to a page with "Profile" and "Settings"
COOKIE_PAGES = {
    "/": [("button", "Go"), ("link", "Help"), ("link", "About"), ("link", "Contact")],
    "/done": [("link", "Home"), ("link", "Profile"), ("link", "Settings")],
    "/profile": [("link", "Home")],
    "/settings": [("link", "Home")],
}
COOKIE_LINKS = {"Go": "/done", "Profile": "/profile", "Settings": "/settings"}
#: (goal, session) of the runs `cookie_runs` makes, in order
COOKIE_GOALS = (
    ('Click "Go" and open "Profile"', "s1"),
    ('Click "Go" and open "Settings"', "s1"),
    ('Open "Help"', "s2"),
)


def cookie_runs(directory: Path, config: RunConfig | None = None) -> tuple[SqliteStore, list[RunResult]]:
    """The bundled agent (scripted policy, memory on) on the cookie site, three runs: the first
    learns the banner the hard way; the second, the same session's next rep, has the site's tip,
    its session, a reference trajectory of the first goal and its graded steps; the third is
    another session's, of another goal."""
    store = SqliteStore.open(directory / "ledger.db")
    site = CookieSite(COOKIE_PAGES, COOKIE_LINKS)
    runs = [
        run_task(
            site,
            RecordingMemory(store, directory / "projections.db"),
            ScriptedPolicy(),
            goal=goal,
            start_url="http://cookies.test/",
            session_id=session,
            config=config,
        )
        for goal, session in COOKIE_GOALS
    ]
    assert all(r.outcome.success for r in runs)
    return store, runs
