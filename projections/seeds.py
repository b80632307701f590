"""The seed lessons a memory starts with, written on its first use (see decisions.on_open).

By default seed 001's three lessons; `memtape.open(path, seeds=...)` chooses others: "none",
"browser-use" (the same advice in browser-use's own actions) or a JSON file of the agent's own.
The choice travels in each `run_started`'s policy (`seeds`, absent for seed 001's), so the
start-of-run decision that writes them can be made again by `verify --decisions` and experiments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import SEED_LESSONS, Category, LessonSeeded, SeedLesson
from memtape.ledger.jsonl import first_error
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

#: seed 001's advice in browser-use's actions (`input_text`, `click_element_by_index`,
#: `send_keys`): what the browser-use adapter's agents are told, since they have no fill/click/type
BROWSER_USE_SEEDS: tuple[SeedLesson, ...] = (
    SeedLesson(
        lesson="If input_text fails on a field, click_element_by_index on the field first, then input_text again.",
        category="tool_fallback",
        failed_command="input_text",
        error_pattern="failed to input text",
    ),
    SeedLesson(
        lesson="After typing into a search box, send_keys Enter to submit. Avoid clicking submit buttons: "
        "autocomplete dropdowns often block them.",
        category="best_practice",
        failed_command="click_element_by_index",
        error_pattern="intercepts pointer",
    ),
    SeedLesson(
        lesson="If an overlay or popup blocks an element, send_keys Escape (or click its close button) before "
        "interacting with the elements behind it.",
        category="best_practice",
        error_pattern="intercepts pointer",
    ),
)

#: the named seed sets `seeds=` takes besides a file ("default" is seed 001's)
NAMED_SEEDS: dict[str, tuple[SeedLesson, ...] | None] = {
    "default": None,
    "none": (),
    "browser-use": BROWSER_USE_SEEDS,
}


def choose_seeds(choice: str | Path | None) -> tuple[SeedLesson, ...] | None:
    """The seed lessons `choice` names: None or "default" for seed 001's (returned as None), "none",
    "browser-use", or the path of a JSON file holding a list of seed lessons (`SeedLesson`'s
    fields). A bad choice or file raises InvalidEvent in one line."""
    if choice is None:
        return None
    if isinstance(choice, str) and choice in NAMED_SEEDS:
        return NAMED_SEEDS[choice]
    if not isinstance(choice, (str, Path)) or not str(choice).strip():
        raise InvalidEvent(
            f"seeds must be {', '.join(map(repr, NAMED_SEEDS))} or a JSON file's path, got {choice!r:.60}"
        )
    path = Path(choice)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidEvent(
            f"seeds {str(choice)[:80]!r}: {exc.strerror or exc} (give {', '.join(map(repr, NAMED_SEEDS))} or a JSON file)"
        ) from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"seeds file {path.name[:80]!r} is not JSON: {str(exc).splitlines()[0][:120]}") from None
    try:
        return tuple(SEED_LESSONS.validate_python(data))
    except ValidationError as exc:
        raise InvalidEvent(f"seeds file {path.name[:80]!r}: {first_error(exc)}") from None


def recorded_seeds(seeds: Sequence[SeedLesson] | None) -> dict[str, Any]:
    """What a `run_started`'s policy carries for these seeds (nothing for seed 001's)."""
    return {} if seeds is None else {"seeds": [s.model_dump(mode="json") for s in seeds]}


def seeds_in(policy: Mapping[str, Any] | None) -> tuple[SeedLesson, ...] | None:
    """The seeds a `run_started`'s recorded policy names (None: seed 001's)."""
    if not policy or "seeds" not in policy:
        return None
    return tuple(SEED_LESSONS.validate_python(policy["seeds"]))


def seed_lessons(seeds: Sequence[SeedLesson] | None = None) -> list[NewEvent]:
    """The seed lessons (seed 001's three when `seeds` is None) as `lesson_seeded` events (ids from
    their dedup keys)."""
    chosen = [(s.lesson, s.category, s.failed_command, s.error_pattern) for s in seeds] if seeds is not None else SEEDS
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
        for text, cat, fc, ep in chosen
    ]
