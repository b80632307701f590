"""The browser: headless Debian Chromium through Playwright, observed and driven by refs.

Observation uses Playwright's AI snapshot (`page.aria_snapshot(mode="ai")`):
every interactive element gets a `[ref=eN]` that an `aria-ref=eN` locator
accepts, so the policy names elements by ref and the ledger records them by
role and name (stable across page loads, unlike refs).

Errors are kept with their substance ("... intercepts pointer events",
"Element is not an <input> ..."): lessons are learned from exactly those
words. Timeouts are short so a blocked click fails in 1.5 s, not 30 s.
Values typed into password fields are flagged `sensitive` so the event layer
redacts them before anything is written.

Example:
    with SitesServer() as sites, Browser(proxy=sites.proxy) as browser:
        browser.new_page()
        browser.execute("goto", {"url": "http://shop.test/"})
        obs = browser.observe()
        print([e.label for e in obs.elements])
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.errors import LedgerError
from memtape.ledger.events import EnvState
from memtape.ledger.redact import MARKER
from memtape.projections.text import domain_of, origin_of

CHROMIUM = "/usr/bin/chromium"
#: Debian's Chromium as this machine runs it: no sandbox (root), no GPU, nothing fetched on its own
LAUNCH_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_ARGS = [*LAUNCH_FLAGS, "--host-resolver-rules=MAP *.test 127.0.0.1"]
#: roles a policy may act on
INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "textbox",
        "searchbox",
        "combobox",
        "checkbox",
        "radio",
        "option",
        "menuitem",
        "tab",
        "switch",
        "slider",
        "spinbutton",
        "listbox",
        "menuitemcheckbox",
    }
)
COMMANDS = ("goto", "click", "fill", "type", "press", "select", "scroll", "wait", "back", "finish")
_LINE = re.compile(r"^(?P<indent>\s*)- (?:'|\")?(?P<role>[a-z]+)(?: \"(?P<name>(?:[^\"\\]|\\.)*)\")?(?P<rest>.*)$")
_REF = re.compile(r"\[ref=([A-Za-z0-9_]+)\]")
#: call-log phrases that carry the reason an action failed
_SUBSTANCE = (
    "intercepts pointer events",
    "is not an <input>",
    "not an <input>",
    "strict mode violation",
    "element is not visible",
    "element is not enabled",
    "not attached",
    "detached",
    "net::ERR",
    "Timeout",
    "Error:",
)
MAX_ERROR = 600
MAX_TEXT = 4000
MAX_EXTRACT = 40_000  # an extraction keeps far more than an observation (the prompt budget cuts it)


class BrowserError(LedgerError):
    """The browser could not be started or used at all (not an action failure)."""


@dataclass(frozen=True, slots=True)
class Element:
    """One interactive element of the page as the snapshot shows it."""

    ref: str
    role: str
    name: str

    @property
    def identity(self) -> str:
        return f"{self.role}:{self.name}"

    @property
    def label(self) -> str:
        return f"{self.ref}: {self.role} - {self.name}" if self.name else f"{self.ref}: {self.role}"


@dataclass(frozen=True, slots=True)
class Observation:
    """What the agent sees of a page (seed 001's InterpreterState)."""

    url: str
    title: str
    elements: tuple[Element, ...]
    text: str
    summary: str
    page_type: str
    snapshot: str = ""
    dialogs: tuple[str, ...] = ()

    @property
    def domain(self) -> str:
        return domain_of(self.url)

    @property
    def origin(self) -> str:
        return origin_of(self.url)

    def find(
        self, name: str, roles: tuple[str, ...] | frozenset[str] | None = None, exact: bool = False
    ) -> Element | None:
        """The element whose accessible name matches `name` (exact first, then containment)."""
        want = name.strip().lower()
        pool = [e for e in self.elements if roles is None or e.role in roles]
        for e in pool:
            if e.name.strip().lower() == want:
                return e
        if exact:
            return None
        for e in pool:
            if want and want in e.name.lower():
                return e
        return None

    def by_identity(self, role: str, name: str) -> Element | None:
        for e in self.elements:
            if e.role == role and e.name == name:
                return e
        return None

    def env(self) -> EnvState:
        return EnvState(
            url=self.url,
            title=self.title[:200],
            page_type=self.page_type,
            elements=[e.identity[:120] for e in self.elements][:80],
        )


@dataclass(slots=True)
class ActionResult:
    """The outcome of one command: ok, or the error verbatim in substance."""

    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None = None
    duration_ms: float = 0.0
    target: Element | None = None
    selector: str | None = None
    sensitive: bool = False
    url_before: str = ""
    url_after: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def parse_snapshot(snapshot: str) -> tuple[list[Element], list[str]]:
    """Interactive elements (with refs) and dialog names from an AI snapshot."""
    elements: list[Element] = []
    dialogs: list[str] = []
    for line in snapshot.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        ref = _REF.search(m.group("rest") or "")
        role = m.group("role")
        name = (m.group("name") or "").replace('\\"', '"')
        if role in ("dialog", "alertdialog") and name:
            dialogs.append(name)
        if ref and role in INTERACTIVE_ROLES:
            elements.append(Element(ref=ref.group(1), role=role, name=name))
    return elements, dialogs


def classify(url: str, title: str, elements: list[Element], text: str) -> str:
    """A coarse page type from what is on the page (seed 001's page_type)."""
    roles = {e.role for e in elements}
    names = " ".join(e.name.lower() for e in elements)
    low = (title + " " + text[:400]).lower()
    if "password" in names or "sign in" in names or "log in" in names:
        return "login"
    if ("combobox" in roles or "searchbox" in roles) and "search" in names:
        return "search_engine"
    if "results for" in low:
        return "search_results"
    if "add to cart" in names:
        return "product"
    if "/article/" in url:
        return "article"
    if "next page" in names or "archive" in low:
        return "listing"
    if {"textbox", "combobox"} & roles:
        return "form"
    return "content"


def summarize(title: str, elements: list[Element], dialogs: list[str], text: str) -> str:
    counts: dict[str, int] = {}
    for e in elements:
        counts[e.role] = counts.get(e.role, 0) + 1
    parts = ", ".join(f"{n} {r}{'s' if n > 1 else ''}" for r, n in sorted(counts.items()))
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    out = f"{title[:80]}: {parts or 'no interactive elements'}"
    if dialogs:
        out += f"; open dialog(s): {', '.join(d[:40] for d in dialogs)}"
    if first and first not in title:
        out += f"; starts with {first[:80]!r}"
    return out


def format_error(exc: BaseException) -> str:
    """First line of Playwright's message plus the call-log line that says why."""
    msg = str(exc)
    lines = [ln.strip(" -") for ln in msg.splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0]
    reason = ""
    for phrase in _SUBSTANCE[:8]:
        hits = [ln for ln in lines[1:] if phrase in ln]
        if hits:
            reason = hits[-1]
            break
    if not reason and "Error:" not in head:
        errs = [ln for ln in lines[1:] if ln.startswith("Error:")]
        reason = errs[0] if errs else ""
    out = f"{head} {reason}".strip() if reason and reason not in head else head
    return out[:MAX_ERROR]


class Browser:
    """One headless Chromium; `new_page()` opens a fresh context (clean cookies) per run."""

    def __init__(
        self,
        proxy: str | None = None,
        *,
        headless: bool = True,
        action_timeout_ms: float = 1500,
        navigation_timeout_ms: float = 6000,
        executable: str = CHROMIUM,
    ):
        self.proxy = proxy
        self.headless = headless
        self.action_timeout_ms = action_timeout_ms
        self.navigation_timeout_ms = navigation_timeout_ms
        self.executable = executable
        self._pw: Any = None
        self._browser: Any = None
        self._context: Any = None
        self.page: Any = None

    def start(self) -> Browser:
        from playwright.sync_api import sync_playwright

        try:
            self._pw = sync_playwright().start()
            kwargs: dict[str, Any] = {
                "executable_path": self.executable,
                "args": CHROMIUM_ARGS,
                "headless": self.headless,
            }
            if self.proxy:
                kwargs["proxy"] = {"server": self.proxy}
            self._browser = self._pw.chromium.launch(**kwargs)
        except Exception as exc:  # noqa: BLE001 - any launch failure is one line for the user
            self.close()
            raise BrowserError(f"cannot start Chromium at {self.executable}: {format_error(exc)}") from exc
        return self

    def close(self) -> None:
        for obj in (self._context, self._browser):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing a dead browser is not an error
                    pass
        if self._pw is not None:
            self._pw.stop()
        self._pw = self._browser = self._context = self.page = None

    def __enter__(self) -> Browser:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def new_page(self) -> Any:
        """A fresh browser context and page: no cookies, banners show again."""
        if self._browser is None:
            self.start()
        if self._context is not None:
            self._context.close()
        self._context = self._browser.new_context()
        self.page = self._context.new_page()
        self.page.set_default_timeout(self.action_timeout_ms)
        self.page.set_default_navigation_timeout(self.navigation_timeout_ms)
        return self.page

    # ---- observe ---------------------------------------------------------------

    def observe(self) -> Observation:
        page = self.page
        try:
            page.wait_for_load_state("domcontentloaded", timeout=self.navigation_timeout_ms)
        except Exception:  # noqa: BLE001 - observe whatever is there
            pass
        url = page.url
        try:
            title = page.title()
            snapshot = page.aria_snapshot(mode="ai")
        except Exception:  # noqa: BLE001 - a navigation raced the snapshot; take it again
            page.wait_for_timeout(200)
            title = page.title()
            snapshot = page.aria_snapshot(mode="ai")
        try:
            text = page.locator("body").inner_text(timeout=self.action_timeout_ms)
        except Exception:  # noqa: BLE001
            text = ""
        text = re.sub(r"\n{3,}", "\n\n", text)[:MAX_TEXT]
        elements, dialogs = parse_snapshot(snapshot)
        return Observation(
            url=url,
            title=title,
            elements=tuple(elements),
            text=text,
            summary=summarize(title, elements, dialogs, text),
            page_type=classify(url, title, elements, text),
            snapshot=snapshot,
            dialogs=tuple(dialogs),
        )

    def form_state(self) -> dict[str, str]:
        """Seed 003's snapshot form state: each field's value by name (id, label); password fields'
        values are replaced by the redaction marker here, before anything can record them."""
        try:
            fields = self.page.evaluate(_FORM_STATE_JS)
        except Exception:  # noqa: BLE001 - a navigating page has no form state to keep
            return {}
        return {str(k)[:100]: (MARKER if secret and v else str(v)[:200]) for k, v, secret in fields[:50]}

    def scroll_position(self) -> tuple[int, int]:
        try:
            x, y = self.page.evaluate("() => [Math.round(window.scrollX), Math.round(window.scrollY)]")
            return int(x), int(y)
        except Exception:  # noqa: BLE001
            return 0, 0

    def scroll_to(self, x: int, y: int) -> None:
        try:
            self.page.evaluate("([x, y]) => window.scrollTo(x, y)", [x, y])
        except Exception:  # noqa: BLE001 - restoring a scroll position is best effort
            pass

    def fill_form(self, form_state: dict[str, str]) -> None:
        """Put a snapshot's non-secret field values back (backtracking restores the form)."""
        for key, value in form_state.items():
            if value == MARKER:
                continue
            try:
                self.page.evaluate(_FORM_RESTORE_JS, [key, value])
            except Exception:  # noqa: BLE001 - a field that is gone stays gone
                pass

    def page_extract(self) -> dict[str, Any]:
        """The page's title, text, section count and links (URL, text and type: main_nav inside a
        nav element, footer inside a footer, content otherwise), for extractions and the sitemap."""
        data = self.page.evaluate(_EXTRACT_JS)
        return {
            "title": str(data["title"])[:500],
            "text": str(data["text"])[:MAX_EXTRACT],
            "section_count": int(data["sections"]),
            "links": [
                {"url": str(u)[:2000], "text": " ".join(str(t).split())[:300], "link_type": str(k)}
                for u, t, k in data["links"][:500]
            ],
        }

    def page_text(self) -> str:
        try:
            return str(self.page.locator("body").inner_text(timeout=self.action_timeout_ms))
        except Exception:  # noqa: BLE001
            return ""

    # ---- selectors ---------------------------------------------------------------

    def stable_selector(self, element: Element) -> str:
        """A selector that survives page loads: `#id` when the element has one, else role and name."""
        return self.element_info(element)[0]

    def element_info(self, element: Element) -> tuple[str, bool]:
        """(stable selector, whether the element lives in a shadow root)."""
        try:
            info = self.page.locator(f"aria-ref={element.ref}").evaluate(
                "el => [(el.id && el.getRootNode() === document && document.querySelectorAll('#' + CSS.escape(el.id)).length === 1)"
                " ? '#' + CSS.escape(el.id) : null, el.getRootNode() instanceof ShadowRoot]",
                timeout=self.action_timeout_ms,
            )
        except Exception:  # noqa: BLE001 - detached nodes fall back to role+name
            info = [None, False]
        return (str(info[0]) if info[0] else role_selector(element.role, element.name)), bool(info[1])

    def selector_matches(self, selector: str, element: Element) -> bool:
        """True when `selector` finds exactly the element the snapshot calls `element`."""
        try:
            loc = self.page.locator(selector)
            if loc.count() != 1:
                return False
            target = self.page.locator(f"aria-ref={element.ref}").element_handle(timeout=self.action_timeout_ms)
            return bool(loc.evaluate("(a, b) => a === b", target, timeout=self.action_timeout_ms))
        except Exception:  # noqa: BLE001 - an invalid or stale selector simply does not match
            return False

    # ---- execute -------------------------------------------------------------------

    def execute(self, command: str, args: dict[str, Any], element: Element | None = None) -> ActionResult:
        """Run one command; never raises for an action failure (the error is in the result)."""
        page = self.page
        result = ActionResult(command=command, args=dict(args), ok=False, target=element, url_before=page.url)
        t0 = time.perf_counter()
        try:
            if command not in COMMANDS:
                raise ValueError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")
            self._run(command, args, result)
            result.ok = True
        except Exception as exc:  # noqa: BLE001 - the error text is the lesson material
            result.error = format_error(exc)
        try:
            page.wait_for_load_state("domcontentloaded", timeout=self.navigation_timeout_ms)
        except Exception:  # noqa: BLE001
            pass
        result.url_after = page.url
        result.duration_ms = (time.perf_counter() - t0) * 1000
        return result

    def _locator(self, args: dict[str, Any]) -> Any:
        ref = args.get("ref")
        if ref:
            return self.page.locator(f"aria-ref={ref}")
        if args.get("selector"):
            return self.page.locator(str(args["selector"]))
        raise ValueError("this command needs a ref (an element from the page snapshot)")

    def _is_password(self, loc: Any | None) -> bool:
        try:
            if loc is None:
                return bool(
                    self.page.evaluate("() => !!document.activeElement && document.activeElement.type === 'password'")
                )
            return bool(
                loc.evaluate(
                    "el => el.type === 'password' || el.autocomplete === 'current-password' || el.autocomplete === 'new-password'",
                    timeout=self.action_timeout_ms,
                )
            )
        except Exception:  # noqa: BLE001 - if we cannot tell, treat typed text as sensitive only by name
            return False

    def _run(self, command: str, args: dict[str, Any], result: ActionResult) -> None:
        page = self.page
        if command == "goto":
            page.goto(str(args["url"]), wait_until="domcontentloaded")
        elif command == "click":
            loc = self._locator(args)
            result.selector = self._selector_for(result)
            loc.click()
        elif command == "fill":
            loc = self._locator(args)
            result.sensitive = self._is_password(loc)
            result.selector = self._selector_for(result)
            loc.fill(str(args.get("value", "")))
        elif command == "type":
            text = str(args.get("text", args.get("value", "")))
            if args.get("ref"):
                loc = self._locator(args)
                result.sensitive = self._is_password(loc)
                result.selector = self._selector_for(result)
                loc.press_sequentially(text)
            else:
                result.sensitive = self._is_password(None)
                page.keyboard.type(text)
        elif command == "press":
            key = str(args.get("key", "Enter"))
            if args.get("ref"):
                result.selector = self._selector_for(result)
                self._locator(args).press(key)
            else:
                page.keyboard.press(key)
        elif command == "select":
            loc = self._locator(args)
            result.selector = self._selector_for(result)
            value = str(args.get("value", ""))
            try:
                loc.select_option(label=value)
            except Exception:  # noqa: BLE001 - fall back to the option's value attribute
                loc.select_option(value=value)
        elif command == "scroll":
            dy = int(args.get("amount", 600)) * (-1 if args.get("direction") == "up" else 1)
            page.mouse.wheel(0, dy)
        elif command == "wait":
            if args.get("text"):
                page.get_by_text(str(args["text"])).first.wait_for(
                    state="visible", timeout=float(args.get("timeout_ms", 3000))
                )
            else:
                page.wait_for_timeout(min(float(args.get("ms", 500)), 5000))
        elif command == "back":
            page.go_back(wait_until="domcontentloaded")
        elif command == "finish":
            return

    def _selector_for(self, result: ActionResult) -> str | None:
        if result.target is None:
            return None
        selector, in_shadow = self.element_info(result.target)
        result.extra["in_shadow"] = in_shadow
        return selector


_FORM_STATE_JS = """() => Array.from(document.querySelectorAll('input, textarea, select'))
  .filter(el => !['hidden', 'submit', 'button', 'reset', 'image', 'file'].includes(el.type))
  .map(el => [el.name || el.id || el.getAttribute('aria-label') || el.type,
              (el.type === 'checkbox' || el.type === 'radio') ? String(el.checked) : el.value,
              el.type === 'password' || /password/.test(el.autocomplete || '')])"""
_FORM_RESTORE_JS = """([key, value]) => {
  const el = document.querySelector(`[name="${CSS.escape(key)}"]`) || document.getElementById(key);
  if (!el || el.type === 'password') return;
  if (el.type === 'checkbox' || el.type === 'radio') el.checked = value === 'true'; else el.value = value;
}"""
_EXTRACT_JS = """() => {
  const kind = a => a.closest('nav') ? 'main_nav' : (a.closest('footer') ? 'footer' : 'content');
  const links = Array.from(document.querySelectorAll('a[href]'))
    .filter(a => /^https?:/.test(a.href))
    .map(a => [a.href.split('#')[0], a.innerText || a.getAttribute('aria-label') || '', kind(a)]);
  const sections = Math.max(document.querySelectorAll('section').length, document.querySelectorAll('h2').length);
  return {title: document.title, text: document.body ? document.body.innerText : '', sections, links};
}"""


def role_selector(role: str, name: str) -> str:
    """Playwright's role selector for an element identity (exact name)."""
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'role={role}[name="{escaped}"s]'
