"""memledger: an event-sourced memory ledger for LLM browser agents.

The public API (see README "Use memledger from your own agent"):

    import memledger
    mem = memledger.open(".agent-memory")
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.tier1(); run.recall_domain(step=1); run.record_step(step=1, action="click", ...)
        run.finish(success=True, outcome="bought")
    mem.audit(run.run_id)

The command line is `memledger.cli`.
"""
from memledger.api import Lesson, MemledgerError, Memory, Policy, Run, TrajectoryRecall, open

__all__ = ["open", "Memory", "Run", "Lesson", "TrajectoryRecall", "Policy", "MemledgerError"]
