"""Small pure helpers shared by the projections: words, Jaccard, names, URLs, domains, time.

Kept in one place so that every projection (and the indexes in view.py)
tokenizes and compares exactly the same way.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import MISSING, fields
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar, cast

from memtape.ledger.clock import parse_ts
from memtape.ledger.envelope import twin
from memtape.ledger.suffixes import host_name, site_of
from memtape.ledger.urls import url_parts

WORD_RE = re.compile(r"[a-z0-9]+")
#: what seed 000's agent removes before splitting a text into words
NOT_WORD = re.compile(r"[^a-z0-9\s]")
#: how much of an element's name a lesson, a fact or a prompt line quotes
CAP_NAME = 80


def words(text: str | None) -> frozenset[str]:
    """The lower-cased word set of step intents and context relevance (seeds 002 and 003 compare
    words; `max_products` is `max` and `products`)."""
    if not text:
        return frozenset()
    return frozenset(WORD_RE.findall(text.lower()))


def goal_words(text: str | None) -> frozenset[str]:
    """The word set of goal similarity, tokenized as seed 000's agent does: lower-cased, every
    character outside `[a-z0-9]` and whitespace removed (`e-mail` is `email`, `N.Y.!` is `ny`),
    split on whitespace, one-character words dropped."""
    if not text:
        return frozenset()
    return frozenset(w for w in NOT_WORD.sub("", text.lower()).split() if len(w) > 1)


def goal_names(goal: str, name: str | None) -> bool:
    """Whether `goal` names the element called `name`: every word of the name (as goal similarity
    tokenizes words) is a word of the goal. `Open "Local bakery wins award"` names the link of
    that name, a goal that logs in "with password" the field "Password"; a goal that only opens an
    article names neither "Archive" nor "Next page". The rule by which memory about an element
    (a learned pattern's step, a field's quirk) goes into a prompt only for a goal that acts on it."""
    said = goal_words(name)
    return bool(said) and said <= goal_words(goal)


def clip(text: str | None, limit: int) -> str:
    """`text` in at most `limit` characters; a cut ends with "…" (at a word boundary when one is near)."""
    text = text or ""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 1, 0)]
    space = head.rfind(" ")
    if space >= limit * 2 // 3:
        head = head[:space]
    return head.rstrip() + "…"


def cap(text: str | None, limit: int) -> str:
    """`text` in at most `limit` characters, cut with "…" wherever the limit falls (page text and
    element names, which have no word boundary to prefer), NUL characters removed."""
    text = (text or "").replace("\x00", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted_name(name: str, limit: int = CAP_NAME) -> str:
    """An element name as a quoted string literal (capped, quotes escaped), as lessons and facts
    store it; a prompt shows memory's names with `fenced`."""
    return '"' + cap(name, limit).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


# ---- memory text in a prompt: data, never instructions ------------------------------------------


def data_line(text: str | None, limit: int | None = None) -> str:
    """`text` as one line of data (at most `limit` characters of it, cut with "…"): every control,
    format and separator character (line and paragraph breaks, tabs, escapes, bidi overrides,
    zero-width and no-break spaces) a space, runs of spaces one, and `<`/`>` written as `‹`/`›`, so
    that no memory item can close the block or fence around it (`</memtape_memory>`, the bundled
    agent's `>>>`), pose as a tag of the prompt, or start a heading or message of its own."""
    flat = "".join(" " if unicodedata.category(c)[0] in "CZ" and c != " " else c for c in text or "")
    flat = " ".join(flat.split())
    if limit is not None and len(flat) > limit:
        flat = flat[: max(limit - 1, 0)] + "…"
    return flat.replace("<", "‹").replace(">", "›")


def fenced(text: str | None, limit: int | None = None) -> str:
    """One memory item (a lesson, a fact's key or value, a session's goal, a trajectory step's
    name or URL) as a prompt shows it: `data_line` in double quotes, a quote or backslash inside
    escaped, so that where the item ends is never in doubt. The prompts memtape builds render
    memory text through these two functions only (the bundled agent's prompt items `fenced`,
    the browser-use adapter's fence one `data_line` per item)."""
    return '"' + data_line(text, limit).replace("\\", "\\\\").replace('"', '\\"') + '"'


#: what reads as instructions to a model rather than a lesson about a site, each with its name: a
#: tag that would close memory's fence or pose as a message of its own, the stock injection phrase,
#: a markdown heading that starts a section, a role label opening a line
INSTRUCTION_SHAPES = (
    (
        "a memory fence or role tag",
        re.compile(
            r"</?\s*(?:memtape_memory|system|assistant|user|developer|tool|instructions?|prompt)\b[^<>]*>"
            r"|<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|<<<|>>>",
            re.IGNORECASE,
        ),
    ),
    (
        "'ignore previous instructions'",
        re.compile(
            r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
            r"(?:previous|prior|above|earlier|preceding|all|other|system)\s+"
            r"(?:instructions?|rules|prompts?|directions|guidelines|messages?)\b",
            re.IGNORECASE,
        ),
    ),
    ("a markdown heading", re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S", re.MULTILINE)),
    (
        "a role label at a line start",
        re.compile(r"^\s*(?:system|assistant|developer)\s*:", re.IGNORECASE | re.MULTILINE),
    ),
)


def instruction_like(text: str) -> str | None:
    """What in `text` reads as instructions to the model (the first shape of `INSTRUCTION_SHAPES`
    it holds), or None. Such a lesson is never promoted into every system prompt: it stays a
    recallable lesson, flagged in `state`, and only a person's pin can put it in Tier 1."""
    return next((name for name, shape in INSTRUCTION_SHAPES if shape.search(text)), None)


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; empty sets match nothing (0.0)."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def domain_of(url: str) -> str:
    """The host name of a URL (lower case, no port): the memory's domain key."""
    return (url_parts(url).hostname or "").lower()


def origin_of(url: str) -> str:
    """Scheme and host of a URL (`https://shop.test:8080`): a recorded trajectory replays only on
    the origin it was recorded on."""
    parts = url_parts(url)
    return f"{parts.scheme}://{parts.netloc.lower()}" if parts.scheme else ""


def domain_matches(host: str | None, scope: str | None) -> bool:
    """`www.amazon.com` matches scope `amazon.com` (suffix on a dot boundary), never a scope above
    the host's registrable domain: `a.co.uk` does not match `co.uk` (see `ledger.suffixes`)."""
    if not host or not scope:
        return False
    host, scope = host.lower(), scope.lower()
    if host == scope:
        return True
    site = site_of(host)
    return host.endswith("." + scope) and site is not None and len(host_name(scope)) >= len(site)


def parent_domains(host: str) -> list[str]:
    """`www.amazon.com` -> [`www.amazon.com`, `amazon.com`]: every scope that matches it, down to
    its registrable domain (never a public suffix such as `com`)."""
    host = host.lower()
    site = site_of(host)
    out = [host]
    i = host.find(".")
    while i >= 0 and site is not None:
        host = host[i + 1 :]
        if len(host_name(host)) < len(site):
            break
        out.append(host)
        i = host.find(".")
    return out


@lru_cache(maxsize=65536)
def ts(text: str) -> datetime:
    """Parse a stored timestamp (cached: the same strings come back often)."""
    return parse_ts(text)


def older_than(then: str, now: str, days: float) -> bool:
    """True when `then` is MORE than `days` before `now` (exactly `days` is not older)."""
    return ts(now) - ts(then) > timedelta(days=days)


def age_days(then: str, now: str) -> float:
    return (ts(now) - ts(then)).total_seconds() / 86400.0


def normalize_text(text: str) -> str:
    """Lesson text compared for dedup: lower-cased words joined by one space."""
    return " ".join(WORD_RE.findall(text.lower()))


#: a frozen slots record of the folds (a Lesson, a Fact, ...)
Record = TypeVar("Record")

_EVOLVERS: dict[tuple[Any, ...], Any] = {}


def evolve(obj: Record, **changes: Any) -> Record:
    """`dataclasses.replace` for the frozen slots records in the folds' hot paths: the fields are
    copied into the record's plain twin (`ledger.envelope.twin`, no __init__, no frozen
    __setattr__) by a function generated once per record class and set of changed fields.
    Measured by `python bench/records.py`: 0.66 µs against 4.01 µs by `dataclasses.replace`
    (6.1x, 2026-12-04)."""
    key = (type(obj), *changes)
    copy = _EVOLVERS.get(key)
    if copy is None:
        copy = _EVOLVERS[key] = _evolver(type(obj), tuple(changes))
    return cast(Record, copy(obj, changes))


def _evolver(cls: type, changed: tuple[str, ...]) -> Any:
    names = [f.name for f in fields(cls)]
    unknown = set(changed) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    lines = ["def copy(obj, changes):", "    o = new(twin)"]
    lines += [f"    o.{n} = changes[{n!r}]" if n in changed else f"    o.{n} = obj.{n}" for n in names]
    lines += ["    o.__class__ = cls", "    return o"]
    env: dict[str, Any] = {"new": object.__new__, "twin": twin(cls), "cls": cls}
    exec("\n".join(lines), env)  # noqa: S102 - generated from the dataclass's own field names
    return env["copy"]


_BUILDERS: dict[type, Any] = {}


def build(cls: type[Record], row: dict[str, Any], **override: Any) -> Record:
    """A frozen slots record from its JSON row (no __init__: its twin's slots are set directly by a
    function generated once per class), for decoding snapshots quickly; fields missing from
    the row take their defaults. Measured by `python bench/records.py`: 1.17 µs against 1.85 µs
    by `LessonEntry(**row)` (1.6x, 2026-12-04)."""
    make = _BUILDERS.get(cls)
    if make is None:
        make = _BUILDERS[cls] = _builder(cls)
    new = make(row)
    for name, value in override.items():
        cls.__dict__[name].__set__(new, value)
    return cast(Record, new)


def _builder(cls: type) -> Any:
    names = [f.name for f in fields(cls)]
    env: dict[str, Any] = {"new": object.__new__, "twin": twin(cls), "cls": cls, "default": _default}
    lines = ["def make(row):", "    o = new(twin)", "    get = row.get"]
    for name in names:
        lines.append(f"    v = get({name!r}, row)")
        lines.append(f"    o.{name} = default(cls, {name!r}) if v is row else v")
    lines += ["    o.__class__ = cls", "    return o"]
    exec("\n".join(lines), env)  # noqa: S102 - generated from the dataclass's own field names
    return env["make"]


def _default(cls: type, name: str) -> Any:
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    raise KeyError(f"{cls.__name__}.{name} missing from a stored state")


MAX_EVENT_IDS = 8


def add_event_id(ids: tuple[str, ...], new: str) -> tuple[str, ...]:
    """Provenance: the first event and the latest ones (bounded so hot items stay small)."""
    if new in ids[-1:]:
        return ids
    if len(ids) < MAX_EVENT_IDS:
        return (*ids, new)
    return (ids[0], *ids[2:], new)


def covered_runs(data: dict[str, Any]) -> set[str]:
    """Every run a `subject_forgotten` covers: its own `run_ids` (resolved when it was forgotten: a
    session's runs, the runs started on a domain) and, for a run, the run itself."""
    runs = set(data.get("run_ids") or ())
    if data.get("subject_kind") == "run":
        runs.add(data["subject"])
    return runs


def forgotten_runs(data: dict[str, Any]) -> set[str]:
    """The runs whose introductions (facts, selectors) a forgotten run or session takes along;
    a forgotten domain takes its own facts and selectors by domain instead."""
    return covered_runs(data) if data.get("subject_kind") in ("run", "session") else set()


def forget_per_run(by_run: dict[str, dict[str, Any]], session_of: dict[str, str], data: dict[str, Any]) -> None:
    """Fold a `subject_forgotten` into run -> key -> item working memory (items with a `domain`), in
    place: the pads of every run it covers (a session's, by `session_of` too) go whole; a forgotten
    domain also takes the items set on that site in any run."""
    kind, subject = data["subject_kind"], data["subject"]
    runs = covered_runs(data)
    if kind == "session":
        runs |= {r for r, s in session_of.items() if s == subject}
    for r in runs:
        by_run.pop(r, None)
        session_of.pop(r, None)
    if kind == "domain":
        for run, items in list(by_run.items()):
            for key in [k for k, item in items.items() if domain_matches(item.domain, subject)]:
                del items[key]
            if not items:
                del by_run[run]
