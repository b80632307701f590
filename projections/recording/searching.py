"""A run's search of memory by words: `Run` takes it from `RunSearch` (the search's own job, beside
the run's recording; `memory.RecordingMemory.search` does the searching)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from memtape.projections.recording.checks import checked_arguments
from memtape.projections.recording.host import RunHost
from memtape.projections.search import SearchResult, check_search


@checked_arguments
class RunSearch:
    """`search` for a `Run`, which supplies what is declared here."""

    memory: RunHost
    run_id: str
    enabled: bool
    timed: Callable[[], AbstractContextManager[None]]
    scrub: Callable[[Any], Any]
    _live: Callable[..., None]

    def search(
        self,
        query: str,
        *,
        kinds: list[str] | None = None,
        domain: str | None = None,
        as_of: int | str | None = None,
        limit: int = 10,
        step: int | None = None,
    ) -> list[SearchResult]:
        """`Memory.search` logged against this run and `step` (the query's known secrets scrubbed)."""
        self._live()
        if not self.enabled:  # memory off: nothing is searched or logged, bad input is still refused
            check_search(query, kinds, limit)
            return []
        with self.timed():
            return self.memory.search(
                self.scrub(query), kinds=kinds, domain=domain, as_of=as_of, limit=limit, run_id=self.run_id, step=step
            )
