"""Experiments replay observations under another policy: the default policy reproduces reality
exactly; changed thresholds decide earlier, later or not at all, at the expected seq. And `fork`."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from memtape.agent.embeddings import Embeddings
from memtape.agent.loop import RunConfig
from memtape.analytics.experiment import run_experiment
from memtape.analytics.fork import fork_ledger
from memtape.commands.experiment import parse_settings
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import FactObserved, RunCompleted, RunStarted
from memtape.ledger.store import SqliteStore
from memtape.projections.writer import MemoryWriter
from tests.analytics_builders import Built, learning_ledger
from tests.cli_runner import run_cli
from tests.fake_sites import COOKIE_GOALS, RunResult, cookie_runs


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
        writer.append(
            [event(FactObserved(fact_type="timing", key="load", value=value), run_id="late", domain="a.test")]
        )
    writer.append([event(RunCompleted(success=True), run_id="late", domain="a.test")])
    types = [e.type for e in store.read()]
    assert {"lessons_pruned", "trajectories_expired", "fact_contradicted", "facts_pruned"} <= set(types)
    yield store, built
    store.close()


def test_default_policy_reproduces_reality(learned: tuple[SqliteStore, Built], aged: tuple[SqliteStore, Built]) -> None:
    for store, _ in (learned, aged):
        result = run_experiment(store, {})
        assert result.differences == 0 and result.decisions == [] and result.timeline == []
        assert result.first_divergence_seq is None
        assert result.sizes["reality"] == result.sizes["experiment"]


def test_lower_promotion_threshold_promotes_at_the_recall(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_uses": 3})
    (d,) = result.decisions
    assert (d.decision, d.item) == ("lesson_promoted", built.lesson_id)
    # use_count 4 on 3 domains at run 2's error recall (seq known), instead of the dedup after it
    assert d.experiment_seq == built.recall_seq["run2"]
    assert d.reality_seq == built.record_seq["run2"] and d.reality_event_seq == built.promoted_seq
    assert result.first_divergence_seq == built.recall_seq["run2"]
    first = [r for r in result.timeline if r.differs]
    assert {(r.area, r.reality, r.experiment) for r in first} == {("tier1", None, True), ("tier2", True, None)}
    # the difference closes when reality promotes too
    assert all(not r.differs for r in result.timeline if r.seq >= built.promoted_seq)


def test_higher_threshold_never_promotes(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_domains": 9})
    (d,) = result.decisions
    assert d.experiment_seq is None and d.reality_event_seq == built.promoted_seq
    assert result.final["tier1"].only_reality == [built.lesson_id]
    assert result.final["tier2"].only_experiment == [built.lesson_id]


def test_until_stops_the_replay(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"promotion_min_uses": 3}, until=built.recall_seq["run2"])
    assert result.until == built.recall_seq["run2"]
    assert result.final["tier1"].only_experiment == [built.lesson_id]
    assert run_experiment(store, {}, until=built.recall_seq["run2"]).differences == 0


def test_pruning_expiry_and_decay_parameters(aged: tuple[SqliteStore, Built]) -> None:
    store, built = aged
    longer = run_experiment(store, {"prune_max_age_days": 365})
    pruned = [d for d in longer.decisions if d.decision == "lessons_pruned"]
    assert [(d.item, d.experiment_seq) for d in pruned] == [(built.lesson_id, None)]
    assert built.lesson_id in longer.final["tier2"].only_experiment
    ttl = run_experiment(store, {"trace_ttl_days": 365})
    assert sorted(ttl.final["trajectories"].only_experiment) == ["traj_run0", "traj_run1"]
    decay = run_experiment(store, {"fact_decay": 0.9})
    assert decay.differences > 0
    assert decay.final["facts"].changed or decay.final["facts"].only_experiment
    assert all(d.decision in ("fact_contradicted", "facts_pruned") for d in decay.decisions)


def test_settings_are_typed_and_checked() -> None:
    assert parse_settings(["promotion_min_uses=3", "fact-decay=0.3", "trace_scoring=true"]) == {
        "promotion_min_uses": 3,
        "fact_decay": 0.3,
        "trace_scoring": True,
    }
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


# ---- counterfactual recall --------------------------------------------------------------


def test_recall_top_k_remakes_recalls_and_their_prompt_items(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    result = run_experiment(store, {"recall_top_k": 1})
    assert result.differences > 0 and result.recalls_kept_as_recorded == 0
    removed = [r for r in result.prompts if r.change == "removed"]
    assert removed and {r.source for r in removed} == {"error_tips"}
    assert not [r for r in result.prompts if r.change == "added"]
    per_run = {r.run_id for r in removed}
    assert per_run <= set(built.runs[1:]) and result.prompt_runs == len(per_run)
    assert all(r.item != built.lesson_id for r in removed)  # the best match (+5) stays: only the rest go
    assert "agent's later actions" in result.limits


def test_fewer_recalls_mean_fewer_uses_so_promotion_comes_later(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    base = run_experiment(store, {"recall_top_k": 0})
    promoted = [d for d in base.decisions if d.decision == "lesson_promoted"]
    # no recall counts as a use any more: the lesson reaches 5 uses later than in reality (or never)
    assert promoted and all(d.experiment_seq is None or d.experiment_seq > d.reality_seq for d in promoted)


def test_prompt_parameters_change_prompt_items(learned: tuple[SqliteStore, Built]) -> None:
    store, built = learned
    traj = run_experiment(store, {"trace_ttl_days": 0.01})  # the runs are an hour apart: nothing matches
    assert {r.source for r in traj.prompts} == {"reference_trajectory"}
    assert all(r.change == "removed" for r in traj.prompts)
    facts = run_experiment(store, {"fact_prompt_min": 0.9})
    assert {(r.source, r.change) for r in facts.prompts} == {("app_knowledge", "removed")}
    assert facts.decisions == []  # the memory's own decisions do not change, only what prompts held


def test_session_history_length_changes_the_sessions_prompts_held(tmp_path: Path) -> None:
    clock = SteppingClock()
    store = SqliteStore.open(tmp_path / "ledger.db", clock=clock)
    built = learning_ledger(store, clock, runs=11)  # runs 5 and 10 come back to a.test
    result = run_experiment(store, {"session_history": 1})
    changed = {(r.run_id, r.source, r.change, r.item) for r in result.prompts}
    assert changed == {(built.runs[10], "session_history", "removed", built.runs[0])}
    store.close()


def test_a_recall_the_real_policy_does_not_reproduce_is_kept_as_recorded(tmp_path: Path) -> None:
    from memtape.ledger.events import ErrorRecall

    store = SqliteStore.open(tmp_path / "ledger.db", clock=SteppingClock())
    writer = MemoryWriter(store)
    writer.open_for_run("r1", "2026-01-01T00:00:00Z")
    writer.append(
        [
            event(RunStarted(goal="g"), run_id="r1", domain="a.test"),
            event(
                ErrorRecall(
                    command="click",
                    error_snippet="nothing matches this",
                    matched=1,
                    lessons=["made up"],
                    lesson_ids=["lsn_elsewhere"],
                ),
                run_id="r1",
                step=1,
                domain="a.test",
            ),
        ]
    )
    result = run_experiment(store, {"recall_top_k": 1})
    assert result.recalls_kept_as_recorded == 1 and result.prompts == [] and result.differences == 0
    store.close()


def test_experiment_report_has_prompts_and_limits(learned: tuple[SqliteStore, Built]) -> None:
    store, _ = learned
    m = str(Path(store.path).parent)
    res = run_cli("--memory-dir", m, "experiment", "--set", "recall_top_k=1", "--format", "json")
    assert res.code == 0, res.err
    doc = orjson.loads(res.out)
    assert doc["prompts"] and "agent's later actions" in doc["limits"][0]["not simulated"]


@pytest.fixture(scope="module")
def cookie_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteStore, list[RunResult]]:
    """The bundled agent's runs on the cookie site: the second, the session's rep 2, held step
    memories and its session's history."""
    store, runs = cookie_runs(tmp_path_factory.mktemp("cookies"))
    yield store, runs
    store.close()


def test_step_memories_are_retrieved_again_under_the_policy(cookie_site: tuple[SqliteStore, list[RunResult]]) -> None:
    store, (first, second, _) = cookie_site
    same = run_experiment(store, {})
    assert same.differences == 0 and same.recalls_kept_as_recorded == 0
    none = run_experiment(store, {"step_memory_top": 0})
    removed = {(r.run_id, r.change, r.source) for r in none.prompts}
    assert removed == {(second.run_id, "removed", "step_memories")}
    assert {r.item.rsplit("#", 1)[0] for r in none.prompts} == {first.run_id}  # the first rep's graded steps
    assert none.recalls_remade == same.recalls_remade and none.differences == len(none.prompts) >= 2


def test_prompt_items_are_compared_by_their_text(cookie_site: tuple[SqliteStore, list[RunResult]]) -> None:
    store, (first, second, _) = cookie_site
    result = run_experiment(store, {"session_full_detail": 0})
    (row,) = result.prompts  # the same session in the history, shown on one line instead of in full
    assert (row.run_id, row.change, row.source, row.item) == (second.run_id, "changed", "session_history", first.run_id)
    assert row.was is not None and "final URL" in row.was and "final URL" not in row.label
    assert result.differences == 1


class GoalVectors(Embeddings):
    """An embeddings endpoint that puts each goal on its own axis: no two goals alike, however
    many words they share."""

    def __init__(self) -> None:
        self.model, self.asked = "axes", {}

    def embed(self, text: str) -> list[float]:
        axis = [goal for goal, _ in COOKIE_GOALS].index(text)
        return [1.0 if k == axis else 0.0 for k in range(len(COOKIE_GOALS))]


def test_step_memories_are_retrieved_again_with_the_steps_recorded_embedding(tmp_path: Path) -> None:
    """The rep 2 run's goal shares most words with rep 1's, but their vectors differ: its prompts
    held no step memory, and the experiment re-retrieves with the vector its steps recorded."""
    store, (first, second, _) = cookie_runs(tmp_path, RunConfig(embeddings=GoalVectors()))
    try:
        steps = [ev for ev in store.read(types=["step_recorded"]) if ev.run_id == second.run_id]
        assert steps and all(ev.data["embedding_model"] == "axes" for ev in steps)
        same = run_experiment(store, {})
        assert same.differences == 0 and same.recalls_kept_as_recorded == 0 and same.recalls_remade >= len(steps)
        text_only = run_experiment(store, {"step_memory_min_similarity": 0.0})
        assert text_only.differences == 0  # still the vectors decide: orthogonal, under any floor
    finally:
        store.close()
