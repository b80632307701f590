"""The web viewer of `memtape serve` (`/ui/`) and `memtape ui`: the audit a person can look at.

Server-rendered pages (Jinja2, autoescaped: memory text is data) over the same reads the HTTP API
and MCP answer (`Memory.state`, `audit`, `explain`, `diff`), with a few lines of own JavaScript
for keyboard navigation; every page reads without JavaScript. `gate.py` keeps the pages behind
the server's token (a cookie set from the login link), `pages.py` shapes what each page shows,
`charts.py` draws the charts as SVG on the server, `app.py` routes.
"""

from __future__ import annotations

from memtape.viewer.app import PREFIX, viewer_app

__all__ = ["PREFIX", "viewer_app"]
