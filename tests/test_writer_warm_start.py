"""Every writer starts from projections.db, read outside the write lock: the first write after
`memtape.open()` (or of `forget`) folds inside its BEGIN IMMEDIATE only the events appended since
projections.db was read, never the whole log, so a big memory's first write does not hold every
other writer behind the lock while it replays the ledger."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import memtape
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.events import FactObserved
from memtape.ledger.store import SqliteStore, Transaction
from memtape.projections.cache import materialize
from memtape.projections.forgetting import forget

SHOP = "https://shop.example/"


@pytest.fixture
def inside_lock(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What was done while a write transaction was open: `seq N` for each event read back (what a
    writer folds while holding the lock), `decoded NAME` for each projection loaded from projections.db."""
    done: list[str] = []
    depth = [0]
    read, atomic, load = Transaction.read, SqliteStore.atomic, materialize.current_projection

    def reading(self: Transaction, from_seq: int = 1) -> Iterator[RecordedEvent]:
        for ev in read(self, from_seq):
            done.append(f"seq {ev.seq}")
            yield ev

    @contextmanager
    def locked(self: SqliteStore) -> Iterator[Transaction]:
        depth[0] += 1
        try:
            with atomic(self) as tx:
                yield tx
        finally:
            depth[0] -= 1

    def loading(store: Any, path: Path, policy: Any, name: str, head: int) -> Any:
        if depth[0]:
            done.append(f"decoded {name}")
        return load(store, path, policy, name, head)

    monkeypatch.setattr(Transaction, "read", reading)
    monkeypatch.setattr(SqliteStore, "atomic", locked)
    monkeypatch.setattr(materialize, "current_projection", loading)
    return done


def a_memory(path: Path, runs: int = 3) -> int:
    """A memory of a few runs, projections.db caught up by a read; its head."""
    with memtape.open(path) as mem:
        for i in range(runs):
            with mem.start_run(goal=f"buy socks {i}", start_url=SHOP) as run:
                run.record_step(step=1, action="click", target='button "Add to cart"', ok=False, error="blocked")
                run.record_lesson(
                    f"accept the banner first ({i})",
                    category="error_recovery",
                    failed_command="click",
                    error_pattern="blocked",
                    step=1,
                )
                run.observe_fact(kind="quirk", key=f"banner {i}", value="blocks clicks", step=1)
                run.finish(success=True, outcome="done")
        mem.state("lessons")
        return int(mem.store.head())


def test_first_write_after_open_folds_nothing_old_inside_the_lock(tmp_path: Path, inside_lock: list[int]) -> None:
    head = a_memory(tmp_path / "memory")
    assert head > 20
    inside_lock.clear()
    with memtape.open(tmp_path / "memory") as mem:
        assert mem.writer.projections_path == mem.projections_path is not None
        with mem.start_run(goal="buy socks again", start_url=SHOP) as run:
            run.record_step(step=1, action="click", target='button "Add to cart"')
            run.finish(success=True, outcome="done")
        assert mem.store.head() > head
    assert inside_lock == []


def test_events_appended_behind_the_writers_back_are_folded_outside_the_lock(
    tmp_path: Path, inside_lock: list[int]
) -> None:
    head = a_memory(tmp_path / "memory")
    with SqliteStore.open(tmp_path / "memory" / "ledger.db", create=False) as other:  # another process, no projections
        other.append(
            [
                NewEvent(FactObserved(fact_type="timing", key=f"k{i}", value="v"), domain="shop.example")
                for i in range(50)
            ]
        )
    inside_lock.clear()
    with memtape.open(tmp_path / "memory") as mem:
        with mem.start_run(goal="buy socks again", start_url=SHOP) as run:
            run.finish(success=True, outcome="done")
        facts = {f.key for f in mem.state("facts", domain="shop.example")}
    assert {f"k{i}" for i in range(50)} <= facts  # the writer did see them: its decisions are made on them
    assert all(int(done.split()[1]) > head + 50 for done in inside_lock if done.startswith("seq "))
    assert not any(done.startswith("decoded ") for done in inside_lock)


def test_forget_writes_from_projections_db(tmp_path: Path, inside_lock: list[int]) -> None:
    a_memory(tmp_path / "memory")
    inside_lock.clear()
    with SqliteStore.open(tmp_path / "memory" / "ledger.db", create=False) as store:
        result = forget(store, "domain", "shop.example", projections_path=tmp_path / "memory" / "projections.db")
    assert result.seq > 0 and result.removed
    assert inside_lock == []


def test_a_first_fact_decodes_only_what_it_touches_and_nothing_inside_the_lock(
    tmp_path: Path, inside_lock: list[str]
) -> None:
    a_memory(tmp_path / "memory")
    inside_lock.clear()
    with memtape.open(tmp_path / "memory") as mem:
        mem.append(
            [mem.event(FactObserved, {"fact_type": "timing", "key": "slow", "value": "yes"}, domain="shop.example")]
        )
        state = mem.writer.state
        assert state is not None
        loaded = {
            name for name in ("lessons", "knowledge", "trajectories", "patterns") if vars(state)[name] is not None
        }
        assert loaded == {"knowledge"}  # lessons and trajectories are left encoded: a fact never reads them
    assert inside_lock == []
