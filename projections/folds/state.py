"""MemoryState: every projection's state, and the fold that drives them all.

Each projection module meets `folds.Fold` (the event types it folds, `empty()`,
`apply(state, event, policy) -> state`, `decode(raw)`, `tables(state)`); `apply`
updates the state in place and returns it; it is deterministic (no clock, no
randomness, only insertion-ordered dicts and sorted iteration), so a rebuild and
a catch-up agree.
A state serializes with orjson (dataclasses natively) to canonical JSON, which is
what snapshots store and what digests hash.
"""

from __future__ import annotations

import dis
import hashlib
import importlib
import importlib.machinery
import importlib.util
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import CodeType
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import UnreadableEvent
from memtape.projections import folds
from memtape.projections.folds import FOLDS
from memtape.projections.folds.context import ContextState
from memtape.projections.folds.credit import CreditState
from memtape.projections.folds.knowledge import KnowledgeState
from memtape.projections.folds.lessons import LessonsState
from memtape.projections.folds.page_maps import PageMapsState
from memtape.projections.folds.patterns import PatternsState
from memtape.projections.folds.runs import RunsState
from memtape.projections.folds.scratch import ScratchState
from memtape.projections.folds.selectors import SelectorsState
from memtape.projections.folds.sessions import SessionsState
from memtape.projections.folds.short_term import ShortTermState
from memtape.projections.folds.sitemap import SitemapState
from memtape.projections.folds.snapshots import SnapshotsState
from memtape.projections.folds.steps import StepsState
from memtape.projections.folds.trajectories import TrajectoriesState
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds

PROJECTIONS: tuple[str, ...] = tuple(FOLDS)
#: the value of a projection not loaded yet (typed Any so each field keeps its state's type)
UNLOADED: Any = None


@dataclass
class MemoryState:
    """All projection states at `head` (the last seq folded in). A projection not loaded holds
    `UNLOADED` (None): `empty(names)` fills only the ones asked for, and a lazy state loads each on
    its first read, so a read always sees the projection's state."""

    lessons: LessonsState = UNLOADED
    knowledge: KnowledgeState = UNLOADED
    sessions: SessionsState = UNLOADED
    selectors: SelectorsState = UNLOADED
    trajectories: TrajectoriesState = UNLOADED
    runs: RunsState = UNLOADED
    step_memories: StepsState = UNLOADED
    short_term: ShortTermState = UNLOADED
    patterns: PatternsState = UNLOADED
    context: ContextState = UNLOADED
    snapshots: SnapshotsState = UNLOADED
    sitemap: SitemapState = UNLOADED
    scratch: ScratchState = UNLOADED
    page_maps: PageMapsState = UNLOADED
    credit: CreditState = UNLOADED
    head: int = 0
    heads: dict[str, int] = field(default_factory=dict)

    @classmethod
    def empty(cls, names: Iterable[str] = PROJECTIONS) -> MemoryState:
        state = cls()
        for name in names:
            setattr(state, name, FOLDS[name].empty())
            state.heads[name] = 0
        return state


_NAMES = frozenset(PROJECTIONS)


class LazyState(MemoryState):
    """A MemoryState whose projections are loaded on first access (as-of views)."""

    def __init__(self, loader: Callable[[str], Any], head: int):
        super().__init__(head=head, heads={n: head for n in PROJECTIONS})
        object.__setattr__(self, "_loader", loader)

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if value is None and name in _NAMES:
            value = object.__getattribute__(self, "_loader")(name)
            object.__setattr__(self, name, value)
        return value


Apply = Callable[[Any, RecordedEvent, Thresholds], Any]


def dispatch(names: Iterable[str] = PROJECTIONS) -> dict[str, list[tuple[str, Apply]]]:
    """event type -> [(projection, apply)] for the projections that fold it."""
    table: dict[str, list[tuple[str, Apply]]] = {}
    for name in names:
        mod = FOLDS[name]
        for t in mod.TYPES:
            table.setdefault(t, []).append((name, mod.apply))
    return table


_DISPATCH: dict[tuple[str, ...], dict[str, list[tuple[str, Apply]]]] = {}


#: what a fold raises on a payload the door would have refused (only an edited ledger holds one)
FOLD_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError)


def unfoldable(ev: RecordedEvent, projection: str, exc: Exception) -> UnreadableEvent:
    """The one-line error naming the event a projection could not fold."""
    return UnreadableEvent(
        f"seq {ev.seq}: {ev.type} cannot be folded into {projection} "
        f"({type(exc).__name__}: {str(exc)[:80]}); run `memtape verify`"
    )


def fold(
    state: MemoryState,
    events: Iterable[RecordedEvent],
    policy: Thresholds = DEFAULT_POLICY,
    names: Iterable[str] | None = None,
) -> MemoryState:
    """Fold events (in seq order, after state.head) into every (or the named) projection."""
    active = PROJECTIONS if names is None else tuple(names)
    table = _DISPATCH.get(active)
    if table is None:
        table = _DISPATCH[active] = dispatch(active)
    get = table.get
    head = state.head
    # the states by name in a local dict while the events go by, each read from `state` when an
    # event first needs it (a lazy state loads it then) and written back once at the end
    states: dict[str, Any] = {}
    try:
        for ev in events:
            try:
                for name, fn in get(ev.type, ()):
                    try:
                        before = states[name]
                    except KeyError:
                        before = states[name] = getattr(state, name)
                    states[name] = fn(before, ev, policy)
            except FOLD_ERRORS as exc:
                raise unfoldable(ev, name, exc) from exc
            head = ev.seq
    finally:
        for name, value in states.items():
            setattr(state, name, value)
    state.head = head
    for name in active:
        state.heads[name] = head
    return state


def _default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(type(obj).__name__)


def encode(obj: Any) -> bytes:
    """Canonical JSON of a projection state (keys sorted, dataclasses as objects)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=_default)


def decode(name: str, raw: bytes) -> Any:
    return FOLDS[name].decode(orjson.loads(raw))


def digest_of(obj: Any) -> str:
    return hashlib.sha256(encode(obj)).hexdigest()


def digests(state: MemoryState, names: Iterable[str] = PROJECTIONS) -> dict[str, str]:
    """sha256 of each projection's canonical JSON: equal digests = equal states."""
    return {name: digest_of(getattr(state, name)) for name in names if getattr(state, name) is not None}


def code_version(name: str) -> str:
    """Digest of every first-party module the projection's fold can execute, as loaded in this process:
    its own module, this driver and their import closure (helpers such as steps.py, the event
    upcasters, clock parsing). A change to any of them means a rebuild."""
    return sources_digest(FOLDS[name].__name__)


@cache
def sources_digest(module_name: str) -> str:
    """Digest of the sources of `module_name`'s first-party import closure (and of this module):
    what a cache built by that module's code depends on."""
    h = hashlib.sha256()
    for path in _fold_sources(module_name):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@cache
def _fold_sources(module_name: str) -> tuple[Path, ...]:
    """Source files of the first-party import closure of `module_name` and of this module,
    found statically (function-level imports included), in a stable order. The registry of
    folds is read but not followed: it imports every fold, and a fold runs only its own."""
    seen: dict[str, Path] = {}
    pending = [module_name, __name__]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        path = _source(current)
        if path is None:
            continue
        seen[current] = path
        if current != _REGISTRY:
            pending.extend(_first_party_imports(current, path))
    return tuple(seen[m] for m in sorted(seen))


def _source(module_name: str) -> Path | None:
    spec = importlib.util.find_spec(module_name)
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


@cache
def _first_party_imports(module_name: str, path: Path) -> tuple[str, ...]:
    """The first-party modules one source file imports, read off its compiled code — Python's
    bytecode cache when it is current, so a cold process parses no source to fingerprint its
    folds (read once per process: the closures of the projections share most files)."""
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    code = importlib.machinery.SourceFileLoader(module_name, str(path)).get_code(module_name)
    if code is None:  # typed as optional for loaders without source; a source file always compiles to code
        return ()
    found: list[str] = []
    for level, module_part, names in _imports(code):
        base = importlib.util.resolve_name("." * level + module_part, package) if level else module_part
        found.append(base)
        # `from package import submodule` names a module too
        found.extend(f"{base}.{name}" for name in names if _is_module(f"{base}.{name}"))
    return tuple(name for name in found if name == _FIRST_PARTY or name.startswith(_FIRST_PARTY + "."))


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _imports(code: CodeType) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(level, module, names) of every import statement compiled into `code` and into the functions
    and classes it defines (an import inside a function counts too). An import is compiled as
    two loads, its level and its names, then IMPORT_NAME."""
    if _IMPORT_NAME in code.co_code:  # a byte that may be the opcode: only then is the code read
        loaded: list[Any] = []
        for ins in dis.get_instructions(code):
            if ins.opcode == _IMPORT_NAME:
                level, names = loaded[-2:]
                yield level, ins.argval, tuple(names or ())
            loaded = [*loaded[-1:], ins.argval] if ins.opname.startswith("LOAD_") else []
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _imports(const)


@cache
def _is_module(name: str) -> bool:
    """Whether `name` (`package.attribute` of a `from package import attribute`) is a module. Only
    a package has submodules: a module's name is never imported to find out (finding
    `memtape.ledger.pgstore.PostgresStore` would run pgstore, and psycopg with it)."""
    if not name.startswith(_FIRST_PARTY + "."):
        return False
    try:
        parent = importlib.util.find_spec(name.rpartition(".")[0])
        return (
            parent is not None
            and parent.submodule_search_locations is not None
            and importlib.util.find_spec(name) is not None
        )
    except ModuleNotFoundError:
        return False


_FIRST_PARTY = __name__.partition(".")[0]
_REGISTRY = folds.__name__


def fingerprint(name: str, policy: Thresholds) -> str:
    return f"{code_version(name)}-{policy.fingerprint()}"
