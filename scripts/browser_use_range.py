#!/usr/bin/env python3
"""The browser-use adapter at both ends of the browser-use range memtape supports.

    python3 scripts/browser_use_range.py [--dir DIR] [VERSION ...]

For each browser-use version (by default the adapter's lower bound, MIN_VERSION in
memtape/integrations/browser_use.py, and the newest the index offers) this makes a fresh
virtualenv under DIR, installs that browser-use, pytest, and memtape's own dependencies from
pyproject.toml except the packages browser-use already brought (its pins win: memtape's
core pins of openai and mcp only fit the newest browser-use), and runs the adapter's tests
from this checkout (on PYTHONPATH, nothing installed from it) against Debian's Chromium.
Prints one line per version and exits non-zero when any version fails.

browser-use 0.6 to 0.13.9 import pydantic_settings without declaring it (mcp used to bring
it), so the extra names it too; the venvs get it the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_browser_use_adapter.py", "tests/test_browser_use_extra.py"]
TOOLS = ["pytest>=8", "hypothesis==6.170.15", "pytest-timeout>=2.3"]


def lower_bound() -> str:
    source = (ROOT / "memtape/integrations/browser_use.py").read_text(encoding="utf-8")
    found = re.search(r"^MIN_VERSION = \((\d+), (\d+), (\d+)\)", source, re.M)
    if found is None:
        raise SystemExit("browser_use_range: MIN_VERSION not found in memtape/integrations/browser_use.py")
    return ".".join(found.groups())


def name_of(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def pip(venv: Path, *args: str) -> None:
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args], check=True
    )


def prepare(venv: Path, version: str) -> str:
    """A venv with this browser-use (newest: unpinned) and memtape's dependencies; returns the
    browser-use version installed."""
    if not (venv / "bin/python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = [r for r in project["optional-dependencies"]["browser-use"] if name_of(r) != "browser-use"]
    pip(venv, "browser-use" if version == "newest" else f"browser-use=={version}", *extra, *TOOLS)
    listed = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(listed)}
    missing = [r for r in project["dependencies"] if name_of(r) not in installed]
    if missing:
        pip(venv, *missing)
    return installed["browser-use"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/memtape-browser-use-range"), help="where the venvs go")
    parser.add_argument("versions", nargs="*", help="browser-use versions (default: the lower bound and newest)")
    args = parser.parse_args()
    versions = args.versions or [lower_bound(), "newest"]
    failed = 0
    for version in versions:
        venv = args.dir / f"browser-use-{version}"
        installed = prepare(venv, version)
        # the project's addopts spread the suite over the cores (pytest-xdist, not in these venvs)
        run = subprocess.run(
            [str(venv / "bin/python"), "-m", "pytest", "-q", "-o", "addopts=-p no:cacheprovider", *TESTS],
            cwd=ROOT,
            env={**os.environ, "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
        )
        summary = (run.stdout.strip().splitlines() or ["no output"])[-1]
        print(f"browser-use {installed}: {'passed' if run.returncode == 0 else 'FAILED'} ({summary})", flush=True)
        if run.returncode != 0:
            failed += 1
            sys.stderr.write(run.stdout[-4000:] + run.stderr[-2000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
