"""The records the API hands back (`Lesson`, `Learned`, `Extraction`, `TrajectoryRecall`) and the
step record post-run learning reads (`StepRecord`), with the `role "name"` element text they use."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.events import FactObserved, LessonRecorded, PatternLearned, TrajectoryRecorded
from memtape.projections.folds import lessons as lessons_mod
from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.trajectories import Trajectory
from memtape.projections.text import domain_of

#: `role "name"`, the way prompts and lessons name an element (quotes escaped as in `quoted_name`)
ELEMENT = re.compile(r'^([A-Za-z][A-Za-z0-9_-]*) "((?:[^"\\]|\\.)*)"$', re.S)


def element_text(role: str | None, name: str | None) -> str | None:
    """`button "Buy"` from a role and a name (None without a role)."""
    if not role:
        return None
    return f'{role} "' + (name or "").replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_element(text: str | None) -> tuple[str | None, str | None]:
    """(role, name) of `button "Buy"`; any other text is a name without a role."""
    if text is None:
        return None, None
    m = ELEMENT.match(text)
    if m is None:
        return None, text
    return m.group(1), re.sub(r"\\(.)", r"\1", m.group(2))


@dataclass
class StepRecord:
    """One executed step as memory keeps it for post-run learning."""

    step: int
    command: str
    args: dict[str, Any]
    ok: bool
    error: str | None
    url_before: str
    url_after: str
    role: str | None = None
    name: str | None = None
    selector: str | None = None
    sensitive: bool = False
    duration_ms: float = 0.0
    decided_by: str = "policy"
    in_shadow: bool = False
    event_id: str | None = None

    @property
    def domain(self) -> str:
        return domain_of(self.url_before) or domain_of(self.url_after)

    @property
    def identity(self) -> tuple[str | None, str | None]:
        return (self.role, self.name)

    @classmethod
    def from_event(cls, ev: RecordedEvent) -> StepRecord:
        """The step a `step_recorded` event logged (a run finished in another process learns from these)."""
        d = ev.data
        action, target = d["action"], d.get("target") or {}
        role = target.get("role") or None
        return cls(
            step=ev.step or 0,
            command=action["command"],
            args=dict(action.get("args") or {}),
            ok=d["ok"],
            error=d.get("error"),
            url_before=(d.get("env_before") or {}).get("url", ""),
            url_after=(d.get("env_after") or {}).get("url", ""),
            role=role,
            name=target.get("name") if role else None,
            selector=target.get("selector"),
            in_shadow=bool(target.get("in_shadow")),
            sensitive=bool(action.get("sensitive")),
            duration_ms=float(d.get("duration_ms") or 0.0),
            decided_by=d.get("decided_by", "policy"),
            event_id=ev.id,
        )


@dataclass
class Learned:
    """What post-run learning produced (also returned to the caller for reports and tests)."""

    lessons: list[LessonRecorded] = field(default_factory=list)
    facts: list[FactObserved] = field(default_factory=list)
    trajectory: TrajectoryRecorded | None = None
    patterns: list[PatternLearned] = field(default_factory=list)


@dataclass(frozen=True)
class Extraction:
    """An extraction as the agent uses it: from the page now, or served from the cache."""

    key: str
    tool: str
    url: str
    title: str
    text: str
    links: tuple[dict[str, str], ...]
    section_count: int
    served_from_cache: bool
    event_id: str

    @classmethod
    def served(cls, key: str, cached: ContextEntry) -> Extraction:
        """The extraction the cache serves for `key`: the entry of its extraction_recorded event."""
        return cls(
            key,
            cached.source,
            cached.url,
            cached.title,
            cached.value,
            cached.links,
            cached.section_count,
            True,
            cached.event_ids[0],
        )

    @classmethod
    def recorded(cls, key: str, tool: str, url: str, event: RecordedEvent) -> Extraction:
        """The extraction just made with `tool` at `url`: its text, title and links as the
        extraction_recorded event stored them."""
        d = event.data
        return cls(key, tool, url, d["title"], d["text"], tuple(d["links"]), d["section_count"], False, event.id)


@dataclass(frozen=True, slots=True)
class Lesson:
    """A lesson as recall returns it; `event_ids` are the events it came from (for provenance)."""

    lesson_id: str
    text: str
    category: str
    use_count: int
    triggered_domains: tuple[str, ...]
    event_ids: tuple[str, ...]
    failed_command: str | None = None
    error_pattern: str | None = None
    scope_domain: str | None = None
    source: str = "learned"
    #: what a recall matched (`pattern+command`, `pattern`, `command`, `domain`, `host`; None outside a
    #: recall) and the score it ranked by; a `command` match was offered but not counted as a use
    score: float = 0.0
    matched: str | None = None

    @classmethod
    def of(cls, lesson: lessons_mod.LessonEntry, match: lessons_mod.Match | None = None) -> Lesson:
        return cls(
            lesson_id=lesson.lesson_id,
            text=lesson.lesson,
            category=lesson.category,
            use_count=lesson.use_count,
            triggered_domains=lesson.triggered_domains,
            event_ids=lesson.event_ids,
            failed_command=lesson.failed_command,
            error_pattern=lesson.error_pattern,
            scope_domain=lesson.scope_domain,
            source=lesson.source,
            score=match.score if match else 0.0,
            matched=match.matched if match else None,
        )

    @classmethod
    def recalled(cls, match: lessons_mod.Match) -> Lesson:
        return cls.of(match.lesson, match)


@dataclass(frozen=True, slots=True)
class TrajectoryRecall:
    """The reference trajectory recalled for a goal, and whether it is close enough to replay
    (similarity ≥ replay_min_similarity, the same origin, some steps)."""

    trajectory: Trajectory
    similarity: float
    score: float
    replay: bool


@dataclass(frozen=True, slots=True)
class Scenario:
    """A run that continues an earlier one (a resume or a fork), as `start_run`'s fields:
    `memory.start_run(**dataclasses.asdict(scenario))` starts it. `start_url` is where the earlier
    run ended ("" when it recorded no URL: give one)."""

    goal: str
    start_url: str
    session_id: str
    parent_run_id: str
    mode: str  # resume | fork
    case_id: str | None = None
