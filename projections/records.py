"""The records a public read answers, by the names the faces' schemas give them.

Each is declared once, by the fold that builds it; this module only gathers their names, so the
Python API, `memtape.face_models` (HTTP and MCP) and the OpenAPI document speak of the same
`Fact`, `SessionEntry` or `Snapshot`, and a face never declares a twin of a library answer.
"""

from __future__ import annotations

from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.credit import ItemCredit
from memtape.projections.folds.knowledge import Fact
from memtape.projections.folds.page_maps import PageMap
from memtape.projections.folds.patterns import Pattern
from memtape.projections.folds.runs import RunManifest
from memtape.projections.folds.scratch import ScratchEntry
from memtape.projections.folds.selectors import SelectorEntry
from memtape.projections.folds.sessions import SessionEntry
from memtape.projections.folds.short_term import ShortTerm
from memtape.projections.folds.sitemap import SiteMap, SitePage
from memtape.projections.folds.snapshots import Snapshot
from memtape.projections.folds.steps import StepMemory
from memtape.projections.folds.trajectories import Trajectory
from memtape.projections.state_rows import Change, ListedLesson

__all__ = [
    "Change",
    "ContextEntry",
    "Fact",
    "ItemCredit",
    "ListedLesson",
    "PageMap",
    "Pattern",
    "RunManifest",
    "ScratchEntry",
    "SelectorEntry",
    "SessionEntry",
    "ShortTerm",
    "SiteMap",
    "SitePage",
    "Snapshot",
    "StepMemory",
    "Trajectory",
]
