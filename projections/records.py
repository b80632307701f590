"""The records a public read answers, by the names the faces' schemas give them.

Each is declared once, by the fold that builds it; this module only gathers their names, so the
Python API, `memtape.face_models` (HTTP and MCP) and the OpenAPI document speak of the same
`Fact`, `SessionEntry` or `Snapshot`, and a face never declares a twin of a library answer.
"""

from __future__ import annotations

from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.knowledge import Fact
from memtape.projections.folds.page_maps import PageMap
from memtape.projections.folds.patterns import Pattern
from memtape.projections.folds.selectors import SelectorEntry
from memtape.projections.folds.sessions import SessionEntry
from memtape.projections.folds.short_term import ShortTerm
from memtape.projections.folds.sitemap import SiteMap
from memtape.projections.folds.snapshots import Snapshot
from memtape.projections.folds.steps import StepMemory

__all__ = [
    "ContextEntry",
    "Fact",
    "PageMap",
    "Pattern",
    "SelectorEntry",
    "SessionEntry",
    "ShortTerm",
    "SiteMap",
    "Snapshot",
    "StepMemory",
]
