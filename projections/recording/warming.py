"""Warming a long-lived process's caches before it answers anyone (`memtape serve`, `memtape ui`).

A process with nothing kept pays, at its first read, for everything the ledger gained while no
process was serving it: the catch-up of projections.db (the states the new events reach decoded
and folded into), then the decoding of each state the read touches. At 1,000,000 events the first
`/ui/` after one run appended elsewhere took 15.1 s, 0.56 s after a warm-up (`bench/serve_start.py`;
docs/benchmarks.md, "The web viewer"). A server warms instead: it catches up, then decodes every
projection's state into what this process keeps between catch-ups (`projections/cache/kept.py`),
before it says where it listens. The pages and `state` then read the kept states, and the next
catch-up folds the new events into them. It also opens the view recalls and writes fold into and
builds the full-text index of it (the first search at 1,000,000 events would otherwise take 2 to 4 s
to index every document), so the first recall and the first search are not the ones that pay.
"""

from __future__ import annotations

from memtape.projections.cache.materialize import FoldProgress, load_state
from memtape.projections.folds.state import PROJECTIONS
from memtape.projections.recording.memory import RecordingMemory

#: what `warm` reports while it decodes (after any catch-up's own reports), with the projection
DECODING = "decoding"
#: what it reports first (a catch-up of a few events reports nothing of its own)
CATCHING_UP = "catching up"
#: what it reports once every state is decoded, while it builds the full-text index of memory
INDEXING = "indexing for search"


def warm(memory: RecordingMemory, progress: FoldProgress | None = None) -> int:
    """Catch `memory`'s projections.db up with the ledger and decode every projection's state at
    the head into the states this process keeps, so that the first read pays neither; returns the
    head warmed. `progress` is told (what, done, total) as the catch-up folds events and before
    each projection is decoded (`decoding NAME`), then (`indexing for search`, total, total) while
    it builds the search index, and last (`decoding`, total, total). A memory without
    projections.db (a fold of the log each read: nothing kept) is left as it is."""
    total = len(PROJECTIONS)
    head = int(memory.store.head())
    if memory.projections_path is not None:
        if progress is not None:
            progress(CATCHING_UP, 0, total)
        state = load_state(memory.store, memory.projections_path, memory.policy, progress=progress, lend=True)
        for done, name in enumerate(PROJECTIONS):
            if progress is not None:
                progress(f"{DECODING} {name}", done, total)
            getattr(state, name)  # decoded on first access, and kept (lend)
        head = state.head
        if progress is not None:
            progress(INDEXING, total, total)
        memory.search_index()  # the recall path's own view, decoded, and the full-text index of it
    if progress is not None:
        progress(DECODING, total, total)
    return head
