"""Progress bars on stderr for the library's long folds (the library only reports counts)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memtape.projections.cache.materialize import FoldProgress
from memtape.projections.recording.warming import DECODING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

#: catch-ups shorter than this draw no bar (reading memory usually folds a few new events)
FOLD_BAR_MIN = 20_000
#: seconds a server's warm-up runs before it draws its line (a small memory is ready at once)
WARM_LINE_AFTER = 0.5


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


@contextmanager
def warm_up_line(label: str = "memtape: warming caches") -> Iterator[FoldProgress]:
    """A `FoldProgress` drawing one line on stderr for a server's warm-up (its catch-up, then each
    projection decoded: `projections.recording.warming.warm`), shown on a terminal once the
    warm-up has run WARM_LINE_AFTER seconds (a small memory draws nothing). It ends with the
    last projection decoded, before the server speaks, and stays, saying how long the server
    took to be ready."""
    # loaded with the line: every command sets this up, and serve and ui use it
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:  # a log or a pipe: the server's own lines say when it is ready
        yield lambda what, done, total: None
        return
    bar = Progress(
        TextColumn(label),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    task = bar.add_task("starting", total=None)
    guard = threading.Lock()
    state = {"shown": False, "over": False}

    def show() -> None:
        with guard:
            if not state["over"]:
                bar.start()
                state["shown"] = True

    def stop() -> None:
        timer.cancel()
        with guard:
            if state["shown"] and not state["over"]:
                bar.stop()
            state["over"] = True

    def report(what: str, done: int, total: int) -> None:
        ended = what == DECODING and done >= total
        bar.update(task, description="ready" if ended else what, completed=done, total=total)
        if ended:
            stop()

    timer = threading.Timer(WARM_LINE_AFTER, show)
    timer.daemon = True
    timer.start()
    try:
        yield report
    finally:
        stop()
