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
    from memtape.api import Lesson, Memory, MemtapeError, Policy, Run, TrajectoryRecall, open
    from memtape.asynchronous import AsyncMemory, AsyncRun, open_async

#: public name -> the module that defines it
_HOMES = {
    **dict.fromkeys(["open", "Memory", "Run", "Lesson", "TrajectoryRecall", "Policy", "MemtapeError"], "memtape.api"),
    **dict.fromkeys(["open_async", "AsyncMemory", "AsyncRun"], "memtape.asynchronous"),
}
__all__ = [
    "open",
    "Memory",
    "Run",
    "Lesson",
    "TrajectoryRecall",
    "Policy",
    "MemtapeError",
    "open_async",
    "AsyncMemory",
    "AsyncRun",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'memtape' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
