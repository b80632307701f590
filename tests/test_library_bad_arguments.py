"""Every bad argument to the library raises MemtapeError, and a refusal writes nothing.

A hunt over the whole public surface (`memtape.open` → `Memory`, and the `Run` it starts): each
public method, one argument at a time replaced by something an adversary or a careless caller
passes (a wrong type, None, 2**63, NaN, a 1 MB string, a lone surrogate, a NUL byte, ...), the
others given ordinary values. Whatever the method does with it, the only exception it may raise
is a MemtapeError, the ledger is untouched when it refuses, and the run still records a step.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from memtape import MemtapeError

SHOP = "https://shop.example/"
_LATER_STEP = 4_611_686_018_427_387_917

#: methods that end or replace the run, or hand out plumbing rather than take a caller's values
_NOT_HUNTED = {"finish", "finish_run", "close", "timed", "take_step_ms", "append", "append_to_run", "once", "event"}

_BAD_FIXED: list[Any] = [
    None,
    True,
    2**63,
    2**64 + 1,
    -1,
    -(2**63) - 1,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    1e308,
    "",
    " ",
    "x" * 1_000_000,
    "\ud800",
    "a\udfffb",
    "a\x00b",
    "\x00",
    b"bytes",
    bytearray(b"x"),
    [1],
    [None],
    ["\ud800"],
    {"a": 1},
    {1: 2},
    {"": "\ud800"},
    (),
    object(),
    1.5,
    math.pi,
    {"a"},
]

BAD = st.one_of(
    st.sampled_from(_BAD_FIXED),
    st.integers(),
    st.floats(),
    st.text(st.characters(codec=None, categories=None), max_size=40),
    st.binary(max_size=20),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.floats()), max_size=3),
)


def _ordinary(p: inspect.Parameter) -> Any:
    """An ordinary value for a parameter the hunt is not aiming at, from its name and annotation."""
    if p.default is not inspect.Parameter.empty:
        return p.default
    hint = str(p.annotation)
    if "url" in p.name:
        return SHOP + "a"
    if p.name == "domain":
        return "shop.example"
    if "Mapping" in hint or "dict" in hint:
        return {}
    if "Sequence" in hint or "list" in hint:
        return []
    if "str" in hint:
        return "k"
    if "bool" in hint:
        return True
    if "int" in hint:
        return 1
    if "float" in hint:
        return 0.5
    return "k"


def _targets(owner: type) -> list[tuple[str, str]]:
    return sorted(
        (name, p)
        for name, fn in inspect.getmembers(owner, inspect.isfunction)
        if not name.startswith("_") and name not in _NOT_HUNTED
        for p in list(inspect.signature(fn).parameters)[1:]
        if inspect.signature(fn).parameters[p].kind
        not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )


MEMORY_TARGETS = _targets(memtape.Memory)
RUN_TARGETS = _targets(memtape.Run)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memtape.Memory]:
    with memtape.open(tmp_path_factory.mktemp("hunt") / "memory") as mem:
        yield mem


def _call(owner: Any, method: str, aimed: str, bad: Any) -> None:
    fn = getattr(owner, method)
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    fn(**{p.name: (bad if p.name == aimed else _ordinary(p)) for p in params})


def _hunt(mem: memtape.Memory, owner: Any, method: str, aimed: str, bad: Any) -> None:
    before = mem.store.head()
    try:
        _call(owner, method, aimed, bad)
    except MemtapeError as refused:
        assert "\n" not in str(refused).strip(), (method, aimed, str(refused)[:300])
        assert mem.store.head() == before, f"{method}({aimed}={bad!r:.60}) refused but wrote"
    except Exception as exc:  # the bug this test hunts: anything else escapes the library's boundary
        pytest.fail(f"{method}({aimed}={bad!r:.60}) raised {type(exc).__name__}: {str(exc)[:200]}")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(RUN_TARGETS), bad=BAD)
def test_a_bad_argument_to_a_run_raises_memtape_error(
    memory: memtape.Memory, target: tuple[str, str], bad: Any
) -> None:
    run = memory.start_run(goal="Buy socks", start_url=SHOP)
    _hunt(memory, run, *target, bad)
    # whatever was taken or refused, the run still records (a step number the hunt never picks)
    run.record_step(_LATER_STEP, "click", 'button "Buy"', url=SHOP)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(MEMORY_TARGETS), bad=BAD)
def test_a_bad_argument_to_memory_raises_memtape_error(
    memory: memtape.Memory, target: tuple[str, str], bad: Any
) -> None:
    _hunt(memory, memory, *target, bad)
    run = memory.start_run(goal="Buy socks", start_url=SHOP)
    run.record_step(1, "click", 'button "Buy"', url=SHOP)


@pytest.mark.parametrize("target", RUN_TARGETS, ids=lambda t: f"{t[0]}.{t[1]}")
def test_every_run_argument_refuses_the_extremes(memory: memtape.Memory, target: tuple[str, str]) -> None:
    run = memory.start_run(goal="Buy socks", start_url=SHOP)
    for bad in (None, 2**63, float("nan"), "\ud800", b"x", [None], object()):
        _hunt(memory, run, *target, bad)


@pytest.mark.parametrize("target", MEMORY_TARGETS, ids=lambda t: f"{t[0]}.{t[1]}")
def test_every_memory_argument_refuses_the_extremes(memory: memtape.Memory, target: tuple[str, str]) -> None:
    for bad in (None, 2**63, float("nan"), "\ud800", b"x", [None], object()):
        _hunt(memory, memory, *target, bad)


def test_the_refusal_names_the_argument(memory: memtape.Memory) -> None:
    run = memory.start_run(goal="Buy socks", start_url=SHOP)
    with pytest.raises(MemtapeError, match="duration_ms") as refused:
        run.record_step(2, "click", duration_ms=None)  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)
    with pytest.raises(MemtapeError, match="url"):
        run.progress(1, None)  # type: ignore[arg-type]
    with pytest.raises(MemtapeError, match="run_id: text contains a NUL character or a lone surrogate"):
        memory.audit("\ud800")
    with pytest.raises(MemtapeError, match="unexpected keyword"):
        run.record_step(2, "click", colour="red")  # type: ignore[call-arg]
