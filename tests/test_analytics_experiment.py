"""Experiments replay observations under another policy: the default policy reproduces reality
exactly; changed thresholds decide earlier, later or not at all, at the expected seq. And `fork`."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from memledger.analytics.experiment import parse_settings, run_experiment
from memledger.analytics.fork import fork_ledger
from memledger.ledger.clock import SteppingClock
from memledger.ledger.errors import LedgerError
from memledger.ledger.events import FactObserved, RunCompleted, RunStarted, event
from memledger.ledger.store import SqliteStore
from memledger.projections.writer import MemoryWriter
from tests.analytics_builders import Built, learning_ledger
from tests.cli_runner import run_cli


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteStore, Built]:
    d = tmp_path_factory.mktemp("exp")
    clock = SteppingClock()
    store = SqliteStore.open(d / "ledger.db", clock=clock)
    built = learning_ledger(store, clock, runs=6)
    yield store, built
    store.close()


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteStore, Built]:
    """Two runs, then 100 days later a run whose opening prunes the lesson (3 uses) and expires the
    trajectories; then facts contradicted until one is pruned."""
    d = tmp_path_factory.mktemp("aged")
    clock = SteppingClock()
    store = SqliteStore.open(d / "ledger.db", clock=clock)
    built = learning_ledger(store, clock, runs=2, memory_off_first=False)
    clock.advance(timedelta(days=100))
    writer = MemoryWriter(store)
    writer.open_for_run("late", clock.now.isoformat())
    writer.append([event(RunStarted(goal="late run"), run_id="late", domain="a.test")])
    for value in ("5s", "5s", "8s", "5s", "9s", "2s", "3s"):
        writer.append([event(FactObserved(fact_type="timing", key="load", value=value), run_id="late",
                             domain="a.test")])
    writer.append([event(RunCompleted(success=True), run_id="late", domain="a.test")])
    types = [e.type for e in store.read()]
    assert {"lessons_pruned", "trajectories_expired", "fact_contradicted", "facts_pruned"} <= set(types)
    yield store, built
    store.close()


def test_default_policy_reproduces_reality(learned: tuple[SqliteStore, Built], aged: tuple[SqliteStore, Built]) -> None:
    for store, _ in (learned, aged):
        result = run_experiment(store, {})
        assert result["differences"] == 0 and result["decisions"] == [] and result["timeline"] == []
        assert result["first_divergence_seq"] is None
        assert result["sizes"]["reality"] == result["sizes"]["experiment"]


def test_lower_promotion_threshold_promotes_at_the_recall(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_uses": 3})
    (d,) = result["decisions"]
    assert (d["decision"], d["item"]) == ("lesson_promoted", built.lesson_id)
    # use_count 4 on 3 domains at run 2's error recall (seq known), instead of the dedup after it
    assert d["experiment_seq"] == built.recall_seq["run2"]
    assert d["reality_seq"] == built.record_seq["run2"] and d["reality_event_seq"] == built.promoted_seq
    assert result["first_divergence_seq"] == built.recall_seq["run2"]
    first = [r for r in result["timeline"] if r["differs"]]
    assert {(r["area"], r["reality"], r["experiment"]) for r in first} == {("tier1", None, True), ("tier2", True, None)}
    # the difference closes when reality promotes too
    assert all(not r["differs"] for r in result["timeline"] if r["seq"] >= built.promoted_seq)


def test_higher_threshold_never_promotes(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_domains": 9})
    (d,) = result["decisions"]
    assert d["experiment_seq"] is None and d["reality_event_seq"] == built.promoted_seq
    assert result["final"]["tier1"]["only_reality"] == [built.lesson_id]
    assert result["final"]["tier2"]["only_experiment"] == [built.lesson_id]


def test_until_stops_the_replay(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_uses": 3}, until=built.recall_seq["run2"])
    assert result["until"] == built.recall_seq["run2"]
    assert result["final"]["tier1"]["only_experiment"] == [built.lesson_id]
    assert run_experiment(store, {}, until=built.recall_seq["run2"])["differences"] == 0


def test_pruning_expiry_and_decay_parameters(aged: tuple[SqliteStore, Built]) -> None:
    store, built = aged
    longer = run_experiment(store, {"prune_max_age_days": 365})
    pruned = [d for d in longer["decisions"] if d["decision"] == "lessons_pruned"]
    assert [(d["item"], d["experiment_seq"]) for d in pruned] == [(built.lesson_id, None)]
    assert built.lesson_id in longer["final"]["tier2"]["only_experiment"]
    ttl = run_experiment(store, {"trace_ttl_days": 365})
    assert sorted(ttl["final"]["trajectories"]["only_experiment"]) == ["traj_run0", "traj_run1"]
    decay = run_experiment(store, {"fact_decay": 0.9})
    assert decay["differences"] > 0
    assert decay["final"]["facts"]["changed"] or decay["final"]["facts"]["only_experiment"]
    assert all(d["decision"] in ("fact_contradicted", "facts_pruned") for d in decay["decisions"])


def test_settings_are_typed_and_checked() -> None:
    assert parse_settings(["promotion_min_uses=3", "fact-decay=0.3", "trace_scoring=true"]) == {
        "promotion_min_uses": 3, "fact_decay": 0.3, "trace_scoring": True}
    for bad in (["nope=1"], ["promotion_min_uses=x"], ["fact_decay"]):
        with pytest.raises(LedgerError):
            parse_settings(bad)


def test_experiment_command(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    m = str(Path(store.path).parent)
    res = run_cli("--memory-dir", m, "experiment", "--set", "promotion_min_uses=3", "--json")
    assert res.code == 0, res.err
    assert orjson.loads(res.out)["decisions"][0]["experiment_seq"] == built.recall_seq["run2"]
    res = run_cli("--memory-dir", m, "experiment", "--set", "promotion_min_uses=3")
    assert res.code == 0 and "1 difference" not in res.out and "first at seq" in res.out
    res = run_cli("--memory-dir", m, "experiment", "--set", "nope=3")
    assert res.code == 1 and res.err.startswith("error: --set nope") and res.err.count("\n") == 1


def test_fork_copies_verbatim_and_keeps_the_chain(learned: tuple[SqliteStore, Built], tmp_path: Path) -> None:
    store, _ = learned
    result = fork_ledger(store, 30, tmp_path / "b")
    assert (result.count, result.head, result.verified) == (30, 30, True)
    fork = SqliteStore.open(result.path, clock=SteppingClock("2027-01-01T00:00:00Z"))
    assert [e.as_dict() for e in fork.read()] == [e.as_dict() for e in store.read(to_seq=30)]
    fork.append([event(RunStarted(goal="b side"), run_id="b1", domain="a.test")])
    assert fork.verify().ok and fork.head() == 31
    fork.close()
    with pytest.raises(LedgerError, match="already exists"):
        fork_ledger(store, 10, tmp_path / "b")
    res = run_cli("--memory-dir", str(Path(store.path).parent), "fork", "--until", "12", "--out", str(tmp_path / "c"))
    assert res.code == 0 and "forked 12 events" in res.out
    assert run_cli("--memory-dir", str(tmp_path / "c"), "verify").code == 0
