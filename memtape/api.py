"""The public Python API: `memtape.open` and what it returns.

    import memtape
    with memtape.open(".agent-memory") as mem:
        with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
            tips = run.recall_domain(step=1)
            run.record_step(step=1, action="click", target='button "Buy"', ok=False, error="...")
            run.recall_error(command="click", error="...", step=1)
            run.finish(success=True, outcome="bought")
        mem.audit(run.run_id)

`Memory` and `Run` are `memtape.projections.recording`'s (`memory.RecordingMemory`, `run.Run`): runs,
recall, post-run learning and `state` (the bundled agent is one more client of them). This module
adds what only the face may compose: opening a store from a directory or URL, and
the answers that need the analytics layer (`audit`, `explain`, `experiment`) as plain data
equal to their `--json`. Every error is a `MemtapeError` with a one-line message; nothing is written
when an argument is bad.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memtape.analytics.audit import audit_run
from memtape.analytics.experiment import run_experiment
from memtape.analytics.explain import explain_item
from memtape.ledger.anchor import HeadFile, Keeper, head_path, refuse_if_behind
from memtape.ledger.errors import InvalidEvent, RunConflict, UnknownItem
from memtape.ledger.errors import LedgerError as MemtapeError
from memtape.ledger.extras import MissingExtra, load, require
from memtape.ledger.jsonl import first_error
from memtape.ledger.location import open_store, projections_path
from memtape.projections.cache.materialize import ProjectionsHead
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.recording import memory
from memtape.projections.recording.checks import check_point, check_storable, checked_arguments, plain
from memtape.projections.recording.memory import STALE_AFTER
from memtape.projections.recording.run import Run
from memtape.projections.recording.values import Lesson, TrajectoryRecall
from memtape.projections.seeds import choose_seeds
from memtape.projections.state_rows import Change, diff_between

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
]

STORE_URL_PREFIXES = ("postgresql://", "postgres://")


class Policy(Thresholds):
    """Every threshold memory applies (promotion, pruning, TTL, recall top k, ...; the defaults are
    the seed documents' values). A bad value raises MemtapeError, like every bad argument."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise MemtapeError(f"policy.{first_error(exc)}") from None


@checked_arguments
class Memory(memory.RecordingMemory):
    """A ledger opened by `memtape.open`: runs, recall and `state` (`memtape.projections.recording.memory.RecordingMemory`),
    and the answers only the analytics layer gives (`audit`, `explain`, `experiment`)."""

    def audit(self, run_id: str, step: int | None = None) -> dict[str, Any]:
        """What run `run_id` knew at each step (or only `step`) and where it came from: the content
        of `audit RUN --json`."""
        if not isinstance(run_id, str) or not run_id:
            raise MemtapeError(f"run_id must be a run id string, got {run_id!r:.60}")
        check_storable(run_id, "run_id")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise MemtapeError(f"step must be an integer >= 0, got {step!r:.60}")
        return plain(audit_run(self.store, run_id, step, self.policy))  # type: ignore[no-any-return]

    def explain(self, item: str, domain: str | None = None) -> dict[str, Any]:
        """The whole life of one lesson, fact (id or key), selector or trajectory: recorded,
        deduplicated, recalled (in which runs), promoted, decayed, pruned, forgotten; `domain` picks
        one site's fact when a key is used on several. The content of `explain ITEM --json`."""
        if not isinstance(item, str) or not item.strip():
            raise MemtapeError(f"item must be a lesson id, fact id or key, selector or trajectory id, got {item!r:.60}")
        if domain is not None and not isinstance(domain, str):
            raise MemtapeError(f"domain must be a string, got {type(domain).__name__}")
        return plain(explain_item(self.store, item, self.policy, self.projections_path, domain))  # type: ignore[no-any-return]

    def credit(self, runs: Sequence[str] | None = None, *, rerun: bool = True) -> dict[str, Any]:
        """Credit every memory item shown to `runs` (None: every run) by counterfactual, record an
        `item_credited` per (item, run), and return the content of `credit --json`: `{"decisions",
        "reproduced", "items": [...]}`. Runs the bundled agent again on the bundled sites (the
        `agent` extra)."""
        if runs is not None and (isinstance(runs, str) or not isinstance(runs, Sequence)):
            raise MemtapeError(f"runs must be a list of run ids, got {type(runs).__name__}")
        if not isinstance(rerun, bool):
            raise MemtapeError(f"rerun must be True or False, got {rerun!r:.60}")
        require("credit", "agent")
        credit = load("memtape.agent.credit", "credit", "agent").credit
        return plain(credit(self, list(runs or ()), rerun=rerun).as_dict())  # type: ignore[no-any-return]

    def diff(self, start: int | str, end: int | str) -> list[Change]:
        """What memory gained, changed and lost from `start` to `end`, each a seq, an ISO time or a
        run id (the end of that run: a diff from 0 to a run shows what memory held once it ended):
        one `Change` (change, projection, item, detail) per change, the rows of `diff --json`."""
        return diff_between(self.store, self.projections_path, start, end, self.policy)

    def experiment(self, changes: dict[str, Any], until: int | str | None = None) -> dict[str, Any]:
        """Replay the log's observations under this policy with `changes` (Policy field -> value)
        and diff against what really happened: the content of `experiment --set ... --json`."""
        if not isinstance(changes, dict):
            raise MemtapeError(f"changes must be a dict of policy parameters, got {type(changes).__name__}")
        unknown = sorted(set(changes) - set(Thresholds.model_fields))
        if unknown:
            raise MemtapeError(f"no policy parameter {unknown[0]!r:.60}; known: {', '.join(Thresholds.model_fields)}")
        return plain(
            run_experiment(
                self.store,
                changes,
                check_point(until, "until"),  # type: ignore[no-any-return]
                real_policy=self.policy,
            )
        )


def open(
    location: str | Path = ".agent-memory",
    *,
    policy: Policy | None = None,  # noqa: A001 - the API's name
    stale_after: timedelta = STALE_AFTER,
    seeds: str | Path | None = None,
) -> Memory:
    """Open (creating if needed) the memory in directory `location`, or the PostgreSQL ledger at a
    `postgresql://` URL. `policy` sets every threshold (default: the seed documents' values);
    runs with no event for `stale_after` are finished as abandoned when a run starts. `seeds` are
    the lessons a new memory starts with, written by its first run: "default" (the three lessons of the seed documents),
    "none", "browser-use" (the same advice in browser-use's actions) or the path of a JSON file of
    your own (a list of {"lesson", "category", "failed_command", "error_pattern"}); None is
    "default", except for an integration that has seeds of its own."""
    if not isinstance(location, (str, Path)) or not str(location).strip():
        raise MemtapeError(f"location must be a directory or a postgresql:// URL, got {location!r:.60}")
    if policy is not None and not isinstance(policy, Thresholds):
        raise MemtapeError(f"policy must be a memtape.Policy, got {type(policy).__name__}")
    chosen = choose_seeds(seeds)
    keepers: tuple[Keeper, ...] = ()
    if str(location).startswith(STORE_URL_PREFIXES):
        store = open_store(url=str(location))
        projections = None
    else:
        store = open_store(location)
        projections = projections_path(store)
        assert projections is not None  # a memory directory's own ledger, its reads verified
        keepers = (HeadFile(head_path(store)), ProjectionsHead(projections))
        try:  # like every command: a ledger cut or rewritten behind this memory's back is refused
            refuse_if_behind(store, keepers)
        except BaseException:
            store.close()
            raise
    # held as the library's own Thresholds, so that it compares equal to the default where it is the default
    rules = Thresholds.model_validate(policy.model_dump()) if policy is not None else DEFAULT_POLICY
    memory = Memory(store, projections, rules, stale_after=stale_after, keepers=keepers, seeds=chosen)
    memory.seeds_chosen = seeds is not None
    return memory
