"""Seed 001's three lessons, written into memory on its first use (see decisions.on_open)."""

from __future__ import annotations

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import Category, LessonSeeded
from memtape.projections.folds.lessons import lesson_id_for

SEEDS: tuple[tuple[str, Category, str | None, str], ...] = (
    (
        "If fill fails, click(ref) to focus the input, then type(text) to enter text.",
        "tool_fallback",
        "fill",
        "too many arguments",
    ),
    (
        "After entering text in a search box, press Enter to submit. Avoid clicking submit buttons: "
        "autocomplete dropdowns often block them.",
        "best_practice",
        "click",
        "intercepts pointer",
    ),
    (
        "If an overlay or popup is blocking an element, press Escape to dismiss it before interacting "
        "with the elements behind it.",
        "best_practice",
        None,
        "intercepts pointer",
    ),
)
"""Seed 001's three lessons with the failures they answer (text, category, failed_command,
error_pattern), with the patterns seed 001's agent writes, so recall on error finds them as
seed 001's walkthrough shows: the fill fallback for `fill` / "too many arguments"; Enter to
submit for a `click` that an autocomplete list intercepts ("intercepts pointer"); Escape for
any command an overlay intercepts. A learned lesson keyed "intercepts pointer events" is its
own lesson (seed 001's third example promotes one)."""


def seed_lessons() -> list[NewEvent]:
    """Seed 001's three hardcoded lessons, as `lesson_seeded` events (ids from their dedup keys)."""
    return [
        NewEvent(
            LessonSeeded(
                lesson_id=lesson_id_for(fc, ep, None, text),
                lesson=text,
                category=cat,
                failed_command=fc,
                error_pattern=ep,
            )
        )
        for text, cat, fc, ep in SEEDS
    ]
