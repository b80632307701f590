"""The input checks every API call makes before anything is built: bad input raises `InvalidEvent`
with a one-line message, so each face (library, CLI, HTTP, MCP) refuses the same input the same way."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any, TypeVar

import orjson
from pydantic import ConfigDict, TypeAdapter, ValidationError

from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import ContextItem, Embedding
from memtape.ledger.field_rules import TEXT_RE
from memtape.ledger.jsonl import first_error
from memtape.projections.budget import count_tokens

Checked = TypeVar("Checked")

CONTEXT_ITEM_KEYS = frozenset(
    {"source", "text", "priority", "event_ids", "content_type", "confidence", "truncated", "tokens"}
)


#: the most of one context item's text a context_built event keeps (the rest is cut, `truncated: true`)
MAX_ITEM_CHARS = 20_000


def one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return first_error(exc)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_step(step: Any, what: str = "step", *, required: bool = False) -> int | None:
    if step is None and not required:
        return None
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**63:
        raise InvalidEvent(f"{what} must be an integer from 0 to 2**63-1, got {step!r:.60}")
    return step


def check_text(value: Any, what: str, *, empty: bool = False, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise InvalidEvent(f"{what} must be a non-empty string, got {value!r:.60}")
    return value


def check_storable(value: Any, what: str) -> None:
    """Text the call hashes or encodes itself before the ledger's door sees it (a lesson's dedup key,
    an action's signature, an audit's run id): refused as the door refuses it, not as the encoder fails."""
    if isinstance(value, str) and not TEXT_RE.search(value):
        raise InvalidEvent(f"{what}: text contains a NUL character or a lone surrogate")


def check_amount(value: Any, what: str, *, whole: bool = False) -> Any:
    """A number >= 0 (an integer when `whole`), never a bool; None passes (a default applies)."""
    kinds = (int,) if whole else (int, float)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds) or not 0 <= value < 2**63):
        raise InvalidEvent(f"{what} must be {'an integer' if whole else 'a number'} >= 0, got {value!r:.60}")
    return value


def check_point(value: Any, what: str) -> int | str | None:
    """A point of the ledger as the API takes it: a seq (an integer >= 0) or an ISO time; None passes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, int) and value < 0):
        raise InvalidEvent(f"{what} must be a seq (an integer >= 0) or an ISO time, got {value!r:.60}")
    return value


def plain(value: Any) -> Any:
    """The value exactly as the command line's `--json` prints it."""
    return orjson.loads(
        orjson.dumps(value, default=lambda v: asdict(v) if is_dataclass(v) and not isinstance(v, type) else str(v))
    )


EMBEDDING: TypeAdapter[list[float]] = TypeAdapter(Embedding)


def check_embedding(vector: Any) -> tuple[float, ...]:
    """A vector as `step_recorded` stores it (real numbers, at most MAX_EMBEDDING), never empty."""
    if isinstance(vector, str | bytes) or not vector:
        raise InvalidEvent(f"embedding must be a non-empty list of numbers, got {vector!r:.60}")
    try:
        return tuple(EMBEDDING.validate_python(list(vector), strict=True))
    except (TypeError, ValidationError) as exc:
        raise InvalidEvent(f"embedding: {one_line(exc)}") from None


def check_flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidEvent(f"{what} must be True or False, got {value!r:.60}")
    return value


def context_items(items: Any, what: str) -> list[Mapping[str, Any]]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidEvent(f"context_built: {what} must be a list of mappings")
    for item in items:
        if not isinstance(item, Mapping):
            raise InvalidEvent(f"context_built: each of {what} must be a mapping, got {type(item).__name__}")
        unknown = set(item) - CONTEXT_ITEM_KEYS
        if unknown:
            raise InvalidEvent(
                f"context_built: unknown item key {sorted(unknown)[0]!r}; known: {', '.join(sorted(CONTEXT_ITEM_KEYS))}"
            )
    return list(items)


def context_item(item: Mapping[str, Any], scrub: Callable[[Any], Any]) -> ContextItem:
    """One prompt item as context_built records it, its text passed through `scrub` (the run's secrets)."""
    try:
        text, kind = item["text"], item.get("content_type", "text")
        cut = isinstance(text, str) and len(text) > MAX_ITEM_CHARS
        # the agent's own count (its tokenizer) when it gives one, else this process's counter
        tokens = (
            item["tokens"]
            if "tokens" in item
            else (count_tokens(text, kind) if isinstance(text, str) and isinstance(kind, str) else 0)
        )
        return ContextItem(
            **scrub(
                {
                    "source": item["source"],
                    "priority": item["priority"],
                    "tokens": tokens,
                    "content_type": kind,
                    "confidence": item.get("confidence", 1.0),
                    "text": text[:MAX_ITEM_CHARS] if isinstance(text, str) else text,
                    "event_ids": list(dict.fromkeys(item.get("event_ids") or ()))[:64],
                    # an item cut here says so, whatever the caller said: an audit must not read it as whole
                    "truncated": cut or item.get("truncated", False),
                }
            )
        )
    except KeyError as exc:
        raise InvalidEvent(f"context_built: an item needs {exc.args[0]!r}") from None
    except (ValidationError, TypeError) as exc:
        raise InvalidEvent(f"context_built.items: {one_line(exc)}") from None


_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


def _argument_adapters(fn: Callable[..., Any]) -> dict[str, TypeAdapter[Any]]:
    hints = typing.get_type_hints(fn)
    return {
        name: TypeAdapter(hints[name], config=_STRICT)
        for name, p in inspect.signature(fn).parameters.items()
        if name in hints and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and hints[name] is not Any
    }


_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "bool": "True or False",
    "dict": "a mapping",
    "list": "a list",
    "none": "None",
    "callable": "a function",
    "timedelta": "a timedelta",
    "datetime": "a datetime",
}
_PLURALS = {"int": "integers", "float": "numbers", "str": "strings"}


def _in_words(schema: Any) -> str:
    """What a parameter's type takes, said to the caller ("a pair of whole numbers or None")."""
    kind = schema.get("type")
    if kind == "nullable":
        return f"{_in_words(schema['schema'])} or None"
    if kind == "default":
        return _in_words(schema["schema"])
    if kind == "union":
        return " or ".join(_in_words(c[0] if isinstance(c, tuple) else c) for c in schema["choices"])
    items = schema.get("items_schema", [])
    if kind == "tuple" and len(items) == 2 and items[0] == items[1] and not schema.get("variadic_item_index"):
        return f"a pair of {_PLURALS.get(str(items[0].get('type')), 'values')}"
    if kind in ("list", "tuple", "set", "frozenset", "generator"):
        return "a list"
    if kind == "is-instance":
        return f"a {schema['cls'].__name__}"
    if kind == "json-or-python":
        return _in_words(schema["json_schema"])
    if kind == "lax-or-strict":
        return _in_words(schema["strict_schema"])
    if kind not in _WORDS and isinstance(schema.get("schema"), dict):
        return _in_words(schema["schema"])
    return _WORDS.get(str(kind), "another type")


def _validate(adapter: TypeAdapter[Any], value: Any) -> None:
    try:
        adapter.validate_python(value)
    except ValidationError:
        if not isinstance(value, list | tuple):
            raise
        # a tuple where a list is declared, or a JSON array where a pair is: the same to the caller
        adapter.validate_python(tuple(value) if isinstance(value, list) else list(value))


def _checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(fn)
    adapters: dict[str, TypeAdapter[Any]] | None = None

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal adapters
        if adapters is None:  # on first use: the annotations name classes defined after this module
            adapters = _argument_adapters(fn)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidEvent(f"{fn.__name__}: {one_line(exc)}") from None
        for name, value in bound.arguments.items():
            adapter = adapters.get(name)
            if adapter is not None:
                try:
                    _validate(adapter, value)
                except ValidationError:
                    raise InvalidEvent(
                        f"{fn.__name__}: {name} must be {_in_words(adapter.core_schema)}, got {value!r:.60}"
                    ) from None
        return fn(*args, **kwargs)

    return call


def checked_arguments(cls: type[Checked]) -> type[Checked]:
    """Check every public method's arguments against its annotations (strictly: no coercion) before
    it runs, so a wrong type or None where none is taken raises InvalidEvent in
    one line on every call, instead of whatever the body would meet (TypeError, AttributeError, ...).
    The method still receives the arguments unchanged; ranges and contents stay its own checks'."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _checked(member))
    return cls
