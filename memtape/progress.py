"""Progress bars on stderr for the library's long folds (the library only reports counts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memtape.projections.cache.materialize import FoldProgress

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

#: catch-ups shorter than this draw no bar (reading memory usually folds a few new events)
FOLD_BAR_MIN = 20_000


@contextmanager
def fold_progress_bar(always: bool = False) -> Iterator[FoldProgress]:
    """A `FoldProgress` drawing one bar per catch-up or rebuild of projections.db: for any length
    when `always` (`memtape rebuild`), else only for folds of at least FOLD_BAR_MIN events."""
    shown: dict[str, object] = {}
    bar: Progress | None = None
    task: TaskID | None = None

    def stop() -> None:
        nonlocal bar
        if bar is not None:
            bar.stop()
            bar = None
        shown.clear()

    def report(what: str, done: int, total: int) -> None:
        nonlocal bar, task
        if shown.get("fold") != (what, total):
            stop()
            shown["fold"] = (what, total)
            if total > 0 and (always or total >= FOLD_BAR_MIN):
                # loaded with the first bar: every command sets this up, few draw one
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

                bar = Progress(
                    TextColumn(what),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("events"),
                    TimeRemainingColumn(),
                    console=Console(stderr=True),
                    transient=False,
                )
                task = bar.add_task(what, total=total)
                bar.start()
        if bar is not None and task is not None:
            bar.update(task, completed=done)
            if done >= total:
                stop()

    try:
        yield report
    finally:
        stop()
