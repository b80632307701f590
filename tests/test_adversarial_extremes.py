"""Events at the door's bounds, and the as-of index that files them.

Every number at the extremes its field accepts (signed 64-bit integers, ±9e18, the smallest
subnormal), text at its longest (100,000 characters, four-byte ones included), empty and made of
separators, line breaks and direction marks, steps at 2**63-1, ids that look like SQL or paths, and
free-form values nested as deeply as the door allows: appended through the policy writer or raw,
they give as-of answers from the index equal to the fold at every seq, and the readers (state,
audit, explain, rebuild) answer them without an internal error.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import NewEvent
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import PAYLOAD_ADAPTER
from memtape.ledger.field_rules import INT64_MAX, INT64_MIN, MAX_TEXT, REAL_MAX
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import materialize
from memtape.projections.writer import MemoryWriter
from tests.cli_runner import run_cli
from tests.ledger_samples import SAMPLES, T, fill
from tests.projections_support import step
from tests.test_projections_determinism import _write, memory_events
from tests.test_projections_intervals import checked_by_index

INTS = [INT64_MAX, INT64_MIN, 0, -1, 1, 2**53 + 1, 1_000_000, 1_000_001]
FLOATS = [REAL_MAX, -REAL_MAX, 5e-324, -5e-324, 1e-300, 0.0, -0.0, 0.1, 1.0, 2.0**53]
TEXTS = [
    "",
    " ",
    "\x1f",
    "\x1e\x1f\n",
    "a\u2028b\u2029c",
    "\u202eevil\u202c",
    "\U0010ffff" * 3,
    "e\u0301",
    "'; DROP TABLE _intervals; --",
    "../../etc/passwd",
    "%s%n{0}",
    "\\",
    "\ufeff",
    "NULL",
]
LONG = ["x" * MAX_TEXT, "\U0001f600" * MAX_TEXT]
IDENTS = ["a..b", "9..", "a:b@c", "1e5", "A" * 200, "run-1", "0", "SELECT", "NULL", "a.-_:@", "e..:..:etc"]
DOMAINS = ["a.b:65535", "x" * 63 + ".com", ".".join(["a" * 61] * 4), "xn--bcher-kva.example", "1.2.3.4"]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def _valid(data: dict[str, Any]) -> bool:
    try:
        PAYLOAD_ADAPTER.validate_python(json.loads(json.dumps(data)))
    except (pydantic.ValidationError, ValueError):
        return False
    return True


@st.composite
def extreme_events(draw: Any) -> NewEvent:
    """A valid event of any type whose numbers and texts are each pushed to an extreme its field
    accepts (a leaf whose extreme the field refuses keeps the sample's value)."""
    type_ = draw(st.sampled_from(sorted(SAMPLES)))
    data = {"type": type_, **fill(SAMPLES[type_], "text")}
    long_once = draw(st.booleans())
    for path, value in _leaves(SAMPLES[type_]):
        if value is T:
            candidates = LONG if long_once and draw(st.booleans()) else TEXTS
            new: Any = draw(st.sampled_from(candidates))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            new = draw(st.sampled_from(INTS))
        elif isinstance(value, float):
            new = draw(st.sampled_from(FLOATS))
        else:
            continue
        old = "text" if value is T else value
        _set(data, path, new)
        if not _valid(data):
            _set(data, path, old)
    payload = PAYLOAD_ADAPTER.validate_python(data)
    run_id = draw(st.sampled_from(IDENTS)) if payload.NEEDS_RUN else draw(st.none() | st.sampled_from(IDENTS))
    return NewEvent(
        payload=payload,
        run_id=run_id,
        step=draw(st.none() | st.sampled_from([0, 1, INT64_MAX])),
        domain=draw(st.none() | st.sampled_from(DOMAINS)),
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    items=st.lists(extreme_events() | memory_events(), min_size=1, max_size=25),
    cut=st.integers(0, 25),
    points=st.lists(st.integers(0, 60), min_size=1, max_size=4),
)
def test_extreme_events_as_of_by_index_equal_the_fold(items: list[Any], cut: int, points: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.open(Path(tmp) / "ledger.db", clock=SteppingClock())
        writer = MemoryWriter(store, check_runs=False)  # any log, as `append --raw` may hold
        path = Path(tmp) / "projections.db"
        _write(store, writer, items[:cut])
        materialize.caught_up(store, path)  # a catch-up in the middle: the next one closes its versions
        _write(store, writer, items[cut:])
        materialize.caught_up(store, path)
        assert checked_by_index(store, path, points)
        store.close()


def test_readers_answer_the_longest_texts_and_the_largest_numbers(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    writer = MemoryWriter(store)
    long_text = "\U0001f600" * MAX_TEXT
    writer.append(
        [step("r" * 200, INT64_MAX, args={"n": INT64_MIN, "x": -REAL_MAX, "t": long_text}, domain="x" * 63 + ".com")]
    )
    store.append(
        [
            NewEvent(
                payload=PAYLOAD_ADAPTER.validate_python(
                    {"type": "lesson_recorded", **fill(SAMPLES["lesson_recorded"], long_text)}
                ),
                domain="a.b:65535",
            )
        ]
    )
    store.close()
    raw = [
        {
            "type": "lesson_promoted",
            "lesson_id": "l2",
            "lesson": "\u202eevil\u202c",
            "use_count": INT64_MAX,
            "triggered_domains": DOMAINS,
        },
        {"type": "facts_pruned", "facts": [{"key": "\x1f", "confidence": 5e-324}], "threshold": 1.0},
        {
            "type": "lessons_pruned",
            "lesson_ids": ["l2"],
            "pruned_count": INT64_MAX,
            "remaining_count": 0,
            "as_of": "8999-12-31T23:59:59.999999Z",
        },
    ]
    r = run_cli(
        "--memory-dir",
        str(memory_path),
        "append",
        "--raw",
        "-",
        stdin="".join(json.dumps(line) + "\n" for line in raw).encode(),
    )
    assert r.code == 0, r.err
    with SqliteStore.open(memory_path / "ledger.db") as store:
        head = store.head()
    for command in (
        ("state", "short-term", "--json"),
        ("state", "lessons", "--as-of", str(head - 1), "--json"),
        ("audit", "r" * 200, "--json"),
        ("audit", "r" * 200, "--step", str(INT64_MAX), "--json"),
        ("explain", "l2", "--json"),
        ("rebuild",),
        ("state", "lessons", "--json"),
    ):
        r = run_cli("--memory-dir", str(memory_path), *command)
        assert r.code == 0 and "internal error" not in r.err, (command[:2], r.err[-300:])
    r = run_cli("--memory-dir", str(memory_path), "state", "short-term", "--json")
    assert str(INT64_MIN) in r.out and long_text in r.out


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _deepest_accepted() -> int:
    """The deepest step args the door accepts (found by bisection: the test does not assume the bound)."""
    lo, hi = 0, 400
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            step("r1", 1, args=_nested(mid))
            lo = mid
        except (pydantic.ValidationError, ValueError):
            hi = mid - 1
    return lo


def test_the_deepest_payload_the_door_accepts_breaks_no_reader(memory_path: Path) -> None:
    """Found by this review: args nested 251 deep were accepted (orjson's limit is 255), and every
    reader after them failed on an internal error — the states nest them further."""
    depth = _deepest_accepted()
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    MemoryWriter(store).append([step("r1", 1, args=_nested(depth)), step("r1", 2)])
    store.close()
    for command in (
        ("state", "short-term", "--json"),
        ("audit", "r1", "--json"),
        ("audit", "r1", "--step", "1"),
        ("rebuild",),
        ("state", "short-term", "--as-of", "1", "--json"),
    ):
        r = run_cli("--memory-dir", str(memory_path), *command)
        assert r.code == 0, (command, r.err[-300:])
    line = json.dumps(
        {
            "type": "step_recorded",
            "run_id": "r2",
            "step": 1,
            "env_before": {"url": "https://x.com/"},
            "env_after": {"url": "https://x.com/"},
            "ok": True,
            "action": {"command": "click", "args": _nested(depth + 1)},
        }
    )
    r = run_cli("--memory-dir", str(memory_path), "append", "-", stdin=(line + "\n").encode())
    assert r.code == 1 and r.err.count("\n") == 1 and "nested more than" in r.err and "nothing was written" in r.err
    with pytest.raises((InvalidEvent, pydantic.ValidationError)) as refused:
        step("r2", 1, args=_nested(depth + 1))
    assert "nested more than" in str(refused.value)


def test_points_and_names_at_the_limits_get_an_answer_or_one_line(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db", clock=SteppingClock())
    MemoryWriter(store).append([step("r1", 1), step("r1", 2)])
    store.close()
    latest = run_cli("--memory-dir", str(memory_path), "state", "short-term", "--json")
    r = run_cli("--memory-dir", str(memory_path), "state", "short-term", "--as-of", str(INT64_MAX), "--json")
    assert r.code == 0 and r.out == latest.out  # a seq beyond the head is the head
    refused = [
        ("state", "short-term", "--as-of", str(INT64_MAX + 1)),
        ("state", "short-term", "--as-of", "10" * 30),
        ("state", "short-term", "--as-of", "-1"),
        ("audit", "r1", "--step", str(INT64_MAX + 1)),
        ("audit", "'; DROP TABLE _intervals; --"),
        ("audit", "x" * 5000),
        ("explain", "'; DROP TABLE _intervals; --"),
        ("explain", "../../etc/passwd"),
        ("explain", ""),
    ]
    for command in refused:
        r = run_cli("--memory-dir", str(memory_path), *command)
        assert r.code in (1, 2) and r.err.count("\n") == 1 and r.err.startswith("error: "), (command[:2], r.err)
    assert run_cli("--memory-dir", str(memory_path), "state", "short-term", "--json").out == latest.out
