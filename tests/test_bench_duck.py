"""bench/duck_queries.py stays honest and runnable: DuckDB (native and through the scanner) and SQLite
give the same answers, including on the cases the synthetic log never produces, and every figure is
measured and positive."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import markdown
from bench.duck_queries import answers, measure, queries
from bench.projections import build_ledger
from memledger.ledger.events import (
    DomainRecall,
    ErrorRecall,
    LessonDeduplicated,
    LessonPromoted,
    NewEvent,
    RunCompleted,
    RunStarted,
    SubjectForgotten,
)


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 synthetic events, plus a promotion, recalls that returned lessons, a run still running
    and a run completed twice (the synthetic log has none of these)."""
    path = tmp_path_factory.mktemp("duck") / "ledger.db"
    store = build_ledger(path, 3_000)
    lid = next(store.read(types=["lesson_recorded"])).data["lesson_id"]
    env = {"run_id": "extra1", "domain": "www.extra.test"}
    store.append([
        NewEvent(RunStarted(goal="g"), **env),
        NewEvent(DomainRecall(matched=3, lesson_ids=[lid, "lsn_other"]), **env),
        NewEvent(ErrorRecall(command="click", error_snippet="x", matched=1, lesson_ids=[lid]), step=0, **env),
        NewEvent(RunCompleted(success=False, summary="no", turns=3), **env),
        NewEvent(RunCompleted(success=True, summary="yes on retry", turns=5), **env),
        NewEvent(LessonDeduplicated(lesson_id=lid, lesson="l", category="error_recovery", new_use_count=2), **env),
        NewEvent(LessonPromoted(lesson_id=lid, lesson="l", use_count=5, triggered_domains=["a", "b", "c"]), **env),
        NewEvent(RunStarted(goal="still going"), run_id="extra2", domain="www.extra.test"),
    ])
    store.close()
    return path


def test_duckdb_and_sqlite_answer_alike(small_ledger: Path) -> None:
    got = answers(small_ledger)
    assert set(got) == {q.name for q in queries()}
    for name, by_engine in got.items():
        assert by_engine["duckdb"], name
        assert by_engine["duckdb"] == by_engine["scanner"] == by_engine["sqlite"], name
    funnel = dict((stage, n) for stage, n, _ in got["promotions funnel"]["sqlite"])
    assert funnel["promoted"] == 1 and funnel["deduplicated"] >= 1
    assert all(row[2] > 0 for row in got["recall hit rate"]["sqlite"])  # hits on both kinds
    extra = next(r for r in got["run outcomes by domain"]["sqlite"] if r[0] == "www.extra.test")
    assert extra[1:5] == (2, 1, 0, 1)  # two runs: one passed on its last completion, one running


def test_figures_are_measured_and_positive(small_ledger: Path) -> None:
    figures = measure(small_ledger, repeat=1)
    assert len(figures) == 2 * len(queries()) + 4
    for f in figures:
        assert f.value > 0, f
        if f.baseline:
            assert f.baseline_value and f.baseline_value > 0 and f.ratio and f.ratio > 0, f
    assert markdown(figures).count("\n") == len(figures) + 2


def test_a_ledger_with_forgetting_is_refused(tmp_path: Path) -> None:
    store = build_ledger(tmp_path / "ledger.db", 200)
    store.append([NewEvent(SubjectForgotten(subject_kind="domain", subject="site1.com", reason="test"))])
    store.close()
    with pytest.raises(RuntimeError, match="forget"):
        answers(tmp_path / "ledger.db")
