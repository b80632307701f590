"""Projection states kept decoded in this process between catch-ups of projections.db.

Decoding a projection's stored state costs as much as its size (at 100,000 events the steps of
every run are a few hundred ms), so a catch-up that decoded every state its new events touch cost
in proportion to the whole memory, not to the few events appended since. A long-lived process
(`memtape serve`, the viewer) instead keeps the states its last catch-up left, and the next
catch-up folds its new events into them.

What is kept is tied to the digest of projections.db that the catch-up which kept it sealed
(`db.Cache.digest`): the digest counts every row of the file, its states and checkpoints among
them, so a file whose sealed digest is still that one holds exactly the states kept here (another
process's catch-up, a rebuild, a forget or an edit changes it, and everything kept for the file
is dropped). A catch-up takes the states out before it folds into them (one that fails keeps
nothing), and a state is folded in place only while nobody else holds it: one lent to a reader
(`lend`) that still holds it is decoded again instead. A state is lent only to readers that fold
nothing into it (`load_state(..., lend=True)`: a list of records built and thrown away).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the references `sys.getrefcount` counts for a state held by one local name only (the name and
#: the call's own argument)
_ALONE = 2
_guard = threading.Lock()


@dataclass
class Kept:
    """The states kept for one projections.db, as of the digest its last catch-up here sealed."""

    digest: str
    states: dict[str, Any] = field(default_factory=dict)


_kept: dict[str, Kept] = {}


def take(path: Path, digest: str) -> dict[str, Any]:
    """The states kept for the file at `path` while its sealed digest is `digest`, taken out (the
    caller folds into them, or drops them): empty when the file changed since they were kept."""
    with _guard:
        kept = _kept.pop(str(path), None)
    if kept is None or kept.digest != digest:
        return {}
    return kept.states


def owned(states: dict[str, Any], name: str) -> Any:
    """`states[name]` taken out of `states` when no reader still holds it (it may then be folded
    into in place); None otherwise."""
    state = states.pop(name, None)
    if state is None or sys.getrefcount(state) > _ALONE:
        return None
    return state


def keep(path: Path, digest: str, states: dict[str, Any]) -> None:
    """Keep `states` (name -> state at the file's checkpoint) for the file whose sealed digest is
    now `digest`."""
    with _guard:
        _kept[str(path)] = Kept(digest, dict(states))


def lend(path: Path, digest: str, name: str) -> Any:
    """The kept state of projection `name` while the file's sealed digest is `digest`, else None."""
    with _guard:
        kept = _kept.get(str(path))
        return kept.states.get(name) if kept is not None and kept.digest == digest else None


def add(path: Path, digest: str, name: str, state: Any) -> None:
    """Keep a state a reader decoded at the checkpoint sealed with `digest` (when what is kept for
    the file is of that digest, or nothing is)."""
    with _guard:
        kept = _kept.get(str(path))
        if kept is None:
            _kept[str(path)] = Kept(digest, {name: state})
        elif kept.digest == digest:
            kept.states.setdefault(name, state)


def drop(path: Path) -> None:
    """Forget what is kept for the file at `path` (it is being removed or rewritten)."""
    with _guard:
        _kept.pop(str(path), None)
