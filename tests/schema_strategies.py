"""Hypothesis strategies built from `memtape schema` itself: lines the schema calls valid (extremes
included), and hostile mutations of them. Used by the schema round-trip and the read-path tests."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

from memtape.ledger.event_schema import json_schema
from memtape.ledger.field_rules import DOMAIN_PATTERN, IDENT_PATTERN, INT64_MAX, INT64_MIN, STREAM_PATTERN, TIME_PATTERN
from memtape.ledger.suffixes import is_public_suffix
from memtape.projections.pin import DOOR_ONLY

SCHEMA = json_schema()
DEFS: dict[str, Any] = SCHEMA["$defs"]
TYPES = sorted(name.removeprefix("line_") for name in DEFS if name.startswith("line_"))

#: small pools, so that generated events meet each other (a recall of a recorded lesson, a run's steps)
RUN_IDS = ["r1", "r2", "R-3.x:y@z"]
IDENTS = st.one_of(
    st.sampled_from([*RUN_IDS, "L1", "L2", "t1", "s1"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,12}", fullmatch=True),
    st.just("x" * 200),
)
LABEL = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,6}[A-Za-z0-9])?", fullmatch=True)
DOMAINS = st.one_of(
    st.sampled_from(["a.com", "shop.test", "www.shop.test", "A.COM", "localhost:1", "b.com:65535"]),
    st.builds(
        lambda parts, port: ".".join(parts) + port,
        st.lists(LABEL, min_size=1, max_size=3),
        st.sampled_from(["", ":1", ":80", ":65535"]),
    ),
)
TIMES = st.builds(
    lambda dt, shape: dt.strftime(shape),
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(8999, 12, 31, 23, 59, 59)),
    st.sampled_from(
        [
            "%Y-%m-%d",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%dT%H:%M:%SZ",
            "%Y-%m-%d %H:%M:%S.%f",
            "%Y-%m-%dT%H:%M:%S+05:30",
            "%Y-%m-%dT%H:%M:%S-23:59",
        ]
    ),
)
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    st.sampled_from(["click", "intercepts pointer events", "https://a.com/p?q=1", "ü\u200b𝄞"]),
)
NUMBERS_EDGE = [INT64_MIN, INT64_MAX, 0, 1, -1]
JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        TEXT,
        st.integers(INT64_MIN, INT64_MAX),
        st.sampled_from(NUMBERS_EDGE),
        st.floats(float(INT64_MIN), math.nextafter(2.0**63, 0), allow_nan=False),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)

PATTERNS = {
    IDENT_PATTERN: IDENTS,
    STREAM_PATTERN: st.one_of(IDENTS, st.just("s" * 204)),
    DOMAIN_PATTERN: DOMAINS,
    TIME_PATTERN: TIMES,
}


def _string(node: dict[str, Any]) -> st.SearchStrategy[str]:
    special = PATTERNS.get(node.get("pattern", ""))
    if special is not None:
        return special
    low = node.get("minLength", 0)
    return TEXT.filter(lambda t: len(t) >= low) if low else TEXT


def _integer(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    lo, hi = node.get("minimum", INT64_MIN), node.get("maximum", INT64_MAX)
    ints = st.one_of(st.sampled_from([lo, hi]), st.integers(lo, hi), st.integers(lo, min(hi, lo + 5)))
    return st.one_of(ints, ints.filter(lambda n: abs(n) < 2**52).map(float))  # 3.0 is the integer 3 in JSON


def _number(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    exclusive = "exclusiveMinimum" in node
    lo, hi = node.get("exclusiveMinimum", node.get("minimum", INT64_MIN)), node.get("maximum", INT64_MAX)
    top = float(hi) if float(hi) <= hi else math.nextafter(float(hi), -math.inf)  # 2**63 - 1 is no float
    floats = st.floats(lo, top, allow_nan=False, allow_infinity=False, exclude_min=exclusive)
    ints = st.integers(math.floor(lo) + 1 if exclusive else math.ceil(lo), math.floor(hi))
    return st.one_of(st.sampled_from([hi] if exclusive else [lo, hi]), floats, ints)


def from_schema(node: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values the (subset of JSON Schema that memtape's schema uses) calls valid."""
    if "$ref" in node:
        name = node["$ref"].removeprefix("#/$defs/")
        return JSON_VALUE if name == "JsonValue" else from_schema(DEFS[name], depth)
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "anyOf" in node or "oneOf" in node:
        options = node.get("anyOf") or node.get("oneOf")
        if "pattern" in node:  # scope_domain: the pattern narrows the string branch; no public suffix (a listed rule)
            return st.one_of(st.none(), DOMAINS.filter(lambda d: not is_public_suffix(d.lower())))
        return st.one_of(*(from_schema(o, depth) for o in options))
    kind = node.get("type")
    if kind == "string":
        return _string(node)
    if kind == "integer":
        return _integer(node)
    if kind == "number":
        return _number(node)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            from_schema(node.get("items", {"$ref": "#/$defs/JsonValue"}), depth + 1),
            min_size=node.get("minItems", 0),
            max_size=2 if depth else 3,
        )
    if kind == "object":
        if "properties" not in node:
            extra = node.get("additionalProperties", {"$ref": "#/$defs/JsonValue"})
            return st.dictionaries(TEXT, from_schema(extra, depth + 1), max_size=3)
        return _object(node, depth)
    return JSON_VALUE


def _object(node: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    required = set(node.get("required", ()))
    fields = {name: from_schema(sub, depth + 1) for name, sub in node["properties"].items()}

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, strategy in fields.items():
            if name in required or draw(st.booleans()):
                out[name] = draw(strategy)
        return out

    return build()


LINES = {t: from_schema(DEFS[f"line_{t}"]) for t in TYPES}
#: a line any caller may append: the schema's types less those only their own door writes (a pin, the
#: server's idempotent answer), which every caller's door refuses (tests/test_doors.py)
any_line = st.sampled_from([t for t in TYPES if t not in DOOR_ONLY]).flatmap(lambda t: LINES[t])

#: values an adversary would try in any field
HOSTILE = [
    True,
    False,
    "3",
    "",
    "\x00",
    "\ud800",
    3.0,
    3.5,
    -1,
    0,
    INT64_MAX,
    INT64_MAX + 1,
    INT64_MIN,
    INT64_MIN - 1,
    2**64,
    18446744073709551615,
    1e300,
    -1e300,
    None,
    [],
    {},
    {"k": INT64_MAX + 1},
    ["\x00"],
    "a.com:99999",
    "a.com:0",
    "A.COM",
    "r1\n",
    "r 1",
    "0001-01-01",
    "1969-12-31T23:59:59Z",
    "9000-01-01",
    "2026-01-01T10:00Z",
    "2026-01-01T24:00",
    "x" * 201,
    {"\x00": 1},
]
KEYS = [
    "type",
    "turn",
    "step",
    "run_id",
    "domain",
    "scope_domain",
    "occurred_at",
    "recorded_at",
    "schema_version",
    "use_count",
    "id",
    "stream",
    "goal",
    "policy",
    "lesson_id",
    "action",
    "items",
    "unknown_field",
    "sources",
]


@st.composite
def mutated_line(draw: st.DrawFn) -> dict[str, Any]:
    """A valid line with one field replaced by a hostile value, or removed."""
    line = dict(draw(any_line))
    key = draw(st.sampled_from(sorted({*KEYS, *line})))
    if draw(st.integers(0, 5)) == 0:
        line.pop(key, None)
    else:
        line[key] = draw(st.sampled_from(HOSTILE))
    return line


def dumps(line: dict[str, Any]) -> bytes:
    """Exact JSON (big integers as written; orjson stops at 64 bits)."""
    return json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass")
