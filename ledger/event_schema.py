"""The JSON Schema of one event as a JSON Lines line (`memtape schema`, `memtape append`), with
the rules a schema cannot say (`CROSS_FIELD_RULES`) that `append` still checks."""

from __future__ import annotations

from typing import Any, cast

from pydantic import JsonValue

from memtape.ledger.events import EVENT_TYPES, min_version
from memtape.ledger.field_rules import (
    DOMAIN_PATTERN,
    IDENT_PATTERN,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_TEXT,
    STREAM_PATTERN,
    TEXT_PATTERN,
    TIME_PATTERN,
)

#: what JSON Schema cannot say about a line, and `append` still checks
CROSS_FIELD_RULES = (
    "occurred_at (and recorded_at) must name a real calendar time: the pattern admits 2026-02-30, append does not.",
    "An id must be unique in the ledger (a batch repeating one, or one already stored, is refused whole).",
    f"A payload may nest objects and arrays at most {MAX_DEPTH} levels deep; a step_recorded's action at most "
    f"{MAX_DEPTH - 1} (its run's trajectory carries the arguments one level deeper).",
    "A lesson_pinned must name a lesson memory holds.",
)
_TEXT = {"type": "string", "maxLength": MAX_TEXT, "pattern": TEXT_PATTERN}
_JSON_VALUE = {
    "anyOf": [
        _TEXT,
        {"type": "number", "minimum": INT64_MIN, "maximum": INT64_MAX},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": "#/$defs/JsonValue"}},
        {"type": "object", "propertyNames": _TEXT, "additionalProperties": {"$ref": "#/$defs/JsonValue"}},
    ]
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _envelope_schema(needs_run: bool) -> dict[str, Any]:
    ident = {"type": "string", "pattern": IDENT_PATTERN}
    time = {"type": "string", "pattern": TIME_PATTERN}
    return {
        "id": _nullable(ident) | {"description": "event id (a UUIDv7 when absent); unique in the ledger"},
        "run_id": (ident if needs_run else _nullable(ident)) | {"description": "the run this event belongs to"},
        "step": _nullable({"type": "integer", "minimum": 0, "maximum": INT64_MAX}) | {"description": "step of the run"},
        "domain": _nullable({"type": "string", "pattern": DOMAIN_PATTERN})
        | {"description": "host where it happened (stored lower-cased)"},
        "stream": _nullable({"type": "string", "pattern": STREAM_PATTERN})
        | {"description": "stream for optimistic concurrency (default run-<run_id> or memory)"},
        "occurred_at": _nullable(time)
        | {"description": "when it happened (UTC when no offset); default: recorded time"},
        "recorded_at": _nullable(time) | {"description": "read as occurred_at (the store sets recorded time)"},
    }


def _constrain(node: Any) -> None:
    """What `check_value` enforces, written into pydantic's schema: storable text everywhere, and
    free-form values (`dict[str, Any]`) as bounded JSON."""
    if isinstance(node, list):
        for item in node:
            _constrain(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and "const" not in node and "enum" not in node:
        node.setdefault("pattern", TEXT_PATTERN)
        node["maxLength"] = min(node.get("maxLength", MAX_TEXT), MAX_TEXT)
    if node.get("type") == "object" and "properties" not in node:  # a dict: keys are text too
        node["propertyNames"] = dict(_TEXT)
        if node.get("additionalProperties", True) in (True, {}):
            node["additionalProperties"] = {"$ref": "#/$defs/JsonValue"}
    for key, value in node.items():
        if key not in ("propertyNames", "const", "enum", "default"):
            _constrain(value)


def line_schema(type_: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One event type's line as `append` takes it (payload fields and envelope at the top level),
    and the definitions it refers to."""
    cls = EVENT_TYPES[type_]
    payload = cls.model_json_schema(ref_template="#/$defs/{model}")
    defs = payload.pop("$defs", {})
    defs.pop("JsonValue", None)  # pydantic's own (any value at all): a line's JsonValue is the bounded one
    props = payload["properties"]
    props["type"] = {"const": type_}
    props["schema_version"] = {
        "type": "integer",
        "minimum": min_version(cls),
        "maximum": cls.CURRENT_VERSION,
        "description": "payload version; a newer one is refused (written by a newer memtape)",
    }
    for name, info in cls.model_fields.items():
        if name == "scope_domain":
            props[name]["pattern"] = DOMAIN_PATTERN
        if cast(object, info.annotation) is JsonValue:  # free-form JSON: bounded like every dict[str, Any]
            props[name] = {"$ref": "#/$defs/JsonValue", "default": info.default}
        if info.description is None and name in props:
            props[name].pop("title", None)
    overlap = set(props) & set(_envelope_schema(False))
    assert not overlap, overlap  # a payload field may not shadow the envelope
    props.update(_envelope_schema(cls.NEEDS_RUN))
    required = ["type", *payload.get("required", []), *(["run_id"] if cls.NEEDS_RUN else [])]
    doc = (cls.__doc__ or f"A {type_} event").strip().splitlines()[0].rstrip(".") + "."
    line = {
        "title": type_,
        "description": doc + (" Needs a run_id." if cls.NEEDS_RUN else ""),
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    _constrain(line)
    _constrain(defs)
    return line, defs


def json_schema(type_: str | None = None) -> dict[str, Any]:
    """The JSON Schema (2020-12) of a whole JSON Lines event as `memtape append` takes it: one
    type's, or every type's (`oneOf`, told apart by `type`). A line is accepted exactly when it is
    valid, except for `CROSS_FIELD_RULES`, which the description lists."""
    if type_ is not None and type_ not in EVENT_TYPES:
        raise KeyError(type_)
    defs: dict[str, Any] = {"JsonValue": _JSON_VALUE}
    lines: dict[str, Any] = {}
    for name in [type_] if type_ else sorted(EVENT_TYPES):
        lines[name], nested = line_schema(name)
        defs.update(nested)
    rules = " Also checked: " + " ".join(CROSS_FIELD_RULES)
    if type_ is not None:
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            **lines[type_],
            "description": lines[type_]["description"] + rules,
            "$defs": defs,
        }
    defs.update({f"line_{name}": schema for name, schema in lines.items()})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "memtape event line",
        "description": "One line of `memtape append` input: `type`, the payload fields and the envelope "
        "fields at the top level." + rules,
        "oneOf": [{"$ref": f"#/$defs/line_{name}"} for name in lines],
        "$defs": defs,
    }
