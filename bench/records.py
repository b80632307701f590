"""The generated record code on the hot paths, beside what Python's dataclasses do in the same run.

Three places build frozen slotted dataclasses through a plain slotted twin and a function
generated with `exec`, then retag the instance with `__class__` (ledger/envelope.py `constructor`,
projections/text.py `evolve` and `build`). Each is timed here against the plain way:

- `recorded_event(...)`, how a store builds the event of each row it reads, against
  `RecordedEvent(...)` (a frozen dataclass's `__init__`, every field through `object.__setattr__`);
- `evolve(lesson, ...)`, how the folds change a record, against `dataclasses.replace`;
- `build(LessonEntry, row)`, how a snapshot's records are decoded, against `LessonEntry(**row)`.

Each figure is the best of `--rounds` timings of `--n` calls, in CPU time.

Usage::

    python bench/records.py --json
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, "") and __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BENCH = "records"

ROW = {
    "seq": 12,
    "id": "evt_0192",
    "stream": "run-run_1",
    "stream_version": 3,
    "type": "step_recorded",
    "schema_version": 1,
    "recorded_at": "2026-11-23T11:54:00.000000Z",
    "occurred_at": "2026-11-23T11:54:00.000000Z",
    "run_id": "run_1",
    "step": 2,
    "domain": "shop.example",
    "data": {"ok": True},
    "payload_json": '{"ok":true}',
    "prev_hash": "a" * 64,
    "hash": "b" * 64,
}


def _best(call: Callable[[], Any], n: int, rounds: int) -> float:
    """The best of `rounds` CPU timings of `n` calls, in µs per call."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(n):
            call()
        best = min(best, time.process_time() - start)
    return best / n * 1e6


def run(quick: bool = False, n: int = 200_000, rounds: int = 5) -> list[Any]:
    from bench import Figure
    from memtape.ledger.envelope import RecordedEvent, recorded_event
    from memtape.projections.folds.lessons import LessonEntry
    from memtape.projections.text import build, evolve

    if quick:
        n, rounds = 20_000, 2
    lesson_row: dict[str, Any] = {
        "lesson_id": "les_1",
        "lesson": "When click fails with 'timeout', try wait() for the page to settle.",
        "category": "error_recovery",
        "failed_command": "click",
        "error_pattern": "timeout",
        "scope_domain": None,
        "use_count": 3,
        "created_at": "2026-11-23T11:54:00Z",
        "last_used": "2026-11-23T11:54:00Z",
        "source": "learned",
        "triggered_domains": ("shop.example",),
        "event_ids": ("evt_1", "evt_2"),
    }
    lesson = LessonEntry(**lesson_row)
    assert recorded_event(**ROW) == RecordedEvent(**ROW)
    assert evolve(lesson, use_count=4) == dataclasses.replace(lesson, use_count=4)
    assert build(LessonEntry, lesson_row) == LessonEntry(**lesson_row)
    pairs = [
        (
            "build a RecordedEvent (a store's read of one row)",
            lambda: recorded_event(**ROW),
            "RecordedEvent(...)",
            lambda: RecordedEvent(**ROW),
        ),
        (
            "change one field of a fold's record (evolve)",
            lambda: evolve(lesson, use_count=4),
            "dataclasses.replace",
            lambda: dataclasses.replace(lesson, use_count=4),
        ),
        (
            "decode a fold's record from its row (build)",
            lambda: build(LessonEntry, lesson_row),
            "LessonEntry(**row)",
            lambda: LessonEntry(**lesson_row),
        ),
    ]
    figures = []
    for name, fast, baseline, plain in pairs:
        figures.append(
            Figure(
                BENCH,
                name,
                _best(fast, n, rounds),
                "µs",
                baseline,
                _best(plain, n, rounds),
                higher_is_better=False,
                note=f"best of {rounds} CPU timings of {n:,} calls",
            )
        )
    return figures


def main() -> None:
    from bench import print_json, table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(args.quick, args.n, args.rounds)
    if args.json:
        print_json(figures)
    else:
        from rich.console import Console

        Console().print(table("generated record code", figures))


if __name__ == "__main__":
    main()
