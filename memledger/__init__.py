"""memledger: an event-sourced memory ledger for LLM browser agents.

The public API (see README "Use memledger from your own agent"):

    import memledger
    mem = memledger.open(".agent-memory")
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.tier1(); run.recall_domain(step=1); run.record_step(step=1, action="click", ...)
        run.finish(success=True, outcome="bought")
    mem.audit(run.run_id)

The command line is `memledger.cli`. The API's names load `memledger.api` on first use (PEP 562),
so that the command line (`memledger.cli` is a module of this package) does not pay for the agent,
the audit and the experiment on every start: `memledger analytics ...` needs none of them.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memledger.api import Lesson, MemledgerError, Memory, Policy, Run, TrajectoryRecall, open

__all__ = ["open", "Memory", "Run", "Lesson", "TrajectoryRecall", "Policy", "MemledgerError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("memledger.api"), name)
    raise AttributeError(f"module 'memledger' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
