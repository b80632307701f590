"""The documentation documents everything and stays in its place: every command has its section in
docs/cli.md, every event type its line in docs/events.md, every HTTP route of the server its row in
docs/http.md; the README opens with the two commands and stays short (the rest is in docs/)."""

from __future__ import annotations

import re
import tempfile

import click

import memtape
from memtape.cli import cli
from memtape.ledger.events import EVENT_TYPES
from memtape.server import create_app
from tests.docs_support import DOCS, README, nav_pages, page

README_MAX_LINES = 250


def test_every_command_has_its_section() -> None:
    """`cli.commands` is empty (the group loads a command's module when asked), so ask it as click does."""
    names = cli.list_commands(click.Context(cli))
    assert len(names) >= 27
    text = page("cli.md")
    missing = [name for name in names if not re.search(rf"^## `memtape {re.escape(name)}[ `]", text, re.M)]
    assert not missing, f"commands without a '## `memtape NAME ...`' section in docs/cli.md: {missing}"


def test_every_event_type_is_documented() -> None:
    text = page("events.md")
    missing = [t for t in sorted(EVENT_TYPES) if f"- `{t}` —" not in text]
    assert not missing, f"event types missing from docs/events.md: {missing}"


def test_every_route_of_the_server_is_in_the_route_table() -> None:
    """The hand-written table says which library call each route makes; the OpenAPI section below it
    is generated, so only the table could drift."""
    with tempfile.TemporaryDirectory() as tmp, memtape.open(tmp) as memory:
        schema = create_app(memory).openapi()
    served = {f"{method.upper()} {path}" for path, item in schema["paths"].items() for method in item}
    rows = [line for line in page("http.md").split("## OpenAPI schema")[0].splitlines() if line.startswith("| `")]
    table = {route for row in rows for route in re.findall(r"`((?:GET|POST) /[^` ?]*)", row)}
    assert served == table


def test_the_two_commands_open_the_readme() -> None:
    head = README.read_text().split("## ")[0]
    assert "<!-- main-command -->" in head and "<!-- test-command -->" in head
    assert head.startswith("# memtape\n")


def test_the_readme_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the detail into docs/"


def test_every_page_is_in_the_nav() -> None:
    assert sorted(nav_pages()) == sorted(DOCS.glob("*.md"))


def test_the_landing_page_installs_and_shows_seven_lines() -> None:
    """What memtape is for, how to install it while it is not on PyPI (the README's lines, included),
    and a stored, recalled and audited lesson in seven lines (run by tests/test_docs_python.py)."""
    landing = page("index.md")
    assert '--8<-- "README.md:pip"' in landing
    pip = README.read_text().split("[start:pip]")[1].split("[end:pip]")[0]
    assert "not published on PyPI" in pip and "pip install ./memtape" in pip and ".whl" in pip
    example = landing.split("```python\n")[1].split("```")[0]
    lines = [line for line in example.splitlines() if line.strip()]
    assert len(lines) == 7 and all(c in example for c in ("record_lesson(", "recall_domain(", "audit("))


def test_the_quick_start_is_short() -> None:
    """At most 20 lines of code; the rest is in the guides."""
    quick = README.read_text().split("[start:quickstart]")[1].split("[end:quickstart]")[0]
    code = quick.split("```python\n")
    assert len(code) == 2 and code[1].split("```")[0].count("\n") <= 20
