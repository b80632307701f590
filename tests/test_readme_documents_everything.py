"""The README documents every command and every event type (new ones must be added there)."""
from __future__ import annotations

import re
from pathlib import Path

from memtape.cli import cli
from memtape.ledger.events import EVENT_TYPES

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_every_command_is_documented() -> None:
    commands = section("Commands")
    missing = [name for name in sorted(cli.commands) if f"`memtape {name}" not in commands]
    assert not missing, f"commands missing from README.md '## Commands': {missing}"


def test_every_event_type_is_documented() -> None:
    events = section("Events")
    missing = [t for t in sorted(EVENT_TYPES) if f"`{t}`" not in events]
    assert not missing, f"event types missing from README.md '## Events': {missing}"


def test_the_two_commands_open_the_readme() -> None:
    head = README.read_text().split("## ")[0]
    assert "<!-- main-command -->" in head and "<!-- test-command -->" in head
