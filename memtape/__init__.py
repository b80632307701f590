"""memtape: an event-sourced memory ledger for LLM browser agents.

The public API (see docs/api.md and the README's quick start):

    import memtape
    mem = memtape.open(".agent-memory")
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.tier1(); run.recall_domain(step=1); run.record_step(step=1, action="click", ...)
        run.finish(success=True, outcome="bought")
    mem.audit(run.run_id)

`memtape.open_async(path)` gives the same memory for async code, every method awaited.

The command line is `memtape.cli`. The API's names load `memtape.api` on first use (PEP 562),
so that the command line (`memtape.cli` is a module of this package) does not pay for the agent,
the audit and the experiment on every start: `memtape analytics ...` needs none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memtape.api import (
        InvalidEvent,
        Lesson,
        Memory,
        MemtapeError,
        MissingExtra,
        Policy,
        Run,
        RunConflict,
        TrajectoryRecall,
        UnknownItem,
        open,
    )
    from memtape.asynchronous import AsyncMemory, AsyncRun, open_async

# The errors a caller catches: MemtapeError is the base of all; InvalidEvent (a refused value),
# RunConflict (a finished, abandoned or concurrently written run), UnknownItem (no such run, lesson,
# fact, ...) and MissingExtra (an extra not installed; also an ImportError) are its kinds.
__all__ = [
    "open",
    "Memory",
    "Run",
    "Lesson",
    "TrajectoryRecall",
    "Policy",
    "MemtapeError",
    "InvalidEvent",
    "RunConflict",
    "UnknownItem",
    "MissingExtra",
    "open_async",
    "AsyncMemory",
    "AsyncRun",
]


#: the async API's names live in their own module; every other public name in memtape.api
_ASYNC = ("open_async", "AsyncMemory", "AsyncRun")


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("memtape.asynchronous" if name in _ASYNC else "memtape.api"), name)
    raise AttributeError(f"module 'memtape' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
