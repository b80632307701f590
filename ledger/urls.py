"""Store URLs as messages show them, and read any stored text as a URL."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit


def display_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


def url_parts(url: str) -> SplitResult:
    """`urlsplit` of any text a URL field holds, never raising: brackets that name no IPv6 address
    (`https://[REDACTED]@host/`, as redaction leaves credentials) are read percent-encoded, as a
    browser sends them; text that is still no URL has no parts."""
    for text in (url, url.replace("[", "%5B").replace("]", "%5D")):
        try:
            return urlsplit(text)
        except ValueError:
            continue
    return urlsplit("")


def start_url_refusal(url: str) -> str | None:
    """Why `url` cannot start a run (one line), or None. A run's domain, its memory's key (lessons,
    facts, sessions, trajectories), is the start URL's host: `app.example/login` has none, so such a
    run would be recorded on domain '' and never recalled for its site."""
    parts = url_parts(url)
    if not parts.scheme or not parts.hostname:
        return (
            f"start_url {url[:80]!r} has no scheme or host; give the site's whole address "
            "(https://app.example/login): its host is the run's domain"
        )
    return None
