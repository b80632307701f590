"""What a `Run` needs of the memory that opened it, as a protocol (`memory.RecordingMemory` is the one), so
the run module does not import the memory module that imports it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.events import Payload
from memtape.projections.parameters import Thresholds
from memtape.projections.recording.values import Lesson, TrajectoryRecall
from memtape.projections.search import SearchResult
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter, RunSoFar


class RunHost(Protocol):
    """The calls a run makes on its memory."""

    policy: Thresholds
    writer: MemoryWriter

    def now(self) -> str: ...

    def current(self) -> MemoryView: ...

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def append_to_run(self, run_id: str, build: Callable[[RunSoFar], Sequence[NewEvent]]) -> list[RecordedEvent]: ...

    def event(
        self,
        cls: type[Payload],
        fields: dict[str, Any],
        *,
        run_id: str | None = None,
        step: int | None = None,
        domain: str | None = None,
        stream: str | None = None,
    ) -> NewEvent: ...

    def tier1(self, *, run_id: str | None = None, step: int | None = 0, domain: str | None = None) -> list[Lesson]: ...

    def recall_domain(self, domain: str, *, run_id: str | None = None, step: int | None = None) -> list[Lesson]: ...

    def recall_error(
        self, command: str, error: str, *, domain: str | None = None, run_id: str | None = None, step: int | None = None
    ) -> list[Lesson]: ...

    def recall_trajectory(
        self, goal: str, url: str, *, run_id: str | None = None, step: int | None = None
    ) -> TrajectoryRecall | None: ...

    def search(
        self,
        query: str,
        *,
        kinds: list[str] | None = None,
        domain: str | None = None,
        as_of: int | str | None = None,
        limit: int = 10,
        run_id: str | None = None,
        step: int | None = None,
    ) -> list[SearchResult]: ...
