"""Screenshots of every page of the web viewer for its docs page (docs/viewer.md): the sample
memory of devtools/viewer_sample.py served by `memtape serve`, each page opened in Chromium
after the login link, saved as docs/img/viewer-NAME.png.

    .venv/bin/python scripts/viewer_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from devtools.viewer_sample import build  # noqa: E402
from memtape.agent.browser import CHROMIUM, LAUNCH_FLAGS  # noqa: E402
from tests.server_support import live_server  # noqa: E402


def main() -> None:
    out = ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sample = build(Path(tmp) / "memory")
        with live_server(Path(tmp) / "memory") as served, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            pages = {
                "login-refused": "/ui/",
                "runs": f"/ui/?token={served.token}",
                "run": f"/ui/runs/{sample.learner}",
                "step": f"/ui/runs/{sample.learner}/steps/1",
                "item": f"/ui/items/{sample.tip}",
                "fact": f"/ui/items/{sample.timing}",
                "diff": f"/ui/diff?from=0&to={sample.teacher}",
                "search": "/ui/search?q=banner",
                "hostile": f"/ui/items/{sample.hostile}",
            }
            for name, path in pages.items():
                page.goto(served.base + path)
                page.screenshot(path=str(out / f"viewer-{name}.png"), full_page=True)
                print(f"docs/img/viewer-{name}.png: {page.url.replace(served.base, '')}")
            browser.close()


if __name__ == "__main__":
    main()
