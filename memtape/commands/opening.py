"""The memory a command records into or recalls from, opened as `--memory-dir`, `--store` and
`--seeds` say (the seeds are checked before anything is created)."""

from __future__ import annotations

from typing import TypeVar

from memtape.commands import current_settings
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.seeds import choose_seeds

Opened = TypeVar("Opened", bound=RecordingMemory)


def open_memory(cls: type[Opened]) -> Opened:
    """The command's memory as a `cls` (the library's `RecordingMemory`, or the API's `Memory`)."""
    settings = current_settings()
    seeds = choose_seeds(settings.seeds)
    memory = cls(settings.store(), settings.projections_path, seeds=seeds)
    memory.seeds_chosen = settings.seeds is not None
    return memory
