"""Time for the ledger: an injectable clock and the one timestamp format.

Timestamps are stored as fixed-width UTC ISO strings so that text order is
time order (SQLite and DuckDB both compare them as text).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def format_ts(value: datetime) -> str:
    """Render a datetime as `YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return f"{value.year:04d}-{value.strftime('%m-%dT%H:%M:%S.%fZ')}"  # strftime's %Y drops zeros before 1000


def parse_ts(text: str | datetime) -> datetime:
    """Parse an ISO time (naive means UTC); accepts dates alone (seed 001 uses them)."""
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    raw = text.strip()
    if raw.endswith("Z"):
        raw = raw[:-1] + "+00:00"
    value = datetime.fromisoformat(raw)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def normalize_ts(text: str | datetime) -> str:
    return format_ts(parse_ts(text))


class SteppingClock:
    """A deterministic clock for tests and demos: starts at `start`, advances `step` per call."""

    def __init__(self, start: datetime | str = "2026-01-01T00:00:00Z", step: timedelta = timedelta(seconds=1)):
        self.now = parse_ts(start)
        self.step = step

    def __call__(self) -> datetime:
        current = self.now
        self.now = current + self.step
        return current

    def advance(self, delta: timedelta) -> None:
        self.now += delta
