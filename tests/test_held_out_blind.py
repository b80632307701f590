"""The blind held-out corpus (tests/held_out_secrets_blind.py) recorded through the library.

Each text goes in as an agent would carry it: a lesson, a fact and a step (its thinking and its
typed argument). Then every needle of a secret is looked for at rest: the memory directory's
bytes (ledger, projections.db and its decompressed states), the events as the ledger returns
them, and every export format. A kept value must come back whole in the events and the JSON
export. The shapes the redactor misses today are named in STILL_MISSED (and the kept values it
eats in STILL_REDACTED): the test fails when one of those changes either way, so the sets say
exactly what holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import memtape
from memtape.projections.interop.exporters import EXPORT_FORMATS, export_memory
from tests.held_out_secrets_blind import KEPT, SECRETS, Shape
from tests.security_support import scan

#: secret shapes some needle of which is at rest after recording: measured once the general secret
#: classes landed (main at 2026-12-04 22:04 UTC), not tuned to: 4 of 78 were; none since the four the first measure missed (a bare 32-hex auth token beside its account id in a
#: call, a Sentry DSN's key as a URL's user name, a reset link's token before another parameter, a
#: Brazilian CPF) were closed by classes in ledger/redact.py; docs/trust.md gives that first measure
STILL_MISSED: frozenset[str] = frozenset()
#: kept values some needle of which does not come back whole
STILL_REDACTED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Measured:
    #: shape name -> the places a secret needle was found at rest
    at_rest: dict[str, list[str]]
    #: shape name -> needles of a kept value that did not come back whole
    lost: dict[str, list[str]]


def _record(mem: memtape.Memory, shape: Shape) -> None:
    run = mem.start_run(goal=f"Check the {shape.kind} settings", start_url="https://shop.example/")
    run.record_step(
        1,
        "type",
        'textbox "Notes"',
        url="https://shop.example/settings",
        args={"text": shape.text},
        think=f"The user gave me this to use:\n{shape.text}",
    )
    run.record_lesson(f"When asked about {shape.kind}: {shape.text}", category="site_specific")
    run.observe_fact("quirk", f"pasted_{shape.name}", shape.text)
    run.finish(success=True, outcome="done")


def measure(root: Path) -> Measured:
    """Record every shape into one memory under `root`, export it, and look for every needle."""
    memory_dir = root / "memory"
    with memtape.open(memory_dir) as mem:
        for shape in (*SECRETS, *KEPT):
            _record(mem, shape)
        events = "\n".join(ev.payload_json for ev in mem.store.read())
        exports = root / "exports"
        exports.mkdir()
        state = mem.current().state
        for fmt in EXPORT_FORMATS:
            export_memory(state, mem.store, fmt, exports / f"memory.{fmt}")
    at_rest: dict[str, list[str]] = {}
    for shape in SECRETS:
        places = [place for place, _needle in scan(root, shape.needles)]
        places += ["events"] * any(n.lower() in events.lower() for n in shape.needles)
        if places:
            at_rest[shape.name] = sorted({Path(p).name for p in places})
    exported = "".join(p.read_text(errors="replace") for p in sorted(exports.rglob("*")) if p.is_file())
    lost = {
        shape.name: missing
        for shape in KEPT
        if (missing := [n for n in shape.needles if n not in events or n not in exported])
    }
    return Measured(at_rest, lost)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Measured]:
    yield measure(tmp_path_factory.mktemp("blind"))


def test_no_secret_of_the_blind_corpus_is_at_rest_but_those_named(measured: Measured) -> None:
    caught_now = sorted(name for name in STILL_MISSED if name not in measured.at_rest)
    assert caught_now == [], f"caught now: take them out of STILL_MISSED: {caught_now}"
    missed = {name: places for name, places in measured.at_rest.items() if name not in STILL_MISSED}
    assert missed == {}, f"at rest: {missed}"


def test_no_kept_value_of_the_blind_corpus_is_redacted_but_those_named(measured: Measured) -> None:
    kept_now = sorted(name for name in STILL_REDACTED if name not in measured.lost)
    assert kept_now == [], f"kept now: take them out of STILL_REDACTED: {kept_now}"
    lost = {name: needles for name, needles in measured.lost.items() if name not in STILL_REDACTED}
    assert lost == {}, f"redacted: {lost}"


def test_the_corpus_is_as_wide_as_promised() -> None:
    assert len(SECRETS) >= 40 and len(KEPT) >= 20
    assert len({s.kind for s in SECRETS}) >= 10
    for shape in (*SECRETS, *KEPT):
        assert shape.needles and all(n in shape.text for n in shape.needles), shape.name
