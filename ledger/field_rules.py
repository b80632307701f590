"""The rules every stored field obeys: the patterns, limits and checks of ids, domains, times,
numbers, text and URLs, shared by the payload models (`events`), the envelope (`envelope`) and
the JSON Schema of a line (`event_schema`), so Python and a schema validator agree."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, WithJsonSchema

#: Patterns are written so that Python's `re.search` and an ECMA-262 validator agree (`$(?!\n)`:
#: Python's `$` also matches before a final newline); the JSON Schema carries the same strings.
PORT_PATTERN = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
DOMAIN_PATTERN = (
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?)*"
    rf"(?::{PORT_PATTERN})?$(?!\n)"
)
IDENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$(?!\n)"
#: a stream may be longer than an id by the store's "run-" prefix (the stream of a run's events)
STREAM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,203}$(?!\n)"
#: an ISO time from 1970 to 8999 (the seed formats' shapes); the calendar check is `datetime`'s
TIME_PATTERN = (
    r"^(?:19[7-9][0-9]|[2-8][0-9]{3})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?$(?!\n)"
)
#: every string: no NUL, no lone surrogate (neither can be stored as UTF-8 text)
TEXT_PATTERN = "^[^\\u0000\\ud800-\\udfff]*$"
DOMAIN_RE = re.compile(DOMAIN_PATTERN)
IDENT_RE = re.compile(IDENT_PATTERN)
STREAM_RE = re.compile(STREAM_PATTERN)
TIME_RE = re.compile(TIME_PATTERN)
TEXT_RE = re.compile(TEXT_PATTERN)
MAX_TEXT = 100_000
#: how deeply a payload may nest (a step's args, a page's state): every reader nests it further
#: (projection states, audits, exports) and JSON encoders stop at 255 levels, so a stored event
#: nested near that limit would break every read after it
MAX_DEPTH = 64
#: every number the ledger stores lies in signed 64-bit range, so that SQLite, DuckDB and Parquet hold it
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def integral(value: Any) -> Any:
    """JSON has one number type: 3.0 is the integer 3 (as JSON Schema's "integer" says); "3" and true are not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Int64 = Annotated[int, Ge(INT64_MIN), Le(INT64_MAX), BeforeValidator(integral)]
Count = Annotated[int, Ge(0), Le(INT64_MAX), BeforeValidator(integral)]
Positive = Annotated[int, Ge(1), Le(INT64_MAX), BeforeValidator(integral)]
#: a float field's bound is a float itself (2**63 - 1 is none), so a stored value validates again on read
REAL_MAX = 9e18


def _within(low: float, high: float) -> Callable[[Any], Any]:
    """The bound checked on the number as given: pydantic compares an int's float rounding instead."""

    def check(value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool) and not low <= value <= high:
            raise ValueError(f"must be from {low:g} to {high:g}")
        return value

    return check


Real = Annotated[float, Ge(-REAL_MAX), Le(REAL_MAX), BeforeValidator(_within(-REAL_MAX, REAL_MAX))]
Duration = Annotated[float, Ge(0), Le(REAL_MAX), BeforeValidator(_within(0, REAL_MAX))]


def _timestamp(value: str) -> str:
    check_time(value, "time")
    return value


#: a time inside a payload (a lesson's last use, a pruning's as-of): folds do date arithmetic on it
Timestamp = Annotated[str, AfterValidator(_timestamp), WithJsonSchema({"type": "string", "pattern": TIME_PATTERN})]


#: URL schemes whose URL carries the code or page it opens: a browser sent to one runs what the
#: URL says, not a site's page
SCRIPT_SCHEMES = ("javascript", "vbscript", "data")


def _scheme_pattern(schemes: tuple[str, ...]) -> str:
    """A URL of one of `schemes` as a browser reads it: leading spaces and controls skipped, tabs and
    newlines anywhere dropped, the scheme in any case (one pattern for Python and ECMA-262)."""
    spelled = ("[\\t\\n\\r]*".join(f"[{c.lower()}{c.upper()}]" for c in scheme) for scheme in schemes)
    return "^[\\u0000-\\u0020]*(?:" + "|".join(spelled) + ")[\\t\\n\\r]*:"


SCRIPT_URL_PATTERN = _scheme_pattern(SCRIPT_SCHEMES)
SCRIPT_URL_RE = re.compile(SCRIPT_URL_PATTERN)


def _navigable(value: str) -> str:
    if SCRIPT_URL_RE.search(value):
        raise ValueError(
            f"{', '.join(s + ':' for s in SCRIPT_SCHEMES)} URLs carry the code they open, "
            "so memtape sends no browser to one; give the site's address (https://...)"
        )
    return value


#: where memtape sends a browser: a run's start (the bundled agent and replays open it), an
#: exploration's home page and the links it goes on to (where a page was is what happened: any URL)
NavigableUrl = Annotated[
    str, AfterValidator(_navigable), Field(json_schema_extra={"not": {"pattern": SCRIPT_URL_PATTERN}})
]


def check_domain(value: str | None, exact: bool = False) -> str | None:
    """A host name (optionally with a port 1-65535), lower-cased; refuses paths, NULs, spaces.
    `exact` (a JSON line): no surrounding space stripped, as the schema's pattern says."""
    if value is None:
        return None
    if not exact:
        value = value.strip().lower()
    if not DOMAIN_RE.search(value):
        raise ValueError(f"invalid domain {value[:60]!r}: expected a host name like example.com (port 1-65535)")
    return value.lower()  # ASCII only: the pattern admits nothing else


def check_ident(value: str | None, what: str = "id") -> str | None:
    if value is None:
        return None
    longest, pattern = (204, STREAM_RE) if what == "stream" else (200, IDENT_RE)
    if not pattern.search(value):
        raise ValueError(f"invalid {what} {value[:60]!r}: letters, digits and _.:@- only, at most {longest}")
    return value


def check_time(value: str, what: str = "occurred_at") -> str:
    """An ISO time the ledger can store and do date arithmetic on (1970-8999, a real calendar day)."""
    if not TIME_RE.search(value):
        raise ValueError(
            f"{what}: expected an ISO time from 1970 to 8999 like 2026-01-31T12:00:00Z, not {value[:40]!r}"
        )
    try:
        datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError as exc:
        raise ValueError(f"{what}: not a calendar time ({str(exc)[:60]})") from None
    return value


def check_occurred(value: datetime | str) -> None:
    """A time given from Python: any form `datetime` parses, within the door's years in UTC (a line's
    1970-01-01T00:00+05:30 is 1969-12-31 in UTC), so date arithmetic on it never overflows."""
    try:
        when = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(value.strip()[:-1] + "+00:00" if value.strip().endswith("Z") else value.strip())
        )
        if when.tzinfo is not None:
            when = when.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"occurred_at: not an ISO time ({str(exc)[:60]})") from None
    if not 1969 <= when.year <= 9000:
        raise ValueError("occurred_at: expected a time from 1970 to 8999")


def check_value(value: Any, limit: int = MAX_DEPTH) -> None:
    """Every string (dict keys included) and number, nested at most `limit` levels: storable text,
    finite numbers in signed 64-bit range. The error names the path (`action.args.n: ...`). A part
    a face built as a model (an `Action`, a `ContextItem`) is walked like the dict it stands for:
    its own validation knows neither the payload's depth nor, for most parts, these rules."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        where = f"{path}: " if path else ""
        if isinstance(item, BaseModel):
            item = dict(item)
        if depth > limit and isinstance(item, dict | list | tuple):
            raise ValueError(f"{path[:60]}{'...' if len(path) > 60 else ''}: nested more than {limit} levels deep")
        if isinstance(item, str):
            if not TEXT_RE.search(item):
                raise ValueError(f"{where}text contains a NUL character or a lone surrogate")
            if len(item) > MAX_TEXT:
                raise ValueError(f"{where}text longer than {MAX_TEXT} characters")
        elif isinstance(item, dict):
            for key, sub in item.items():
                stack.append((path, key, depth) if isinstance(key, str) else (path, None, depth))
                stack.append((f"{path}.{key}" if path else str(key), sub, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}.{i}", sub, depth + 1) for i, sub in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{where}numbers must be finite (JSON has no NaN or Infinity)")
        elif isinstance(item, int | float) and not isinstance(item, bool) and not INT64_MIN <= item <= INT64_MAX:
            raise ValueError(f"{where}number {item!r:.30} outside the signed 64-bit range")
